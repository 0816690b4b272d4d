"""Mutants, pure: the file format (header and git diff,
rendered into each layout) and the verdicts."""

import pytest

from orchestrator.errors import ConfigError
from orchestrator.model.layout import get_layout
from orchestrator.model.results import TestRecord, Verdict
from orchestrator.patchset.series import unified_file_diff
from orchestrator.verdicts.classify import CRASHED, FAILED, PASSED, TIMEOUT
from orchestrator.verdicts.mutants import kill_line, mutant_verdict, parse_mutant

from ..helpers.patches import OPT, mutant_text

FAIL_LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"


def test_a_mutant_file_is_a_header_and_a_git_diff():
    m = parse_mutant("01-no-reset.patch", mutant_text("01", "a\nb\n", "a\nB\n"))
    assert (m.name, m.title, m.why) == ("01-no-reset", "no reset", "01 is wrong on purpose")
    ggml, llama = get_layout("ggml"), get_layout("llama.cpp")
    assert m.paths(llama, ggml) == ["src/ggml-opt.cpp"]
    assert m.rendered(llama, ggml).startswith("diff --git a/src/ggml-opt.cpp b/src/ggml-opt.cpp\n")
    assert m.rendered(llama, get_layout("llama.cpp", "vendor/llama.cpp")).startswith(
        "diff --git a/vendor/llama.cpp/ggml/src/ggml-opt.cpp "
        "b/vendor/llama.cpp/ggml/src/ggml-opt.cpp\n"
    )


@pytest.mark.parametrize(
    "text, phrase",
    [
        ("Mutant: x\nWhy it is wrong: y\n\nno diff here\n", "no 'diff --git' section"),
        (unified_file_diff(OPT, "a\n", "b\n"), "no 'Mutant: ...' line"),
        ("Mutant: x\n\n" + unified_file_diff(OPT, "a\n", "b\n"), "no 'Why it is wrong: ...' line"),
        (
            "Mutant: x\nWhy it is wrong: y\n\n" + unified_file_diff("../etc/passwd", "a\n", "b\n"),
            "escapes the source tree",
        ),
    ],
)
def test_a_malformed_mutant_is_one_line_naming_the_file(text, phrase):
    with pytest.raises(ConfigError) as e:
        parse_mutant("02-bad.patch", text)
    assert (
        str(e.value).startswith("02-bad.patch: ")
        and phrase in str(e.value)
        and "\n" not in str(e.value)
    )


def _gate(outcome, exit_code, output="", signal=None):
    return TestRecord(outcome=outcome, exit_code=exit_code, signal=signal, gate=True, output=output)


@pytest.mark.parametrize(
    "apply_error, built, gate, expected, phrase",
    [
        (
            "error: patch failed: src/ggml-opt.cpp:3",
            True,
            None,
            Verdict.INVALID,
            "did not apply: error: patch failed",
        ),
        (None, False, None, Verdict.INVALID, "the tree with the mutant did not build"),
        (None, True, _gate(CRASHED, -11, signal="SIGSEGV"), Verdict.INVALID, "crashed (SIGSEGV)"),
        (None, True, _gate(TIMEOUT, None), Verdict.INVALID, "timed out"),
        (None, True, _gate(PASSED, 0), Verdict.SURVIVED, "passed with this known-wrong fix"),
        (None, True, _gate(FAILED, 1, "x\n"), Verdict.INVALID, "without printing its failure line"),
        (None, True, _gate(FAILED, 1, FAIL_LINE + "\n"), Verdict.KILLED, FAIL_LINE),
    ],
)
def test_verdicts(apply_error, built, gate, expected, phrase):
    v = mutant_verdict(apply_error, built, gate)
    assert v.verdict == expected and phrase in v.reason


def test_kill_line_counts_the_mutants_that_ran():
    assert (
        kill_line([Verdict.KILLED, Verdict.SURVIVED, None, Verdict.KILLED])
        == "the gate kills 2/3 known-wrong fixes"
    )


def test_each_test_judges_a_mutant_on_its_own_and_any_kill_is_a_kill():
    from orchestrator.verdicts.mutants import overall_verdict, per_test_verdicts, tally_line

    opt_fail = (
        "  test_per_step_graphs(high_level=no, schedule=TTTTTT, "
        "opt_period=1, subtest=weights, optimizer=sgd): FAIL"
    )
    tests = {
        "test-opt": TestRecord(outcome=FAILED, exit_code=1, output=f"    step 2: x\n{opt_fail}\n"),
        "test-opt-dynamic-accum": TestRecord(outcome=PASSED, exit_code=0, output=""),
    }
    per = per_test_verdicts(None, True, tests, ["test-opt", "test-opt-dynamic-accum"])
    assert per["test-opt"].verdict == Verdict.KILLED and opt_fail.strip() in per["test-opt"].reason
    assert per["test-opt-dynamic-accum"].verdict == Verdict.SURVIVED
    assert overall_verdict(per).verdict == Verdict.KILLED
    crashed = {**tests, "test-opt": TestRecord(outcome=CRASHED, exit_code=-11, output="")}
    per = per_test_verdicts(None, True, crashed, ["test-opt", "test-opt-dynamic-accum"])
    assert (
        per["test-opt"].verdict == Verdict.INVALID
        and overall_verdict(per).verdict == Verdict.INVALID
    )
    passed = {**tests, "test-opt": TestRecord(outcome=PASSED, exit_code=0, output="")}
    assert (
        overall_verdict(per_test_verdicts(None, True, passed, ["test-opt"])).verdict
        == Verdict.SURVIVED
    )
    per = per_test_verdicts("patch failed", False, {}, ["test-opt", "test-opt-dynamic-accum"])
    assert {v.verdict for v in per.values()} == {Verdict.INVALID}
    assert tally_line(11, {"test-opt": 11, "test-opt-dynamic-accum": 10}) == (
        "11 known-wrong fixes: 11 killed by test-opt alone (test-opt-dynamic-accum: 10)"
    )
