"""ggml-patch matrix: apply, build, test and control every cell."""
from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError, ExitCode

HELP = "apply, build, test and control every cell of the matrix"


def add_arguments(p) -> None:
    p.add_argument("--results", default="results", metavar="DIR", help="where results go (default: results/)")
    p.add_argument("--profile", default="default", help="matrix.yaml profile (default: default)")
    p.add_argument("--target", action="append", default=[], metavar="NAME", help="only this target (repeatable)")
    p.add_argument("--backend", action="append", default=[], metavar="NAME", help="only this backend (repeatable)")
    p.add_argument("--build-only", action="store_true",
                   help="build (patched and control, no tests) the cells whose toolchain is here but whose "
                        "device is not (CUDA without a GPU), instead of skipping them")
    p.add_argument("--rerun", action="store_true",
                   help="run every cell again even when a cached result for exactly these inputs exists")
    p.add_argument("--no-mutants", action="store_true",
                   help="skip the known-wrong fixes of native_tests/mutants/ (shown as skipped, with the reason)")
    p.add_argument("--parallel", type=int, metavar="N",
                   help="cells at once (default: one per core; compile jobs are split so the cores are never oversubscribed)")


def run(args, matrix, cache) -> ExitCode:
    from ..report.model import CellStatus
    from ..run.matrix import RunOptions, run_matrix
    from ..report.summary import write_results

    results_dir = Path(args.results)
    if args.parallel is not None and args.parallel < 1:
        raise ConfigError(f"--parallel {args.parallel}: expected a positive number of cells")
    opts = RunOptions(matrix, cache, results_dir, args.profile, args.target, args.backend, args.build_only,
                      args.rerun, not args.no_mutants, args.parallel)
    results = run_matrix(opts)
    paths = write_results(results, results_dir)
    cells = results.cells
    count = {s: sum(1 for c in cells if c.status == s)
             for s in (CellStatus.PASSED, CellStatus.SKIPPED, CellStatus.BUILD_ONLY)}
    built = f", {count[CellStatus.BUILD_ONLY]} build-only" if count[CellStatus.BUILD_ONLY] else ""
    print(f"{count[CellStatus.PASSED]} passed, {len(cells) - sum(count.values())} failed, "
          f"{count[CellStatus.SKIPPED]} skipped{built}: results in " + ", ".join(str(p) for p in paths))
    return ExitCode(results.exit_code)
