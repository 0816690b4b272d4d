"""llama-finetune's output read: ggml_opt_epoch_callback_progress_bar on stderr, redrawn with \\r;
the line that reaches data=N/N is an epoch's final (train, then val), its loss the mean over the
epoch. Pure."""

from __future__ import annotations

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


def parse_output(text: str) -> ProgramOutput:
    """llama-finetune's output -> one Epoch per (train, val) pair of final progress lines, and its
    warnings."""
    epochs: list[Epoch] = []
    train: Optional[tuple[float, float]] = None
    warnings: list[str] = []
    for seg in re.split(r"[\r\n]+", text):
        seg = seg.strip()
        m = _BAR.match(seg)
        if m is None:
            seg = _LOG_TIME.sub("", seg)  # common's log prefix: a timestamp differs between runs
            if seg and WARNING.search(seg) and len(warnings) < 20 and seg[:300] not in warnings:
                warnings.append(seg[:300])
            continue
        if m["i"] != m["n"]:
            continue
        loss, acc = number(m["loss"]), number(m["acc"]) / 100
        if m["kind"] == "train":
            train = (loss, acc)
        elif train is not None:
            epoch = Epoch(
                epoch=len(epochs) + 1,
                train_loss=train[0],
                eval_loss=loss,
                train_acc=train[1],
                eval_acc=acc,
            )
            epochs.append(epoch)
            train = None
    return ProgramOutput(epochs=tuple(epochs), warnings=tuple(warnings))
