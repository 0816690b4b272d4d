"""The drift check's effects: fetch every target's base, render the series into its layout and
try it patch by patch in a worktree of the tool's cache; then, per topic in conflict or already
upstream, its behaviour (behaviour.py: only test-opt is built, once per tree). Statuses and
verdicts: status.py.

Per target, under <cache>/status/<target>/:
  try/      scratch worktree: every attempt starts from the base, whatever was left there
  resolve/  made only on a conflict: `git am -3` stopped at the conflicting patch, for a person
            to resolve (`git add`, `git am --continue`), then `ggml-patch refresh TARGET`. Never
            reset by the tool: a later run keeps it as it is (unless everything in it is in the
            series again, after a refresh).
  series/   the rendered patch files that were tried
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Callable, NamedTuple, Optional

from .. import sources
from ..cache import Cache, slug
from ..config import Matrix, Target
from ..errors import ConfigError, SourceUnavailable
from ..model.layout import get_layout, translate
from ..model.results import Provenance
from ..patchset.files import load_queue, load_series, write_patches
from ..patchset.queue import Topic
from ..patchset.render import render
from ..patchset.series import Series
from ..vcs.runner import error_line
from ..vcs.snapshots import SnapshotRepo, Worktree
from . import confined, proofs, resolution
from .alone import try_alone
from .behaviour import check_topic
from .status import (
    CLEAN,
    CONFLICTED,
    MERGED,
    NEEDS_BEHAVIOUR,
    NOT_APPLICABLE,
    NOT_TRIED,
    OPT_HEADER,
    PRESENT,
    RETIRED_HERE,
    SKIPPED,
    UNAVAILABLE,
    UNREACHABLE,
    Behaviour,
    Conflict,
    PatchResult,
    TargetStatus,
    TopicOnTarget,
    conflict_regions,
    content_present,
    failed_hunk,
    modified_fix_files,
    not_applicable_reason,
    split_topics,
    target_status,
    with_behaviour,
)

Thunk = Callable[[], None]


class StatusDirs(NamedTuple):
    trial: Path
    resolve: Path
    series: Path


def status_dirs(cache: Cache, target: Target) -> StatusDirs:
    root = cache.root / "status" / slug(target.name)
    return StatusDirs(root / "try", root / "resolve", root / "series")


def target_names(matrix: Matrix, profile: str, names: list[str]) -> list[str]:
    matrix.cells(profile, names or None)  # one-line errors for an unknown profile or target
    return list(names) if names else list(matrix.profiles[profile][0])


def status_of_targets(
    matrix: Matrix,
    cache: Cache,
    names: list[str],
    topics: Optional[list[str]] = None,
    behaviour: bool = True,
) -> list[TargetStatus]:
    """Each target's row: the chosen topics' series (`topics`, else --topic's, else the queue's
    default) tried patch by patch, split back into the topics; a topic in conflict or already
    upstream gets its behaviour checked (behaviour.py) unless `behaviour` is False."""
    # a bad series is refused here, before anything is fetched or touched; a bad deadline too
    queue = load_queue(matrix)
    series = load_series(matrix, topics, queue=queue)
    if behaviour:
        confined.deadline()
    chosen = queue.chosen(topics)
    follows = _follows(chosen)
    repo = SnapshotRepo(cache.snapshots_git)
    # every source is resolved before any worktree is touched:
    # a ref that does not exist stops the run here
    resolved = [(t, *_snapshot_or_reason(t, cache, repo)) for t in map(matrix.target, names)]
    # once, and only if some patch needs a 3-way merge
    before_merge = functools.cache(lambda: ensure_preimages(matrix, cache, repo, series))
    rows = []
    for target, snap, status, reason in resolved:
        # the topics retired on this target (upstream has them there) are not applied there
        here = [t for t in chosen if t.active_on(target.name)]
        retired = [t for t in chosen if not t.active_on(target.name)]
        mine = series if not retired else load_series(matrix, topics, queue, target.name)
        if snap is None or not here:
            layout, source = _layout_name(target), _source_info(target, None)
            row = TargetStatus(
                target=target.name,
                layout=layout,
                source=source if snap is None else _source_info(target, snap),
                status=status if snap is None else NOT_APPLICABLE,
                detail=reason if snap is None else "every topic is retired on this target",
            )
        else:
            with cache.lock(f"status-{target.name}"):  # one run at a time in a target's worktrees
                carried = {t.name for t in queue.active(target.name)}
                row = check_target(cache, repo, mine, target, snap, before_merge, follows, carried)
        row.topics = split_topics(own_patches(here), row)
        for t in retired:
            row.topics[t.name] = _retired_here(t, target.name)
        if snap is not None:
            for t in here:
                found = _behaviour(
                    matrix, cache, repo, target, snap, t, row.topics[t.name], behaviour
                )
                proof = proofs.proof_of(cache, target.layout, t) if found else None
                proven = f"(control:{t.name} killed on {proof.cell})" if proof else None
                row.topics[t.name] = with_behaviour(row.topics[t.name], found, proven, t.name)
        rows.append(row)
    return rows


def _retired_here(topic: Topic, target: str) -> TopicOnTarget:
    upstream = topic.meta.retired.get(target)
    said = f"topic.yaml retired: {target}" + (f" (upstream: {upstream})" if upstream else "")
    return TopicOnTarget(status=RETIRED_HERE, detail=said)


def _follows(chosen: list[Topic]) -> dict[str, set[str]]:
    """Each topic's `after:` at any depth (the topics it cannot be tried without)."""
    direct = {t.name: set(t.meta.after) for t in chosen}
    out: dict[str, set[str]] = {}
    for name in direct:
        seen, todo = set(), list(direct[name])
        while todo:
            d = todo.pop()
            if d not in seen:
                seen.add(d)
                todo += direct.get(d, set())
        out[name] = seen
    return out


