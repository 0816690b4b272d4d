"""Tests a backend does not run (its module's skip_tests, e.g. test-opt under LeakSanitizer):
recorded skipped with the reason in every variant, never counted as passed or failed; the
control's verdict then rests on the gate alone and says so; shown in summary.md, junit.xml and
the PR body's data."""

import json
import xml.etree.ElementTree as ET

import pytest

from orchestrator.model.results import Outcome, TestRecord, results_of
from orchestrator.report.junit import control_gate_name, junit_xml
from orchestrator.report.summary import summary_markdown
from orchestrator.upstream import bundle as B
from orchestrator.upstream import pr_body, views
from orchestrator.verdicts import attribution
from orchestrator.verdicts.classify import (
    FAILED,
    INVALID,
    KILLED,
    PASSED,
    SKIPPED,
    SURVIVED,
    cell_status,
    control_verdict,
)

from ..helpers.samples import GATE, SANITIZE_SKIP, UPSTREAM, sample, with_sanitize_cell

LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"
WHY = "test-opt leaks its ctx_compute under LeakSanitizer"


def test_a_skipped_record_keeps_its_reason_and_adds_only_keys():
    t = TestRecord.not_run(WHY)
    d = t.to_json()
    assert d["outcome"] == "skipped" and d["skipped"] == WHY and "stopped_on" not in d
    again = TestRecord.model_validate_json(json.dumps(d), strict=True)
    assert again.outcome is Outcome.SKIPPED and again.skipped == WHY and again == t
    # a record of any other outcome has no `skipped` key: results.json's keys unchanged
    assert "skipped" not in TestRecord(outcome=Outcome.PASSED, exit_code=0).to_json()


def test_results_json_with_a_skipped_test_validates():
    r = results_of(with_sanitize_cell(sample()).to_json())
    rec = r.records_of("ggml/cpu-sanitize")["patched"]
    assert (
        rec.tests[UPSTREAM].outcome is Outcome.SKIPPED
        and rec.tests[UPSTREAM].skipped == SANITIZE_SKIP
    )


def test_control_verdict_on_the_gate_alone_says_so():
    v = control_verdict(True, FAILED, 1, LINE, SKIPPED, test_opt_skipped=WHY)
    assert v.verdict == KILLED
    assert v.reason.startswith(f"the gate test failed by its own check: {LINE}")
    assert f"(verdict on the gate alone: test-opt is not run on this backend: {WHY})" in v.reason


@pytest.mark.parametrize("gate, exit_code, expected", [(PASSED, 0, SURVIVED), (FAILED, 1, KILLED)])
def test_a_skipped_test_opt_never_turns_a_verdict(gate, exit_code, expected):
    v = control_verdict(
        True, gate, exit_code, LINE if gate == FAILED else "", SKIPPED, test_opt_skipped=WHY
    )
    assert v.verdict == expected


def test_a_skipped_gate_cannot_kill_the_control():
    v = control_verdict(True, SKIPPED, None, "", PASSED)
    assert v.verdict == INVALID and "did not run (skipped)" in v.reason


def test_a_cell_with_only_skipped_test_opt_passing_gate_and_killed_control_passes():
    killed = control_verdict(True, FAILED, 1, LINE, SKIPPED, test_opt_skipped=WHY)
    status, reason = cell_status(True, {UPSTREAM: SKIPPED, GATE: PASSED}, killed)
    assert status == "passed"
    assert reason == (
        "every test run passes with the fix (test-opt not run on this backend); "
        "the gate fails without it"
    )


def test_skipped_is_not_passed_a_failing_gate_still_fails_the_cell():
    killed = control_verdict(True, FAILED, 1, LINE, SKIPPED, test_opt_skipped=WHY)
    status, reason = cell_status(True, {UPSTREAM: SKIPPED, GATE: FAILED}, killed)
    assert status == "failed" and reason.startswith(f"with the fix: {GATE} failed")
    status, reason = cell_status(True, {UPSTREAM: SKIPPED, GATE: SKIPPED}, killed)
    assert status == "failed" and reason.startswith("no test ran with the fix")


def test_a_skipped_test_is_never_attributed():
    entries = attribution.attribute(
        {UPSTREAM: TestRecord.not_run(WHY)}, {UPSTREAM: TestRecord.not_run(WHY)}
    )
    assert entries == []


def test_junit_marks_it_skipped_with_the_reason_in_both_variants():
    root = ET.fromstring(junit_xml(with_sanitize_cell(sample())))
    cases = {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}
    for variant in ("patched", "control:accumulator-reset"):
        skipped = cases[(f"ggml-patch/ggml/cpu-sanitize/{variant}", UPSTREAM)].find("skipped")
        assert skipped is not None
        assert skipped.get("message") == f"test-opt not run on cpu-sanitize: {SANITIZE_SKIP}"
    assert (
        cases[
            (
                "ggml-patch/ggml/cpu-sanitize/control:accumulator-reset",
                control_gate_name("test-opt-dynamic-accum"),
            )
        ].find("failure")
        is None
    )
    assert cases[("ggml-patch/ggml/cpu-sanitize/patched", GATE)].find("failure") is None
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "ggml/cpu-sanitize")
    # each variant's two tests, and the topic's control's own case
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("5", "2", "0")


def test_summary_lists_the_tests_not_run_with_the_reason():
    md = summary_markdown(with_sanitize_cell(sample()))
    assert "## Tests not run" in md
    assert f"| ggml/cpu-sanitize | test-opt | {SANITIZE_SKIP} |" in md
    # the sample's cells, and the sanitize cell: passed, not "skipped"
    assert "3/3 cells passed" in md


def test_a_skipped_test_is_no_bundle_problem_and_the_body_names_the_reason():
    r = results_of(with_sanitize_cell(sample()).to_json())
    assert B._cell_problems(r, r.cells[-1]) == []
    assert views.skipped_tests(r, "ggml") == [("ggml/cpu-sanitize", UPSTREAM, SANITIZE_SKIP)]
    body = "\n".join(pr_body.additional_information(r, "0" * 64, "ggml", [], [], {}, None))
    # this machine's reason stays in summary.md: the body says only that test-opt did not run there
    assert SANITIZE_SKIP not in body
    row = next(ln for ln in body.splitlines() if ln.startswith("| cpu-sanitize | "))
    assert "| `skipped` |" in row
