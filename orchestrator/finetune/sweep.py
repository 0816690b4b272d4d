"""The training evidence compared across learning rates (a sweep: the cases of one optimizer,
opt_period and epoch count at several rates). Pure.

Per build: the final held-out eval loss at each rate (mean over seeds) and the best rate. The
rate ratio k: the unfixed build at rate x reaches the loss the fixed build reaches at rate k x,
at the same epoch; the fixed build's loss between two rates of the grid is interpolated in
log(rate), never extrapolated beyond the grid. It is fitted over the epochs with
x * steps <= ONSET (before the unfixed build's overshoot, on the tiny model): per seed the median
of log(r / x), then the mean over seeds (k) and the seeds' range. Where each build first turns
up, as lr x optimizer steps. The rules are training-evidence/tiny-lr-sweep/predictions.yaml's.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any, Optional, Sequence

from pydantic import ConfigDict

from ..records import Record
from .record import FinetuneResults
from .verdict import determinism_floor, mean_curve, seed_pairs, spread_curve, turns_up

# lr x optimizer steps where the tiny model's unfixed build first turned up (1e-4 and 1e-5,
# review 2026-12-06 section 3b): the fit stops there
ONSET = 0.012
ONE_SEED_MARGIN = 1e-4  # as predictions.py: the margin where there is one seed
MIN_RATES = 3  # fewer rates make no sweep


class RatePoint(Record):
    """One build at one rate: the final held-out eval loss (mean, seed spread, per seed), the
    lowest of the mean curve and its epoch, where the mean curve turns up."""

    model_config = ConfigDict(frozen=True)

    lr: float
    final: float
    spread: float
    per_seed: tuple[float, ...]
    lowest: float
    lowest_epoch: int
    turns_up: Optional[int]  # epoch (mean curve; margin: the seed spread, at least the floor)
    # lr x steps at the start and the end of that epoch
    turns_up_lr_steps: Optional[tuple[float, float]]
    seeds_turn_up: tuple[Optional[int], ...]  # each seed's (margin: the determinism floor)


class SeedRatio(Record):
    model_config = ConfigDict(frozen=True)

    seed: int
    k: Optional[float]  # exp(median of log(r / x)); None: no epoch matched within the grid
    points: int


class AtK(Record):
    """The unfixed build at x against the fixed one at k x (interpolated): the largest
    difference over the epochs before the onset, and at the last epoch, with the margins."""

    model_config = ConfigDict(frozen=True)

    lr: float
    k_lr: float
    early_epochs: int
    early_max_diff: Optional[float]  # max |control - patched| over those epochs
    early_margin: Optional[float]
    tracks: Optional[bool]
    final_diff: float  # control - patched at the last epoch
    final_margin: float
    ends_higher: bool


class Sweep(Record):
    model_config = ConfigDict(frozen=True)

    optimizer: str
    opt_period: int
    epochs: int
    seeds: int
    steps_per_epoch: int
    onset: float
    patched: tuple[RatePoint, ...]
    control: tuple[RatePoint, ...]
    best_patched: RatePoint
    best_control: RatePoint
    best_margin: float  # the larger seed spread of the two best points
    k: Optional[float]
    k_seeds: tuple[SeedRatio, ...]
    at_k: tuple[AtK, ...]


def _log_interp(rates: Sequence[float], ys: Sequence[float], r: float) -> Optional[float]:
    """ys at rate r, linear in log(rate) between the grid's rates; None outside the grid."""
    for a, b, ya, yb in zip(rates, rates[1:], ys, ys[1:], strict=False):
        if a <= r <= b:
            t = (math.log(r) - math.log(a)) / (math.log(b) - math.log(a))
            return ya + t * (yb - ya)
    return None


def _interp(rates: Sequence[float], ys: Sequence[float], r: float) -> float:
    """_log_interp for a rate known to be in the grid."""
    found = _log_interp(rates, ys, r)
    return math.nan if found is None else found


def rate_for(rates: Sequence[float], ys: Sequence[float], y: float) -> Optional[float]:
    """The rate at which ys (by rate, interpolated in log(rate)) equals y: the first bracket from
    the lowest rate; None where no two neighbouring rates bracket y (never extrapolated)."""
    for a, b, ya, yb in zip(rates, rates[1:], ys, ys[1:], strict=False):
        if min(ya, yb) <= y <= max(ya, yb) and ya != yb:
            t = (y - ya) / (yb - ya)
            return math.exp(math.log(a) + t * (math.log(b) - math.log(a)))
    return None


def sweep_cases(results: FinetuneResults) -> list[tuple[str, int, float]]:
    """The largest set of cases of one optimizer, opt_period and epoch count, with both builds,
    at MIN_RATES rates or more, by rate; [] when there is none."""
    groups: dict[tuple[str, int, int], list[tuple[str, int, float]]] = {}
    for case in results.cases():
        pairs = seed_pairs(results, case)
        if not pairs:
            continue
        epochs = min(min(len(p), len(c)) for p, c in pairs)
        groups.setdefault((case[0], case[1], epochs), []).append(case)
    best = max(groups.values(), key=len, default=[])
    return sorted(best, key=lambda c: c[2]) if len(best) >= MIN_RATES else []


