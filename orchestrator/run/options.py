"""A run's options and the options each cell derives from them, once (RunOptions.for_cell).

RunOptions describes a whole `ggml-patch matrix` run as the user asked for it; RunInputs is what the
run loads once before its first cell (the series, the mutants, the competing fixes, the compile
jobs); CellOptions is frozen: how one cell runs, whoever runs it (the matrix, the bundle's
verification, the training evidence)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Optional

if TYPE_CHECKING:  # the records load with a matrix: not for `--help` (start-up)
    from ..cache import Cache
    from ..config import Backend, Matrix, Target
    from ..patchset.series import Series
    from ..verdicts.competing import CompetingFix
    from ..verdicts.mutants import Mutant


@dataclass(frozen=True, kw_only=True)
class CellOptions:
    """How one cell runs. Every field has the value that cell uses: nothing is left for later."""

    series: Series  # the canonical series (rendered into the target's layout by apply)
    n_jobs: Optional[int] = None  # compile jobs (None: every core, cmake's own choice)
    makeflags: Optional[str] = None  # the run's jobserver (run/cores.py): set, n_jobs is unused
    rerun: bool = False  # ignore a cached result
    mutant_files: tuple[Mutant, ...] = ()  # native_tests/mutants/*.patch
    no_mutants: bool = False  # --no-mutants (no competing fixes either)
    competing_files: tuple[CompetingFix, ...] = ()  # native_tests/competing/*.patch
    programs: bool = True  # build and run the training program beside the tests
    build_subdir: str = "build"  # the build tree under the cell's folder
    build_only: bool = False  # --build-only: built, not skipped, where the device is missing
    required: bool = False  # --require-backend: a skip of this cell is a failure


@dataclass(frozen=True)
class RunInputs:
    """What a matrix run loads once, before its first cell, for every cell."""

    series: Series
    mutant_files: tuple[Mutant, ...]
    competing_files: tuple[CompetingFix, ...]
    n_jobs: int  # compile jobs per cell (run/matrix.py's plan_parallelism)
    makeflags: Optional[str] = None  # the cells share the cores through this jobserver
    # a target's own series where it differs from `series`: without the topics retired there
    # (topic.yaml `retired:`; empty where every topic is)
    by_target: Mapping[str, Series] = field(default_factory=dict)

    def for_target(
        self, target: str
    ) -> tuple[Series, tuple[Mutant, ...], tuple[CompetingFix, ...]]:
        """The series, known-wrong and competing fixes a cell of `target` carries: only those of
        the topics applied there."""
        series = self.by_target.get(target)
        if series is None:
            return self.series, self.mutant_files, self.competing_files
        carried = set(series.topics)
        return (
            series,
            tuple(m for m in self.mutant_files if m.topic in carried),
            tuple(c for c in self.competing_files if c.topic in carried),
        )


@dataclass(kw_only=True)
class RunOptions:
    """A matrix run's options (run/matrix.py); each cell derives its own with for_cell."""

    matrix: Matrix
    cache: Cache
    results_dir: Path
    profile: str = "default"
    targets: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)  # --topic: [] for every active topic
    # build (not skip) cells whose toolchain is here but whose device is not
    build_only: bool = False
    rerun: bool = False  # ignore cached cell results
    no_mutants: bool = False  # --no-mutants: the known-wrong fixes of native_tests/mutants/ not run
    parallel: Optional[int] = None  # cells at once (default: as many as cores, at most the cells)
    # a skip of these is a failure (a CI runner meant to have them)
    require_backends: tuple[str, ...] = ()

    def for_cell(self, target: Target, backend: Backend, inputs: RunInputs) -> CellOptions:
        """The options of the cell `target` x `backend` (`inputs`: what the run loaded once)."""
        series, mutants, competing = inputs.for_target(target.name)
        return CellOptions(
            series=series,
            n_jobs=inputs.n_jobs,
            makeflags=inputs.makeflags,
            rerun=self.rerun,
            mutant_files=mutants,
            no_mutants=self.no_mutants,
            competing_files=competing,
            build_only=self.build_only,
            required=backend.name in self.require_backends,
        )
