"""The determinism floor, the seed spread and the verdict rule of the training evidence, and
finetune.json's text with them computed. Pure.

Losses are llama-finetune's mean cross-entropy per epoch, printed with 5 decimals
(PRINT_RESOLUTION); the eval loss compared is the held-out one (Epoch.held_out: the eval windows
that share no token with training). The determinism floor is the largest difference in any
epoch's train or eval loss between runs of the same build, case and seed that differ only in run
(repeat) or thread count, never below the print resolution: it measures determinism, not
variation across models. The effect of a case is control - patched last held-out eval loss, per
seed; its seed spread is max - min over the seeds (0 with one seed). A difference is:
- "bug visible": the mean effect is above the floor, above the seed spread and at least
  MIN_EFFECT of the patched loss (or the control's loss is not finite while the patched one is);
- "control lower": the same with the sign reversed (the unfixed build ends lower);
- "differs, no clear effect": some epoch differs by more than the floor, but the mean
  effect does not exceed the floor, the spread and MIN_EFFECT;
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
    "rule": "bug visible: mean over seeds of (unfixed - fixed last held-out eval loss) > "
    "determinism floor, > seed spread (max - min over seeds) and >= min_effect_rel x fixed; "
    "control lower: the same with the sign reversed",
}


class Determinism(Record):
    """The determinism floor and what it was measured from."""

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
    # control - patched last held-out eval loss, mean over seeds (positive: the control ends worse)
    end_diff: float
    end_diff_rel: float  # end_diff / patched last held-out eval loss (mean over seeds)
    floor: float
    seeds: int = 1
    # the relative effect per seed, and its spread (max - min; 0 with one seed)
    effects_rel: tuple[float, ...] = ()
    spread: float = 0.0  # of end_diff over the seeds, in loss units
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


def determinism_floor(results: FinetuneResults) -> Determinism:
    """The floor from every pair (primary run, other run of the same variant, case and seed)."""
    measured: Optional[float] = None
    pairs = []
    for r in results.runs:
        other = r.primary or r.outcome != "ok"
        p = None if other else results.run(r.variant, *r.case, seed=r.seed)
        if p is None or p.outcome != "ok":
            continue
        d = _max_abs_diff(p.epochs, r.epochs)
        measured = d if measured is None else max(measured, d)
        case = f"{r.variant} {r.optimizer} lr {r.lr:g} opt_period {r.opt_period}"
        repeat = f" repeat {r.repeat}" if r.repeat else ""
        pairs.append(f"{case}: t{p.threads} vs t{r.threads}{repeat}: {d:.5g}")
    floor = max(PRINT_RESOLUTION, measured or 0.0)
    return Determinism(floor=floor, measured=measured, pairs=tuple(pairs))


def _end_diff(patched: Epoch, control: Epoch) -> tuple[float, float]:
    """control - patched held-out eval loss at one epoch, absolute and relative to the patched
    one (a non-finite control loss while the patched one is finite: infinitely worse)."""
    fe, ue = patched.held_out, control.held_out
    if math.isfinite(fe) and math.isfinite(ue):
        end = ue - fe
    elif math.isfinite(fe):
        end = math.inf
    else:
        end = 0.0 if fe == ue else -math.inf
    if math.isfinite(fe) and fe != 0:
        return end, end / abs(fe)
    return end, math.inf if end > 0 else 0.0


def mean_curve(runs: Sequence[Sequence[Epoch]]) -> list[float]:
    """The held-out eval loss per epoch, mean over the runs (seeds), on the epochs all have."""
    n = min((len(r) for r in runs), default=0)
    return [sum(r[k].held_out for r in runs) / len(runs) for k in range(n)]


def spread_curve(runs: Sequence[Sequence[Epoch]]) -> list[float]:
    """max - min of the held-out eval loss per epoch over the runs (seeds); 0 with one run."""
    n = min((len(r) for r in runs), default=0)
    out = []
    for k in range(n):
        values = [r[k].held_out for r in runs]
        out.append(max(values) - min(values))
    return out


def turns_up(curve: Sequence[float], margins: Sequence[float]) -> Optional[int]:
    """The first epoch k >= 2 (1-based) whose loss exceeds the minimum of the epochs before it by
    more than margins[k - 1]; None when it never does (predictions.yaml's rule)."""
    for k in range(1, len(curve)):
        if curve[k] > min(curve[:k]) + margins[k]:
            return k + 1
    return None


def rising_epochs(curve: Sequence[float], margins: Sequence[float]) -> list[int]:
    """The epochs k >= 2 (1-based) whose loss is above epoch k - 1's by more than margins[k - 1]."""
    return [k + 1 for k in range(1, len(curve)) if curve[k] > curve[k - 1] + margins[k]]


def case_verdict(
    optimizer: str,
    opt_period: int,
    lr: float,
    pairs: Sequence[tuple[Sequence[Epoch], Sequence[Epoch]]],
    floor: float,
) -> FinetuneVerdict:
    """The rule above on (patched, control) epochs per seed, on the epochs all runs reported."""
    n = min((min(len(p), len(c)) for p, c in pairs), default=0)
    patched = [list(p[:n]) for p, _ in pairs]
    control = [list(c[:n]) for _, c in pairs]
    max_diff = max((_max_abs_diff(f, u) for f, u in zip(patched, control, strict=True)), default=0)
    diverged = False
    for f, u in zip(patched, control, strict=True):
        finite = [math.isfinite(e.train_loss) and math.isfinite(e.eval_loss) for e in f + u]
        diverged = diverged or (all(finite[:n]) and not all(finite[n:]))  # the control only
    ends: list[float] = []
    rels: list[float] = []
    if n:
        for f, u in zip(patched, control, strict=True):
            end_seed, rel_seed = _end_diff(f[-1], u[-1])
            ends.append(end_seed)
            rels.append(rel_seed)
    end = sum(ends) / len(ends) if ends else 0.0
    end_rel = sum(rels) / len(rels) if rels else 0.0
    finite_ends = [e for e in ends if math.isfinite(e)]
    spread = max(finite_ends) - min(finite_ends) if len(finite_ends) == len(ends) and ends else 0.0
    f_mean, u_mean = mean_curve(patched), mean_curve(control)
    spreads = zip(spread_curve(patched), spread_curve(control), strict=True)
    margin = [max(floor, a, b) for a, b in spreads]
    pairs_mean = zip(f_mean, u_mean, margin, strict=True)
    better = sum(1 for a, b, m in pairs_mean if b < a - m)
    pairs_mean = zip(f_mean, u_mean, margin, strict=True)
    worse = sum(1 for a, b, m in pairs_mean if not b <= a + m)
    beyond = abs(end) > floor and abs(end) > spread and abs(end_rel) >= MIN_EFFECT
    if n == 0:
        label = "undecided"
    elif beyond and end > 0:
        label = "bug visible"
    elif beyond:
        label = "control lower"
    elif max_diff > floor:
        label = "differs, no clear effect"
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
        seeds=len(pairs),
        effects_rel=tuple(rels),
        spread=spread,
        better_epochs=better,
        worse_epochs=worse,
        diverged=diverged,
        label=label,
    )