def _behaviour(
    matrix: Matrix,
    cache: Cache,
    repo: SnapshotRepo,
    target: Target,
    snap: sources.Snapshot,
    topic: Topic,
    text: TopicOnTarget,
    wanted: bool,
) -> Optional[Behaviour]:
    """The topic's behaviour on the target where its status needs it (None: it does not)."""
    if text.status not in NEEDS_BEHAVIOUR:
        return None
    if not wanted:
        return Behaviour(outcome=SKIPPED, detail="skipped (--no-behaviour)")
    return check_topic(matrix, cache, repo, target, snap, topic)


def own_patches(topics: list[Topic]) -> list[tuple[str, list[str]]]:
    """Each topic's name and its own patch names, as split_topics takes them."""
    return [(t.name, [p.name for p in t.series.patches]) for t in topics]


def _snapshot_or_reason(target: Target, cache: Cache, repo: SnapshotRepo):
    try:
        return sources.snapshot(target.source, cache, repo), None, None
    except sources.SourceUnreachable as e:
        return None, UNREACHABLE, str(e)
    except SourceUnavailable as e:
        return None, UNAVAILABLE, str(e)


def check_target(
    cache: Cache,
    repo: SnapshotRepo,
    series: Series,
    target: Target,
    snap: sources.Snapshot,
    before_merge: Thunk,
    follows: Optional[dict[str, set[str]]] = None,
    carried: Optional[set[str]] = None,
) -> TargetStatus:
    src, layout = get_layout(series.layout), get_layout(target.layout, target.prefix)
    layout_name, source = _layout_name(target), _source_info(target, snap)
    row = TargetStatus(
        target=target.name,
        layout=layout_name,
        source=source,
        status=NOT_APPLICABLE,
        base=snap.commit,
    )
    read_base = lambda p: repo.read_blob(snap.commit, p)  # noqa: E731
    fix_files = [translate(p, src, layout) for p in modified_fix_files(series)]
    reason = not_applicable_reason(fix_files, layout.from_ggml(OPT_HEADER), read_base)
    if reason:
        row.detail = reason
        return row
    try:
        rendered = render(series, src, layout, read_base)
    except (
        ConfigError
    ) as e:  # e.g. a tests/CMakeLists.txt with no test-opt to register the gate test after
        row.detail = str(e)
        return row
    dirs = status_dirs(cache, target)
    files = write_patches(rendered, dirs.series)
    trial = Worktree(repo, dirs.trial)
    results, conflict = attempt(trial, snap.commit, rendered, files, before_merge)
    if conflict and follows is not None:  # the later topics that do not need the stuck one

        def alone(sub: Series, sub_files: list[Path]) -> list[PatchResult]:
            return attempt(trial, snap.commit, sub, sub_files, before_merge)[0]

        results = try_alone(rendered, files, results, follows, alone)
    row.patches = results
    row.status, row.detail = target_status(results)
    if conflict:
        row.conflict = leave_for_resolution(
            repo, dirs.resolve, snap.commit, results, files, conflict, series, carried
        )
    else:
        drop_captured_resolution(repo, dirs.resolve, trial)
        if dirs.resolve.exists():  # an earlier conflict's worktree, no longer this series'
            said = _kept_worktree(repo, dirs.resolve, snap.commit, series, carried)
            row.detail = f"{row.detail}; {said}" if row.detail else said
    return row