def _point(lr: float, runs: list[list[Any]], floor: float, steps: int) -> RatePoint:
    mean, spread = mean_curve(runs), spread_curve(runs)
    curves = [[e.held_out for e in r] for r in runs]
    one = len(runs) == 1
    margins = [max(floor, ONE_SEED_MARGIN if one else s) for s in spread]
    up = turns_up(mean, margins)
    low = min(range(len(mean)), key=lambda k: mean[k])
    return RatePoint(
        lr=lr,
        final=mean[-1],
        spread=spread[-1],
        per_seed=tuple(r[len(mean) - 1].held_out for r in runs),
        lowest=mean[low],
        lowest_epoch=low + 1,
        turns_up=up,
        turns_up_lr_steps=(lr * steps * (up - 1), lr * steps * up) if up else None,
        seeds_turn_up=tuple(turns_up(c, [floor] * len(c)) for c in curves),
    )


def _seed_ratio(
    seed: int, rates: list[float], patched: list[list[float]], control: list[list[float]], w: int
) -> SeedRatio:
    """patched/control: [rate][epoch] held-out loss of one seed."""
    logs = []
    for x, curve in zip(rates, control, strict=True):
        for e, y in enumerate(curve):
            if x * w * (e + 1) > ONSET:
                break
            r = rate_for(rates, [p[e] for p in patched], y)
            if r is not None:
                logs.append(math.log(r / x))
    k = math.exp(statistics.median(logs)) if logs else None
    return SeedRatio(seed=seed, k=k, points=len(logs))


def _at_k(k: float, rates: list[float], curves: dict, w: int, least: float) -> list[AtK]:
    """The unfixed build at each rate x against the fixed one at k x. curves: variant -> [rate]
    -> (mean curve, spread curve); least: the smallest margin (the floor, 1e-4 for one seed)."""
    out = []
    for i, x in enumerate(rates):
        kx = k * x
        if not rates[0] <= kx <= rates[-1]:
            continue  # k x outside the grid: never extrapolated
        cm, cs = curves["control"][i]
        pm = [[m[e] for m, _ in curves["patched"]] for e in range(len(cm))]
        ps = [[s[e] for _, s in curves["patched"]] for e in range(len(cm))]
        diffs, margins = [], []
        for e in range(len(cm)):
            if x * w * (e + 1) > ONSET:
                break
            at = _interp(rates, pm[e], kx)
            diffs.append(abs(cm[e] - at))
            margins.append(max(least, cs[e], _interp(rates, ps[e], kx)))
        last = len(cm) - 1
        final_diff = cm[last] - _interp(rates, pm[last], kx)
        final_margin = max(least, cs[last], _interp(rates, ps[last], kx))
        early = max(diffs) if diffs else None
        margin = max(margins) if margins else None
        out.append(
            AtK(
                lr=x,
                k_lr=kx,
                early_epochs=len(diffs),
                early_max_diff=early,
                early_margin=margin,
                tracks=None
                if early is None
                else all(a <= m for a, m in zip(diffs, margins, strict=True)),
                final_diff=final_diff,
                final_margin=final_margin,
                ends_higher=final_diff > final_margin,
            )
        )
    return out


def sweep(results: FinetuneResults) -> Optional[Sweep]:
    """The comparison across rates, or None where the record holds no sweep (sweep_cases)."""
    cases = sweep_cases(results)
    if not cases:
        return None
    floor = determinism_floor(results).floor
    rates = [c[2] for c in cases]
    pairs = [seed_pairs(results, c) for c in cases]
    epochs = min(min(len(p), len(q)) for ps in pairs for p, q in ps)
    first = results.seed_runs("patched", cases[0])[0]
    w = (first.epochs[-1].train_points or 0) // max(1, first.opt_period)
    seeds = [r.seed for r in results.seed_runs("patched", cases[0])]
    n = min(len(ps) for ps in pairs)
    points: dict[str, list[RatePoint]] = {"patched": [], "control": []}
    curves: dict[str, list[tuple[list[float], list[float]]]] = {"patched": [], "control": []}
    for lr, ps in zip(rates, pairs, strict=True):
        for j, variant in enumerate(("patched", "control")):
            runs = [list(q[j][:epochs]) for q in ps[:n]]
            points[variant].append(_point(lr, runs, floor, w))
            curves[variant].append((mean_curve(runs), spread_curve(runs)))
    per_seed = []
    for s in range(n):
        held = {
            v: [[e.held_out for e in ps[s][j][:epochs]] for ps in pairs]
            for j, v in enumerate(("patched", "control"))
        }
        per_seed.append(_seed_ratio(seeds[s], rates, held["patched"], held["control"], w))
    logs = [math.log(r.k) for r in per_seed if r.k is not None]
    k = math.exp(sum(logs) / len(logs)) if logs else None
    bp = min(points["patched"], key=lambda q: q.final)
    bc = min(points["control"], key=lambda q: q.final)
    one = n == 1
    least = max(floor, ONE_SEED_MARGIN) if one else floor
    return Sweep(
        optimizer=cases[0][0],
        opt_period=cases[0][1],
        epochs=epochs,
        seeds=n,
        steps_per_epoch=w,
        onset=ONSET,
        patched=tuple(points["patched"]),
        control=tuple(points["control"]),
        best_patched=bp,
        best_control=bc,
        best_margin=max(floor, ONE_SEED_MARGIN if one else max(bp.spread, bc.spread)),
        k=k,
        k_seeds=tuple(per_seed),
        at_k=tuple(_at_k(k, rates, curves, w, least) if k else ()),
    )


