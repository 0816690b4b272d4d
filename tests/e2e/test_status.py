"""The drift status on the real pinned snapshots (PyPI sdists) and forks of it with history
written here (a commit next to the fix, one over it, the fix merged upstream, the file or the API
gone), through git sources (file paths, so no network)."""

import json
from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.drift.check import status_dirs, status_of_targets
from orchestrator.drift.status import (
    APPLIES,
    CLEAN,
    CONFLICT,
    CONFLICTED,
    FAILED,
    MERGED,
    NOT_APPLICABLE,
    NOT_TRIED,
    PASSED,
    PRESENT,
    THREE_WAY,
    UNREACHABLE,
    UPSTREAM,
)
from orchestrator.errors import ExitCode
from orchestrator.patchset.series import parse_patch
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree

from ..helpers.forks import (
    CONTEXT_LINE,
    FORK_LINE,
    INSERT_AFTER,
    OPT,
    OPT_HEADER,
    ROOT,
    apply_series,
    commit_change,
    git,
    pinned_targets,
    real_snapshot_refs,
    replace_once,
    repo_from_snapshot,
    seeded_cache,
    write_matrix,
)
from ..helpers.patches import real_queue
from ..helpers.tools import run_tool

PATCHES = sorted((ROOT / "patches" / "accumulator-reset").glob("*.patch"))


FIX, TEST = (p.name for p in PATCHES)
TOPIC = "accumulator-reset"


@pytest.fixture(scope="module")
def drift(tool_cache, tmp_path_factory):
    """One status run over the real pinned targets and llama.cpp forks with history written here."""
    tmp = tmp_path_factory.mktemp("drift")
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp / "fork", refs["llama.cpp"], tool_cache)
    commit_change(
        fork,
        "near",
        {OPT: replace_once(CONTEXT_LINE, CONTEXT_LINE.rstrip("\n") + "  // fork: note\n")},
        "fork: annotate the opt_i update, two lines from the fix",
    )
    commit_change(
        fork,
        "conflict",
        {OPT: replace_once(INSERT_AFTER, INSERT_AFTER + FORK_LINE)},
        "fork: its own assertion where the fix puts one",
    )
    apply_series(fork, "merged")
    commit_change(
        fork,
        "merged-moved",
        {OPT: replace_once(CONTEXT_LINE, CONTEXT_LINE + "    // upstream: reworded\n")},
        "upstream: merged the fix, then edited around it",
        start="merged",
    )
    commit_change(fork, "no-opt", {OPT: None}, "fork: drop ggml-opt")
    commit_change(
        fork,
        "no-api",
        {OPT_HEADER: lambda t: t.replace("ggml_opt_prepare_alloc", "ggml_opt_prepare_x")},
        "fork: no per-step API",
    )
    git(fork, "tag", "v-near", "near")
    targets = dict(pinned_targets(refs))
    for branch in ("master", "near", "conflict", "merged", "merged-moved", "no-opt", "no-api"):
        targets[f"fork-{branch}"] = (
            f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: {branch}}}\n"
        )
    targets["fork-tag"] = f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: v-near}}\n"
    targets["offline"] = (
        "layout: llama.cpp\n"
        "source: {kind: git, url: 'http://127.0.0.1:9/llama.cpp.git', ref: master}\n"
    )
    matrix_path = write_matrix(tmp, targets)
    cache = seeded_cache(tmp / "cache", tool_cache)
    matrix = load_matrix(matrix_path)
    # the forks' history is about accumulator-reset: its series alone (the default is the queue)
    found = status_of_targets(matrix, cache, list(matrix.targets), [TOPIC])
    rows = {r.target: r for r in found}
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
    assert rows["fork-near"].source.upstream_commit == rows["fork-near"].base
    assert rows["fork-tag"].base == rows["fork-near"].base
    assert rows["fork-tag"].source.resolved_ref == "refs/tags/v-near"


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
    assert (
        c.hunk == "@@ -826,6 +836,8 @@ void ggml_opt_eval(ggml_opt_context_t "
        "opt_ctx, ggml_opt_result_t result) {"
    )
    assert c.reason == f"CONFLICT (content): Merge conflict in {OPT}"
    assert c.lines and all(a < b for a, b in c.lines)
    assert [p.result for p in row.patches] == [CONFLICTED, NOT_TRIED]
    assert row.detail.startswith(f"0001: {OPT}, @@ -826,6 +836,8 @@")
    wt = Worktree(SnapshotRepo(cache.snapshots_git), Path(c.worktree))
    assert Path(c.worktree) == status_dirs(cache, matrix.target("fork-conflict")).resolve
    assert wt.am_in_progress() and wt.conflicted_files() == [OPT]
    text = wt.read_file(OPT)
    first, last = c.lines[0]
    lines = text.splitlines()
    assert lines[first - 1].startswith("<<<<<<< ") and lines[last - 1].startswith(">>>>>>> ")
    assert (
        "GGML_ASSERT(opt_ctx->gf != nullptr);" in text
        and "the accumulators outlive the graphs: reset them in the next ggml_opt_alloc" in text
    )


