"""llama-finetune's output read: ggml_opt_epoch_callback_progress_bar on stderr, redrawn with \\r;
the line that reaches data=N/N is an epoch's final (train, then val), its loss the mean over the
epoch. Each val line is a running mean over the eval windows so far, so the mean over the windows
after the first (the held-out loss: the first eval window shares its first half with the last
training window, finetune.cpp's windows being n_ctx long every n_ctx / 2) is
(N * mean_N - k * mean_k) / (N - k), k the first window's points. Pure."""

from __future__ import annotations

import math
import re
from typing import Optional

from pydantic import ConfigDict

from ..records import Record
from .cases import number
from .record import Epoch

_BAR = re.compile(
    r"^(?P<kind>train|val):\s*\[[^\]]*\]\s*data=(?P<i>\d+)/(?P<n>\d+)"
    r"\s+loss=(?P<loss>[^±\s]+)±\S+"
    r"\s+acc=(?P<acc>[^±\s]+)±"
)
WARNING = re.compile(r"(?i)\bwarn|will not receive gradients")
_LOG_TIME = re.compile(r"^\d+\.\d+\.\d+\.\d+\s+")


class ProgramOutput(Record):
    """What a run printed: its epochs, and libllama's and finetune.cpp's warnings."""

    model_config = ConfigDict(frozen=True)

    epochs: tuple[Epoch, ...]
    warnings: tuple[str, ...]  # shown in the record

    def complete(self, epochs: int) -> bool:
        return len(self.epochs) == epochs


def held_out(points: list[tuple[int, float, float]], skip: int) -> tuple[float, float, int]:
    """(loss, accuracy, windows) over the eval points after the first `skip`, from the running
    means [(data index, mean loss, mean accuracy)] the bar printed, the last being the epoch's
    final; nan and 0 windows where there are no more points than `skip` (pure)."""
    n = len(points)
    if n <= skip or skip < 1:
        return math.nan, math.nan, 0
    _, loss_n, acc_n = points[-1]
    _, loss_k, acc_k = points[skip - 1]
    loss = (n * loss_n - skip * loss_k) / (n - skip)
    acc = (n * acc_n - skip * acc_k) / (n - skip)
    return round(loss, 5), round(acc, 4), n - skip


def parse_output(text: str, first_window_points: int = 1) -> ProgramOutput:
    """llama-finetune's output -> one Epoch per (train, val) pair of final progress lines, and its
    warnings. first_window_points: how many val points the first eval window prints (the
    held-out loss leaves them out)."""
    epochs: list[Epoch] = []
    train: Optional[tuple[float, float, int]] = None
    val_points: list[tuple[int, float, float]] = []
    warnings: list[str] = []
    for seg in re.split(r"[\r\n]+", text):
        seg = seg.strip()
        m = _BAR.match(seg)
        if m is None:
            seg = _LOG_TIME.sub("", seg)  # common's log prefix: a timestamp differs between runs
            if seg and WARNING.search(seg) and len(warnings) < 20 and seg[:300] not in warnings:
                warnings.append(seg[:300])
            continue
        loss, acc = number(m["loss"]), number(m["acc"]) / 100
        if m["kind"] == "val" and train is not None:
            val_points.append((int(m["i"]), loss, acc))
        if m["i"] != m["n"]:
            continue
        if m["kind"] == "train":
            train = (loss, acc, int(m["n"]))
            val_points = []
        elif train is not None:
            h_loss, h_acc, h_windows = held_out(val_points, first_window_points)
            epoch = Epoch(
                epoch=len(epochs) + 1,
                train_loss=train[0],
                eval_loss=loss,
                train_acc=train[1],
                eval_acc=acc,
                train_points=train[2],
                eval_points=int(m["n"]),
                heldout_loss=h_loss,
                heldout_acc=h_acc,
                heldout_windows=h_windows,
            )
            epochs.append(epoch)
            train = None
    return ProgramOutput(epochs=tuple(epochs), warnings=tuple(warnings))
