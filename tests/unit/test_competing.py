"""Competing fixes, pure: the file format (header, provenance, git diff) and the verdicts."""

import pytest

from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.model.layout import GATE_TEST, UPSTREAM_TEST, get_layout
from orchestrator.model.results import CompetingVerdict, Outcome, TestRecord
from orchestrator.patchset.series import unified_file_diff
from orchestrator.verdicts.competing import (
    first_failing_line,
    judge,
    load_competing,
    parse_competing,
)

from ..helpers.patches import OPT
from ..helpers.tools import ROOT

HEADER = (
    "Competing fix: zero at alloc\n"
    "URL: https://github.com/ggml-org/llama.cpp/pull/22705\n"
    "Date: 2026-05\n"
    "Author's summary: zeroes grad_accs when opt_i == 0\n"
    "Provenance: which PR holds this hunk is not confirmed\n\n"
)
DIFF = unified_file_diff(OPT, "a\nb\n", "a\nB\n")
GATE_FAIL = "device=CPU opt_period=1: FAIL at step 1: w=1 expected 0.75"
OPT_FAIL = (
    "  test_per_step_graphs(high_level=no, schedule=TTTTTT, opt_period=1, subtest=weights, "
    "optimizer=adamw): FAIL"
)


def test_a_competing_fix_is_a_header_with_provenance_and_a_git_diff():
    c = parse_competing("qlora.patch", HEADER + DIFF)
    assert (c.name, c.title, c.date) == ("qlora", "zero at alloc", "2026-05")
    assert c.url == "https://github.com/ggml-org/llama.cpp/pull/22705"
    assert c.provenance == "which PR holds this hunk is not confirmed"
    ggml, llama = get_layout("ggml"), get_layout("llama.cpp")
    assert c.paths(llama, ggml) == ["src/ggml-opt.cpp"]
    assert c.rendered(llama, ggml).startswith("diff --git a/src/ggml-opt.cpp b/src/ggml-opt.cpp\n")


def test_provenance_is_optional():
    c = parse_competing(
        "x.patch",
        HEADER.replace("Provenance: which PR holds this hunk is not confirmed\n", "") + DIFF,
    )
    assert c.provenance == ""


@pytest.mark.parametrize(
    "text, phrase",
    [
        (HEADER + "no diff\n", "no 'diff --git' section"),
        (
            HEADER.replace("URL: https://github.com/ggml-org/llama.cpp/pull/22705\n", "") + DIFF,
            "no 'URL: ...' line",
        ),
        (HEADER.replace("Author's summary", "Summary") + DIFF, "x.patch:4: 'Summary: zeroes"),
        (
            HEADER.replace("https://github.com", "http://github.com") + DIFF,
            "is not an https:// URL",
        ),
        (HEADER.replace("2026-05", "May 2026") + DIFF, "expected YYYY-MM, YYYY-MM-DD or 'unknown'"),
        (
            HEADER.replace("Date: 2026-05\n", "Date: 2026-05\nDate: 2026-06\n") + DIFF,
            "x.patch:4: 'Date:' given twice",
        ),
        (HEADER.replace("zero at alloc", "zero at alloc \u2013 QLoRA") + DIFF, "non-ASCII"),
        (HEADER + unified_file_diff("../etc/passwd", "a\n", "b\n"), "escapes the source tree"),
    ],
)
def test_a_malformed_competing_fix_is_one_line_naming_the_file(text, phrase):
    with pytest.raises(ConfigError) as e:
        parse_competing("x.patch", text)
    msg = str(e.value)
    assert phrase in msg and msg.startswith("x.patch") and "\n" not in msg, msg


def test_the_shipped_competing_fixes_load_with_their_provenance():
    fixes = load_competing(load_matrix(ROOT / "matrix.yaml"))
    by_name = {c.name: c for c in fixes}
    # the fork's reconstructed reset is no port of anyone's code: it is mutant 02 (NOTES.md)
    assert set(by_name) == {"qlora-branch-alloc-zeroing"}
    assert (
        ROOT
        / "native_tests"
        / "accumulator-reset"
        / "mutants"
        / "02-reset-at-build-when-opt-i-zero.patch"
    ).is_file()
    qlora = by_name["qlora-branch-alloc-zeroing"]
    # its provenance is the stored commit, never a PR no stored evidence ties it to
    assert qlora.url == f"https://github.com/ggml-org/llama.cpp/commit/{ORIGINAL_COMMIT}"
    assert ORIGINAL_COMMIT in qlora.provenance and "22705" not in qlora.provenance + qlora.url
    assert qlora.discussed_at == "" and "seed" in qlora.to_pass
    for c in fixes:  # diffs against the UNFIXED file: they add, they never remove the series' reset
        assert [f.path for f in c.files] == ["ggml/src/ggml-opt.cpp"]
        assert "allocated_graph == opt_ctx->gb_opt) {\n+" not in c.files[0].text
        assert "\n-" not in c.files[0].text.split("@@", 1)[1]


