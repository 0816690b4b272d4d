"""The drift status: pure verdicts, then the real llama.cpp snapshot and forks of it with history
written here (a commit next to the fix, one over it, the fix merged upstream, the file or the API
gone), through git sources (file paths, so no network), and bad input at the command line.
"""

import pytest

from orchestrator.drift.status import (
    APPLIES,
    CLEAN,
    CONFLICT,
    CONFLICTED,
    MERGED,
    NOT_APPLICABLE,
    NOT_TRIED,
    PRESENT,
    THREE_WAY,
    UNAVAILABLE,
    UNREACHABLE,
    UPSTREAM,
    PatchResult,
    TargetStatus,
    conflict_regions,
    content_present,
    exit_code,
    failed_hunk,
    hunk_header,
    modified_fix_files,
    not_applicable_reason,
    short_name,
    target_status,
)
from orchestrator.errors import ExitCode
from orchestrator.patchset.series import parse_series

from ..helpers.forks import OPT, OPT_HEADER, ROOT

# the fix and the gate test's own patch (a new file and its registration)
PATCHES = [
    *sorted((ROOT / "patches" / "accumulator-reset").glob("0001-*.patch")),
    ROOT
    / "native_tests"
    / "accumulator-reset"
    / "upstream-gate"
    / "0003-tests-add-test-opt-dynamic-accum-for-per-step-gradie.patch",
]
FIX, TEST = (p.name for p in PATCHES)


def _series():
    return parse_series("llama.cpp", [(p.name, p.read_text()) for p in PATCHES])


# ---- pure: verdicts ----


@pytest.mark.parametrize(
    "results, status",
    [
        ([CLEAN, CLEAN], APPLIES),
        ([MERGED, CLEAN], THREE_WAY),
        ([CLEAN, MERGED], THREE_WAY),
        ([PRESENT, PRESENT], UPSTREAM),
        ([PRESENT, CLEAN], APPLIES),  # partly upstream: the rest still applies
        ([PRESENT, MERGED], THREE_WAY),
        ([CLEAN, CONFLICTED], CONFLICT),
        ([CONFLICTED, NOT_TRIED], CONFLICT),
    ],
)
def test_verdict_precedence(results, status):
    got, detail = target_status(
        [PatchResult(name=f"000{i}", result=r, detail="x") for i, r in enumerate(results)]
    )
    assert got == status
    if status == APPLIES and PRESENT in results:
        assert detail == "already upstream: 0000"


def test_short_name():
    assert short_name(FIX) == "0001" and short_name("x.patch") == "x.patch"


def test_verdict_conflict_names_the_patch_and_where():
    assert target_status(
        [
            PatchResult(
                name="0001-a.patch", result=CONFLICTED, detail="ggml/src/ggml-opt.cpp, @@ -1 +1 @@"
            )
        ]
    ) == (CONFLICT, "0001: ggml/src/ggml-opt.cpp, @@ -1 +1 @@")
    assert target_status(
        [
            PatchResult(name="0001-a.patch", result=PRESENT, detail="x"),
            PatchResult(name="0002-b.patch", result=PRESENT, detail="y"),
        ]
    ) == (UPSTREAM, "0001: x; 0002: y")


def test_exit_code():
    row = lambda s: TargetStatus(target="t", layout="llama.cpp", status=s)  # noqa: E731
    assert (
        exit_code([row(APPLIES), row(THREE_WAY), row(UPSTREAM), row(NOT_APPLICABLE)]) == ExitCode.OK
    )
    assert exit_code([row(APPLIES), row(CONFLICT)]) == ExitCode.SERIES_DOES_NOT_APPLY
    assert exit_code([row(CONFLICT), row(UNREACHABLE)]) == ExitCode.SOURCE_UNAVAILABLE
    assert exit_code([row(UNAVAILABLE)]) == ExitCode.SOURCE_UNAVAILABLE
    assert exit_code([]) == ExitCode.OK


# ---- pure: not applicable ----


def test_modified_fix_files_skip_tests_and_new_files():
    assert modified_fix_files(_series()) == [OPT]


