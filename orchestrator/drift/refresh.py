"""The canonical series regenerated from a target's worktree (base..HEAD by `git format-patch` in
stable bytes, mapped back into the series' layout): the resolution worktree `status` left at a
conflict and someone finished, or else the series applied afresh (clean or 3-way) to the base."""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import sources
from ..cache import Cache
from ..config import Matrix, Target
from ..errors import ConfigError, SeriesDoesNotApply
from ..model.layout import GATE_TEST, get_layout
from ..patchset.files import load_queue, write_patches, write_series
from ..patchset.render import render
from ..patchset.series import Patch, Series, parse_series
from ..vcs.snapshots import SnapshotRepo, Worktree
from .check import attempt, series_base, status_dirs
from .status import CONFLICTED, PRESENT


@dataclass
class Refreshed:
    worktree: str
    layout: str
    written: list[str]
    removed: list[str]
    native_test: Optional[str]  # native_tests/ gate test rewritten to the series' own


def refresh(
    matrix: Matrix, cache: Cache, target: Target, topics: Optional[list[str]] = None
) -> Refreshed:
    """The chosen topics (the active ones by default) rewritten from the target's worktree: its
    commits split back into the topics in queue order, each topic as many as it had."""
    queue = load_queue(matrix, with_gate=False)
    topics = topics or matrix.topics
    chosen = queue.chosen(topics)
    old = queue.series(topics)
    repo = SnapshotRepo(cache.snapshots_git)
    snap = sources.snapshot(target.source, cache, repo)
    layout = get_layout(target.layout, target.prefix)
    with cache.lock(f"status-{target.name}"):  # status must not reset the worktree under us
        wt = resolved_worktree(repo, cache, target, snap.commit, old)
        # base..HEAD of the worktree, written by git format-patch, in the canonical layout
        with tempfile.TemporaryDirectory(prefix="refresh-") as tmp:
            files = wt.format_patch(snap.commit, Path(tmp))
            if not files:
                raise ConfigError(
                    f"{wt.path}: no commits on top of the base {snap.commit[:12]}; "
                    "nothing to refresh from"
                )
            texts = [(f.name, f.read_bytes().decode("utf-8", "surrogateescape")) for f in files]
        new = parse_series(layout.name, texts)
        dst = get_layout(old.layout)
        if layout != dst:
            read = (
                _canonical_base_reader(matrix, cache, repo, old)
                if layout.name != dst.name
                else (lambda p: None)
            )
            new = render(new, layout, dst, read)
    if len(new.patches) < len(old.patches):  # e.g. a patch skipped as already upstream there
        raise ConfigError(
            f"{wt.path}: {len(new.patches)} commits on the base for {len(old.patches)} patches; "
            f"refreshing from {target.name} would drop a patch from the queue "
            "(already upstream there?)"
        )
    if len(chosen) > 1 and len(new.patches) != len(old.patches):
        raise ConfigError(
            f"{wt.path}: {len(new.patches)} commits on the base for {len(old.patches)} patches of "
            f"{len(chosen)} topics; cannot tell which topic the extra ones belong to "
            "(refresh one topic with --topic NAME)"
        )
    written: list[str] = []
    removed: list[str] = []
    start = 0
    for i, t in enumerate(chosen):
        last = i == len(chosen) - 1
        count = len(new.patches) - start if last else len(t.series.patches)
        part = _numbered(new.patches[start : start + count])
        start += count
        w, r = write_series(matrix.topic_dir(t.name), Series(new.layout, part))
        written += [f"{t.name}/{name}" for name in w]
        removed += [f"{t.name}/{name}" for name in r]
    return Refreshed(
        str(wt.path), layout.name, written, removed, _sync_native_test(matrix.native_tests_dir, new)
    )


def _numbered(patches: tuple[Patch, ...]) -> tuple[Patch, ...]:
    """A topic's patches numbered from 0001 (format-patch numbers the whole queue)."""
    out = []
    for i, p in enumerate(patches, 1):
        rest = re.sub(r"^\d{4}-", "", p.name)
        out.append(Patch(f"{i:04d}-{rest}", p.header, p.files, p.trailer))
    return tuple(out)


def resolved_worktree(
    repo: SnapshotRepo, cache: Cache, target: Target, base: str, series: Series
) -> Worktree:
    """The finished resolution worktree if there is one, else the
    series applied afresh in the trial worktree."""
    dirs = status_dirs(cache, target)
    if dirs.resolve.exists():
        wt = Worktree(repo, dirs.resolve)
        if wt.am_in_progress():
            raise ConfigError(
                f"{wt.path}: git am is still in progress; resolve the conflict, `git add` the "
                "files, `git am --continue`, then refresh"
            )
        if not wt.is_clean():
            raise ConfigError(
                f"{wt.path}: uncommitted changes; commit them "
                "(e.g. `git commit --amend`) before refresh"
            )
        if not wt.descends_from(base):
            raise ConfigError(
                f"{wt.path}: not based on {target.name}'s current base {base[:12]} (the source "
                "moved); remove the worktree and run status again"
            )
        return wt
    layout, src = get_layout(target.layout, target.prefix), get_layout(series.layout)
    rendered = render(series, src, layout, lambda p: repo.read_blob(base, p))
    trial = Worktree(repo, dirs.trial)
    results, conflict = attempt(trial, base, rendered, write_patches(rendered, dirs.series))
    if conflict:
        raise SeriesDoesNotApply(
            f"{target.name}: {conflict.patch} conflicts in {conflict.file}; run "
            f"`ggml-patch status --target {target.name}` and resolve it in the worktree it leaves"
        )
    present = [r.name for r in results if r.result == PRESENT]
    if present:
        raise ConfigError(
            f"{target.name}: {present[0]} is already upstream "
            "there; refreshing from it would drop it"
        )
    assert not any(r.result == CONFLICTED for r in results)
    return trial


def _canonical_base_reader(matrix: Matrix, cache: Cache, repo: SnapshotRepo, series: Series):
    """Files of the base the canonical series was made on (to
    register the gate test in its convention)."""
    snap = series_base(matrix, cache, repo, series)
    if snap is None:
        raise ConfigError(
            f"{matrix.path}: no pinned {series.layout} target whose files match the series' index "
            f"lines; refresh from a {series.layout} target, or add the series' base to the matrix"
        )
    return lambda p: repo.read_blob(snap.commit, p)


def _sync_native_test(native_dir: Path, series: Series) -> Optional[str]:
    """Keep native_tests/ (what the harness builds) equal to the gate test the series adds."""
    source = series.gate_test_source()
    target = native_dir / f"{GATE_TEST}.cpp"
    if source is None or not target.exists() or target.read_bytes() == source.encode():
        return None
    target.write_bytes(source.encode())
    return str(target)
