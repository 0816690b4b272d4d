"""The cell pipeline's parts: a Step (a name, what it runs, where its result goes), the context
every step takes (CellContext: what the cell is, its CellOptions, what the earlier steps returned)
and run_steps, which runs a list of steps in order. The matrix's, the bundle's and the training
evidence's step lists are declared where their steps are (run/cell.py, finetune/runner.py). A
step may end a phase (`ends_phase`): the matrix runs every cell through one phase before any cell
starts the next (phases), so each cell's first verdict comes before any cell's known-wrong fixes."""

from __future__ import annotations

import functools
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Generic, Iterator, NamedTuple, Optional, Sequence, TypeVar, Union

from .. import backends
from ..backends import BackendModule
from ..cache import Cache
from ..cancel import CancelToken
from ..config import Backend, Target
from ..model.layout import Layout, get_layout
from ..model.results import Cell, CellStatus, RecordStatus, VariantRecord
from ..progress import Reporter
from ..vcs.snapshots import SnapshotRepo, Worktree
from .options import CellOptions
from .tree import native_programs

T = TypeVar("T")
_STEP = "step "  # a step's wall time in the cell's timings: "step <name>"


class CellProgress:
    """Progress (where there is a reporter) and cancellation: a cancelled cell stops at its next
    step or build line."""

    def __init__(self, reporter: Optional[Reporter] = None, cancel: Optional[CancelToken] = None):
        self.reporter = reporter
        self.cancel = cancel or CancelToken()
        # what the matrix's schedule waits for (run/matrix.py): the cell's first build over (its
        # cold build: the cores are free again), its first verdict printed
        self.first_build = threading.Event()
        self.first_verdict = threading.Event()

    def step(self, name: str, detail: str = "") -> None:
        self.cancel.check()
        if self.reporter:
            self.reporter.step(name, detail)

    def done(self, what: str) -> None:
        if self.reporter:
            self.reporter.done(what)

    def verdict(self, text: str) -> None:
        if self.reporter:
            self.reporter.verdict(text)
        self.first_verdict.set()

    def built(self) -> None:
        self.first_build.set()

    def carry(self) -> Callable[[], None]:
        """Called first in a worker thread of this cell: its lines are the cell's."""
        return self.reporter.carry() if self.reporter else lambda: None

    def build_progress(self, done: int, total: int) -> None:
        self.cancel.check()
        if self.reporter:
            self.reporter.build_progress(done, total)


class Stop(NamedTuple):
    """A step's result that ends the cell's steps there (e.g. a cached result is the cell's)."""

    why: str


@dataclass(frozen=True)
class Step(Generic[T]):
    """One step of a cell: `run` takes the context and returns the step's result (or a Stop);
    `record` writes that result where the cell keeps it (the Cell, the records)."""

    name: str
    run: Callable[[CellContext], Union[T, Stop]]
    record: Optional[Callable[[CellContext, T], None]] = None
    # the name of the phase this step ends (progress shows it); "": the phase goes on
    ends_phase: str = ""


class Phase(NamedTuple):
    """Consecutive steps of one list that every cell runs before any cell runs the next phase."""

    name: str
    steps: tuple[Step[Any], ...]


def phases(steps: Sequence[Step[Any]]) -> list[Phase]:
    """`steps` cut after each step that ends a phase, in order; steps after the last such step
    are a phase of their own, named after its first step."""
    out: list[Phase] = []
    current: list[Step[Any]] = []
    for step in steps:
        current.append(step)
        if step.ends_phase:
            out.append(Phase(step.ends_phase, tuple(current)))
            current = []
    if current:
        out.append(Phase(current[0].name, tuple(current)))
    return out


