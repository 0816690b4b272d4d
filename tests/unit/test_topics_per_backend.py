"""Issue 46 points 3-4: summary.md shows, per topic and cell (target/backend), proven / cannot be
judged (why) / failed (why) / not run, counted; a control that was not killed is never shown as
proven."""

import pytest

from orchestrator.model.results import RecordStatus, results_of
from orchestrator.report.summary import summary_markdown, topic_outcome, write_results

from ..helpers.samples import control_survived, sample

pytestmark = pytest.mark.unit

WHY = "cannot be judged on CPU: the CPU is compared with its own reference path"


def _section(text: str) -> str:
    start = text.index("## Topics per backend")
    return text[start : text.index("\n## ", start + 1)]


def test_each_outcome_is_shown_and_counted():
    results = control_survived(sample(), "ggml/cpu")
    rec = results.control_of("llama.cpp/cpu")
    rec.status, rec.verdict, rec.verdict_reason = RecordStatus.SKIPPED, None, WHY
    topic = results.series.topics[0]
    cells = {c.cell: c for c in results.cells}
    assert topic_outcome(results, cells["llama.cpp/cpu"], topic) == ("cannot be judged", WHY)
    word, why = topic_outcome(results, cells["ggml/cpu"], topic)
    assert word == "failed" and why.startswith("its control survived")
    section = _section(summary_markdown(results))
    assert "0 proven, 1 cannot be judged, 1 failed, 0 not run." in section
    assert f"**cannot be judged**: {WHY}" in section
    assert "**proven**" not in section


def test_why_a_control_cannot_be_judged_survives_results_json(tmp_path):
    # summary.md is written from the record as results.json holds it: a control with a reason
    # and no verdict (not judged here) kept its reason only in memory before (found on a real
    # Vulkan cell: the table said "cannot be judged" without why)
    results = sample()
    rec = results.control_of("llama.cpp/cpu")
    rec.status, rec.verdict, rec.verdict_reason = RecordStatus.SKIPPED, None, WHY
    again = results_of(results.to_json())
    assert again.control_of("llama.cpp/cpu").verdict_reason == WHY
    write_results(results, tmp_path)
    section = _section((tmp_path / "summary.md").read_text())
    assert f"**cannot be judged**: {WHY}" in section


def test_a_fix_that_fails_its_tests_proves_nothing():
    results = sample()
    patched = results.records_of("ggml/cpu")["patched"]
    patched.status = RecordStatus.FAILED
    cell = next(c for c in results.cells if c.cell == "ggml/cpu")
    assert topic_outcome(results, cell, results.series.topics[0])[0] == "failed"


def test_a_cell_without_its_control_says_why_not_run():
    results = sample()
    results.records = [r for r in results.records if r.cell != "ggml/cpu"]
    cell = next(c for c in results.cells if c.cell == "ggml/cpu")
    cell.reason = "no Vulkan device"
    assert topic_outcome(results, cell, results.series.topics[0]) == ("not run", "no Vulkan device")


def test_a_topic_retired_on_a_target_is_not_run_there_and_not_judged_nowhere():
    results = sample()
    topic = results.series.topics[0]
    for c in results.cells:
        c.topics = []  # every target run retired it
    cell = results.cells[0]
    assert topic_outcome(results, cell, topic) == (
        "not run",
        "not carried on this target (retired there)",
    )
    results.records = [r for r in results.records if not r.variant.startswith("control:")]
    assert topic not in results.judged_nowhere()
    results.cells[0].topics = [topic]  # carried once, its control killed nowhere
    assert results.judged_nowhere() == [topic]
