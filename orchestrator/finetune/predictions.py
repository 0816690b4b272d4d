"""The pre-registered predictions (training-evidence/predictions.yaml, committed before the runs)
compared with what the runs show, by the file's own rule. Pure but for reading the file.

Each prediction is a sentence of a few fixed shapes ("control at every epoch", "between epoch 2
and epoch 6", "never within 8 epochs", ...); a sentence of no known shape is reported as not
decidable, never guessed. Curves are the held-out eval loss, mean over seeds; a difference counts
where it exceeds the seed spread at that epoch (max - min over seeds), and at least the
determinism floor (the file's 1e-4 where there is one seed).
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Optional, Sequence

from pydantic import ConfigDict

from ..records import Record
from . import sweep
from .cases import parse_case
from .record import FinetuneResults
from .verdict import (
    determinism_floor,
    mean_curve,
    seed_pairs,
    spread_curve,
    turns_up,
)

FILE = Path("training-evidence") / "predictions.yaml"
SWEEP = "sweep"  # the file's entry across learning rates (sweep.py), beside `cases`
ONE_SEED_MARGIN = 1e-4  # the file's rule: "or by 1e-4 where there is one seed"
MAX_BYTES = 1 << 16


class PredictedOutcome(Record):
    """What a case's runs show, in the terms of the predictions."""

    model_config = ConfigDict(frozen=True)

    epochs: int
    seeds: int
    # per epoch: "control", "patched" or "neither" (within the margin)
    lower: tuple[str, ...]
    control_turns_up: Optional[int]
    patched_turns_up: Optional[int]
    ends_higher: str  # "control", "patched" or "neither"
    effects_rel: tuple[float, ...]  # (control - patched) / patched at the last epoch, per seed
    epoch1_rel: float  # the same at epoch 1, mean over seeds


def outcome(
    patched: Sequence[Sequence[Any]], control: Sequence[Sequence[Any]], floor: float
) -> PredictedOutcome:
    """The PredictedOutcome of (patched, control) epoch lists, one of each per seed (pure)."""
    f, u = mean_curve(patched), mean_curve(control)
    one = len(patched) == 1
    both = zip(spread_curve(patched), spread_curve(control), strict=False)
    spreads = [max(a, b) for a, b in both]
    margin = [max(floor, ONE_SEED_MARGIN if one else s) for s in spreads]
    lower = []
    for a, b, m in zip(f, u, margin, strict=False):
        lower.append("control" if b < a - m else "patched" if a < b - m else "neither")
    effects = []
    for p, c in zip(patched, control, strict=True):
        fe, ue = p[len(f) - 1].held_out, c[len(f) - 1].held_out
        effects.append((ue - fe) / fe if f and fe else math.nan)
    epoch1 = []
    for p, c in zip(patched, control, strict=True):
        epoch1.append((c[0].held_out - p[0].held_out) / p[0].held_out)
    return PredictedOutcome(
        epochs=len(f),
        seeds=len(patched),
        lower=tuple(lower),
        control_turns_up=turns_up(u, margin),
        patched_turns_up=turns_up(f, margin),
        ends_higher=_HIGHER[lower[-1]] if lower else "neither",
        effects_rel=tuple(effects),
        epoch1_rel=sum(epoch1) / len(epoch1) if epoch1 else math.nan,
    )


# the variant that ends higher, from the one that is lower at the last epoch
_HIGHER = {"control": "patched", "patched": "control", "neither": "neither"}
_NEVER = re.compile(r"^(?:never|not) within (\d+) epochs")
_BETWEEN = re.compile(r"^between epoch (\d+) and epoch (\d+)")
_LATER = re.compile(r"^later than the control's, or never within (\d+) epochs")
_SIGN = re.compile(r"^(negative|positive) at epoch (\d+) for all (\d+) seeds")
_MARGIN = re.compile(r"by a small margin \(< (\d+(?:\.\d+)?) %\)")


def _turns(text: str, found: Optional[int], other: Optional[int]) -> Optional[bool]:
    if m := _NEVER.match(text):
        return found is None or found > int(m[1])
    if m := _BETWEEN.match(text):
        return found is not None and int(m[1]) <= found <= int(m[2])
    if m := _LATER.match(text):
        return found is None or (other is not None and found > other)
    return None


def _lower(text: str, o: PredictedOutcome) -> Optional[bool]:
    if not o.lower:
        return None
    if text == "control at every epoch":
        return all(x == "control" for x in o.lower)
    if m := re.match(r"^control at epoch 1; patched from some epoch <= (\d+) on$", text):
        tail = [k for k in range(1, o.epochs + 1) if all(x == "patched" for x in o.lower[k - 1 :])]
        return o.lower[0] == "control" and bool(tail) and tail[0] <= int(m[1])
    if text == "control early":
        return o.lower[0] == "control"
    if text.startswith("control at epoch 1"):
        held = o.lower[0] == "control"
        if m := _MARGIN.search(text):
            held = held and abs(o.epoch1_rel) * 100 < float(m[1])
        return held
    return None


