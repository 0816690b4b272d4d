"""Issue 35, point 3: the matrix runs every cell to its first verdict (the fix's tests, its control
judged) before any cell's known-wrong and competing fixes, so the last cell's answer is not behind
the first cell's mutants. One step list, cut after control; the real run_matrix, the real cells
of matrix.yaml and their locks, with each step's work replaced by a stand-in that prints what the
real step prints (no fetch, no build): the progress lines in the order a user reads them."""

import io
import re

import pytest
from rich.console import Console

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.errors import BuildFailed
from orchestrator.progress import Reporter
from orchestrator.run import cell as cell_mod
from orchestrator.run import cores as cores_mod
from orchestrator.run import matrix as matrix_mod
from orchestrator.run.pipeline import Step, Stop, phases

from ..helpers.tools import ROOT

CELLS = ["ggml/cpu", "llama.cpp/cpu"]  # the cheapest first


def test_the_matrix_steps_are_one_list_cut_after_the_control():
    names = [s.name for s in cell_mod.MATRIX_STEPS]
    cut = names.index("control") + 1
    assert [p.name for p in cell_mod.MATRIX_PHASES] == [
        "first verdicts",
        "known-wrong and competing fixes",
    ]
    first, rest = cell_mod.MATRIX_PHASES
    assert [s.name for s in first.steps] == names[:cut]
    assert [s.name for s in rest.steps] == names[cut:]
    assert first.steps + rest.steps == cell_mod.MATRIX_STEPS


def test_steps_after_the_last_boundary_are_a_phase_named_after_their_first_step():
    def nothing(ctx):
        return None

    steps = [Step("a", nothing), Step("b", nothing, ends_phase="one"), Step("c", nothing)]
    assert [(p.name, [s.name for s in p.steps]) for p in phases(steps)] == [
        ("one", ["a", "b"]),
        ("c", ["c"]),
    ]
    assert phases([]) == []


def _stand_ins(ran, fail=None, cached=None):
    """Steps named and cut as MATRIX_STEPS, each printing what the real one prints; `fail`: the
    cell whose build fails, `cached`: the cell whose apply finds its cached result."""

    def make(name):
        def run(ctx):
            cell = ctx.cell.cell
            ran.append((cell, name))
            ctx.steps.step(name)
            if name == "apply" and cell == cached:
                ctx.steps.done("cached result, nothing changed")
                return Stop("cached result")
            if name == "build" and cell == fail:
                raise BuildFailed(f"{cell}: build failed: stand-in")
            if name == "build":
                ctx.steps.built()
            if name == "control":
                ctx.steps.verdict("with the fix every test passes; the control: killed")
            if name == "mutants":
                ctx.steps.step("mutant 01-stand-in")
            if name == "conclude":
                ctx.cell.status, ctx.cell.reason = "passed", "stand-in"
            return name

        return run

    return tuple(Step(s.name, make(s.name), ends_phase=s.ends_phase) for s in cell_mod.MATRIX_STEPS)


@pytest.fixture
def run(tmp_path, monkeypatch):
    def go(parallel=None, **how):
        ran = []
        monkeypatch.setattr(matrix_mod, "MATRIX_PHASES", phases(_stand_ins(ran, **how)))
        opts = matrix_mod.RunOptions(
            matrix=load_matrix(ROOT / "matrix.yaml"),
            cache=Cache(tmp_path / "cache"),
            results_dir=tmp_path / "results",
            backends=["cpu"],
            parallel=parallel,
        )
        out = io.StringIO()
        results = matrix_mod.run_matrix(opts, Reporter(len(CELLS), Console(file=out, width=300)))
        return results, ran, out.getvalue()

    return go


def _at(text, line):
    """Where `line` starts in the progress (it must be there)."""
    m = re.search(rf"^{re.escape(line)}", text, re.M)
    assert m, f"{line!r} not in:\n{text}"
    return m.start()


