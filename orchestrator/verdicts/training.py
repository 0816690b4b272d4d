"""Training evidence: loss per epoch with and without the fix (native_tests/train-opt-dynamic). Pure
but the plot, made only where matplotlib is installed (the
`plot` extra: pip install 'ggml-patch[plot]')."""

from __future__ import annotations

import importlib.util
import math
import re
from pathlib import Path
from typing import Optional

from ..model.results import EpochLoss

_EPOCH = re.compile(
    r"^epoch=(?P<epoch>\d+) train_loss=(?P<train>\S+) eval_loss=(?P<eval>\S+)\s*$", re.M
)


def epochs(output: str) -> list[EpochLoss]:
    """train-opt-dynamic's output, one EpochLoss per line (nan/inf kept as floats)."""
    return [
        EpochLoss(epoch=int(m["epoch"]), train_loss=float(m["train"]), eval_loss=float(m["eval"]))
        for m in _EPOCH.finditer(output)
    ]


def diverges_as_predicted(patched: list[EpochLoss], control: list[EpochLoss]) -> Optional[bool]:
    """The bug's signature: with the fix the training loss falls; without it, it ends higher than
    it started or than the fixed run (growing effective step: overshoot or divergence)."""
    if len(patched) < 2 or len(control) < 2:
        return None
    p_first, p_last = patched[0].train_loss, patched[-1].train_loss
    c_first, c_last = control[0].train_loss, control[-1].train_loss
    fixed_learns = p_last < p_first
    bug_hurts = not math.isfinite(c_last) or c_last > c_first or c_last > 10 * p_last
    return fixed_learns and bug_hurts


def table_markdown(patched: list[EpochLoss], control: list[EpochLoss]) -> str:
    """| epoch | train (fix) | eval (fix) | train (no fix) |
    eval (no fix) | — numbers as in results.json."""
    by_epoch: dict[int, list[Optional[EpochLoss]]] = {e.epoch: [e, None] for e in patched}
    for e in control:
        by_epoch.setdefault(e.epoch, [None, None])[1] = e
    lines = [
        "| epoch | train loss, with the fix | eval loss, with the fix | "
        "train loss, without | eval loss, without |",
        "|---|---|---|---|---|",
    ]
    for n in sorted(by_epoch):
        # the program prints %.6g: :g gives back exactly what results.json holds
        cols = []
        for epoch in by_epoch[n]:
            for k in ("train_loss", "eval_loss"):
                cols.append(f"{getattr(epoch, k):g}" if epoch else "—")
        lines.append(f"| {n} | " + " | ".join(cols) + " |")
    return "\n".join(lines) + "\n"


def can_plot() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def figure(patched: list[EpochLoss], control: list[EpochLoss], title: str):
    """Both variants' train and eval loss per epoch, log scale, labelled axes."""
    # matplotlib: the optional plot extra, loaded only to draw
    import matplotlib.pyplot as plt

    plt.switch_backend("Agg")  # no display on CI machines
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for rows, label, colour in (
        (patched, "with the fix", "tab:blue"),
        (control, "without the fix", "tab:red"),
    ):
        xs = [r.epoch for r in rows]
        ax.plot(xs, [r.train_loss for r in rows], "-o", color=colour, label=f"train, {label}")
        ax.plot(
            xs, [r.eval_loss for r in rows], "--s", color=colour, alpha=0.7, label=f"eval, {label}"
        )
    ax.set_yscale("log")
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss (mean squared error, log scale)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot(patched: list[EpochLoss], control: list[EpochLoss], path: Path, title: str) -> Path:
    # matplotlib: the optional plot extra, loaded only to draw
    import matplotlib.pyplot as plt

    fig = figure(patched, control, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})  # no version stamp: same data, same bytes
    plt.close(fig)
    return path
