"""ggml-patch matrix: apply, build, test and control every cell."""

from __future__ import annotations

import os
from collections import Counter

from .. import backends
from ..errors import ConfigError, ExitCode
from . import add_results, add_targets, add_topics, repeatable

HELP = "apply, build, test and control every cell of the matrix"
REQUIRE_ENV = "GGML_PATCH_REQUIRE_BACKEND"


def add_arguments(p) -> None:
    add_results(p, "where results go (default: results/)")
    p.add_argument("--profile", default="default", help="matrix.yaml profile (default: default)")
    add_targets(p)
    add_topics(p)
    repeatable(p, "--backend", "only this backend (repeatable)")
    p.add_argument(
        "--build-only",
        action="store_true",
        help="build (patched and control, no tests) the cells whose toolchain is here but whose "
        "device is not (CUDA without a GPU), instead of skipping them",
    )
    repeatable(
        p,
        "--require-backend",
        "this machine is meant to run NAME: a skip of its cells is a failure (exit 9) instead "
        f"(repeatable; also ${REQUIRE_ENV}, comma-separated)",
    )
    p.add_argument(
        "--rerun",
        action="store_true",
        help="run every cell again even when a cached result for exactly these inputs exists",
    )
    p.add_argument(
        "--no-mutants",
        action="store_true",
        help="skip the known-wrong fixes of native_tests/<topic>/mutants/ "
        "(shown as skipped, with the reason)",
    )
    p.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="cells at once (default: one per core; compile jobs are "
        "split so the cores are never oversubscribed)",
    )


def run(args, matrix, cache) -> ExitCode:
    from ..config import require_native_tests
    from ..model.results import CellStatus
    from ..outdir import check, claim, made_results
    from ..report.summary import write_results
    from ..run.matrix import RunOptions, run_matrix

    # every user error before the first cell: results.json must not fail to be written at the end
    results_dir = check(args.results, "--results", legacy=made_results)  # never over a user's files
    if args.parallel is not None and args.parallel < 1:
        raise ConfigError(f"--parallel {args.parallel}: expected a positive number of cells")
    require_native_tests(matrix)
    # unknown names: one line now, not after a build
    matrix.cells(args.profile, args.target, args.backend)
    opts = RunOptions(
        matrix=matrix,
        cache=cache,
        results_dir=results_dir,
        profile=args.profile,
        targets=args.target,
        backends=args.backend,
        topics=list(args.topic or []),
        build_only=args.build_only,
        rerun=args.rerun,
        no_mutants=args.no_mutants,
        parallel=args.parallel,
        require_backends=required_backends(matrix, args.require_backend),
    )
    # marked as the tool's before the first log
    claim(results_dir, "--results", legacy=made_results)
    results = run_matrix(opts)
    paths = write_results(results, results_dir)
    # the controls killed: where `status` may later call a passing conflict fixed upstream (a
    # no-change re-run, every proof already on record, loads nothing)
    from ..drift import proofs

    if proofs.unrecorded(cache, results):
        from ..patchset.files import load_queue

        proofs.record(cache, results, load_queue(matrix).topics)
    if os.environ.get("GITHUB_ACTIONS") == "true":  # failed and skipped cells on the run's page
        from ..ci.annotations import cell_annotations

        for line in cell_annotations(results, matrix):
            print(line)
    n = Counter(c.status for c in results.cells)
    passed, skipped, built = n[CellStatus.PASSED], n[CellStatus.SKIPPED], n[CellStatus.BUILD_ONLY]
    failed, also = (
        len(results.cells) - passed - skipped - built,
        f", {built} build-only" if built else "",
    )
    print(
        f"{passed} passed, {failed} failed, {skipped} skipped{also}: results in "
        + ", ".join(map(str, paths))
    )
    for topic in results.judged_nowhere():
        print(f"{topic}: judged nowhere in this run (its control was killed in no cell)")
    return ExitCode(results.exit_code)


def required_backends(matrix, names: list[str], env=os.environ) -> tuple[str, ...]:
    """--require-backend (each a backend of matrix.yaml), then
    $GGML_PATCH_REQUIRE_BACKEND (comma-separated). The variable describes the machine,
    not one matrix: a backend this matrix does not have is not asked of it."""
    from_env = [n.strip() for n in env.get(REQUIRE_ENV, "").split(",") if n.strip()]
    for n in from_env:
        if n not in backends.names():
            raise ConfigError(
                f"${REQUIRE_ENV}: unknown backend {n!r} (backends: {', '.join(backends.names())})"
            )
    listed = [*names, *(n for n in from_env if n in matrix.backends)]
    return tuple(dict.fromkeys(matrix.backend(n).name for n in listed))
