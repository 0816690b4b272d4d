"""A topic retired on one target (`topic retire NAME --target T`: upstream has it there) is left out
of a `matrix` run's cells of T: not applied, no control, none of its known-wrong fixes; every
other target's cells still carry it. The real run_matrix on a copy of the project's matrix and
queue, its steps stand-ins that record what each cell was given (as tests/integration/test_phases
does: no fetch, no build); then the real control step on the fake project of test_mutants, given
the series such a cell gets: a control per topic it carries, none for the retired one."""

import dataclasses
import io
import shutil

import pytest
from rich.console import Console

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.drift.topics import last_verdicts
from orchestrator.model.results import CONTROL_PREFIX, CellStatus
from orchestrator.patchset.files import load_queue
from orchestrator.patchset.series import Series
from orchestrator.progress import Reporter
from orchestrator.report.summary import write_results
from orchestrator.run import cell as cell_mod
from orchestrator.run import matrix as matrix_mod
from orchestrator.run.cell import CONTROL, EARLY_CONTROLS
from orchestrator.run.options import RunInputs
from orchestrator.run.pipeline import Step, phases
from orchestrator.upstream.views import topic_results

from ..helpers.tools import ROOT, run_tool
from .test_topic_controls import queue_cell, queue_series  # noqa: F401 -- the fixture

RETIRED_ON = "ggml"
KEPT_ON = "llama.cpp"


@pytest.fixture
def project(tmp_path):
    """A copy of the project whose first topic is retired on RETIRED_ON (by the command)."""
    for name in ("patches", "native_tests"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    matrix = tmp_path / "matrix.yaml"
    first = load_queue(load_matrix(matrix)).names()[0]
    proc = run_tool(
        "topic", "retire", first, "--target", RETIRED_ON, "--upstream", "0123abcd",
        "--matrix", str(matrix), "--cache", str(tmp_path / "cache"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    # the note that a matrix run still applied it there is gone: it does not any more
    assert "still applies the whole queue" not in proc.stdout
    return load_matrix(matrix), first


def _recording(given):
    """Stand-ins for MATRIX_STEPS: each cell's first step records the series, the known-wrong and
    competing fixes its options carry."""

    def make(name):
        def run(ctx):
            if name == "fetch":
                o = ctx.options
                given[ctx.cell.cell] = (
                    list(o.series.topics),
                    {p.topic for p in o.series.patches},
                    {m.topic for m in o.mutant_files},
                    {c.topic for c in o.competing_files},
                )
            if name == "conclude":
                ctx.cell.status, ctx.cell.reason = CellStatus.PASSED, "stand-in"
            return name

        return run

    return tuple(Step(s.name, make(s.name), ends_phase=s.ends_phase) for s in cell_mod.MATRIX_STEPS)


def test_a_cell_of_the_target_a_topic_is_retired_on_leaves_it_out(project, tmp_path, monkeypatch):
    matrix, first = project
    queue = load_queue(matrix)
    everywhere = [t.name for t in queue.active()]
    assert first in everywhere and len(everywhere) > 1, everywhere
    given = {}
    monkeypatch.setattr(matrix_mod, "MATRIX_PHASES", phases(_recording(given)))
    opts = matrix_mod.RunOptions(
        matrix=matrix,
        cache=Cache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        targets=[KEPT_ON, RETIRED_ON],
        backends=["cpu"],
        parallel=1,
    )
    out = io.StringIO()
    results = matrix_mod.run_matrix(opts, Reporter(2, Console(file=out, width=300)))
    kept, retired = given[f"{KEPT_ON}/cpu"], given[f"{RETIRED_ON}/cpu"]
    # the other target: every topic, its patches, its mutants and competing fixes
    assert kept[0] == everywhere and kept[1] == set(everywhere)
    # the retired one's: the others only (their `after:` on it is met by upstream there)
    assert retired[0] == [t for t in everywhere if t != first]
    assert first not in retired[1] and retired[1] == set(retired[0])
    assert first not in retired[2] | retired[3]
    assert retired[2] <= kept[2] and retired[3] <= kept[3]
    # the results say which topics each cell carried; the run's series is the whole run's
    cells = {c.cell: c for c in results.cells}
    assert cells[f"{KEPT_ON}/cpu"].topics == everywhere
    assert cells[f"{RETIRED_ON}/cpu"].topics == retired[0]
    assert results.series.topics == everywhere
    assert all(c.status == "passed" for c in results.cells), out.getvalue()
    # the retired topic's bundle reads only the cells that carried it; another topic's, every cell
    view = topic_results(results, first, frozenset(), frozenset(), False)
    assert [c.cell for c in view.cells] == [f"{KEPT_ON}/cpu"]
    view = topic_results(results, retired[0][0], frozenset(), frozenset(), False)
    assert len(view.cells) == 2
    # `ggml-patch queue`'s last verdicts of the retired topic: the cells that carried it
    write_results(results, tmp_path / "results")
    shown = last_verdicts(tmp_path / "results", queue.topic(first))
    assert shown == {f"{KEPT_ON}/cpu": "passed"}, shown
    assert len(last_verdicts(tmp_path / "results", queue.topic(retired[0][0]))) == 2


def test_a_target_every_topic_of_the_run_is_retired_on_is_skipped_saying_so(project, tmp_path):
    matrix, first = project
    opts = matrix_mod.RunOptions(
        matrix=matrix,
        cache=Cache(tmp_path / "cache"),
        results_dir=tmp_path / "results",
        targets=[RETIRED_ON],
        backends=["cpu"],
        topics=[first],
    )
    results = matrix_mod.run_matrix(opts, Reporter(1, Console(file=io.StringIO(), width=300)))
    (cell,) = results.cells
    assert cell.status == "skipped" and "retired on ggml" in cell.reason, cell.reason
    assert not results.records


def test_the_control_step_controls_only_the_topics_the_cell_carries(queue_cell):  # noqa: F811
    """The fake project's three topics; the second retired on the cell's target (its fix in the
    base: the tree is the same), so the cell's series is the other two's."""
    whole = queue_series(())
    carried = tuple(t for t in whole.topics if t != whole.topics[1])
    theirs = Series(
        whole.layout,
        tuple(p for p in whole.patches if p.topic in carried),
        carried,
        (),
        tuple(x for x in whole.topic_tests if x[0] in carried),
    )
    inputs = RunInputs(whole, (), (), 1, None, {"fake": theirs})
    assert inputs.for_target("fake")[0] == theirs and inputs.for_target("other")[0] == whole
    ctx = queue_cell.context(())
    ctx.options = dataclasses.replace(ctx.options, series=theirs)
    ctx.results[cell_mod.APPLY.name] = ctx.results[cell_mod.APPLY.name]._replace(rendered=theirs)
    cell_mod.run_steps(ctx, [EARLY_CONTROLS, CONTROL])
    controls = [r.topic for r in ctx.records if r.variant.startswith(CONTROL_PREFIX)]
    assert controls == list(carried) and whole.topics[1] not in controls
