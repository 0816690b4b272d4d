"""The training evidence in Markdown: the verdict and loss tables, the provenance rows, the section
of summary.md and the lines of PR_BODY.md / ISSUE.md (with the commands that reproduce it). Pure."""

from __future__ import annotations

import math
from typing import Callable, Optional

from .cases import N_CTX, Case
from .commands import (
    BINARY,
    BUILD_COMMANDS,
    PRETRAINED,
    PROGRAM,
    PROGRAM_SOURCE,
    THREADS,
    TREE,
    VAL_SPLIT,
    VARIANT_LABELS,
    command,
    pretrain_command,
)
from .record import Epoch, FinetuneResults
from .verdict import MIN_EFFECT, PRINT_RESOLUTION, noise_floor, verdicts

SECTION_TITLE = "Fine-tuning evidence: upstream's llama-finetune with and without the fix"
Cell = Callable[[str], str]  # one table cell's text made safe


def _cells(e: Optional[Epoch]) -> str:
    """An epoch's train and eval loss as two table cells, as llama-finetune prints them (5
    decimals)."""
    if not e:
        return "— | —"
    losses = (e.train_loss, e.eval_loss)
    return " | ".join(f"{x:.5f}" if math.isfinite(x) else str(x) for x in losses)


def table_markdown(results: FinetuneResults) -> str:
    """A verdict table, then per case: epoch | train/eval loss with the fix | train/eval
    without."""
    noise = noise_floor(results)
    measured = "none measured" if noise.measured is None else f"{noise.measured:.5g}"
    lines = [
        f"Noise floor {noise.floor:.5g} (largest same-build difference measured: "
        f"{measured}; print resolution "
        f"{PRINT_RESOLUTION:g}); minimum effect {MIN_EFFECT:.0%} of the fixed run's last eval "
        'loss. "bug visible" = the unfixed run\'s last eval loss is higher by more than the '
        "floor and by at least the minimum effect.",
        "",
        "| optimizer | lr | opt_period | epochs | verdict | last eval loss, without - with | "
        "relative | max abs. diff | epochs better / worse without (eval, beyond the floor) | "
        "non-finite loss without |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts(results):
        lines.append(
            f"| {v.optimizer} | {v.lr:g} | {v.opt_period} | {v.epochs} | **{v.label}** | "
            f"{v.end_diff:+.5f} | {v.end_diff_rel:+.3%} | {v.max_abs_diff:.5f} | "
            f"{v.better_epochs} / {v.worse_epochs} | {'yes' if v.diverged else 'no'} |"
        )
    if any(not r.primary for r in results.runs):
        lines += ["", "Noise-floor runs (same build and case, another thread count or run):", ""]
        lines += [f"- {p}" for p in noise.pairs] or ["- none finished"]
    for opt, period, lr in results.cases():
        patched = results.run("patched", opt, period, lr)
        control = results.run("control", opt, period, lr)
        first = patched or control
        if first is None:  # a case exists because one of its runs does
            continue
        fe = {e.epoch: e for e in patched.epochs} if patched else {}
        ue = {e.epoch: e for e in control.epochs} if control else {}
        lines += [
            "",
            f"**{opt}, lr {lr:g}, opt_period {period}** (n_batch {first.n_batch}, "
            f"n_ubatch {first.n_ubatch})",
            "",
            "| epoch | train loss, with the fix | eval loss, with the fix | train loss, without "
            "| eval loss, without |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {n} | {_cells(fe.get(n))} | {_cells(ue.get(n))} |" for n in sorted(fe | ue)]
    return "\n".join(lines) + "\n"


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


def provenance_rows(results: FinetuneResults) -> dict[str, str]:
    """what -> value: where the numbers come from (data only)."""
    m, d = results.model, results.data
    pre = m.pretrain
    dims = m.dims.model_dump() if m.dims else {}
    shown = ("n_layer", "n_embd", "n_head", "n_ff", "n_ctx")
    model = ", ".join(f"{k} {dims[k]}" for k in shown if k in dims)
    runs = [r for r in results.runs if r.cpu_seconds is not None]
    cpu = sum(r.cpu_seconds or 0 for r in runs)
    curve = (pre.eval_loss if pre else None) or []
    learned = ""
    if curve:
        learned = (
            f", eval loss {curve[0]:.4f} after epoch 1, {curve[-1]:.4f} after epoch {len(curve)}"
        )
    warnings = sorted({w for r in results.runs for w in r.warnings})
    upstream, series = results.source.upstream_commit, results.series.sha256
    description = results.source.description or ""
    program = results.program
    pre_files = " + ".join((pre.files if pre else None) or [])
    pre_how = (
        f"{_or_dash(pre.optimizer if pre else None)} lr {_or_dash(pre.lr if pre else None)}, "
        f"{_or_dash(pre.epochs if pre else None)} epochs"
    )
    epochs = sum(len(r.epochs) for r in runs)
    return {
        "target": f"{results.target}: {description}".rstrip(": "),
        "base commit": f"`{results.base}`",
        "upstream commit": f"`{upstream}`" if upstream else "—",
        "series sha256": f"`{series}`" if series else "—",
        "program": f"upstream's `{PROGRAM}` ({program.source or PROGRAM_SOURCE} of the tree, "
        f"unmodified, sha256 `{str(program.sha256 or '—')[:16]}`), CPU, {THREADS} threads, "
        f"-c = -b = {N_CTX}, -ub = {N_CTX} / opt_period, val-split {VAL_SPLIT:g}, wd 0",
        "fix in each binary": _fix_checks(results) or "not checked",
        "model": f"tiny llama PRE-TRAINED here, sha256 `{_or_dash(m.sha256)}`: random F32 "
        f"weights (seed {_or_dash(m.seed)}, {model}, n_vocab {_or_dash(m.n_vocab)}, "
        f"{_or_dash(m.n_params)} parameters, sha256 `{_or_dash(m.random_sha256)}`) trained with "
        f"the fixed build on {pre_files} ({pre_how}{learned}). Upstream keeps token embeddings "
        "frozen (tok_embd is never a parameter), so most of what trains is the output matrix.",
        "fine-tuning data": f"{' + '.join(d.files or [])} of the tree (not the pre-training "
        f"text), sha256 `{_or_dash(d.sha256)}`; eval = llama-finetune's own validation split "
        f"(its last {VAL_SPLIT:.0%} of datapoints, held out of training)",
        "warnings printed": "; ".join(warnings) if warnings else "none",
        "CPU seconds per epoch": f"{cpu / max(1, epochs):.1f}" if runs else "—",
    }


def _or_dash(value: object) -> str:
    return "—" if value is None else str(value)


def _tables(results: FinetuneResults, cell: Cell = str) -> list[str]:
    """Provenance (what -> value, each cell's text through `cell`), then the verdicts and the loss
    tables."""
    rows = [f"| {cell(k)} | {cell(v)} |" for k, v in provenance_rows(results).items()]
    tables = table_markdown(results).rstrip("\n").split("\n")
    return ["| | |", "|---|---|", *rows, "", *tables]


def summary_section(results: FinetuneResults, plot_note: str) -> str:
    """The section of summary.md: provenance, then the verdicts and the loss tables."""
    return "\n".join([f"## {SECTION_TITLE}", "", plot_note, "", *_tables(results)]) + "\n"


def pr_lines(results: Optional[FinetuneResults], level: str, cell: Cell = str) -> list[str]:
    """The training evidence as data for PR_BODY.md / ISSUE.md: provenance, thresholds, verdicts
    and losses, and the commands that reproduce it. `cell` makes one table cell's text safe."""
    if results is None or not results.runs:
        return []
    title = (
        f"{level} Fine-tuning with upstream's llama-finetune: held-out eval loss per epoch with "
        "and without the fix"
    )
    out = [title, "", *_tables(results, cell)]
    # each command as someone reproduces it: paths relative, the same for both variants
    data = [f"{TREE}/{f}" for f in results.data.files or []]
    pre = results.model.pretrain
    commands = []
    for r in results.runs:
        if r.primary:
            case = Case(r.optimizer, r.lr, r.opt_period, len(r.epochs))
            argv = command(BINARY, PRETRAINED, data, case, r.threads, "finetuned.gguf")
            commands.append(" ".join(argv))
    seed, vocab = results.model.seed, results.model.vocab_file or ""
    random = f"tiny-llama-{seed}.gguf"
    pre_data = [f"{TREE}/{f}" for f in (pre.files if pre else None) or []]
    pretrain = pretrain_command(BINARY, random, pre_data, PRETRAINED)
    tiny = f"python -m orchestrator.finetune.tiny_model {TREE}/{vocab} {random} --seed {seed}"
    return out + [
        "",
        "```sh",
        *BUILD_COMMANDS,
        tiny,
        " ".join(pretrain),
        *dict.fromkeys(commands),
        "```",
    ]