@dataclass
class CellContext:
    """One cell: what it is, how it runs (its CellOptions, held), what its steps returned."""

    target: Target
    backend: Backend
    module: BackendModule
    cache: Cache
    repo: SnapshotRepo
    native_tests: Path  # native_tests/: the harness, the training program, mutants/
    cell_dir: Path  # src/ (the worktree), build/, harness/, series/, state.json
    worktree: Worktree  # the tree the cell builds (apply puts the series on it)
    logs: Path  # where this run's logs go
    options: CellOptions
    steps: CellProgress
    cell: Cell
    # --build-only on a machine without the device: build, run nothing
    build_only_reason: Optional[str] = None
    records: list[VariantRecord] = field(default_factory=list)
    results: dict[str, Any] = field(default_factory=dict)  # step name -> what it returned

    def got(self, step: Step[T]) -> T:
        """What `step` returned in this cell (it ran before the step asking)."""
        if step.name not in self.results:
            raise LookupError(f"{self.cell.cell}: step {step.name!r} has not run in this cell")
        found: T = self.results[step.name]
        return found

    @functools.cached_property
    def env(self) -> dict[str, str]:
        """Configure's, the builds' and the tests' (the backend's module's, then matrix.yaml's)."""
        return self.module.test_env(self.backend)

    @property
    def layout(self) -> Layout:
        return get_layout(self.target.layout, self.target.prefix)

    @property
    def build_dir(self) -> Path:
        return self.cell_dir / self.options.build_subdir

    @property
    def runs_tests(self) -> bool:
        return self.build_only_reason is None

    @property
    def skipped_tests(self) -> dict[str, str]:
        """test program -> why this backend does not run it (its module's skip_tests): never
        built or run."""
        return dict(self.module.skip_tests)

    @functools.cached_property
    def native_programs(self) -> tuple[str, ...]:
        """The programs native_tests/ holds (a topic's gate test, training programs)."""
        return native_programs(self.native_tests)

    @property
    def key(self) -> str:
        return self.cell.cache_key or ""

    @contextmanager
    def timing(self, name: str) -> Iterator[None]:
        """The block's wall time in the cell's timings (not when it raises)."""
        t0 = time.monotonic()
        yield
        self.took(name, time.monotonic() - t0)

    def took(self, name: str, seconds: float) -> None:
        """The one way a time reaches the cell's timings (a step's is "step <name>")."""
        self.cell.timings[name] = round(seconds, 2)

    @property
    def seconds(self) -> dict[str, float]:
        """Each step's wall time in this cell, by step name (from the cell's timings)."""
        t = self.cell.timings
        return {k.removeprefix(_STEP): v for k, v in t.items() if k.startswith(_STEP)}

    def conclude(self, status: CellStatus, reason: str, exit_code: int) -> None:
        """The one way the cell's status, reason and exit code are set."""
        self.cell.status, self.cell.reason, self.cell.exit_code = status, reason, exit_code

    def record(
        self, variant: str, status: RecordStatus = RecordStatus.PENDING, **info: Any
    ) -> VariantRecord:
        """A new record of this cell (`info`: a mutant's or a competing fix's header)."""
        c = self.cell
        return VariantRecord(
            cell=c.cell,
            target=c.target,
            backend=c.backend,
            variant=variant,
            status=status,
            **info,
        )


def run_steps(ctx: CellContext, steps: Sequence[Step[Any]]) -> Optional[Stop]:
    """`steps` in order on `ctx`, each result recorded before the next step runs; the Stop that
    ended them early, or None when every step ran."""
    for step in steps:
        t0 = time.monotonic()
        result = step.run(ctx)
        ctx.took(_STEP + step.name, time.monotonic() - t0)
        if isinstance(result, Stop):
            return result
        ctx.results[step.name] = result
        if step.record is not None:
            step.record(ctx, result)
    return None


def new_context(
    target: Target,
    backend: Backend,
    cache: Cache,
    repo: SnapshotRepo,
    native_tests: Path,
    cell_dir: Path,
    logs: Path,
    options: CellOptions,
    worktree: Optional[Worktree] = None,
    reporter: Optional[Reporter] = None,
    cancel: Optional[CancelToken] = None,
    module: Optional[BackendModule] = None,
) -> CellContext:
    """A cell's context: a fresh Cell, its backend's module (unless given), progress on `reporter`,
    the worktree at cell_dir/src unless one is given."""
    cell = Cell(
        cell=f"{target.name}/{backend.name}",
        target=target.name,
        backend=backend.name,
        layout=target.layout,
        topics=list(options.series.topics) or None,
    )
    return CellContext(
        target=target,
        backend=backend,
        module=module or backends.get(backend.name, cache.root),
        cache=cache,
        repo=repo,
        native_tests=native_tests,
        cell_dir=cell_dir,
        worktree=worktree or Worktree(repo, cell_dir / "src"),
        logs=logs,
        options=options,
        steps=CellProgress(reporter, cancel),
        cell=cell,
    )