def finetune_verdict(
    optimizer: str,
    opt_period: int,
    lr: float,
    patched: Sequence[Epoch],
    control: Sequence[Epoch],
    floor: float,
) -> FinetuneVerdict:
    """The rule above for one seed (pure)."""
    return case_verdict(optimizer, opt_period, lr, [(patched, control)], floor)


class VariantSummary(Record):
    """One variant of one case from one seed: where its held-out eval loss is lowest, the epochs
    where it rises (beyond the determinism floor), where it ends."""

    model_config = ConfigDict(frozen=True)

    case: str
    variant: str
    seed: int
    epochs: int
    min_epoch: Optional[int]
    min_loss: Optional[float]
    rising_epochs: tuple[int, ...]
    turns_up: Optional[int]
    final_loss: Optional[float]
    final_acc: Optional[float]
    heldout_windows: Optional[int]
    train_windows: Optional[int]
    steps: int  # optimizer steps in all: training windows x epochs x (1 / opt_period)


def variant_summary(case: str, run: Run, floor: float) -> VariantSummary:
    curve = [e.held_out for e in run.epochs]
    finite = [(y, k + 1) for k, y in enumerate(curve) if math.isfinite(y)]
    low = min(finite) if finite else None
    margins = [floor] * len(curve)
    last = run.epochs[-1] if run.epochs else None
    train_windows = last.train_points if last else None
    steps = (train_windows or 0) * len(run.epochs) // max(1, run.opt_period)
    return VariantSummary(
        case=case,
        variant=run.variant,
        seed=run.seed,
        epochs=len(run.epochs),
        min_epoch=low[1] if low else None,
        min_loss=low[0] if low else None,
        rising_epochs=tuple(rising_epochs(curve, margins)),
        turns_up=turns_up(curve, margins),
        final_loss=last.held_out if last else None,
        final_acc=last.held_out_acc if last else None,
        heldout_windows=(last.heldout_windows or last.eval_points) if last else None,
        train_windows=train_windows,
        steps=steps,
    )