def attempt(
    wt: Worktree, base: str, rendered: Series, files: list[Path], before_merge: Thunk = lambda: None
) -> tuple[list[PatchResult], Optional[Conflict]]:
    """Each patch in turn on base: as is, already there, or 3-way
    (after `before_merge`); stops at a conflict."""
    wt.ensure(base)
    results: list[PatchResult] = []
    for i, (patch, f) in enumerate(zip(rendered.patches, files, strict=True)):
        result, detail, conflict = _try_patch(wt, patch, f, before_merge)
        results.append(PatchResult(name=patch.name, result=result, detail=detail))
        if conflict:
            results += [
                PatchResult(name=p.name, result=NOT_TRIED) for p in rendered.patches[i + 1 :]
            ]
            return results, conflict
    return results, None


def _try_patch(
    wt: Worktree, patch, f: Path, before_merge: Thunk
) -> tuple[str, str, Optional[Conflict]]:
    """(result, detail, conflict) of one patch on the worktree."""
    # reverse first: a patch that only adds (new test cases)
    # applies a second time on a tree that has it
    if wt.applies(f, reverse=True):
        return PRESENT, "the patch reverse-applies", None
    plain = wt.try_am(f)
    if plain is None:
        return CLEAN, "", None
    wt.am_abort()
    if content_present(patch, wt.read_file):
        return PRESENT, "its content is already there", None
    before_merge()
    merged = wt.try_am(f, three_way=True)
    if merged is None:
        return MERGED, "", None
    if "No changes -- Patch already applied" in merged:
        wt.am_abort()
        return PRESENT, "a 3-way merge leaves nothing to change", None
    conflict = _conflict(wt, patch, plain, merged)
    wt.am_abort()
    return (
        CONFLICTED,
        f"{conflict.file}, {conflict.hunk}" if conflict.file else conflict.reason,
        conflict,
    )


def _conflict(wt: Worktree, patch, plain_output: str, merged_output: str) -> Conflict:
    path, hunk = failed_hunk(patch, plain_output)
    conflicted = wt.conflicted_files()
    if conflicted and path not in conflicted:  # the merge stopped elsewhere than the plain apply
        path, hunk = conflicted[0], "3-way merge conflict"
    lines = tuple(conflict_regions((wt.read_file(path) if path else None) or ""))
    # why the 3-way merge stopped: the conflict, or the blobs it lacked, in git's own words
    reason = error_line(merged_output, prefer=("CONFLICT (", "error: sha1 information is lacking"))
    return Conflict(patch=patch.name, file=path or "", hunk=hunk, lines=lines, reason=reason)


def leave_for_resolution(
    repo: SnapshotRepo,
    path: Path,
    base: str,
    results: list[PatchResult],
    files: list[Path],
    conflict: Conflict,
    series: Optional[Series] = None,
    carried: Optional[set[str]] = None,
) -> Conflict:
    """A worktree with the patches before the conflict applied and `git am -3` stopped at it,
    recorded as made for `base` and `series` (resolution.py). One already there is kept (someone
    may be resolving there: never reset), named stale where it was made for another."""
    wt = Worktree(repo, path)
    if path.exists():
        why = resolution.stale_reason(path, base, series, carried) if series else None
        stale = f"{why}; discard it: {resolution.discard_command(repo, path)}" if why else ""
        return conflict.model_copy(update={"worktree": str(path), "kept": True, "stale": stale})
    wt.ensure(base)
    if series is not None:
        resolution.record(path, base, series)
    k = next(i for i, r in enumerate(results) if r.result == CONFLICTED)
    for r, f in zip(results[:k], files[:k], strict=True):
        if r.result in (CLEAN, MERGED) and wt.try_am(f, three_way=r.result == MERGED) is not None:
            wt.am_abort()  # it applied in the trial worktree a moment ago; leave a clean stop
    wt.try_am(*files[k:], three_way=True)
    text = wt.read_file(conflict.file) if conflict.file else None
    lines = tuple(conflict_regions(text or "")) or conflict.lines
    return conflict.model_copy(update={"worktree": str(path), "lines": lines})


