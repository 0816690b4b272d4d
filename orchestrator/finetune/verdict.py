"""The noise floor and the verdict rule of the training evidence, and finetune.json's text with
them computed. Pure.

Losses are llama-finetune's mean cross-entropy per epoch, printed with 5 decimals
(PRINT_RESOLUTION). The noise floor is the largest difference in any epoch's train or eval loss
between runs of the same build and case that differ only in run (repeat) or thread count, never
below the print resolution. A difference between the variants is:
- "bug visible": the control's last eval loss is higher than the patched one's by more than the
  floor AND by at least MIN_EFFECT of the patched one (or it is not finite while the patched one
  is);
- "differs, no harm shown": some epoch differs by more than the floor, but not that;
- "no difference": every epoch within the floor;
- "undecided": the runs have no epoch in common.
"""

from __future__ import annotations

import json
import math
from typing import Optional, Sequence

from pydantic import ConfigDict

from ..records import Record
from .record import Epoch, FinetuneResults, Run

PRINT_RESOLUTION = 1e-5
MIN_EFFECT = 0.01  # relative to the patched run's last eval loss: 1 %

THRESHOLDS = {
    "print_resolution": PRINT_RESOLUTION,
    "min_effect_rel": MIN_EFFECT,
    "rule": "bug visible: unfixed last eval loss - fixed > noise floor "
    "and >= min_effect_rel x fixed",
}


class Noise(Record):
    """The noise floor and what it was measured from."""

    model_config = ConfigDict(frozen=True)

    floor: float  # absolute, in loss units
    measured: Optional[float]  # the largest same-build difference seen (None: no pair measured)
    # which runs were compared, e.g. "patched adamw lr 1e-05 opt_period 1: t2 vs t1: 0.0001"
    pairs: tuple[str, ...]

    def kept_nulls(self) -> frozenset[str]:
        return frozenset({"measured"})  # finetune.json says "none measured" as null


class FinetuneVerdict(Record):
    """One case's verdict: the patched run against the control, on the epochs both reported."""

    model_config = ConfigDict(frozen=True)

    optimizer: str
    opt_period: int
    lr: float
    epochs: int
    max_abs_diff: float  # largest |control - patched| of any epoch's train or eval loss
    end_diff: float  # control - patched last eval loss (positive: the control ends worse)
    end_diff_rel: float  # end_diff / patched last eval loss
    floor: float
    # epochs where the control's eval loss is lower than the patched one's by more than the floor
    better_epochs: int
    worse_epochs: int  # ... higher
    diverged: bool  # the control's loss became nan or inf (the patched run's did not)
    label: str


def _max_abs_diff(a: Sequence[Epoch], b: Sequence[Epoch]) -> float:
    out = 0.0
    for x, y in zip(a, b, strict=False):
        for u, v in ((x.train_loss, y.train_loss), (x.eval_loss, y.eval_loss)):
            if math.isfinite(u) and math.isfinite(v):
                d = abs(u - v)
            else:
                d = 0.0 if u == v else math.inf
            out = max(out, d)
    return out


def noise_floor(results: FinetuneResults) -> Noise:
    """The floor from every pair (primary run, other run of the same variant and case)."""
    measured: Optional[float] = None
    pairs = []
    for r in results.runs:
        p = None if r.primary or r.outcome != "ok" else results.run(r.variant, *r.case)
        if p is None or p.outcome != "ok":
            continue
        d = _max_abs_diff(p.epochs, r.epochs)
        measured = d if measured is None else max(measured, d)
        case = f"{r.variant} {r.optimizer} lr {r.lr:g} opt_period {r.opt_period}"
        repeat = f" repeat {r.repeat}" if r.repeat else ""
        pairs.append(f"{case}: t{p.threads} vs t{r.threads}{repeat}: {d:.5g}")
    floor = max(PRINT_RESOLUTION, measured or 0.0)
    return Noise(floor=floor, measured=measured, pairs=tuple(pairs))


def finetune_verdict(
    optimizer: str,
    opt_period: int,
    lr: float,
    patched: Sequence[Epoch],
    control: Sequence[Epoch],
    floor: float,
) -> FinetuneVerdict:
    """The rule above, on the epochs both runs reported (pure)."""
    n = min(len(patched), len(control))
    f, u = list(patched[:n]), list(control[:n])
    max_diff = _max_abs_diff(f, u)
    finite = [math.isfinite(e.train_loss) and math.isfinite(e.eval_loss) for e in f + u]
    diverged = all(finite[:n]) and not all(finite[n:])  # the control only
    end, end_rel = 0.0, 0.0
    if n:
        fe, ue = f[-1].eval_loss, u[-1].eval_loss
        if math.isfinite(fe) and math.isfinite(ue):
            end = ue - fe
        elif math.isfinite(fe):  # the control's loss not finite: infinitely worse
            end = math.inf
        else:
            end = 0.0 if fe == ue else -math.inf
        if math.isfinite(fe) and fe != 0:
            end_rel = end / abs(fe)
        else:
            end_rel = math.inf if end > 0 else 0.0
    better = sum(1 for a, b in zip(f, u, strict=True) if b.eval_loss < a.eval_loss - floor)
    worse = sum(1 for a, b in zip(f, u, strict=True) if not b.eval_loss <= a.eval_loss + floor)
    if n == 0:
        label = "undecided"
    elif end > floor and end_rel >= MIN_EFFECT:
        label = "bug visible"
    elif max_diff > floor:
        label = "differs, no harm shown"
    else:
        label = "no difference"
    return FinetuneVerdict(
        optimizer=optimizer,
        opt_period=opt_period,
        lr=lr,
        epochs=n,
        max_abs_diff=max_diff,
        end_diff=end,
        end_diff_rel=end_rel,
        floor=floor,
        better_epochs=better,
        worse_epochs=worse,
        diverged=diverged,
        label=label,
    )


def unfinished(results: FinetuneResults) -> list[Run]:
    return [r for r in results.runs if r.outcome != "ok"]


def no_case_differs(results: FinetuneResults) -> bool:
    """Reverting the fix changed no case's curves (the evidence's negative control survived)."""
    found = verdicts(results)
    return bool(found) and all(v.label == "no difference" for v in found)


def verdicts(results: FinetuneResults) -> list[FinetuneVerdict]:
    """One verdict per case that has both variants, against the results' own noise floor."""
    floor = noise_floor(results).floor
    out = []
    for case in results.cases():
        patched, control = results.run("patched", *case), results.run("control", *case)
        if patched and control:
            out.append(finetune_verdict(*case, patched.epochs, control.epochs, floor))
    return out


def finetune_json(results: FinetuneResults) -> str:
    """finetune.json's text: the record, with the noise floor, thresholds and verdicts (a reader
    recomputes them)."""
    plain = results.to_json()
    plain["noise"] = noise_floor(results).model_dump()
    plain["thresholds"] = THRESHOLDS
    plain["verdicts"] = [v.model_dump() for v in verdicts(results)]
    return json.dumps(plain, indent=2, sort_keys=True, allow_nan=True) + "\n"
