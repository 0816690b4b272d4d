"""Issue 46 point 5, the record `status` reads: a run's killed controls kept per layout and topic,
keyed by the topic's test hunks (a refresh's index lines do not change it; new cases do)."""

import dataclasses

import pytest

from orchestrator.cache import Cache
from orchestrator.drift import proofs
from orchestrator.model.results import Verdict

from ..helpers.patches import real_queue
from ..helpers.samples import control_survived, sample

pytestmark = pytest.mark.unit


def _with_tests(topic, text_of):
    """The topic with each test file's diff text changed by `text_of`."""
    patches = []
    for p in topic.series.patches:
        files = tuple(
            dataclasses.replace(f, text=text_of(f.text)) if "tests/" in f.path else f
            for f in p.files
        )
        patches.append(dataclasses.replace(p, files=files))
    series = dataclasses.replace(topic.series, patches=tuple(patches))
    return dataclasses.replace(topic, series=series)


def test_a_run_records_each_killed_control_once_per_layout(tmp_path):
    results, topics = sample(), real_queue().topics
    found = proofs.killed_controls(results, topics)
    killed = {
        (r.topic, next(c.layout for c in results.cells if c.cell == r.cell))
        for c in results.cells
        for r in results.controls_of(c.cell)
        if r.verdict == Verdict.KILLED and r.topic in {t.name for t in topics}
    }
    assert killed and {(p.topic, p.layout) for p in found} == killed
    cache = Cache(tmp_path)
    proofs.record(cache, results, topics)
    for p in found:
        topic = next(t for t in topics if t.name == p.topic)
        assert proofs.proof_of(cache, p.layout, topic) == p
        assert proofs.proof_of(cache, "whisper.cpp", topic) is None  # another layout: none


def test_a_surviving_control_proves_nothing(tmp_path):
    topics = real_queue().topics
    results = sample()
    for c in results.cells:
        results = control_survived(results, c.cell)
    first = topics[0].name
    assert all(p.topic != first for p in proofs.killed_controls(results, topics))


def test_the_key_follows_the_cases_not_the_index_lines():
    topic = real_queue().topics[0]
    key = proofs.tests_key(topic)
    reindexed = _with_tests(topic, lambda t: t.replace("index ", "index 0000000..", 1))
    assert proofs.tests_key(reindexed) == key
    more = _with_tests(topic, lambda t: t + "+    // one more line of a case\n")
    assert proofs.tests_key(more) != key


def test_a_rerun_with_every_proof_on_record_records_nothing(tmp_path):
    results, topics = sample(), real_queue().topics
    cache = Cache(tmp_path)
    assert proofs.unrecorded(cache, results)
    proofs.record(cache, results, topics)
    assert not proofs.unrecorded(cache, results)
