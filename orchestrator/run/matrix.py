"""The matrix run: every target x backend cell of a profile, phase by phase (cell.py's
MATRIX_PHASES): every cell's first verdict before any cell's known-wrong and competing fixes. By
default the cells share the cores through a jobserver (run/cores.py); --parallel N (or a ninja
that cannot join one) runs N cells at once with fixed compile jobs. Errors in one cell are
recorded; the others go on."""

from __future__ import annotations

import concurrent.futures
import functools
import resource
import threading
import time
from typing import Callable, Mapping, Optional, Sequence, TypeVar

from .. import backends
from ..cancel import CancelToken
from ..config import Backend, Target
from ..model.results import Parallel, Results, SeriesInfo, overall_exit_code
from ..patchset.files import load_queue, load_series
from ..patchset.queue import Queue
from ..patchset.series import Series
from ..progress import Reporter
from ..vcs.snapshots import SnapshotRepo
from ..verdicts.competing import load_competing
from ..verdicts.mutants import load_mutants
from . import cmake
from .cell import MATRIX_PHASES
from .cellrun import CellRun
from .cores import CoreTokens
from .options import RunInputs, RunOptions

__all__ = ["RunOptions", "run_matrix"]

T = TypeVar("T")


def plan_parallelism(
    n_cells: int, cores: int, parallel: Optional[int], default: int = 1
) -> tuple[int, int]:
    """(cells at once, compile jobs per cell): never more compile jobs than cores in all. By default
    (`default` 1, the first verdicts) one cell at a time with every core, cheapest first: the first
    verdict comes soonest (two cells at -j1 each finish together, later), and the phase takes about
    as long (cold builds dominate)."""
    workers = max(1, min(parallel or default, n_cells, cores))
    return workers, max(1, cores // workers)


def plan_second_phase(n_cells: int, cores: int, parallel: Optional[int]) -> tuple[int, int]:
    """The known-wrong and competing fixes' (cells at once, jobs per cell): by default a cell per
    core. Each fix rebuilds one translation unit and relinks, work for one core: run one cell at a
    time, the other core would idle through the phase."""
    return plan_parallelism(n_cells, cores, parallel, default=cores)


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
    queue = load_queue(opts.matrix)  # read once: the series, the mutants, the competing fixes
    series = load_series(opts.matrix, opts.topics, queue=queue)
    # a malformed mutant or competing fix is refused here, before any cell runs
    mutant_files = load_mutants(opts.matrix, opts.topics, queue=queue)
    competing_files = load_competing(opts.matrix, opts.topics, queue=queue)
    matrix_cells = opts.matrix.cells(opts.profile, opts.targets, opts.backends)
    costs = {b.name: backends.get(b.name).relative_cost for _, b in matrix_cells}
    order = cheapest_first(matrix_cells, costs)
    cells = [matrix_cells[i] for i in order]
    progress = reporter or Reporter(len(cells))
    token = cancel or CancelToken()
    repo = SnapshotRepo(opts.cache.snapshots_git)
    started, cpu0 = time.time(), _own_cpu_s()
    cores = cmake.jobs()
    workers, n_jobs = plan_parallelism(len(cells), cores, opts.parallel)
    # the default schedule shares the cores through a jobserver where ninja joins one; --parallel
    # (or an older ninja) keeps the plan of fixed cells and jobs
    tokens = None
    if opts.parallel is None and len(cells) > 1:
        scratch = opts.cache.scratch()
        prefix = opts.cache.scratch_prefix("cores")
        tokens = CoreTokens.for_run(cores, scratch, prefix, cmake.ninja_exe())
    makeflags = tokens.makeflags if tokens else None
    inputs = RunInputs(
        series,
        tuple(mutant_files),
        tuple(competing_files),
        n_jobs,
        makeflags,
        series_by_target(opts, queue, series, [t for t, _ in cells]),
    )

    runs = [
        CellRun(opts, opts.for_cell(t, b, inputs), t, b, repo, progress, token) for t, b in cells
    ]
    later: Optional[tuple[int, int]] = None
    if tokens is not None:
        try:
            _run_sharing_cores(runs, progress, token, tokens)
        finally:
            tokens.close()
    else:
        later = _run_phases(
            runs, progress, token, workers, lambda n: plan_second_phase(n, cores, opts.parallel)
        )
    progress.cell_times([(r.id, str(r.cell.status), r.cell.timings["total"]) for r in runs])
    done = [runs[order.index(i)] for i in range(len(runs))]  # results in the matrix's order
    cell_results = [r.cell for r in done]
    records = [rec for r in done for rec in r.records]
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
        parallel=_parallel_record(workers, n_jobs, later, tokens),
        exit_code=int(overall_exit_code(cell_results)),
    )


