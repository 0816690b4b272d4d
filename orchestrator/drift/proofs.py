"""Which topics' tests were shown to catch their bug, per layout: a matrix run records each control
killed (`control:<topic>` failed by the topic's own tests with its source hunks reverted), and
`status` says "fixed upstream (behaviour)" only where such a record exists for the target's layout.
Tests that pass on a target say nothing about the fix unless they were seen failing without it
(a CPU-only cell of test-backend-ops, test-opt for an op's fix).

A record is kept per layout and topic under <cache>/proofs/, keyed by the topic's test hunks: a
topic whose tests changed since has no proof until a run kills its control again."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional

from ..cache import Cache, slug
from ..model.results import Results, Verdict
from ..model.values import Name, TextLine
from ..records import Record

if TYPE_CHECKING:  # the queue's parser: loaded only where a proof is written or read
    from ..patchset.queue import Topic


class Proof(Record):
    """One control killed: where, when, and what the topic's tests were then."""

    topic: Name
    layout: TextLine
    tests_key: str  # tests_key(topic) when the control was killed
    cell: TextLine  # the cell that killed it, e.g. "ggml/cpu"
    started_at: TextLine = ""  # the run's start (its results.json `started_at`)
    line: TextLine = ""  # the first failing line the control printed


def tests_key(topic: Topic) -> str:
    """The topic's test cases as what they add and remove (not index lines or offsets, which a
    refresh rewrites), with the tests it declares."""
    h = hashlib.sha256()
    for spec in topic.meta.test_specs():
        h.update(f"test {spec.name}\n".encode())
    for patch in topic.series.patches:
        for f in patch.files:
            if not (f.path.startswith("tests/") or "/tests/" in f.path):
                continue
            h.update(f"file {f.path.rsplit('tests/', 1)[-1]}\n".encode())
            for line in f.text.splitlines():
                if line[:1] in "+-" and not line.startswith(("+++", "---")):
                    h.update(line.encode("utf-8", "surrogateescape") + b"\n")
    return h.hexdigest()


def _file(cache: Cache, layout: str, topic: str) -> Path:
    return cache.root / "proofs" / slug(layout) / f"{slug(topic)}.json"


def killed_controls(results: Results, topics: Iterable[Topic]) -> list[Proof]:
    """The proofs a run's results hold: one per topic and layout whose control was killed."""
    by_name = {t.name: t for t in topics}
    cells = {c.cell: c for c in results.cells}
    out: dict[tuple[str, str], Proof] = {}
    for r in results.records:
        cell = cells.get(r.cell)
        topic = by_name.get(r.topic or "")
        if r.verdict != Verdict.KILLED or cell is None or topic is None:
            continue
        if r not in results.controls_of(r.cell) or (topic.name, cell.layout) in out:
            continue
        out[(topic.name, cell.layout)] = Proof(
            topic=topic.name,
            layout=cell.layout,
            tests_key=tests_key(topic),
            cell=r.cell,
            started_at=results.started_at,
            line=(r.failure_line or "").partition("\n")[0],
        )
    return list(out.values())


def unrecorded(cache: Cache, results: Results) -> bool:
    """Whether a control the run killed has no record yet (a cell reused from the result cache
    was recorded when it ran; a topic whose tests changed is a new result, never a reused one)."""
    layouts = {c.cell: c.layout for c in results.cells}
    return any(
        not _file(cache, layouts.get(r.cell, ""), r.topic).is_file()
        for c in results.cells
        for r in results.controls_of(c.cell)
        if r.verdict == Verdict.KILLED and r.topic
    )


def record(cache: Cache, results: Results, topics: Iterable[Topic]) -> None:
    """Keep the run's killed controls (a later run's replace them; a control not killed in this
    run leaves an earlier proof as it was: it was shown once, with the same tests)."""
    for proof in killed_controls(results, topics):
        path = _file(cache, proof.layout, proof.topic)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(proof.to_json(), indent=2) + "\n")


def proof_of(cache: Cache, layout: str, topic: Topic) -> Optional[Proof]:
    """The record that the topic's current tests caught its bug in `layout` (None: none)."""
    path = _file(cache, layout, topic.name)
    try:
        proof = Proof.model_validate(json.loads(path.read_text()))
    except (OSError, ValueError):  # none, or unreadable: no proof (the run says how to get one)
        return None
    return proof if proof.tests_key == tests_key(topic) else None
