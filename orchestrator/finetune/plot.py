"""The training evidence's plot (matplotlib, the optional [plot] extra): train and eval loss per
epoch, both variants, one panel per case."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .record import FinetuneResults

# variant -> (colour, legend label)
_STYLES = {"patched": ("tab:blue", "with the fix"), "control": ("tab:red", "without")}


def figure(results: FinetuneResults) -> Any:
    """Rows = optimizer and lr, columns = opt_period: train (solid) and eval (dashed) loss per
    epoch."""
    try:  # a Figure of its own: no pyplot state, no display
        from matplotlib.figure import Figure  # the optional plot extra, loaded only to draw
        from matplotlib.ticker import MaxNLocator  # matplotlib: the optional plot extra
    except ImportError as e:
        raise RuntimeError(
            "the finetune plot needs matplotlib (pip install 'ggml-patch[plot]')"
        ) from e

    cases = results.cases()
    opts = list(dict.fromkeys((o, lr) for o, _, lr in cases))
    periods = sorted(dict.fromkeys(p for _, p, _ in cases))
    fig = Figure(figsize=(3.6 * len(periods), 2.8 * len(opts)), dpi=110)
    axes = fig.subplots(len(opts), len(periods), squeeze=False)
    for i, (opt, lr) in enumerate(opts):
        for j, period in enumerate(periods):
            ax = axes[i][j]
            for variant, (colour, label) in _STYLES.items():
                run = results.run(variant, opt, period, lr)
                if not run:
                    continue
                xs = [e.epoch for e in run.epochs]
                train = [e.train_loss for e in run.epochs]
                ax.plot(xs, train, "-o", ms=3, color=colour, label=f"train, {label}")
                ys = [e.eval_loss for e in run.epochs]
                ax.plot(xs, ys, "--s", ms=3, color=colour, alpha=0.7, label=f"eval, {label}")
            ys = [y for line in ax.lines for y in line.get_ydata() if math.isfinite(y) and y > 0]
            if ys and max(ys) / min(ys) > 10:
                ax.set_yscale("log")  # a diverging run would flatten the other curves
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(f"{opt} lr {lr:g}, opt_period {period}", fontsize=9)
            ax.set_xlabel("epoch", fontsize=8)
            ax.set_ylabel("cross-entropy loss", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=6)
    upstream = results.source.upstream_commit
    where = results.target + (f", upstream {upstream[:12]}" if upstream else "")
    title = "upstream llama-finetune, pre-trained tiny llama model, with and without the fix"
    fig.suptitle(f"{title}\n{where}", fontsize=9)
    fig.tight_layout()
    return fig


def plot(results: FinetuneResults, path: Path) -> Path:
    """Write finetune-loss.png (no version stamp in the metadata: same data, same bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(results).savefig(path, metadata={"Software": None})
    return path
