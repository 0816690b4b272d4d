"""ggml-patch evidence: fine-tune a tiny llama model through llama.cpp's own training path
(llama_opt_init / llama_opt_epoch) with the fix and with the fix reverted; loss per epoch, verdicts."""

from __future__ import annotations

import sys

from ..errors import ConfigError, ExitCode

HELP = (
    "fine-tune a tiny llama model with llama_opt_epoch, with and without the fix, per optimizer and "
    "opt_period: results/evidence/finetune.json, a plot, a section of summary.md"
)


def add_arguments(p) -> None:
    from ..finetune import results as ft

    p.add_argument(
        "--target",
        default="llama.cpp",
        metavar="NAME",
        help="a llama.cpp-layout target of matrix.yaml (default: llama.cpp)",
    )
    p.add_argument(
        "--results",
        default="results",
        metavar="DIR",
        help="results folder: evidence/ goes in it, and a section of its summary.md (default: results/)",
    )
    p.add_argument(
        "--case",
        action="append",
        default=[],
        metavar=ft.CASE_FORMAT,
        help="a case to run in both variants (repeatable; opt_period 1 or 2, epochs default 6); "
        f"default: {' '.join(ft.DEFAULT_CASES)}",
    )
    p.add_argument(
        "--rerun",
        action="store_true",
        help="build and run again even when a cached result for exactly these inputs exists",
    )


def run(args, matrix, cache) -> ExitCode:
    from ..finetune import results as ft
    from ..finetune.runner import EvidenceOptions, llama_target, run_evidence
    from ..outdir import check, writable_dir
    from ..progress import Reporter
    from ..redact import redact

    # every user error before any work
    results_dir = writable_dir(args.results, "--results")
    check(results_dir / "evidence", "--results")  # never a folder holding a user's files
    try:
        cases = tuple(ft.parse_cases(args.case))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    llama_target(matrix, args.target)
    done = run_evidence(EvidenceOptions(matrix, cache, results_dir, args.target, cases, args.rerun), Reporter(1))
    res = done.results
    for v in ft.verdicts(res):
        rises = ", ".join(map(str, v.rises_where_fixed_falls))
        detail = (
            [f"max rel. diff {v.max_rel_diff:.3g}"]
            + ([f"eval rises without the fix in epoch(s) {rises}"] if rises else [])
            + (["oscillates"] if v.oscillates else [])
            + (["diverged"] if v.diverged else [])
        )
        print(
            f"{v.optimizer} lr {v.lr:g} opt_period {v.opt_period}, {v.epochs} epochs: {v.label} ({', '.join(detail)})"
        )
    how = f"cached result, key {res.cache_key[:12]}" if done.cached else "built and run"
    print(
        redact(
            f"evidence: {how} in {done.seconds:.2f} s; {done.plot_note}; results in "
            + ", ".join(str(p) for p in done.files)
        )
    )
    failed = ft.unfinished(res)
    if failed:
        print(
            redact(
                "ggml-patch: evidence: "
                + "; ".join(
                    f"{r.variant.replace('_', ' ')} {r.optimizer} lr {r.lr:g} opt_period {r.opt_period}: {r.outcome} "
                    f"(exit {r.exit_code})"
                    for r in failed
                )
                + f" (logs in {results_dir / 'evidence' / 'logs'})"
            ),
            file=sys.stderr,
        )
        return ExitCode.EXPECTATIONS_NOT_MET
    if ft.no_case_differs(res):
        print(
            "ggml-patch: evidence: the curves with and without the fix do not differ in any case: "
            "reverting the fix changed nothing on llama.cpp's training path",
            file=sys.stderr,
        )
        return ExitCode.CONTROL_NOT_KILLED
    return ExitCode.OK