ORIGINAL_COMMIT = "0eb92d8f033fbc86c7f2ec9bc32f61f75fed88d4"


def _original(path):
    """(header fields, context lines before the added block, context lines after it)."""
    fields, before, after, seen = {}, [], [], False
    for line in path.read_text(encoding="ascii").splitlines():
        if line.startswith("# ") and ": " in line and not before:
            key, value = line[2:].split(": ", 1)
            fields[key] = value
        elif line.startswith("#"):
            continue
        elif line == "@@ added @@":
            seen = True
        else:
            (after if seen else before).append(line)
    return fields, before, after


def _port_context(text):
    """(context lines before the port's added block, after it, its added non-blank lines)."""
    [diff] = parse_competing("port.patch", text).files
    hunks = diff.text.split("\n@@ ")[1:]
    assert len(hunks) == 1 and "ggml_opt_alloc(" in hunks[0].splitlines()[0]
    lines = hunks[0].splitlines()[1:]
    added = [i for i, ln in enumerate(lines) if ln.startswith("+")]
    assert added == list(range(added[0], added[-1] + 1))  # one block of added lines
    before = [ln[1:] for ln in lines[: added[0]]]
    after = [ln[1:] for ln in lines[added[-1] + 1 :]]
    return before, after, [ln[1:].strip() for ln in lines if ln.startswith("+") and ln[1:].strip()]


def test_the_qlora_port_sits_where_the_stored_original_puts_its_hunk():
    """The port's hunk has the original's context lines around its added lines: at the start of
    ggml_opt_alloc, before the graph is built (not at its end, where it zeroed the loss seed)."""
    folder = ROOT / "native_tests" / "accumulator-reset" / "competing"
    fields, before, after = _original(folder / "qlora-branch-alloc-zeroing.original")
    assert fields["commit"] == ORIGINAL_COMMIT and fields["function"] == "ggml_opt_alloc"
    text = (folder / "qlora-branch-alloc-zeroing.patch").read_text(encoding="ascii")
    assert [f.path for f in parse_competing("port.patch", text).files] == [fields["file"]]
    port_before, port_after, code = _port_context(text)
    assert (port_before, port_after) == (before, after)
    assert code[1:] == [  # the original's code, its comment paraphrased in one line
        "if (!opt_ctx->static_graphs && backward && opt_ctx->opt_i == 0) {",
        "for (struct ggml_tensor * ga : opt_ctx->grad_accs) {",
        "if (ga) {",
        "ggml_set_zero(ga);",
        "}",
        "}",
        "}",
    ]
    assert code[0].startswith("//")


# the earlier, unfaithful port: the same lines at the end of ggml_opt_alloc, after the build
END_OF_ALLOC = "\n".join(
    [
        "diff --git a/ggml/src/ggml-opt.cpp b/ggml/src/ggml-opt.cpp",
        "--- a/ggml/src/ggml-opt.cpp",
        "+++ b/ggml/src/ggml-opt.cpp",
        "@@ -776,6 +776,10 @@ void ggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward) {",
        "     ggml_backend_sched_alloc_graph("
        "opt_ctx->backend_sched, opt_ctx->allocated_graph_copy);",
        "     opt_ctx->allocated_graph = graph;",
        " ",
        "+    if (!opt_ctx->static_graphs && backward && opt_ctx->opt_i == 0) {",
        "+        ggml_set_zero(opt_ctx->grad_accs[0]);",
        "+    }",
        "+",
        "     opt_ctx->eval_ready = true;",
        " }",
        " ",
        "",
    ]
)


def test_the_port_check_fails_on_the_port_at_the_end_of_alloc():
    _, before, after = _original(
        ROOT
        / "native_tests"
        / "accumulator-reset"
        / "competing"
        / "qlora-branch-alloc-zeroing.original"
    )
    port_before, port_after, _ = _port_context(HEADER + END_OF_ALLOC)
    assert port_before != before and port_after != after


def test_discussed_at_and_to_pass_are_optional_header_fields():
    text = HEADER + "Discussed at: https://github.com/o/r/pull/1\nTo pass: keep the seed\n\n" + DIFF
    c = parse_competing("x.patch", text.replace("\n\nDiscussed", "\nDiscussed"))
    assert (c.discussed_at, c.to_pass) == ("https://github.com/o/r/pull/1", "keep the seed")
    bad = text.replace("https://github.com/o/r/pull/1", "#1").replace(
        "\n\nDiscussed", "\nDiscussed"
    )
    with pytest.raises(ConfigError, match="x.patch: Discussed at: '#1' is not an https:// URL"):
        parse_competing("x.patch", bad)