def test_a_second_run_keeps_the_resolution_worktree_untouched(drift):
    rows, cache, matrix, _ = drift
    path = Path(rows["fork-conflict"].conflict.worktree)
    (path / "NOTES.txt").write_text("half-way through resolving\n")
    before = (path / OPT).read_bytes()
    again = status_of_targets(matrix, cache, ["fork-conflict"], [TOPIC])[0]
    assert again.status == CONFLICT and again.conflict.kept and again.conflict.worktree == str(path)
    assert (path / "NOTES.txt").read_text() == "half-way through resolving\n"
    assert (path / OPT).read_bytes() == before
    assert Worktree(SnapshotRepo(cache.snapshots_git), path).am_in_progress()


def test_upstream_that_merged_the_fix(drift):
    row = drift[0]["fork-merged"]
    assert row.status == UPSTREAM, row
    assert [(p.result, p.detail) for p in row.patches] == [
        (PRESENT, "the patch reverse-applies")
    ] * 2


def test_upstream_that_merged_the_fix_and_moved_on(drift):
    row = drift[0]["fork-merged-moved"]
    assert row.status == UPSTREAM, row
    assert [(p.result, p.detail) for p in row.patches] == [
        (PRESENT, "its content is already there"),
        (PRESENT, "the patch reverse-applies"),
    ]


def test_the_topics_behaviour_where_its_patch_cannot_tell(drift):
    """The llama.cpp layout's behaviour check: the fork whose line sits where the fix goes has the
    bug (its test cases fail there); the fork that merged the fix passes them; a target where the
    patch applies is not checked."""
    rows = drift[0]
    on = rows["fork-conflict"].topics["accumulator-reset"]
    assert (on.status, on.behaviour.outcome) == (CONFLICT, FAILED), on
    assert "its test cases fail on the target as it is: test_opt_period_non_static(" in on.detail
    for name in ("fork-merged", "fork-merged-moved"):
        on = rows[name].topics["accumulator-reset"]
        assert (on.status, on.behaviour.outcome) == (UPSTREAM, PASSED), on
    assert rows["llama.cpp"].topics["accumulator-reset"].behaviour is None
    assert rows["fork-near"].topics["accumulator-reset"].behaviour is None


@pytest.mark.parametrize(
    "target, reason",
    [
        ("fork-no-opt", f"{OPT} is absent"),
        ("fork-no-api", f"{OPT_HEADER} has no per-step API (ggml_opt_prepare_alloc)"),
    ],
)
def test_not_applicable(drift, target, reason):
    row = drift[0][target]
    assert (row.status, row.detail) == (NOT_APPLICABLE, reason)
    assert not status_dirs(drift[1], drift[2].target(target)).trial.exists()  # nothing was tried


def test_unreachable_source_is_a_status_with_its_reason(drift):
    row = drift[0]["offline"]
    assert row.status == UNREACHABLE
    assert row.detail.startswith(
        "targets.offline.source.url: http://127.0.0.1:9/llama.cpp.git is unreachable: "
    )
    assert "127.0.0.1" in row.detail.split("unreachable: ", 1)[1]
    assert "\n" not in row.detail