def variant_summaries(results: FinetuneResults) -> list[VariantSummary]:
    """Every primary run's summary, case by case, variant by variant, seed by seed."""
    floor = determinism_floor(results).floor
    out = []
    for case in results.cases():
        name = case_name(case, results)
        for variant in ("patched", "control"):
            out += [variant_summary(name, r, floor) for r in results.seed_runs(variant, case)]
    return out


def case_name(case: tuple[str, int, float], results: FinetuneResults) -> str:
    """'adamw:1e-05:1:8' as --case writes it (the epochs of its first primary run)."""
    opt, period, lr = case
    runs = results.seed_runs("patched", case) or results.seed_runs("control", case)
    epochs = len(runs[0].epochs) if runs else 0
    return f"{opt}:{lr:g}:{period}:{epochs}"


def unfinished(results: FinetuneResults) -> list[Run]:
    return [r for r in results.runs if r.outcome != "ok"]


def no_case_differs(results: FinetuneResults) -> bool:
    """Reverting the fix changed no case's curves (the evidence's negative control survived)."""
    found = verdicts(results)
    return bool(found) and all(v.label == "no difference" for v in found)


def seed_pairs(
    results: FinetuneResults, case: tuple[str, int, float]
) -> list[tuple[list[Epoch], list[Epoch]]]:
    """(patched, control) epochs per seed that has both variants, in seed order."""
    control = {r.seed: r for r in results.seed_runs("control", case)}
    out = []
    for p in results.seed_runs("patched", case):
        c = control.get(p.seed)
        if c is not None:
            out.append((list(p.epochs), list(c.epochs)))
    return out


def verdicts(results: FinetuneResults) -> list[FinetuneVerdict]:
    """One verdict per case that has both variants, against the results' own determinism floor
    and seed spread."""
    floor = determinism_floor(results).floor
    out = []
    for case in results.cases():
        pairs = seed_pairs(results, case)
        if pairs:
            out.append(case_verdict(*case, pairs, floor))
    return out


def finetune_json(
    results: FinetuneResults,
    predictions: Optional[list[dict]] = None,
    sweep: Optional[dict] = None,
) -> str:
    """finetune.json's text: the record, with the determinism floor, thresholds, verdicts,
    per-variant summaries, the comparison with the predictions and the one across rates
    (sweep.py's; a reader recomputes them)."""
    plain = results.to_json()
    plain["determinism"] = determinism_floor(results).model_dump()
    plain["thresholds"] = THRESHOLDS
    plain["verdicts"] = [v.model_dump() for v in verdicts(results)]
    plain["variants"] = [v.model_dump() for v in variant_summaries(results)]
    if predictions is not None:
        plain["predictions"] = predictions
    if sweep is not None:
        plain["sweep"] = sweep
    return json.dumps(plain, indent=2, sort_keys=True, allow_nan=True) + "\n"
