"""merge-results, pure: per-cell results (one CI leg each) combined into one, equal to one run over
the same cells; different series and duplicate cells refused."""

import pytest

from orchestrator.errors import ConfigError
from orchestrator.model.results import Parallel, Results
from orchestrator.report.merge import merge_results

from ..helpers.samples import sample as committed_sample
from ..helpers.samples import split as _split

ORDER = ["llama.cpp/cpu", "ggml/cpu"]


@pytest.fixture
def sample() -> Results:
    """The committed sample."""
    return committed_sample()


def test_merging_the_cells_gives_back_the_whole_run(sample):
    ggml, llama = _split(sample, "ggml/cpu"), _split(sample, "llama.cpp/cpu")
    llama.started_at, ggml.started_at = "2026-11-30T00:40:00Z", "2026-11-30T00:39:51Z"
    llama.duration_s, ggml.duration_s = 20.0, 4.61
    llama.orchestrator_cpu_s, ggml.orchestrator_cpu_s = 0.5, 0.25
    merged = merge_results([("ggml", ggml), ("llama", llama)], ORDER)  # given out of order
    # cells back in matrix order; earliest start; summed machine time; one leg each
    assert merged == sample.model_copy(
        update={"orchestrator_cpu_s": 0.75, "parallel": Parallel(legs=2)}
    )


def test_cells_not_in_the_order_keep_their_input_order(sample):
    extra = _split(sample, "ggml/cpu")
    for c in [*extra.cells, *extra.records]:
        c.cell = "ggml-master/cpu"
    merged = merge_results([("x", extra), ("a", _split(sample, "ggml/cpu"))], ["ggml/cpu"])
    assert [c.cell for c in merged.cells] == ["ggml/cpu", "ggml-master/cpu"]
    assert [r.cell for r in merged.records] == ["ggml/cpu"] * 2 + ["ggml-master/cpu"] * 2


def test_the_worst_exit_code_wins(sample):
    bad = _split(sample, "ggml/cpu")
    bad.cells[0].status, bad.cells[0].exit_code = "failed", 7
    merged = merge_results([("a", _split(sample, "llama.cpp/cpu")), ("b", bad)], ORDER)
    assert merged.exit_code == 7


def test_different_series_are_refused(sample):
    other = _split(sample, "ggml/cpu")
    other.series = other.series.model_copy(update={"sha256": "0" * 64})
    with pytest.raises(ConfigError) as e:
        merge_results(
            [
                ("cells/a/results.json", _split(sample, "llama.cpp/cpu")),
                ("cells/b/results.json", other),
            ]
        )
    msg = str(e.value)
    assert "cells/b/results.json" in msg and "different series" in msg and "\n" not in msg


def test_a_cell_twice_is_refused(sample):
    with pytest.raises(ConfigError, match=r"b\.json: cell ggml/cpu is also in a\.json"):
        merge_results(
            [("a.json", _split(sample, "ggml/cpu")), ("b.json", _split(sample, "ggml/cpu"))]
        )