def check(key: str, text: str, o: PredictedOutcome) -> Optional[bool]:
    """Whether one prediction held (None: not a shape the rule decides)."""
    text = " ".join(str(text).split())
    if key == "lower":
        return _lower(text, o)
    if key == "control_turns_up":
        return _turns(text, o.control_turns_up, None)
    if key == "patched_turns_up":
        return _turns(text, o.patched_turns_up, o.control_turns_up)
    if key == "ends_higher":
        return o.ends_higher == text if text in ("control", "patched") else None
    if key == "sign_of_effect" and (m := _SIGN.match(text)):
        want = 1 if m[1] == "positive" else -1
        if int(m[2]) != o.epochs or int(m[3]) != o.seeds:
            return None  # predicted for other runs than these: not decided, never guessed
        return all(math.copysign(1, e) == want and e != 0 for e in o.effects_rel)
    return None


def observed(key: str, o: PredictedOutcome) -> str:
    """What the runs show for one key, in words."""
    if key == "lower":
        return ", ".join(f"{k}: {x}" for k, x in enumerate(o.lower, 1))
    if key in ("control_turns_up", "patched_turns_up"):
        k = getattr(o, key)
        return f"epoch {k}" if k else f"never within {o.epochs} epochs"
    if key == "ends_higher":
        return o.ends_higher
    if key == "sign_of_effect":
        return ", ".join(f"{e:+.2%}" for e in o.effects_rel)
    return "-"


def _matches(entry: dict, results: FinetuneResults, case: tuple[str, int, float]) -> bool:
    if SWEEP in entry:
        return False  # across rates (sweep.py), never one case's
    epochs = len(results.seed_runs("patched", case)[0].epochs)
    real = entry.get("model") != "tiny"
    if results.case_set != ("real" if real else "tiny"):
        return False
    try:
        c = parse_case(str(entry.get("case", "")), default_epochs=0)
    except ValueError:
        # a real model's entry named, not a case: any case of the real set (the first file's)
        return real
    return (c.optimizer, c.opt_period, c.lr, c.epochs) == (*case, epochs)


def compare(entries: list[dict], results: FinetuneResults) -> list[dict]:
    """For each case run: the prediction entry it matches and each key held / failed / not
    decidable, with what was observed (pure)."""
    floor = determinism_floor(results).floor
    out = []
    for case in results.cases():
        pairs = seed_pairs(results, case)
        if not pairs:
            continue
        found = next((e for e in entries if _matches(e, results, case)), None)
        o = outcome([p for p, _ in pairs], [c for _, c in pairs], floor)
        name = f"{case[0]}:{case[2]:g}:{case[1]}:{o.epochs}"
        row: dict[str, Any] = {"case": name, "outcome": o.model_dump()}
        if found is None:
            row["prediction"] = None
            row["checks"] = []
            out.append(row)
            continue
        row["prediction"] = str(found.get("case"))
        checks = []
        for key, text in (found.get("predict") or {}).items():
            held = check(key, str(text), o)
            word = {True: "held", False: "failed", None: "not decided by the rule"}[held]
            checks.append(
                {"key": key, "predicted": str(text), "observed": observed(key, o), "held": word}
            )
        row["checks"] = checks
        out.append(row)
    found_sweep = sweep.sweep(results)
    for entry in entries:
        compared = sweep.compare(entry[SWEEP], found_sweep) if SWEEP in entry else None
        out += [compared] if compared else []
    return out


def load(path: Path) -> list[dict]:
    """The cases of predictions.yaml, then its `sweep:` entry as {"sweep": entry} where it has
    one; a ValueError naming the file and what is wrong."""
    import yaml  # the tool's dependency; loaded only here

    try:
        raw = path.read_bytes()[:MAX_BYTES]
        data = yaml.safe_load(raw.decode("utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise ValueError(f"{path}: unreadable ({type(e).__name__})") from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list) or not all(isinstance(c, dict) for c in cases):
        raise ValueError(f"{path}: key 'cases': expected a list of mappings")
    found = data.get(SWEEP)
    if found is None:
        return cases
    if not isinstance(found, dict) or not isinstance(found.get("predict"), dict):
        raise ValueError(f"{path}: key '{SWEEP}': expected a mapping with a 'predict' mapping")
    return [*cases, {SWEEP: found}]  # compared across the rates (sweep.py)
