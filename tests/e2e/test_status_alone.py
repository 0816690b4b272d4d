"""On a target where the queue's first topic conflicts, the later topics that do not need it are
tried on their own (their own state, not "not tried"); a topic retired on that target (`topic
retire NAME --target T`) is not applied there and still is on every other target. The real
llama.cpp snapshot and a fork of it, through git sources (file paths, no network)."""

import pytest

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
from ..helpers.tools import ROOT, run_tool


def _independent_later_topics() -> list[str]:
    """The real queue's later topics that neither follow its first nor touch its lines: what these
    tests need. Since issue 49, topics 2 and 3 follow accumulator-reset (their cases use its test
    helper), so the real queue may have none; the rule itself is tested on synthetic queues in
    tests/unit/test_alone.py and tests/unit/test_resolution.py."""
    queue = load_queue(load_matrix(ROOT / "matrix.yaml"))
    first = queue.names()[0]
    return [t.name for t in queue.topics[1:] if first not in t.meta.after]


def _need_an_independent_topic() -> None:
    if not _independent_later_topics():
        pytest.skip(
            "the real queue has no later topic independent of its first (all follow it: after:)"
        )


def test_later_topics_are_tried_on_their_own_and_retire_is_per_target(tool_cache, tmp_path):
    _need_an_independent_topic()
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp_path / "fork", refs["llama.cpp"], tool_cache)
    commit_change(
        fork,
        "conflict",
        {OPT: replace_once(INSERT_AFTER, INSERT_AFTER + FORK_LINE)},
        "fork: its own assertion where the fix puts one",
    )
    targets = {
        f"fork-{b}": f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: {b}}}\n"
        for b in ("master", "conflict")
    }
    matrix_path = write_matrix(tmp_path, targets)
    cache = seeded_cache(tmp_path / "cache", tool_cache)
    matrix = load_matrix(matrix_path)
    names = load_queue(matrix).names()
    first, later = names[0], names[1:]
    row = status_of_targets(matrix, cache, ["fork-conflict"], behaviour=False)[0]
    assert row.status == CONFLICT and row.topics[first].status == CONFLICT, row
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
    assert here.status == APPLIES and all(here.topics[n].status == APPLIES for n in later)
    assert there.status == APPLIES and there.topics[first].status == APPLIES


def test_a_stale_resolution_worktree_is_named_and_blocks_no_refresh(tool_cache, tmp_path):
    """status leaves a resolution worktree on fork-conflict for the whole queue; once the first
    topic is retired there, that worktree is stale: status names it with the command that
    discards it, and refresh of the other topics passes it by."""
    _need_an_independent_topic()
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp_path / "fork", refs["llama.cpp"], tool_cache)
    commit_change(
        fork,
        "conflict",
        {OPT: replace_once(INSERT_AFTER, INSERT_AFTER + FORK_LINE)},
        "fork: its own assertion where the fix puts one",
    )
    target = f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: conflict}}\n"
    matrix_path = write_matrix(tmp_path, {"fork-conflict": target})
    cache = seeded_cache(tmp_path / "cache", tool_cache)
    common = ("--matrix", str(matrix_path), "--cache", str(tmp_path / "cache"))
    row = status_of_targets(load_matrix(matrix_path), cache, ["fork-conflict"], behaviour=False)[0]
    worktree = row.conflict.worktree
    first = load_queue(load_matrix(matrix_path)).names()[0]
    proc = run_tool("topic", "retire", first, "--target", "fork-conflict", *common)
    assert proc.returncode == 0, proc.stderr
    row = status_of_targets(load_matrix(matrix_path), cache, ["fork-conflict"], behaviour=False)[0]
    assert f"stale resolution worktree {worktree}" in row.detail, row.detail
    assert f"worktree remove --force --force {worktree}" in row.detail
    proc = run_tool("refresh", "fork-conflict", *common)
    assert proc.returncode == 0, proc.stderr
    assert "passed by; discard it: git" in proc.stdout, proc.stdout
