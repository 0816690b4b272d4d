"""The matrix run: every target x backend cell of a profile, one after another or in parallel
(cell.py runs one). Errors in one cell are recorded; the others go on."""

from __future__ import annotations

import concurrent.futures
import resource
import time
from typing import Callable, Mapping, Optional, Sequence

from .. import backends
from ..cancel import CancelToken
from ..config import Backend, Target
from ..model.results import Cell, Parallel, Results, SeriesInfo, VariantRecord, overall_exit_code
from ..patchset.files import load_series
from ..progress import Reporter
from ..vcs.snapshots import SnapshotRepo
from ..verdicts.competing import load_competing
from ..verdicts.mutants import load_mutants
from . import cmake
from .cell import run_cell
from .options import RunInputs, RunOptions

__all__ = ["RunOptions", "run_matrix"]

CellRan = tuple[Cell, list[VariantRecord]]


def plan_parallelism(n_cells: int, cores: int, parallel: Optional[int]) -> tuple[int, int]:
    """(cells at once, compile jobs per cell): never more compile jobs than cores in all. By default
    one cell at a time with every core, cheapest first: the first verdict comes soonest (two cells
    at -j1 each finish together, later), and the whole run takes about as long (builds dominate)."""
    workers = max(1, min(parallel or 1, n_cells, cores))
    return workers, max(1, cores // workers)


# ggml's tree is a part of llama.cpp's: less to fetch, import and check out
_LAYOUT_COST = {"ggml": 0, "llama.cpp": 1}


def cheapest_first(
    cells: Sequence[tuple[Target, Backend]], backend_cost: Mapping[str, float]
) -> list[int]:
    """Indexes of `cells` in the order that gives the cheapest complete verdict first: by the
    backend's relative cost (its module's), then the target's layout, then the matrix's order."""
    return sorted(
        range(len(cells)),
        key=lambda i: (
            backend_cost.get(cells[i][1].name, 1.0),
            _LAYOUT_COST.get(cells[i][0].layout, 1),
            i,
        ),
    )


def run_matrix(
    opts: RunOptions, reporter: Optional[Reporter] = None, cancel: Optional[CancelToken] = None
) -> Results:
    series = load_series(opts.matrix)
    # a malformed mutant or competing fix is refused here, before any cell runs
    mutant_files, competing_files = load_mutants(opts.matrix), load_competing(opts.matrix)
    matrix_cells = opts.matrix.cells(opts.profile, opts.targets, opts.backends)
    costs = {b.name: backends.get(b.name).relative_cost for _, b in matrix_cells}
    order = cheapest_first(matrix_cells, costs)
    cells = [matrix_cells[i] for i in order]
    progress = reporter or Reporter(len(cells))
    token = cancel or CancelToken()
    repo = SnapshotRepo(opts.cache.snapshots_git)
    started, cpu0 = time.time(), _own_cpu_s()
    workers, n_jobs = plan_parallelism(len(cells), cmake.jobs(), opts.parallel)
    inputs = RunInputs(series, tuple(mutant_files), tuple(competing_files), n_jobs)

    def one(target: Target, backend: Backend) -> CellRan:
        """The cell with the options it derives from the run's."""
        options = opts.for_cell(target, backend, inputs)
        return run_cell(opts, options, target, backend, repo, progress, token)

    if workers == 1:
        ran = [one(t, b) for t, b in cells]
    else:
        ran = _run_parallel(one, cells, token, workers)
    progress.cell_times([(c.cell, str(c.status), c.timings.get("total", 0.0)) for c, _ in ran])
    done = [ran[order.index(i)] for i in range(len(ran))]  # results in the matrix's order
    cell_results = [c for c, _ in done]
    records = [r for _, recs in done for r in recs]
    return Results(
        series=SeriesInfo.model_validate(series, from_attributes=True),
        cells=cell_results,
        records=records,
        matrix=str(opts.matrix.path),
        profile=opts.profile,
        started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        duration_s=round(time.time() - started, 2),
        # this process only: not git, cmake, compilers, tests
        orchestrator_cpu_s=round(_own_cpu_s() - cpu0, 2),
        parallel=Parallel(cells_at_once=workers, jobs_per_build=n_jobs),
        exit_code=int(overall_exit_code(cell_results)),
    )


def _run_parallel(
    one: Callable[[Target, Backend], CellRan],
    cells: list[tuple[Target, Backend]],
    cancel: CancelToken,
    workers: int,
) -> list[CellRan]:
    """Independent cells overlap (one fetches or links while another compiles), results in the given
    order. On Ctrl-C or SIGTERM the others stop at their next step or build line: compilers killed,
    trees put back."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(one, t, b) for t, b in cells]
        try:
            return [f.result() for f in futures]
        except BaseException:
            cancel.cancel()
            for f in futures:
                f.cancel()
            concurrent.futures.wait(futures)
            raise


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
