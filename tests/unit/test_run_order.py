"""Issue 24: the matrix's cells run cheapest complete verdict first, one at a time
with every core by default; each cell's verdict prints once its control is judged, and
the run ends with the time each cell took."""

import io

from rich.console import Console

from orchestrator import backends
from orchestrator.config import load_matrix
from orchestrator.model.results import RecordStatus, VariantRecord, Verdict
from orchestrator.progress import Reporter, cell_time_lines
from orchestrator.run.cell import verdict_line
from orchestrator.run.matrix import cheapest_first, plan_parallelism, plan_second_phase

from ..helpers.tools import ROOT


def _costs(cells):
    return {b.name: backends.get(b.name).relative_cost for _, b in cells}


def _names(cells, order):
    return [f"{cells[i][0].name}/{cells[i][1].name}" for i in order]


def test_the_default_profile_starts_with_ggml_on_the_cpu():
    m = load_matrix(ROOT / "matrix.yaml")
    cells = m.cells()
    assert _names(cells, cheapest_first(cells, _costs(cells))) == [
        "ggml/cpu",
        "llama.cpp/cpu",
        "ggml/metal",
        "llama.cpp/metal",
        "ggml/vulkan",
        "llama.cpp/vulkan",
        "ggml/cuda",
        "llama.cpp/cuda",
    ]


def test_every_profile_of_every_backend_orders_by_cost_then_layout_then_matrix_order():
    m = load_matrix(ROOT / "matrix.yaml")
    cells = m.cells(
        backends=["cpu-sanitize", "cuda", "cpu"], targets=["llama.cpp", "ggml", "ggml-master"]
    )
    order = cheapest_first(cells, _costs(cells))
    assert sorted(order) == list(range(len(cells)))  # a permutation: no cell lost or doubled
    assert _names(cells, order) == [
        "ggml/cpu",
        "ggml-master/cpu",
        "llama.cpp/cpu",
        "ggml/cpu-sanitize",
        "ggml-master/cpu-sanitize",
        "llama.cpp/cpu-sanitize",
        "ggml/cuda",
        "ggml-master/cuda",
        "llama.cpp/cuda",
    ]


def test_an_unknown_cost_counts_as_a_cpu_cell_and_ties_keep_the_matrix_order():
    m = load_matrix(ROOT / "matrix.yaml")
    cells = m.cells(backends=["vulkan", "cpu"], targets=["ggml"])
    assert _names(cells, cheapest_first(cells, {})) == ["ggml/vulkan", "ggml/cpu"]
    assert _names(cells, cheapest_first(cells, {"vulkan": 0.5})) == ["ggml/vulkan", "ggml/cpu"]
    assert _names(cells, cheapest_first(cells, {"vulkan": 2})) == ["ggml/cpu", "ggml/vulkan"]


def test_one_cell_at_a_time_with_every_core_unless_asked():
    assert plan_parallelism(8, 2, None) == (1, 2)
    assert plan_parallelism(8, 16, None) == (1, 16)
    assert plan_parallelism(8, 2, 2) == (2, 1)
    assert plan_parallelism(8, 2, 5) == (2, 1)  # never more cells than cores
    assert plan_parallelism(1, 8, 4) == (1, 8)  # never more cells than there are


def test_the_known_wrong_fixes_run_a_cell_per_core_unless_asked():
    # each fix rebuilds one translation unit: one cell at a time would leave a core idle
    assert plan_second_phase(2, 2, None) == (2, 1)
    assert plan_second_phase(1, 2, None) == (1, 2)  # one cell left: every core for it
    assert plan_second_phase(8, 4, None) == (4, 1)
    assert plan_second_phase(8, 2, 1) == (1, 2)  # --parallel 1 holds for every phase


def test_cell_time_lines_are_aligned_in_run_order_with_the_total():
    lines = cell_time_lines(
        [
            ("ggml/cpu", "passed", 52.34),
            ("llama.cpp/cuda", "skipped", 0.05),
            ("llama.cpp/cpu", "failed", 70.0),
        ]
    )
    assert lines == [
        "time per cell:",
        "  ggml/cpu           52.3 s  passed",
        "  llama.cpp/cuda      0.1 s  skipped",
        "  llama.cpp/cpu      70.0 s  failed",
        "  all cells         122.4 s",
    ]
    assert cell_time_lines([]) == []


def test_the_reporter_prints_the_verdict_the_result_with_its_time_and_the_times():
    out = io.StringIO()
    r = Reporter(2, Console(file=out, width=300))
    r.start_cell("ggml/cpu")
    r.verdict("with the fix every test passes; the control (fix reverted): killed")
    r.cell_result("passed", "every test passes", 52.34)
    r.cell_times([("ggml/cpu", "passed", 52.34)])
    text = out.getvalue()
    assert (
        "ggml/cpu: verdict: with the fix every test passes; the control (fix reverted): killed"
        in text
    )
    assert "ggml/cpu: passed - every test passes (52.3 s)" in text
    assert text.index("verdict:") < text.index("passed -") < text.index("time per cell:")
    assert "  ggml/cpu      52.3 s  passed\n  all cells     52.3 s\n" in text


def test_verdict_line_names_the_fix_and_the_control():
    patched = VariantRecord(
        cell="t/cpu", target="t", backend="cpu", variant="patched", status=RecordStatus.PASSED
    )
    control = VariantRecord(
        cell="t/cpu",
        target="t",
        backend="cpu",
        variant="control",
        status=RecordStatus.KILLED,
        verdict=Verdict.KILLED,
    )
    assert (
        verdict_line(patched, control)
        == "with the fix every test passes; the control (fix reverted): killed"
    )
    patched.status = RecordStatus.FAILED
    control.verdict = Verdict.SURVIVED
    assert (
        verdict_line(patched, control)
        == "with the fix a test fails; the control (fix reverted): survived"
    )