@pytest.mark.parametrize(
    "files, reason",
    [
        ({}, f"{OPT} is absent"),
        ({OPT: "x"}, f"{OPT_HEADER} is absent: no per-step API (ggml_opt_prepare_alloc)"),
        (
            {OPT: "x", OPT_HEADER: "void ggml_opt_alloc(void);"},
            f"{OPT_HEADER} has no per-step API (ggml_opt_prepare_alloc)",
        ),
        ({OPT: "x", OPT_HEADER: "GGML_API void ggml_opt_prepare_alloc("}, None),
    ],
)
def test_not_applicable_reason(files, reason):
    assert not_applicable_reason([OPT], OPT_HEADER, files.get) == reason


# ---- pure: already upstream, conflict details ----


def test_content_present_needs_every_added_run_and_created_file():
    fix, test = _series().patches
    added = "".join(
        line[1:] + "\n"
        for line in fix.files[0].text.splitlines()
        if line.startswith("+") and not line.startswith("+++")
    )
    assert not content_present(fix, {OPT: "int x;\n"}.get)
    assert not content_present(fix, {}.get)
    assert content_present(fix, {OPT: "// moved around\n" + added + "// more\n"}.get)
    # one line of the run missing: not there
    assert not content_present(fix, {OPT: added.split("\n", 1)[1]}.get)
    new_test = test.files[1]
    files = {
        "tests/CMakeLists.txt": "llama_build_and_test(test-opt.cpp)\n  "
        "llama_build_and_test(test-opt-dynamic-accum.cpp)\n",
        new_test.path: new_test.added_content,
    }
    assert content_present(test, files.get)
    assert not content_present(
        test, {**files, new_test.path: new_test.added_content + "// edited\n"}.get
    )


def test_failed_hunk_from_git_messages():
    fix = _series().patches[0]
    hdr = (
        "@@ -826,6 +836,8 @@ void ggml_opt_eval(ggml_opt_context_t "
        "opt_ctx, ggml_opt_result_t result) {"
    )
    assert hunk_header(fix, OPT, 826) == hdr
    assert failed_hunk(
        fix, f"Applying: x\nerror: patch failed: {OPT}:826\nerror: {OPT}: patch does not apply\n"
    ) == (OPT, hdr)
    assert failed_hunk(fix, f"error: patch failed: {OPT}:7\n") == (OPT, "at line 7")
    assert failed_hunk(fix, "error: tests/x.cpp: already exists in working directory\n") == (
        "tests/x.cpp",
        "new file: already exists",
    )
    assert failed_hunk(fix, "error: ggml/src/a.c: does not exist in index\n") == (
        "ggml/src/a.c",
        "file does not exist",
    )
    assert failed_hunk(fix, "fatal: something else\n") == (None, "")


def test_conflict_regions():
    text = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> x\nd\n<<<<<<< HEAD\n>>>>>>> y\n"
    assert conflict_regions(text) == ((2, 6), (8, 9))
    assert conflict_regions("no markers\n") == ()


# ---- the real snapshot and forks of it ----


# ---- bad input: refused in one line before anything is touched ----


# ---- a real fork without ggml-opt: ik_llama.cpp as vendored by ik-llama-cpp-python 0.1.5 ----


def test_what_status_json_writes_from_gits_own_words_reads_back():
    """A row the tool builds (git's message: several lines, a terminal escape) is written as one
    safe line per value and reads back (drift-issue --status); the raw text is refused."""
    import json

    from orchestrator.ci.drift_issue import read_status
    from orchestrator.drift.status import Conflict, StatusReport
    from orchestrator.errors import ConfigError

    said = "error: patch failed\n\x1b[2Jhunk #1"
    row = TargetStatus(
        target="ggml",
        status=CONFLICT,
        detail=said,
        patches=[PatchResult(name="0001-x.patch", result=CONFLICTED, detail=said)],
        conflict=Conflict(patch="0001-x.patch", file="src/x.c", hunk="@@ -1 +1 @@", reason=said),
    )
    text = json.dumps(StatusReport(profile="default", targets=[row]).to_json())
    _, rows = read_status(text, "status.json")
    assert "\n" not in rows["ggml"].detail and "\x1b" not in rows["ggml"].detail
    with pytest.raises(ConfigError) as e:
        read_status(text.replace("\\\\x1b", "\\u001b"), "status.json")
    assert "targets[0].detail: a control character" in str(e.value)
