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
from ..patchset.queue import Queue, Topic
from ..patchset.render import render
from ..patchset.series import Patch, Series, parse_series
from ..vcs.snapshots import SnapshotRepo, Worktree
from . import resolution
from .check import attempt, series_base, status_dirs
from .status import CONFLICTED, PRESENT


@dataclass
class Refreshed:
    worktree: str
    layout: str
    written: list[str]
    removed: list[str]
    native_test: Optional[str]  # native_tests/ gate test rewritten to the series' own
    notes: tuple[str, ...] = ()  # a stale resolution worktree passed by


def refresh(
    matrix: Matrix, cache: Cache, target: Target, topics: Optional[list[str]] = None
) -> Refreshed:
    """The chosen topics (the active ones by default) rewritten from the target's worktree: its
    commits split back into the topics in queue order, each topic as many as it had."""
    queue = load_queue(matrix, with_gate=False)
    # a topic retired on this target (upstream has it there) is not refreshed from it
    chosen = queue.chosen(topics, target.name)
    old = queue.series(topics, target.name)
    repo = SnapshotRepo(cache.snapshots_git)
    snap = sources.snapshot(target.source, cache, repo)
    layout = get_layout(target.layout, target.prefix)
    with cache.lock(f"status-{target.name}"):  # status must not reset the worktree under us
        notes: list[str] = []
        wt = resolved_worktree(repo, cache, target, snap.commit, old, notes)
        head = wt.head() or ""
        stack = [c[0] for c in repo.commits(snap.commit, head)]
        if not stack:
            raise ConfigError(
                f"{wt.path}: no commits on top of the base {snap.commit[:12]}; "
                "nothing to refresh from"
            )
        _check_count(wt.path, target.name, len(stack), old, len(chosen))
        ranges = _topic_ranges(chosen, snap.commit, stack)
        read = _reader(matrix, cache, repo, old, layout)
        with tempfile.TemporaryDirectory(prefix="refresh-") as tmp:
            if len(chosen) == 1:  # base..HEAD of the worktree as it is
                texts = {chosen[0].name: _texts(wt.format_patch(snap.commit, Path(tmp)))}
            else:  # each topic alone on the base, after the topics it follows
                scratch = Worktree(repo, status_dirs(cache, target).trial.parent / "topic")
                texts = {
                    t.name: _alone(repo, scratch, snap.commit, queue, t, ranges, Path(tmp))
                    for t in chosen
                }
    written: list[str] = []
    removed: list[str] = []
    whole: list[Patch] = []
    for t in chosen:
        new = parse_series(layout.name, texts[t.name])
        if read is not None:
            new = render(new, layout, get_layout(old.layout), read)
        part = _numbered(new.patches)
        whole += part
        w, r = write_series(matrix.topic_dir(t.name), Series(new.layout, part))
        written += [f"{t.name}/{name}" for name in w]
        removed += [f"{t.name}/{name}" for name in r]
    synced = _sync_native_test(matrix.native_tests_dir, Series(old.layout, tuple(whole)))
    return Refreshed(str(wt.path), layout.name, written, removed, synced, tuple(notes))


def _check_count(where: Path, target: str, commits: int, old: Series, topics: int) -> None:
    if commits < len(old.patches):  # e.g. a patch skipped as already upstream there
        raise ConfigError(
            f"{where}: {commits} commits on the base for {len(old.patches)} patches; "
            f"refreshing from {target} would drop a patch from the queue "
            "(already upstream there?)"
        )
    if topics > 1 and commits != len(old.patches):
        raise ConfigError(
            f"{where}: {commits} commits on the base for {len(old.patches)} patches of "
            f"{topics} topics; cannot tell which topic the extra ones belong to "
            "(refresh one topic with --topic NAME)"
        )


def _topic_ranges(chosen: list[Topic], base: str, stack: list[str]) -> dict[str, tuple[str, str]]:
    """Each topic's (first parent, last commit) in the worktree's stack, in queue order, each as
    many commits as it has patches (the last topic: the rest)."""
    out, start = {}, 0
    for i, t in enumerate(chosen):
        count = len(stack) - start if i == len(chosen) - 1 else len(t.series.patches)
        parent = stack[start - 1] if start else base
        out[t.name] = (parent, stack[start + count - 1])
        start += count
    return out


def _alone(
    repo: SnapshotRepo,
    scratch: Worktree,
    base: str,
    queue: Queue,
    topic: Topic,
    ranges: dict[str, tuple[str, str]],
    tmp: Path,
) -> list[tuple[str, str]]:
    """The topic's commits replayed on the base after only the topics it follows (`after:`), then
    written by format-patch: its own patches, numbered and indexed as a series of its own (what
    its bundle carries)."""
    # those it follows that this refresh carries (one retired on the target is in its base)
    follows = [t.name for t in queue.chosen([topic.name]) if t.name in ranges]
    follows = [n for n in follows if n != topic.name]
    scratch.ensure(base)
    start = base
    for name in (*follows, topic.name):
        first, last = ranges[name]
        files = repo.format_patches(first, last, tmp / "stack" / name)
        try:
            scratch.am(files)
        except SeriesDoesNotApply as e:
            raise ConfigError(
                f"{topic.name}: its commits do not apply on the base without the topics before "
                f"it ({e}); name those it needs in `after:` of its topic.yaml"
            ) from None
        if name != topic.name:
            start = scratch.head() or base
    return _texts(scratch.format_patch(start, tmp / "alone" / topic.name))


def _texts(files: list[Path]) -> list[tuple[str, str]]:
    return [(f.name, f.read_bytes().decode("utf-8", "surrogateescape")) for f in files]


def _reader(matrix: Matrix, cache: Cache, repo: SnapshotRepo, old: Series, layout):
    """What rendering the target's patches back into the canonical layout reads (None: the target
    is in that layout already)."""
    dst = get_layout(old.layout)
    if layout == dst:
        return None
    if layout.name != dst.name:
        return _canonical_base_reader(matrix, cache, repo, old)
    return lambda p: None


def _numbered(patches: tuple[Patch, ...]) -> tuple[Patch, ...]:
    """A topic's patches numbered from 0001 (format-patch numbers the whole queue)."""
    out = []
    for i, p in enumerate(patches, 1):
        rest = re.sub(r"^\d{4}-", "", p.name)
        out.append(Patch(f"{i:04d}-{rest}", p.header, p.files, p.trailer))
    return tuple(out)


def resolved_worktree(
    repo: SnapshotRepo,
    cache: Cache,
    target: Target,
    base: str,
    series: Series,
    notes: Optional[list[str]] = None,
) -> Worktree:
    """The finished resolution worktree if there is one made for this base and these topics,
    else the series applied afresh in the trial worktree (a stale one is passed by, named in
    `notes`: it never blocks another topic's refresh)."""
    dirs = status_dirs(cache, target)
    mine = resolution.for_topics(dirs.resolve, base, list(series.topics))
    if dirs.resolve.exists() and mine is False:
        if notes is not None:
            notes.append(
                f"{dirs.resolve}: a resolution worktree made for another base or other topics, "
                f"passed by; discard it: {resolution.discard_command(repo, dirs.resolve)}"
            )
    elif dirs.resolve.exists():
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
