"""ggml-patch evidence: the training evidence. Upstream's own llama-finetune, built with the fix
(patched) and with it reverted (control), fine-tunes a pre-trained tiny llama model; held-out eval
loss per epoch, a noise floor, verdicts."""

from __future__ import annotations

import sys

from ..errors import ConfigError, ExitCode
from . import add_results, repeatable

HELP = (
    "the training evidence: upstream's llama-finetune with and without the fix, fine-tuning a "
    "pre-trained tiny llama model, per optimizer, lr and opt_period, with a measured noise floor: "
    "results/evidence/finetune.json, a plot, a section of summary.md"
)


def add_arguments(p) -> None:
    # light: finetune.results (pydantic) would cost every start-up
    from ..finetune.cases import CASE_FORMAT, DEFAULT_CASES

    target_help = "a llama.cpp-layout target of matrix.yaml (default: llama.cpp)"
    p.add_argument("--target", default="llama.cpp", metavar="NAME", help=target_help)
    add_results(
        p,
        "results folder: evidence/ goes in it, and a section of its summary.md (default: results/)",
    )
    case_help = (
        "a case to run in both variants (repeatable; opt_period 1, 2 or 4, epochs default 8); "
        "default: "
    )
    repeatable(p, "--case", case_help + " ".join(DEFAULT_CASES), CASE_FORMAT)
    rerun_help = "build and run again even when a cached result for exactly these inputs exists"
    p.add_argument("--rerun", action="store_true", help=rerun_help)


def run(args, matrix, cache) -> ExitCode:
    from ..finetune.cases import parse_cases
    from ..finetune.commands import VARIANT_LABELS
    from ..finetune.runner import llama_target, run_training_evidence
    from ..finetune.verdict import MIN_EFFECT, no_case_differs, noise_floor, unfinished, verdicts
    from ..outdir import check, claim, made_results
    from ..progress import Reporter
    from ..redact import redact

    # every user error before any work
    results_dir = check(args.results, "--results", legacy=made_results)  # never over a user's files
    check(results_dir / "evidence", "--results")  # never a folder holding a user's files
    try:
        cases = tuple(parse_cases(args.case))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    target = llama_target(matrix, args.target)
    # marked as ours before anything is written into it (summary.md's section, evidence/), so a
    # re-run finds the folder the tool made
    claim(results_dir, "--results", legacy=made_results)
    done = run_training_evidence(matrix, cache, results_dir, target, cases, args.rerun, Reporter(1))
    res = done.results
    noise = noise_floor(res)
    print(
        f"noise floor {noise.floor:.5g} ({len(noise.pairs)} same-build comparison(s)); "
        "bug visible = the unfixed run's last eval loss higher by more than the floor and by "
        f">= {MIN_EFFECT:.0%}"
    )
    for v in verdicts(res):
        print(
            f"{v.optimizer} lr {v.lr:g} opt_period {v.opt_period}, {v.epochs} epochs: {v.label} "
            f"(last eval loss without - with {v.end_diff:+.5f}, {v.end_diff_rel:+.3%}; "
            f"max abs. diff {v.max_abs_diff:.5f}; "
            f"epochs better/worse without {v.better_epochs}/{v.worse_epochs})"
        )
    how = f"cached result, key {res.cache_key[:12]}" if done.cached else "built and run"
    files = ", ".join(str(p) for p in done.files)
    print(redact(f"evidence: {how} in {done.seconds:.2f} s; {done.plot_note}; results in {files}"))
    failed = unfinished(res)
    if failed:
        runs = "; ".join(
            f"{VARIANT_LABELS[r.variant]} {r.optimizer} lr {r.lr:g} "
            f"opt_period {r.opt_period}: {r.outcome} (exit {r.exit_code})"
            for r in failed
        )
        logs = results_dir / "evidence" / "logs"
        print(redact(f"ggml-patch: evidence: {runs} (logs in {logs})"), file=sys.stderr)
        return ExitCode.EXPECTATIONS_NOT_MET
    if no_case_differs(res):
        print(
            "ggml-patch: evidence: the curves with and without the fix do not differ beyond the "
            "noise floor in any case: reverting the fix changed nothing measurable on llama.cpp's "
            "training path",
            file=sys.stderr,
        )
        return ExitCode.CONTROL_NOT_KILLED
    return ExitCode.OK