# ---------------------------------------------------------------- the pre-registered sweep

_BETWEEN = re.compile(r"^between (\d+(?:\.\d+)?) and (\d+(?:\.\d+)?)")
_UP_TO = re.compile(r"^up to (\d+(?:\.\d+)?(?:e-?\d+)?)")
_TRACKS = "control at x within the seed spread of patched at k x while x * steps <= "


def check(key: str, text: str, s: Sweep) -> Optional[bool]:
    """Whether one sweep prediction held (None: not a shape the rule decides)."""
    text = " ".join(str(text).split())
    if key == "best" and text == "patched at least as good as control":
        return s.best_patched.final <= s.best_control.final + s.best_margin
    if key == "rate_ratio" and (m := _BETWEEN.match(text)):
        return s.k is not None and float(m[1]) <= s.k <= float(m[2])
    if key == "tracks" and text.startswith(_TRACKS):
        if text[len(_TRACKS) :] != f"{ONSET:g}":
            return None  # another threshold than the fit's: not decided, never guessed
        decided = [a.tracks for a in s.at_k if a.tracks is not None]
        return all(decided) if decided else None
    if key == "ends_higher_at_k" and text.startswith("control at x higher than patched at k x"):
        late = [a for a in s.at_k if a.lr * s.steps_per_epoch * s.epochs >= 2 * ONSET]
        return all(a.ends_higher for a in late) if late else None
    if key == "patched_falls_with_rate" and (m := _UP_TO.match(text)):
        finals = [q.final for q in s.patched if q.lr <= float(m[1]) * (1 + 1e-9)]
        return len(finals) >= 2 and all(b < a for a, b in zip(finals, finals[1:], strict=False))
    return None


def observed(key: str, s: Sweep) -> str:
    """What the sweep shows for one key, in words."""
    if key == "best":
        bp, bc = s.best_patched, s.best_control
        return (
            f"with the fix {bp.final:.4f} at lr {bp.lr:g}, without {bc.final:.4f} at lr "
            f"{bc.lr:g} (seed spread {s.best_margin:.4f})"
        )
    if key == "rate_ratio":
        return k_words(s)
    if key == "tracks":
        return (
            "; ".join(
                f"x {a.lr:g}: max diff {a.early_max_diff:.4f} / spread {a.early_margin:.4f} "
                f"over {a.early_epochs} epoch(s)"
                for a in s.at_k
                if a.early_max_diff is not None and a.early_margin is not None
            )
            or "no epoch before the onset with k x in the grid"
        )
    if key == "ends_higher_at_k":
        return (
            "; ".join(
                f"x {a.lr:g}: {a.final_diff:+.4f} (spread {a.final_margin:.4f})"
                for a in s.at_k
                if a.lr * s.steps_per_epoch * s.epochs >= 2 * ONSET  # the rule's rates
            )
            or "no rate with x * steps >= 0.024 at the end and k x in the grid"
        )
    if key == "patched_falls_with_rate":
        return ", ".join(f"{q.lr:g}: {q.final:.4f}" for q in s.patched)
    return "-"


def k_words(s: Sweep) -> str:
    """k and its spread over the seeds, in words."""
    ks = [r.k for r in s.k_seeds if r.k is not None]
    if s.k is None:
        return "no k: no epoch before the onset matched within the grid"
    spread = f" (seeds {min(ks):.2f} to {max(ks):.2f})" if len(ks) > 1 else ""
    points = sum(r.points for r in s.k_seeds)
    return f"k = {s.k:.2f}{spread}, from {points} epoch(s) with x * steps <= {ONSET:g}"


def compare(entry: dict, s: Optional[Sweep]) -> Optional[dict]:
    """predictions.yaml's `sweep:` entry against the sweep: a row as predictions.compare's."""
    same = (entry.get("optimizer"), entry.get("opt_period"), entry.get("epochs"))
    if s is None or same != (s.optimizer, s.opt_period, s.epochs):
        return None  # another sweep's prediction: not this one's
    name = f"sweep {s.optimizer} opt_period {s.opt_period}, {s.epochs} epochs"
    checks = []
    for key, text in (entry.get("predict") or {}).items():
        held = check(key, str(text), s)
        word = {True: "held", False: "failed", None: "not decided by the rule"}[held]
        checks.append(
            {"key": key, "predicted": str(text), "observed": observed(key, s), "held": word}
        )
    return {"case": name, "prediction": "sweep", "outcome": s.model_dump(), "checks": checks}