def series_by_target(
    opts: RunOptions, queue: Queue, series: Series, targets: Sequence[Target]
) -> dict[str, Series]:
    """Each target's own series where a topic of the run is retired there (topic.yaml
    `retired:`: upstream has it on that target): the run's without it, as status, refresh and
    bundle leave it out there (empty where every topic of the run is)."""
    out: dict[str, Series] = {}
    for t in targets:
        if t.name in out:
            continue
        here = queue.chosen(opts.topics or None, t.name)
        if [x.name for x in here] == list(series.topics):
            continue
        out[t.name] = (
            load_series(opts.matrix, opts.topics or None, queue, t.name)
            if here
            else Series(series.layout, ())
        )
    return out


def _run_phases(
    runs: list[CellRun],
    progress: Reporter,
    cancel: CancelToken,
    workers: int,
    later_plan: Callable[[int], tuple[int, int]],
) -> Optional[tuple[int, int]]:
    """Every cell through MATRIX_PHASES, a phase in every cell still going before the next phase
    in any; the first phase `workers` cells at once, each later one as `later_plan` says for the
    cells still going (returned, None where no cell got that far); every lock released at the
    end, whatever happens."""
    later = None
    try:
        for number, phase in enumerate(MATRIX_PHASES):
            going = [r for r in runs if not r.ended]
            if not going:
                return later
            n_jobs = None
            if number > 0:
                later = later_plan(len(going))
                workers, n_jobs = later
            total = len(MATRIX_PHASES)
            progress.phase(number + 1, total, phase.name, [s.name for s in phase.steps])
            one = functools.partial(
                CellRun.run_phase,
                number=number,
                phase=phase,
                last=number + 1 == total,
                n_jobs=n_jobs,
            )
            if workers == 1:
                for r in going:
                    one(r)
            else:
                _run_parallel(one, going, cancel, workers)
    finally:
        for r in runs:
            r.close()  # one still held (an interrupt): released
    return later


def _parallel_record(
    workers: int, n_jobs: int, later: Optional[tuple[int, int]], tokens: Optional[CoreTokens]
) -> Parallel:
    if tokens is not None:
        return Parallel(shared_cores=tokens.cores)
    return Parallel(
        cells_at_once=workers,
        jobs_per_build=n_jobs,
        later_cells_at_once=later[0] if later else None,
        later_jobs_per_build=later[1] if later else None,
    )


def _run_sharing_cores(
    runs: list[CellRun], progress: Reporter, cancel: CancelToken, tokens: CoreTokens
) -> None:
    """Every cell through MATRIX_PHASES, each phase's steps holding one of the run's cores (the
    builds take more while they are free). A cell starts once the cell before it has built (its
    cold build had every core; what follows, its controls, recompiles one file at a time, and
    the next cell fetches and builds beside them); a later phase starts once every cell's first
    verdict is out, so the known-wrong and competing fixes never delay one. The cheapest cell's
    first verdict comes as soon as with one cell at a time; no core idles while another cell has
    work. Every lock released at the end, whatever happens."""
    total = len(MATRIX_PHASES)
    first = MATRIX_PHASES[0]
    progress.phase(1, total, first.name, [s.name for s in first.steps])
    later_started = _Once()

    def one(i: int) -> None:
        run = runs[i]
        if i > 0:
            _wait(runs[i - 1].ctx.steps.first_build, cancel)
        with tokens.core(cancel):
            run.run_phase(number=0, phase=first, last=total == 1)
        run.pass_milestones()
        for number in range(1, total):
            if run.ended:
                return
            for other in runs:
                _wait(other.ctx.steps.first_verdict, cancel)
            phase = MATRIX_PHASES[number]
            steps = [s.name for s in phase.steps]
            later_started.do(
                number, functools.partial(progress.phase, number + 1, total, phase.name, steps)
            )
            with tokens.core(cancel):
                run.run_phase(number=number, phase=phase, last=number + 1 == total)

    try:
        _run_parallel(one, list(range(len(runs))), cancel, len(runs))
    finally:
        for r in runs:
            r.close()  # one still held (an interrupt): released


class _Once:
    """Each key's action done once, by the first thread that gets there."""

    def __init__(self) -> None:
        self._done: set[int] = set()
        self._lock = threading.Lock()

    def do(self, key: int, action: Callable[[], None]) -> None:
        with self._lock:
            if key in self._done:
                return
            self._done.add(key)
            action()


def _wait(event: threading.Event, cancel: CancelToken) -> None:
    """Until `event` is set; an interrupt ends the wait."""
    while not event.wait(0.2):
        cancel.check()


def _run_parallel(
    one: Callable[[T], None], runs: list[T], cancel: CancelToken, workers: int
) -> None:
    """Independent cells overlap (one fetches or links while another compiles). On Ctrl-C or
    SIGTERM the others stop at their next step or build line: compilers killed, trees put back."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(one, r) for r in runs]
        try:
            for f in futures:
                f.result()
        except BaseException:
            cancel.cancel()
            for f in futures:
                f.cancel()
            concurrent.futures.wait(futures)
            raise


def _own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
