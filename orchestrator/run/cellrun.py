"""One cell of a matrix run, taken through MATRIX_PHASES one phase at a time (CellRun), and
whether it runs at all (cell_action)."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import replace
from typing import Any, Optional

from ..cache import slug
from ..cancel import CancelToken
from ..config import Backend, Target
from ..errors import BuildFailed, ExitCode, GgmlPatchError
from ..model.results import Cell, CellStatus, VariantRecord
from ..progress import Reporter
from ..vcs.snapshots import SnapshotRepo
from .options import CellOptions, RunOptions
from .pipeline import Phase, Step, new_context, run_steps


class CellRun:
    """One cell of a matrix run, taken through MATRIX_PHASES one phase at a time (run/matrix.py
    runs every cell's first phase before any cell's second): skipped, or its steps run under the
    cell's lock, held from its first phase to its end. A Stop (a cached result), a failure or the
    last phase ends it; its result line is printed then."""

    def __init__(
        self,
        opts: RunOptions,
        options: CellOptions,
        target: Target,
        backend: Backend,
        repo: SnapshotRepo,
        reporter: Reporter,
        cancel: CancelToken,
    ):
        self.id = f"{target.name}/{backend.name}"
        self.opts, self.options, self.reporter = opts, options, reporter
        self.ctx = new_context(
            target,
            backend,
            opts.cache,
            repo,
            opts.matrix.native_tests_dir,
            opts.cache.cell_dir(self.id),
            opts.results_dir / "logs" / slug(self.id),
            options,
            reporter=reporter,
            cancel=cancel,
        )
        self.index = 0  # its place in the run's progress lines
        self.ended = False
        self._seconds = 0.0  # its phases' wall time: skip probes and waiting for the lock included
        self._reported = True  # a skip is reported as one, not with a result line
        self._lock = ExitStack()
        self._locked = False

    @property
    def cell(self) -> Cell:
        return self.ctx.cell

    @property
    def records(self) -> list[VariantRecord]:
        return self.ctx.records

    def run_phase(
        self, number: int, phase: Phase, last: bool, n_jobs: Optional[int] = None
    ) -> None:
        """The phase's steps (`n_jobs`: its compile jobs, where not the cell's own); the first phase
        starts the cell (skipped, or run)."""
        t0 = time.monotonic()
        if n_jobs is not None:
            self.ctx.options = replace(self.ctx.options, n_jobs=n_jobs)
        try:
            if number == 0:
                self.index = self.reporter.start_cell(self.id)
                going = self._start()
            else:
                self.reporter.resume_cell(self.index, self.id, phase.name)
                going = True
            going = going and self._run(phase.steps) and not last
        except BaseException:  # Ctrl-C, a bug: the lock released, the run ends
            self.close()
            raise
        self._seconds += time.monotonic() - t0
        if not going:
            self._end()

    def close(self) -> None:
        """The cell's lock released (again: a no-op); nothing waits on its milestones."""
        self._lock.close()
        self.pass_milestones()

    def pass_milestones(self) -> None:
        """Its first build and first verdict counted as done, whether or not it had them (a
        build-only cell has no verdict): the cells that wait for them go on."""
        self.ctx.steps.first_build.set()
        self.ctx.steps.first_verdict.set()

    def _start(self) -> bool:
        """Whether the cell runs (or builds only); a skip is recorded (and reported) here."""
        ctx, cell, module = self.ctx, self.ctx.cell, self.ctx.module
        backend, options = ctx.backend, self.options
        if not options.series.patches:  # every topic of the run is upstream on this target
            why = f"every topic of the run is retired on {ctx.target.name} (topic.yaml retired:)"
            self.reporter.skip(why)
            ctx.conclude(CellStatus.SKIPPED, why, 0)
            self._reported = False
            return False
        action, why = cell_action(
            module.missing_toolchain(backend),
            module.missing_device(backend),
            module.build_only_ok,
            options.build_only,
        )
        if action == "skip" and options.required:
            why = (
                f"{backend.name} is required here (--require-backend {backend.name}) "
                f"but cannot run: {why}"
            )
            ctx.conclude(CellStatus.FAILED, why, int(ExitCode.BACKEND_MISSING))
            return False
        if action == "skip":
            self.reporter.skip(why)
            ctx.conclude(CellStatus.SKIPPED, why, 0)
            self._reported = False
            return False
        cell.device = module.recorded_device(backend)
        ctx.build_only_reason = why if action == "build-only" else None
        return True

    def _run(self, steps: tuple[Step[Any], ...]) -> bool:
        """`steps` under the cell's lock (taken at its first step); False: the cell ended."""
        try:
            if not self._locked:
                self._lock.enter_context(self.opts.cache.lock(f"cell-{self.id}"))
                self._locked = True
            return run_steps(self.ctx, steps) is None
        except BuildFailed as e:
            self.ctx.conclude(CellStatus.FAILED, str(e), int(e.exit_code))
        except GgmlPatchError as e:
            self.ctx.conclude(CellStatus.ERROR, str(e), int(e.exit_code))
        return False

    def _end(self) -> None:
        self.close()
        self.ended = True
        cell = self.ctx.cell
        self.ctx.took("total", self._seconds)
        if self._reported:
            self.reporter.cell_result(cell.status, cell.reason, cell.timings["total"])


def cell_action(
    no_toolchain: Optional[str], no_device: Optional[str], build_only_ok: bool, build_only: bool
) -> tuple[str, str]:
    """("run" | "build-only" | "skip", why): a skip names everything missing; without the device, a
    cell is built on request (--build-only) where that means something (CUDA), and never counts as
    passed."""
    if no_toolchain:
        also = f"; {no_device}" if no_device and no_device not in no_toolchain else ""
        return "skip", no_toolchain + also
    if no_device:
        return ("build-only" if build_only and build_only_ok else "skip"), no_device
    return "run", ""


# ---------------------------------------------------------------- the result cache