@pytest.mark.parametrize("parallel", [1, None, 2])
def test_every_cells_verdict_comes_before_any_cells_mutants(run, parallel):
    results, ran, text = run(parallel)
    verdicts = [_at(text, f"  {c}: verdict: ") for c in CELLS]
    mutants = [_at(text, f"  [{i}/2] {c}: mutant ") for i, c in enumerate(CELLS, 1)]
    ends = [_at(text, f"  {c}: passed - stand-in") for c in CELLS]
    assert max(verdicts) < min(mutants), text
    # phase 2 one cell after another with --parallel 1 (by default a cell per core): each cell's
    # result when its mutants are done
    assert parallel != 1 or mutants[0] < ends[0] < mutants[1] < ends[1], text
    phase_2 = _at(text, "phase 2/2: known-wrong and competing fixes (mutants, competing")
    assert _at(text, "phase 1/2: first verdicts (fetch, apply") < min(verdicts)
    assert max(verdicts) < phase_2 < min(mutants)
    # each cell goes on under its own header, with its place in the run
    assert phase_2 < _at(text, "[1/2] ggml/cpu (known-wrong and competing fixes)") < mutants[0]
    if parallel == 1:  # one at a time: the steps in this order exactly
        names = [s.name for s in cell_mod.MATRIX_STEPS]
        cut = names.index("control") + 1
        assert ran == [
            *((CELLS[0], n) for n in names[:cut]),
            *((CELLS[1], n) for n in names[:cut]),
            *((CELLS[0], n) for n in names[cut:]),
            *((CELLS[1], n) for n in names[cut:]),
        ]
    # the results as before: the matrix's order, every cell passed, its time the sum of its phases
    assert [c.cell for c in results.cells] == ["llama.cpp/cpu", "ggml/cpu"]
    assert [c.status for c in results.cells] == ["passed", "passed"]
    assert all(c.timings["total"] >= 0 for c in results.cells)
    assert _at(text, "time per cell:") > max(ends)


def test_a_cell_that_ends_in_the_first_phase_is_done_there_and_the_others_go_on(run, tmp_path):
    results, ran, text = run(fail="ggml/cpu", cached="llama.cpp/cpu")
    # the failed build and the cached result: each cell's result line in phase 1, no phase 2
    assert _at(text, "  ggml/cpu: failed - ggml/cpu: build failed: stand-in") < _at(
        text, "[2/2] llama.cpp/cpu"
    )
    assert "phase 2/2" not in text and "mutant" not in text
    assert ("ggml/cpu", "test") not in ran and ("llama.cpp/cpu", "plan") not in ran
    cells = {c.cell: c for c in results.cells}
    assert cells["ggml/cpu"].status == "failed" and cells["llama.cpp/cpu"].status != "failed"
    # every cell's lock released: another run takes them at once
    cache = Cache(tmp_path / "cache", lock_timeout=0)
    for c in CELLS:
        with cache.lock(f"cell-{c}"):
            pass


def test_a_cell_holds_its_lock_from_its_first_phase_to_its_end(run, tmp_path, monkeypatch):
    """Another run waiting for the cell between its phases would change its tree under it."""
    held = []
    real = matrix_mod.CellRun.run_phase

    def probe(self, number, phase, last, n_jobs=None):
        if number == 1:  # between the phases: the lock is still this run's
            other = Cache(tmp_path / "cache", lock_timeout=0)
            try:
                with other.lock(f"cell-{self.id}"):
                    held.append((self.id, False))
            except Exception:  # LockTimedOut: held
                held.append((self.id, True))
        return real(self, number, phase, last, n_jobs)

    monkeypatch.setattr(matrix_mod.CellRun, "run_phase", probe)
    run()
    assert sorted(held) == sorted([(CELLS[0], True), (CELLS[1], True)])  # phase 2: either order


def test_by_default_the_cells_share_the_cores_and_the_next_starts_after_a_build(run, monkeypatch):
    """Two cores, a ninja that joins a jobserver: the cells draw from one; the second cell starts
    once the first has built (its cold build had both cores), not once its phase is over."""
    if not cores_mod.ninja_joins_jobserver(matrix_mod.cmake.ninja_exe()):
        pytest.skip("this ninja predates jobservers (< 1.13): the fixed plan runs")
    monkeypatch.setattr(matrix_mod.cmake, "jobs", lambda: 2)
    made = []
    real = cores_mod.CoreTokens.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(cores_mod.CoreTokens, "__init__", spy)
    results, ran, text = run()
    assert results.parallel.shared_cores == 2 and results.parallel.cells_at_once is None
    assert ran.index(("llama.cpp/cpu", "fetch")) > ran.index(("ggml/cpu", "build"))
    verdicts = [ran.index((c, "control")) for c in CELLS]
    assert max(verdicts) < min(ran.index((c, "mutants")) for c in CELLS)
    assert [c.status for c in results.cells] == ["passed", "passed"]
    # the jobserver's fifo is gone with the run
    assert len(made) == 1 and not made[0].path.exists()
