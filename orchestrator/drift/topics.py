"""`ggml-patch queue`: each topic of the queue, its lifecycle, where it stands on every target (the
status check `ggml-patch status` runs, once for the whole queue, its patches' results split back
into the topics) and the last verdict per cell of results.json when there is one."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from pydantic import Field

from ..cache import Cache
from ..config import Matrix
from ..patchset.files import load_queue
from ..patchset.queue import Queue, Topic
from ..records import Record
from .check import own_patches, status_of_targets
from .status import TOPIC_NOT_TRIED as NOT_TRIED
from .status import TargetStatus, TopicOnTarget, split_topics

__all__ = ["NOT_TRIED", "queue_report", "split_by_topic"]

NOT_APPLIED = "not applied"  # merged upstream or dropped: the queue does not carry it


class TopicRow(Record):
    """One topic of `ggml-patch queue --json`."""

    NULLS = frozenset({"bug", "forwarded", "applied_upstream"})

    topic: str
    state: str
    summary: str
    after: list[str] = Field(default_factory=list)
    bug: Optional[str] = None
    forwarded: Optional[str] = None
    applied_upstream: Optional[str] = None
    last_update: str
    patches: list[str] = Field(default_factory=list)
    targets: dict[str, TopicOnTarget] = Field(default_factory=dict)
    last_verdicts: dict[str, str] = Field(default_factory=dict)  # cell -> its status


class QueueReport(Record):
    profile: str
    results: Optional[str] = None  # the results.json the verdicts come from
    topics: list[TopicRow]


def split_by_topic(queue: Queue, row: TargetStatus) -> dict[str, TopicOnTarget]:
    """A target's status row as one status per active topic (status.split_topics)."""
    return split_topics(own_patches(queue.active()), row)


def last_verdicts(results_dir: Path, topic: Topic) -> dict[str, str]:
    """cell -> status in results.json, when the run carried the topic's patches; else none."""
    from ..model.results import Results  # the results model: only when there are results
    from ..upstream.bundle import load_results_dir  # its loader, likewise

    if not (Path(results_dir) / "results.json").exists():
        return {}
    results: Results = load_results_dir(results_dir)[0]
    if results.series.topics is not None and topic.name not in results.series.topics:
        return {}
    subjects = {p.subject for p in results.series.patches}  # older results: by the subjects
    if not all(p.subject in subjects for p in topic.series.patches):
        return {}
    # a cell of a target the topic is retired on did not carry it: no verdict of it there
    return {
        c.cell: str(c.status) for c in results.cells if c.topics is None or topic.name in c.topics
    }


def queue_report(
    matrix: Matrix,
    cache: Cache,
    targets: list[str],
    profile: str,
    results_dir: Optional[Path],
    behaviour: bool = True,
) -> QueueReport:
    """Every topic of the queue: an active one where the status check (every active topic at
    once, behaviour included unless `behaviour` is False) finds it, the others not applied."""
    queue = load_queue(matrix)
    active = [t.name for t in queue.active()]
    rows = status_of_targets(matrix, cache, targets, active, behaviour) if active else []
    on_targets = {r.target: r.topics for r in rows}
    found = results_dir is not None and (Path(results_dir) / "results.json").exists()
    out = []
    for t in queue.topics:
        meta = t.meta
        if t.active:
            where = {name: per[t.name] for name, per in on_targets.items()}
        else:
            shown = TopicOnTarget(status=NOT_APPLIED, detail=meta.state)
            where = dict.fromkeys(targets, shown)
        out.append(
            TopicRow(
                topic=t.name,
                state=meta.state,
                summary=meta.summary,
                after=list(meta.after),
                bug=meta.bug,
                forwarded=meta.forwarded,
                applied_upstream=meta.applied_upstream,
                last_update=meta.last_update,
                patches=[p.name for p in t.series.patches],
                targets=where,
                last_verdicts=last_verdicts(results_dir, t) if found and results_dir else {},
            )
        )
    shown_results = str(Path(results_dir) / "results.json") if found and results_dir else None
    return QueueReport(profile=profile, results=shown_results, topics=out)
