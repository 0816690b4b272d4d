"""The training evidence's plot (matplotlib, the optional [plot] extra): held-out eval loss per
epoch, both variants, one panel per case."""

from __future__ import annotations

import math
import textwrap
from pathlib import Path
from typing import Any

from .record import FinetuneResults
from .sweep import Sweep

SWEEP_PLOT = "finetune-sweep.png"

# variant -> (colour, legend label)
_STYLES = {"patched": ("tab:blue", "with the fix"), "control": ("tab:red", "without the fix")}


def _matplotlib() -> tuple[Any, Any]:
    try:  # a Figure of its own: no pyplot state, no display
        from matplotlib.figure import Figure  # the optional plot extra, loaded only to draw
        from matplotlib.ticker import MaxNLocator  # matplotlib: the optional plot extra
    except ImportError as e:
        raise RuntimeError(
            "the finetune plot needs matplotlib (pip install 'ggml-patch[plot]')"
        ) from e
    return Figure, MaxNLocator


def _title(fig: Any, width_in: float, *lines: str) -> None:
    """The figure's title, each line wrapped to the figure's width (never cut at the edges)."""
    chars = max(30, int(width_in * 13))  # about 13 characters per inch at 9 pt
    fig.suptitle("\n".join(textwrap.fill(line, chars) for line in lines), fontsize=9)


def figure(results: FinetuneResults) -> Any:
    """One panel per case (no empty panel): the held-out eval loss per epoch of both variants,
    each seed's run a thin line, the mean over seeds a thick one."""
    Figure, MaxNLocator = _matplotlib()
    cases = [c for c in results.cases() if results.seed_runs("patched", c)]
    cases = cases or results.cases()
    width = 4.2 * max(1, len(cases))
    fig = Figure(figsize=(width, 3.2 + 0.3 * (width < 6)), dpi=110)
    axes = fig.subplots(1, max(1, len(cases)), squeeze=False)[0]
    for ax, (opt, period, lr) in zip(axes, cases, strict=False):
        for variant, (colour, label) in _STYLES.items():
            runs = results.seed_runs(variant, (opt, period, lr))
            for run in runs:
                xs = [e.epoch for e in run.epochs]
                ys = [e.held_out for e in run.epochs]
                ax.plot(xs, ys, "-", lw=0.7, color=colour, alpha=0.45)
            n = min((len(r.epochs) for r in runs), default=0)
            if n:
                mean = [sum(r.epochs[k].held_out for r in runs) / len(runs) for k in range(n)]
                seeds = f", mean of {len(runs)} seeds" if len(runs) > 1 else ""
                xs = list(range(1, n + 1))
                ax.plot(xs, mean, "-o", ms=3, lw=1.6, color=colour, label=label + seeds)
        ys = [y for line in ax.lines for y in line.get_ydata() if math.isfinite(y) and y > 0]
        if ys and max(ys) / min(ys) > 10:
            ax.set_yscale("log")  # a diverging run would flatten the other curves
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{opt} lr {lr:g}, opt_period {period}", fontsize=9)
        ax.set_xlabel("epoch", fontsize=8)
        ax.set_ylabel("held-out eval loss", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6)
    upstream = results.source.upstream_commit
    where = results.target + (f", upstream {upstream[:12]}" if upstream else "")
    real = results.model.real
    model = real.name if real else "pre-trained tiny llama models"
    title = f"upstream llama-finetune on {model}, with and without the fix"
    _title(fig, width, title, where)
    fig.tight_layout()
    return fig


def sweep_figure(s: Sweep, where: str) -> Any:
    """The final held-out eval loss against the learning rate (log), one line per build (mean
    over seeds; each seed a dot), the best rate of each build ringed."""
    Figure, _ = _matplotlib()
    fig = Figure(figsize=(7.0, 4.2), dpi=110)
    ax = fig.subplots(1, 1)
    for variant, points in (("patched", s.patched), ("control", s.control)):
        colour, label = _STYLES[variant]
        rates = [q.lr for q in points]
        ax.plot(rates, [q.final for q in points], "-o", ms=4, lw=1.6, color=colour, label=label)
        for q in points:
            ax.plot([q.lr] * len(q.per_seed), q.per_seed, ".", ms=3, color=colour, alpha=0.5)
        best = min(points, key=lambda q: q.final)
        ax.plot([best.lr], [best.final], "o", ms=11, mfc="none", color=colour)
    ax.set_xscale("log")
    ax.set_xlabel("learning rate", fontsize=8)
    ax.set_ylabel(f"held-out eval loss after epoch {s.epochs}", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    k = f"; k = {s.k:.2f}" if s.k is not None else ""
    title = f"{s.optimizer}, opt_period {s.opt_period}, {s.epochs} epochs, "
    title += f"{s.seeds} seed(s): best rate per build ringed{k}"
    _title(fig, 7.0, "upstream llama-finetune across learning rates", title, where)
    fig.tight_layout()
    return fig


def plot_sweep(s: Sweep, where: str, path: Path) -> Path:
    """Write finetune-sweep.png (no version stamp in the metadata)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_figure(s, where).savefig(path, metadata={"Software": None})
    return path


def plot(results: FinetuneResults, path: Path) -> Path:
    """Write finetune-loss.png (no version stamp in the metadata: same data, same bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(results).savefig(path, metadata={"Software": None})
    return path