def test_a_malformed_file_in_the_folder_is_named_with_its_folder(tmp_path):
    import shutil

    shutil.copytree(ROOT / "patches", tmp_path / "patches")
    competing = tmp_path / "native_tests" / "accumulator-reset" / "competing"
    competing.mkdir(parents=True)
    for n in ("CMakeLists.txt", f"{GATE_TEST}.cpp"):
        (tmp_path / "native_tests" / n).write_text("x\n")
    (competing / "bad.patch").write_text("Competing fix: x\n\n" + DIFF)
    m = (ROOT / "matrix.yaml").read_text()
    (tmp_path / "matrix.yaml").write_text(m)
    with pytest.raises(ConfigError, match=r"competing/bad.patch: no 'URL: \.\.\.' line"):
        load_competing(load_matrix(tmp_path / "matrix.yaml"))


def _rec(outcome, output="", code=None, gate=False):
    if code is None:
        code = 0 if outcome == Outcome.PASSED else 1
    return TestRecord(outcome=outcome, exit_code=code, output=output, gate=gate)


FIXED = {UPSTREAM_TEST: Outcome.PASSED, GATE_TEST: Outcome.PASSED}


def test_verdict_equivalent_when_it_passes_what_the_fix_passes():
    v = judge(
        None, True, {UPSTREAM_TEST: _rec(Outcome.PASSED), GATE_TEST: _rec(Outcome.PASSED)}, FIXED
    )
    assert v.verdict == CompetingVerdict.EQUIVALENT and v.failure_line is None


def test_verdict_wrong_names_the_first_failing_case_line():
    tests = {
        UPSTREAM_TEST: _rec(
            Outcome.FAILED, f"    step 1: x\n{OPT_FAIL}\n  Backend CPU adamw: FAIL\n"
        ),
        GATE_TEST: _rec(Outcome.FAILED, GATE_FAIL + "\n", gate=True),
    }
    v = judge(None, True, tests, FIXED)
    assert v.verdict == CompetingVerdict.WRONG and v.failing_test == UPSTREAM_TEST
    assert v.failure_line == OPT_FAIL.strip()
    v = judge(None, True, {**tests, UPSTREAM_TEST: _rec(Outcome.PASSED)}, FIXED)
    assert (v.failing_test, v.failure_line) == (GATE_TEST, GATE_FAIL)


def test_a_test_the_fix_does_not_pass_is_not_held_against_it():
    tests = {UPSTREAM_TEST: _rec(Outcome.FAILED, OPT_FAIL), GATE_TEST: _rec(Outcome.PASSED)}
    v = judge(None, True, tests, {UPSTREAM_TEST: Outcome.CRASHED, GATE_TEST: Outcome.PASSED})
    assert v.verdict == CompetingVerdict.EQUIVALENT


def test_a_crash_is_wrong_with_the_outcome_as_its_line():
    v = judge(
        None,
        True,
        {UPSTREAM_TEST: _rec(Outcome.CRASHED, "", -11), GATE_TEST: _rec(Outcome.PASSED)},
        FIXED,
    )
    assert (
        v.verdict == CompetingVerdict.WRONG and v.failure_line == "test-opt crashed (exit code -11)"
    )


def test_verdict_invalid_when_it_does_not_apply_or_build():
    assert (
        judge("patch failed: ggml/src/ggml-opt.cpp:776", False, {}, FIXED).verdict
        == CompetingVerdict.INVALID
    )
    v = judge(None, False, {}, FIXED)
    assert v.verdict == CompetingVerdict.INVALID and v.reason == "does not build"


def test_first_failing_line_of_test_opt_skips_the_summary_lines():
    out = "\x1b[1;31m  Backend CPU sgd: FAIL\x1b[0m\n1/2 backend*optimizer passed\n"
    assert first_failing_line(UPSTREAM_TEST, out) is None
    assert first_failing_line(UPSTREAM_TEST, f"x\n{OPT_FAIL}\x1b[0m\n") == OPT_FAIL.strip()


def test_the_gate_joins_the_series_only_once_maintainers_approval_is_recorded(tmp_path):
    import shutil

    from orchestrator.patchset.files import load_series

    for d in ("patches", "native_tests"):
        shutil.copytree(ROOT / d, tmp_path / d)
    text = (ROOT / "matrix.yaml").read_text()
    (tmp_path / "matrix.yaml").write_text(text)
    topic = ["accumulator-reset"]  # the gate is topic 1's
    series = load_series(load_matrix(tmp_path / "matrix.yaml"), topic)
    assert [p.name[:4] for p in series.patches] == ["0001", "0002"]
    approved = text.replace(
        "  layout: llama.cpp\n",
        "  layout: llama.cpp\n  gate_approval: https://github.com/ggml-org/llama.cpp/pull/1#c\n",
        1,
    )
    (tmp_path / "matrix.yaml").write_text(approved)
    series = load_series(load_matrix(tmp_path / "matrix.yaml"), topic)
    assert [p.name[:4] for p in series.patches] == ["0001", "0002", "0003"]
    # in the whole queue the gate patch follows topic 1's series, before the next topic's
    whole = load_series(load_matrix(tmp_path / "matrix.yaml"))
    assert "test-opt-dynamic-accum" in whole.patches[2].name
    assert series.gate_test_source() == (ROOT / "native_tests" / f"{GATE_TEST}.cpp").read_text()
