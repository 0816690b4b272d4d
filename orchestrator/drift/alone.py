"""A topic hidden behind another's conflict, tried on its own: where `git am` stopped at one
topic's patch on a target, each later topic that neither follows it (`after:`, at any depth) nor
touches the lines it touches is applied on the base with only the topics it follows, so status
shows its own state there rather than "not tried"."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import unidiff

from ..patchset.series import FileDiff, Series
from .status import ALONE, CLEAN, CONFLICTED, MERGED, NOT_TRIED, PatchResult

_MARGIN = 3  # a hunk's context: lines this close are one region for `git am`


def _spans(files: list[FileDiff]) -> dict[str, list[tuple[int, int]]]:
    """Per file, the base's line ranges the hunks cover (context included)."""
    out: dict[str, list[tuple[int, int]]] = {}
    for f in files:
        try:
            hunks = [h for pf in unidiff.PatchSet(f.text) for h in pf]
        except unidiff.UnidiffParseError:
            hunks = []
        spans = [(h.source_start, h.source_start + max(h.source_length, 1)) for h in hunks]
        out.setdefault(f.path, []).extend(spans or [(0, 1 << 30)])  # unparsed: the whole file
    return out


def overlaps(one: list[FileDiff], other: list[FileDiff]) -> bool:
    """Whether two topics' hunks touch the same or nearby lines of a file."""
    left = _spans(one)
    for path, spans in _spans(other).items():
        for a, b in spans:
            if any(a <= d + _MARGIN and c <= b + _MARGIN for c, d in left.get(path, [])):
                return True
    return False


def _files_of(series: Series, topic: str) -> list[FileDiff]:
    return [f for p in series.patches if p.topic == topic for f in p.files]


def try_alone(
    rendered: Series,
    files: list[Path],
    results: list[PatchResult],
    follows: dict[str, set[str]],
    attempt: Callable[[Series, list[Path]], list[PatchResult]],
) -> list[PatchResult]:
    """`results` with each independent later topic's patches tried on its own: `attempt(series,
    files)` applies a sub-series on the base (stopping at a conflict). `follows`: each topic's
    `after:` at any depth."""
    k = next((i for i, r in enumerate(results) if r.result == CONFLICTED), None)
    if k is None or not rendered.patches[k].topic:
        return results
    stuck = rendered.patches[k].topic
    out = list(results)
    waiting = []
    for i, p in enumerate(rendered.patches):
        if results[i].result == NOT_TRIED and p.topic not in waiting and p.topic != stuck:
            waiting.append(p.topic)
    blocked = {stuck}
    for topic in waiting:
        deps = follows.get(topic, set())
        if deps & blocked or overlaps(_files_of(rendered, stuck), _files_of(rendered, topic)):
            blocked.add(topic)
            continue
        keep = [i for i, p in enumerate(rendered.patches) if p.topic in deps | {topic}]
        sub = Series(rendered.layout, tuple(rendered.patches[i] for i in keep))
        tried = attempt(sub, [files[i] for i in keep])
        for i, r in zip(keep, tried, strict=True):
            if rendered.patches[i].topic == topic:
                out[i] = _marked(r)
    return out


def _marked(r: PatchResult) -> PatchResult:
    if r.result in (CLEAN, MERGED, NOT_TRIED) and not r.detail:
        return r.model_copy(update={"detail": ALONE})
    return r.model_copy(update={"detail": f"{ALONE}; {r.detail}" if r.detail else ALONE})
