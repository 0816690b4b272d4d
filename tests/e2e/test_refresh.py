"""ggml-patch refresh: patches/ regenerated from a target's worktree with stable bytes. On copies of
the repository's matrix targets and series (never the checkout's own patches/): the real llama.cpp
target rewrites nothing, the ggml target maps back byte-identically, a resolved conflict on a fork
becomes the new series, and unfinished or lossy refreshes are refused.
"""

import shutil
from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.drift.check import status_dirs, status_of_targets
from orchestrator.drift.status import APPLIES, CONFLICT
from orchestrator.errors import ExitCode

from ..helpers.forks import (
    FORK_LINE,
    INSERT_AFTER,
    OPT,
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
from ..helpers.tools import run_tool


@pytest.fixture(scope="module")
def setup(tool_cache, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refresh")
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp / "fork", refs["llama.cpp"], tool_cache)
    commit_change(
        fork,
        "conflict",
        {OPT: replace_once(INSERT_AFTER, INSERT_AFTER + FORK_LINE)},
        "fork: its own assertion where the fix puts one",
    )
    apply_series(fork, "merged")
    targets = dict(pinned_targets(refs))
    targets["fork-conflict"] = (
        f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: conflict}}\n"
    )
    targets["fork-merged"] = (
        f"layout: llama.cpp\nsource: {{kind: git, url: '{fork}', ref: merged}}\n"
    )
    write_matrix(tmp, targets)
    return tmp, seeded_cache(tmp / "cache", tool_cache)


@pytest.fixture
def project(setup, tmp_path):
    """A fresh copy of matrix.yaml + patches/ + native_tests/ (the cache is shared)."""
    tmp, cache = setup
    for name in ("matrix.yaml", "patches", "native_tests"):
        src = tmp / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tmp_path / name)
    return tmp_path / "matrix.yaml", cache


def _snapshot(directory: Path) -> dict:
    """Every file under the directory (topic folders included): bytes and mtime."""
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    return {str(p.relative_to(directory)): (p.read_bytes(), p.stat().st_mtime_ns) for p in files}


def _refresh(matrix: Path, cache, target: str):
    return run_tool("refresh", target, "--matrix", str(matrix), "--cache", str(cache.root))


def test_series_copy_is_the_real_one(project):
    m, _ = project
    for p in (ROOT / "patches" / "accumulator-reset").glob("*.patch"):
        assert (m.parent / "patches" / "accumulator-reset" / p.name).read_bytes() == p.read_bytes()


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_refresh_with_nothing_changed_changes_no_byte(project, target):
    """llama.cpp: format-patch in the canonical layout; ggml: its layout, mapped back (a round trip
    through git: the registration regenerated in llama.cpp's convention from the series' base)."""
    m, cache = project
    before = _snapshot(m.parent / "patches")
    proc = _refresh(m, cache, target)
    assert proc.returncode == 0, proc.stderr
    assert "no byte changed" in proc.stdout
    assert _snapshot(m.parent / "patches") == before  # not even rewritten (mtimes kept)


def test_resolved_conflict_becomes_the_series(project):
    m, cache = project
    matrix = load_matrix(m)
    row = status_of_targets(matrix, cache, ["fork-conflict"])[0]
    assert row.status == CONFLICT
    wt = Path(row.conflict.worktree)

    # refresh before the conflict is resolved: refused, nothing written
    before = _snapshot(m.parent / "patches")
    proc = _refresh(m, cache, "fork-conflict")
    assert proc.returncode == ExitCode.CONFIG and "git am is still in progress" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert _snapshot(m.parent / "patches") == before

    # resolve: keep both assertions, then let git am go on with the rest of the series
    text = (wt / OPT).read_text()
    resolved = "".join(
        line
        for line in text.splitlines(True)
        if not line.startswith(("<<<<<<< ", "=======", ">>>>>>> "))
    )
    (wt / OPT).write_text(resolved)
    git(wt, "add", OPT)
    git(wt, "am", "--continue")
    (wt / "stray.txt").write_text("x\n")
    proc = _refresh(m, cache, "fork-conflict")
    assert proc.returncode == ExitCode.CONFIG and "uncommitted changes" in proc.stderr
    (wt / "stray.txt").unlink()

    proc = _refresh(m, cache, "fork-conflict")
    assert proc.returncode == 0, proc.stderr
    topic = ROOT / "patches" / "accumulator-reset"
    fix, test = sorted(p.name for p in topic.glob("*.patch"))
    # the test patch did not change a byte
    assert f"wrote accumulator-reset/{fix}" in proc.stdout and test not in proc.stdout
    new_fix = (m.parent / "patches" / "accumulator-reset" / fix).read_text()
    old_fix = (topic / fix).read_text()
    # mail header and message kept
    assert new_fix.split("\ndiff --git")[0] == old_fix.split("\ndiff --git")[0]
    assert FORK_LINE.strip() in new_fix  # the new hunk carries the fork's line as context

    # the refreshed series applies to the fork as is; the resolution worktree, fully captured, goes
    again = status_of_targets(load_matrix(m), cache, ["fork-conflict"])[0]
    assert again.status == APPLIES, again
    assert not wt.exists()
    assert not status_dirs(cache, matrix.target("fork-conflict")).resolve.exists()


def test_refresh_from_a_target_that_already_has_the_fix_is_refused(project):
    m, cache = project
    before = _snapshot(m.parent / "patches")
    proc = _refresh(m, cache, "fork-merged")
    assert proc.returncode == ExitCode.CONFIG, proc.stderr
    assert "is already upstream there; refreshing from it would drop it" in proc.stderr
    assert _snapshot(m.parent / "patches") == before


def test_refresh_of_a_conflict_without_its_worktree_points_at_status(project, setup):
    m, cache = project
    resolve = status_dirs(cache, load_matrix(m).target("fork-conflict")).resolve
    if resolve.exists():
        shutil.rmtree(resolve)
    proc = _refresh(m, cache, "fork-conflict")
    assert proc.returncode == ExitCode.SERIES_DOES_NOT_APPLY, proc.stderr
    assert "ggml-patch status --target fork-conflict" in proc.stderr
