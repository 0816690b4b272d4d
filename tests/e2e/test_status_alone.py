"""On a target where the queue's first topic conflicts, the later topics that do not need it are
tried on their own (their own state, not "not tried"); a topic retired on that target (`topic
retire NAME --target T`) is not applied there and still is on every other target. The real
llama.cpp snapshot and a fork of it, through git sources (file paths, no network). The real
queue's later topics all follow its first (`after:`), so each test adds, in its copy of the
project, a small topic independent of the first with `topic new` (a line of the fork's in
ggml-alloc.c and test-alloc.cpp, files the first topic does not touch)."""

from orchestrator.config import load_matrix
from orchestrator.drift.check import status_of_targets
from orchestrator.drift.status import ALONE, APPLIES, CONFLICT, RETIRED_HERE, TOPIC_NOT_TRIED
from orchestrator.patchset.files import load_queue

from ..helpers.forks import (
    FORK_LINE,
    INSERT_AFTER,
    OPT,
    commit_change,
    real_snapshot_refs,
    replace_once,
    repo_from_snapshot,
    seeded_cache,
    write_matrix,
)
from ..helpers.tools import run_tool

# the small topic these tests add (its fix and its test touch files the first topic does not)
INDEPENDENT = "independent-alloc-note"
ALLOC, ALLOC_TEST = "ggml/src/ggml-alloc.c", "tests/test-alloc.cpp"


def _fork_with_an_independent_change(tmp_path, tool_cache):
    """The real llama.cpp snapshot as a fork: branch `conflict` puts its own line where the first
    topic's fix goes; branch `independent` adds a line to ggml-alloc.c and to its test, which no
    topic of the queue touches."""
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp_path / "fork", refs["llama.cpp"], tool_cache)
    commit_change(
        fork,
        "conflict",
        {OPT: replace_once(INSERT_AFTER, INSERT_AFTER + FORK_LINE)},
        "fork: its own assertion where the fix puts one",
    )
    note = lambda text: text + "// a note of the fork, none of the queue's topics\n"  # noqa: E731
    commit_change(
        fork, "independent", {ALLOC: note, ALLOC_TEST: note}, "ggml-alloc : a note of the fork"
    )
    return fork


def _add_independent_topic(matrix_path, fork, tmp_path) -> list[str]:
    """The independent change as the queue's last topic (`topic new`, as a contributor adds one:
    the real queue's later topics all follow its first, `after:`); the later topics that neither
    follow the first nor touch its lines, the new one among them."""
    proc = run_tool(
        "topic", "new", INDEPENDENT, "--from", "independent", "--repo", str(fork),
        "--matrix", str(matrix_path), "--cache", str(tmp_path / "cache"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    queue = load_queue(load_matrix(matrix_path))
    first = queue.topics[0]
    mine = {f.path for p in first.series.patches for f in p.files}
    assert not mine & {ALLOC, ALLOC_TEST}, mine  # it touches none of the first topic's files
    deep = {t.name: set(t.meta.after) for t in queue.topics}
    for _ in queue.topics:  # `after:` at any depth
        deep = {n: a.union(*(deep[x] for x in a)) for n, a in deep.items()}
    later = [t.name for t in queue.topics[1:] if first.name not in deep[t.name]]
    assert INDEPENDENT in later, later
    return later


def test_later_topics_are_tried_on_their_own_and_retire_is_per_target(tool_cache, tmp_path):
    fork = _fork_with_an_independent_change(tmp_path, tool_cache)
    targets = {
        f"fork-{b}": f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: {b}}}\n"
        for b in ("master", "conflict")
    }
    matrix_path = write_matrix(tmp_path, targets)
    cache = seeded_cache(tmp_path / "cache", tool_cache)
    later = _add_independent_topic(matrix_path, fork, tmp_path)
    matrix = load_matrix(matrix_path)
    first = load_queue(matrix).names()[0]
    row = status_of_targets(matrix, cache, ["fork-conflict"], behaviour=False)[0]
    assert row.status == CONFLICT and row.topics[first].status == CONFLICT, row
    for name in load_queue(matrix).names()[1:]:
        if name not in later:  # it follows the first: it waits for it
            assert row.topics[name].status == TOPIC_NOT_TRIED, (name, row.topics[name])
    for name in later:
        on = row.topics[name]
        assert on.status not in (TOPIC_NOT_TRIED, CONFLICT), (name, on)
        assert on.detail.startswith(ALONE), (name, on)
    proc = run_tool(
        "topic",
        "retire",
        first,
        "--target",
        "fork-conflict",
        "--upstream",
        "0123abcd",
        "--matrix",
        str(matrix_path),
        "--cache",
        str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr
    matrix = load_matrix(matrix_path)
    rows = {r.target: r for r in status_of_targets(matrix, cache, list(targets), behaviour=False)}
    here, there = rows["fork-conflict"], rows["fork-master"]
    assert here.topics[first].status == RETIRED_HERE and "0123abcd" in here.topics[first].detail
    assert all(here.topics[n].status == APPLIES for n in later), here.topics
    assert there.status == APPLIES and there.topics[first].status == APPLIES


def test_a_stale_resolution_worktree_is_named_and_blocks_no_refresh(tool_cache, tmp_path):
    """status leaves a resolution worktree on fork-conflict for the whole queue; once the first
    topic is retired there, that worktree is stale: status names it with the command that
    discards it, and refresh of the independent topic passes it by."""
    fork = _fork_with_an_independent_change(tmp_path, tool_cache)
    target = f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: conflict}}\n"
    matrix_path = write_matrix(tmp_path, {"fork-conflict": target})
    cache = seeded_cache(tmp_path / "cache", tool_cache)
    _add_independent_topic(matrix_path, fork, tmp_path)
    common = ("--matrix", str(matrix_path), "--cache", str(tmp_path / "cache"))
    row = status_of_targets(load_matrix(matrix_path), cache, ["fork-conflict"], behaviour=False)[0]
    worktree = row.conflict.worktree
    first = load_queue(load_matrix(matrix_path)).names()[0]
    proc = run_tool("topic", "retire", first, "--target", "fork-conflict", *common)
    assert proc.returncode == 0, proc.stderr
    # the whole queue there: the later topics that follow the first conflict without it; the
    # worktree kept is named stale (made for a topic no longer applied there)
    row = status_of_targets(load_matrix(matrix_path), cache, ["fork-conflict"], behaviour=False)[0]
    assert row.conflict.kept and row.conflict.worktree == worktree, row.conflict
    assert f"{first} no longer applied on this target" in row.conflict.stale, row.conflict
    assert f"worktree remove --force --force {worktree}" in row.conflict.stale
    # the independent topic alone applies there, and status names the worktree stale beside it
    row = status_of_targets(
        load_matrix(matrix_path), cache, ["fork-conflict"], [INDEPENDENT], behaviour=False
    )[0]
    assert row.status == APPLIES, row
    assert f"stale resolution worktree {worktree}" in row.detail, row.detail
    assert f"worktree remove --force --force {worktree}" in row.detail
    # the independent topic refreshed from there: the stale worktree passed by, not in its way
    proc = run_tool("refresh", "fork-conflict", "--topic", INDEPENDENT, *common)
    assert proc.returncode == 0, proc.stderr
    assert "passed by; discard it: git" in proc.stdout, proc.stdout