def test_command_table_and_json(drift):
    _, cache, matrix, _ = drift
    names = ["llama.cpp", "fork-near", "fork-merged", "fork-no-opt", "offline"]
    args = [f"--target={n}" for n in names]
    where = ("--matrix", str(matrix.path), "--cache", str(cache.root), "--topic", TOPIC)
    proc = run_tool("status", *where, *args)
    assert proc.returncode == ExitCode.SOURCE_UNAVAILABLE, proc.stderr
    for name, status in zip(
        names, [APPLIES, THREE_WAY, UPSTREAM, NOT_APPLICABLE, UNREACHABLE], strict=True
    ):
        line = next(ln for ln in proc.stdout.splitlines() if ln.startswith(f"│ {name} "))
        assert status in line, (name, line)
    proc = run_tool("status", "--json", *where, *args[:4])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [t["status"] for t in data["targets"]] == [APPLIES, THREE_WAY, UPSTREAM, NOT_APPLICABLE]
    assert data["targets"][1]["patches"][0] == {"name": FIX, "result": MERGED, "detail": ""}


def test_command_prints_the_conflict_with_its_worktree(drift):
    _, cache, matrix, _ = drift
    proc = run_tool(
        "status",
        "--matrix",
        str(matrix.path),
        "--cache",
        str(cache.root),
        "--target",
        "fork-conflict",
    )
    assert proc.returncode == ExitCode.SERIES_DOES_NOT_APPLY, proc.stderr
    out = proc.stdout
    assert f"fork-conflict: conflict in {OPT} (@@ -826,6 +836,8 @@" in out
    assert str(status_dirs(cache, matrix.target("fork-conflict")).resolve) in out
    assert "ggml-patch refresh fork-conflict" in out


def test_queue_shows_each_topic_where_status_finds_it_and_its_last_verdicts(drift, tmp_path):
    """`ggml-patch queue`: the queue's default topic on a target it applies to, one that merged it
    and one without ggml-opt (the same words as `status`); its last verdict per cell from
    results.json."""
    from ..helpers.samples import results_dir, sample

    _, cache, matrix, _ = drift
    r = sample()
    for p, mine in zip(r.series.patches, PATCHES, strict=True):
        p.subject = parse_patch(mine.name, mine.read_text()).subject  # a run of today's topic
    results = results_dir(tmp_path, r)
    names = ["llama.cpp", "fork-merged", "fork-no-opt"]
    argv = ["--matrix", str(matrix.path), "--cache", str(cache.root), "--results", str(results)]
    proc = run_tool("queue", "--json", *argv, *(x for n in names for x in ("--target", n)))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["results"] == str(results / "results.json")
    topics = {t["topic"]: t for t in data["topics"]}
    assert list(topics) == real_queue().names()  # every topic of patches/queue.yaml, in order
    topic = topics["accumulator-reset"]  # the first topic of the queue
    assert (topic["topic"], topic["state"], topic["after"]) == ("accumulator-reset", "local", [])
    assert topic["patches"] == [FIX, TEST] and topic["bug"] is None
    where = {t: v["status"] for t, v in topic["targets"].items()}
    assert where == {"llama.cpp": APPLIES, "fork-merged": UPSTREAM, "fork-no-opt": NOT_APPLICABLE}
    assert topic["last_verdicts"] == {"llama.cpp/cpu": "passed", "ggml/cpu": "passed"}
    table = run_tool("queue", *argv, "--target", "llama.cpp", "--results", str(tmp_path / "none"))
    assert table.returncode == 0, table.stderr
    assert "accumulator-reset" in table.stdout and APPLIES in table.stdout
    assert "no results.json" in table.stdout


IK_LLAMA = (
    'layout: llama.cpp\nsource: {kind: pypi-sdist, package: ik-llama-cpp-python, version: "0.1.5", '
    "sha256: 33c67eb99e4dcab5e611050433243815709b8b3067753f9ce18375013cf002ad, "
    "subdirectory: vendor/ik_llama.cpp}\n"
)


def test_ik_llama_cpp_is_not_applicable(tmp_path, tool_cache):
    """The 42 MB sdist is fetched once into the default cache;
    nothing is tried, so no worktree is made there."""
    m = write_matrix(tmp_path, {"ik_llama.cpp": IK_LLAMA})
    proc = run_tool("status", "--json", "--matrix", str(m), "--cache", str(tool_cache))
    assert proc.returncode == 0, proc.stderr
    row = json.loads(proc.stdout)["targets"][0]
    assert (row["status"], row["detail"]) == (NOT_APPLICABLE, f"{OPT} is absent")
    assert row["source"]["description"] == "ik-llama-cpp-python==0.1.5 (vendor/ik_llama.cpp)"
    assert not (tool_cache / "status" / "ik_llama.cpp").exists()