def _kept_worktree(
    repo: SnapshotRepo, path: Path, base: str, series: Series, carried: Optional[set[str]]
) -> str:
    """What status says of a resolution worktree kept where this series has no conflict: stale
    (why, and the command that discards it), or made for another choice of topics."""
    why = resolution.stale_reason(path, base, series, carried)
    made = resolution.made_for(path)
    if why is None and made is not None:
        topics = ", ".join(str(t) for t in made["topics"])
        return (
            f"resolution worktree {path} kept for {topics} (another choice of topics; refresh "
            f"with those topics uses it; discard it: {resolution.discard_command(repo, path)})"
        )
    why = why or "made by an earlier run for a conflict this series no longer has"
    return f"stale resolution worktree {path} ({why}); discard it: " + (
        resolution.discard_command(repo, path)
    )


def drop_captured_resolution(repo: SnapshotRepo, path: Path, trial: Worktree) -> None:
    """Remove a resolution worktree whose every change the series now reproduces (after a refresh):
    finished (no am in progress), clean, and the same tree as the series applied."""
    if path.exists():
        wt = Worktree(repo, path)
        if not wt.am_in_progress() and wt.is_clean() and wt.tree() == trial.tree():
            repo.remove_worktree(path)


def ensure_preimages(matrix: Matrix, cache: Cache, repo: SnapshotRepo, series: Series) -> None:
    """`git am -3` needs the blobs the series' index lines name. They are the files of the base the
    series was made on: if they are not in the snapshot repository yet, import that base."""
    if not all(repo.has_object(blob) for blob in preimage_blobs(series).values()):
        series_base(matrix, cache, repo, series)


def series_base(
    matrix: Matrix, cache: Cache, repo: SnapshotRepo, series: Series
) -> Optional[sources.Snapshot]:
    """The snapshot the canonical series was made on: a pinned target in the series' own layout
    whose files are the series' pre-images (index lines). None when the matrix has none."""
    wanted = preimage_blobs(series)
    for t in matrix.targets.values():
        if t.layout != series.layout or t.prefix or not _pinned(t):
            continue
        try:
            snap = sources.snapshot(t.source, cache, repo)
        except (SourceUnavailable, ConfigError):
            continue
        if all((repo.object_id(snap.commit, p) or "").startswith(b) for p, b in wanted.items()):
            return snap
    return None


def preimage_blobs(series: Series) -> dict[str, str]:
    """path -> blob id before the series, for each file the series changes (first touch)."""
    out: dict[str, str] = {}
    for p in series.patches:
        for f in p.files:
            m = re.search(r"^index ([0-9a-f]+)\.\.[0-9a-f]+", f.text, re.M)
            if m and f.path not in out and set(m.group(1)) != {"0"}:
                out[f.path] = m.group(1)
    return out


def _pinned(t: Target) -> bool:
    if t.source.kind == "git":
        return bool(re.fullmatch(r"[0-9a-f]{40}", str(t.source.get("ref", ""))))
    return t.source.kind in ("pypi-sdist", "tarball")


def _layout_name(target: Target) -> str:
    return target.layout + (f" at {target.prefix.rstrip('/')}/" if target.prefix else "")


def _source_info(target: Target, snap: Optional[sources.Snapshot]) -> Provenance:
    if snap:
        return Provenance(kind=target.source.kind, description=snap.description, **snap.provenance)
    o = target.source.options  # not fetched: what the matrix asks for
    description = {
        "git": f"{o.get('url')} {o.get('ref')}",
        "tarball": str(o.get("url")),
        "local": str(o.get("path")),
        "pypi-sdist": f"{o.get('package')}=={o.get('version')}",
    }.get(target.source.kind, "")
    return Provenance(kind=target.source.kind, description=description)
