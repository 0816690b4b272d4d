"""Fine-tuning evidence on llama.cpp's own training path (native_tests/finetune-opt-dynamic.cpp).

A tiny llama model is fine-tuned with llama_opt_init / llama_opt_epoch, with the fix and with the fix
reverted, for each optimizer and opt_period; this module holds the cases (`--case`), the program's
command line, the results' data model (to and from JSON, validated as untrusted input), the parser
of the program's output, the verdict rules, the cache key, the markdown tables and the plot.
Everything but the plot's file write is pure; finetune/runner.py does the work.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

SCHEMA_VERSION = 1
KEY_VERSION = 1  # bump when the meaning of a cached finetune result changes
VARIANTS = ("with_fix", "without_fix")
PROGRAM = "finetune-opt-dynamic"

# The data: text shipped in the llama.cpp snapshot, paths relative to its root, concatenated in
# this order with one newline between files (as the program reads them).
DATA_FILES = ("LICENSE", "CONTRIBUTING.md")

# The program's fixed options (every run): n_ctx 256 is the smallest context llama_context takes;
# one datapoint is n_ctx tokens, cut into ubatches of N_UBATCH, so opt_period = n_batch / n_ubatch
# can be 1 or 2. Two threads, always: the losses are reproducible to the last digit for a thread count.
N_CTX = 256
N_UBATCH = 128
VAL_SPLIT = 0.1
THREADS = 2
OPTIMIZERS = ("sgd", "adamw")
PERIODS = tuple(p for p in range(1, N_CTX // N_UBATCH + 1) if (N_CTX // N_UBATCH) % p == 0)
MAX_EPOCHS = 100


# ---------------------------------------------------------------------------------------------
# the cases and the program's command line


@dataclass(frozen=True)
class Case:
    """One configuration run in both variants: optimizer, learning rate, opt_period, epochs."""

    optimizer: str
    lr: float
    opt_period: int
    epochs: int

    @property
    def n_batch(self) -> int:
        return N_UBATCH * self.opt_period

    @property
    def name(self) -> str:
        return f"{self.optimizer}:{self.lr:g}:{self.opt_period}:{self.epochs}"

    def label(self) -> str:
        return f"{self.optimizer} lr {self.lr:g} opt_period {self.opt_period}"

    def key(self) -> dict[str, Any]:
        """What the cache key holds of the case: everything the program is given for it."""
        return {
            "optimizer": self.optimizer,
            "lr": self.lr,
            "n_batch": self.n_batch,
            "n_ubatch": N_UBATCH,
            "epochs": self.epochs,
        }


# ggml-opt's own default AdamW step (alpha 1e-3) and SGD at 0.1 (where the fixed run learns at a
# similar pace; at 1e-3 it barely moves), opt_period 1 and 2: the curves separate within 6 epochs
# (benchmarks/records/2026-11-30-finetune-evidence)
DEFAULT_CASES = ("adamw:1e-3:1:6", "adamw:1e-3:2:6", "sgd:0.1:1:6", "sgd:0.1:2:6")
CASE_FORMAT = "OPTIMIZER:LR:OPT_PERIOD[:EPOCHS]"


def parse_case(text: str, default_epochs: int = 6) -> Case:
    """'adamw:1e-3:2:6' -> Case; a ValueError naming what is wrong otherwise."""
    parts = text.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"--case {text!r}: expected {CASE_FORMAT}, e.g. adamw:1e-3:2:6")
    opt, lr_text, period_text = parts[:3]
    if opt not in OPTIMIZERS:
        raise ValueError(f"--case {text!r}: optimizer {opt!r}: expected one of {', '.join(OPTIMIZERS)}")
    try:
        lr = float(lr_text)
    except ValueError:
        lr = math.nan
    if not (math.isfinite(lr) and 0 < lr <= 10):
        raise ValueError(f"--case {text!r}: learning rate {lr_text!r}: expected a number in (0, 10]")
    period = _int(period_text)
    if period not in PERIODS:
        raise ValueError(
            f"--case {text!r}: opt_period {period_text!r}: expected one of "
            f"{', '.join(map(str, PERIODS))} (n_batch = opt_period x {N_UBATCH} must divide n_ctx {N_CTX})"
        )
    epochs = _int(parts[3]) if len(parts) == 4 else default_epochs
    if epochs is None or not 1 <= epochs <= MAX_EPOCHS:
        raise ValueError(f"--case {text!r}: epochs {parts[3]!r}: expected a whole number from 1 to {MAX_EPOCHS}")
    return Case(opt, lr, period, epochs)


def parse_cases(texts: Sequence[str]) -> list[Case]:
    """The cases in order, each once (a repeated case is run once)."""
    cases = [parse_case(t) for t in (texts or DEFAULT_CASES)]
    seen: dict[tuple, Case] = {}
    for c in cases:
        other = seen.setdefault((c.optimizer, c.lr, c.opt_period), c)
        if other.epochs != c.epochs:
            raise ValueError(f"--case {c.name} and --case {other.name}: the same case with two epoch counts")
    return list(dict.fromkeys(cases))


def _int(text: str) -> Optional[int]:
    return int(text) if text.isdigit() else None


def program_options() -> dict[str, Any]:
    """The program's options that are the same for every case (part of the cache key)."""
    return {"n_ctx": N_CTX, "n_ubatch": N_UBATCH, "val_split": VAL_SPLIT, "threads": THREADS, "wd": 0.0}


def model_name(seed: Any) -> str:
    return f"tiny-llama-{seed}.gguf"


TREE = "$LLAMA_CPP"  # the llama.cpp tree, in the commands a reader runs (from a ggml-patch checkout)


def build_commands() -> list[str]:
    """The program built against a llama.cpp tree, as the evidence builds it."""
    return [
        f"cmake -S native_tests/llama-harness -B build -DLLAMA_SOURCE_DIR={TREE} -DCMAKE_BUILD_TYPE=Release "
        "-DBUILD_SHARED_LIBS=OFF",
        f"cmake --build build --target {PROGRAM}",
    ]


def display_command(run: Run, data: Sequence[str], seed: Any) -> str:
    """A run's command as someone reproduces it from a ggml-patch checkout (paths relative, from the
    run's own numbers; the same for both variants: the llama.cpp tree decides which)."""
    argv = ["./build/bin/" + PROGRAM, "-m", model_name(seed)] + [a for f in data for a in ("-f", f"{TREE}/{f}")]
    argv += [
        "--optimizer",
        run.optimizer,
        "--lr",
        f"{run.lr:g}",
        "-c",
        str(N_CTX),
        "-b",
        str(run.n_batch),
        "-ub",
        str(run.n_ubatch),
        "--epochs",
        str(len(run.epochs)),
        "--val-split",
        f"{VAL_SPLIT:g}",
        "-t",
        str(THREADS),
    ]
    return " ".join(argv)


def command(binary: str, model: str, data: Sequence[str], case: Case) -> list[str]:
    """The program's command line for a case."""
    argv = [binary, "-m", model]
    for f in data:
        argv += ["-f", f]
    return argv + [
        "--optimizer",
        case.optimizer,
        "--lr",
        f"{case.lr:g}",
        "-c",
        str(N_CTX),
        "-b",
        str(case.n_batch),
        "-ub",
        str(N_UBATCH),
        "--epochs",
        str(case.epochs),
        "--val-split",
        f"{VAL_SPLIT:g}",
        "-t",
        str(THREADS),
    ]


# ---------------------------------------------------------------------------------------------
# the program's output


_PAIR = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<value>\S*)")


def _value(text: str) -> Any:
    """'12' -> 12, '1.5e-05' / 'nan' / '-inf' -> float, anything else stays a string."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)  # accepts nan, inf, -inf as printf writes them
    except ValueError:
        return text


def parse_pairs(line: str) -> dict[str, Any]:
    """'a=1 b=x' -> {'a': 1, 'b': 'x'}; a token that is not key=value makes it not a data line ({})."""
    tokens = line.split()
    pairs = {}
    for tok in tokens:
        m = _PAIR.fullmatch(tok)
        if not m:
            return {}
        pairs[m["key"]] = _value(m["value"])
    return pairs


@dataclass(frozen=True)
class Epoch:
    epoch: int
    train_loss: float
    eval_loss: float
    train_acc: Optional[float] = None
    eval_acc: Optional[float] = None


@dataclass(frozen=True)
class ProgramOutput:
    config: dict[str, Any]
    epochs: tuple[Epoch, ...]
    done: dict[str, Any]  # empty when the program did not reach its last line

    @property
    def complete(self) -> bool:
        return bool(self.done) and self.done.get("epochs") == len(self.epochs)


def parse_output(text: str) -> ProgramOutput:
    """The program's stdout -> config, epochs in order, summary. Lines of anything else are ignored;
    an epoch line lacking a loss is ignored too (it is not a measurement)."""
    config: dict[str, Any] = {}
    done: dict[str, Any] = {}
    epochs: list[Epoch] = []
    for line in text.splitlines():
        head, _, rest = line.strip().partition(" ")
        if head == "config":
            config = parse_pairs(rest)
        elif head == "done":
            done = parse_pairs(rest)
        elif head.startswith("epoch="):
            p = parse_pairs(line)
            if not isinstance(p.get("epoch"), int) or not all(
                isinstance(p.get(k), (int, float)) for k in ("train_loss", "eval_loss")
            ):
                continue
            acc = {k: float(p[k]) for k in ("train_acc", "eval_acc") if isinstance(p.get(k), (int, float))}
            epochs.append(Epoch(p["epoch"], float(p["train_loss"]), float(p["eval_loss"]), **acc))
    return ProgramOutput(config=config, epochs=tuple(epochs), done=done)


# ---------------------------------------------------------------------------------------------
# the results' data model


@dataclass
class Run:
    """One run of the program: a variant (with or without the fix) of one case."""

    variant: str
    optimizer: str
    opt_period: int
    n_batch: int
    n_ubatch: int
    lr: float
    command: list[str]
    epochs: list[Epoch] = field(default_factory=list)
    exit_code: Optional[int] = None
    seconds: Optional[float] = None
    outcome: str = "ok"  # ok | failed | timed out | crashed: as the runner classified it
    cpu_seconds: Optional[float] = None  # user + system CPU of the program (wall time depends on the load)

    @property
    def case(self) -> tuple[str, int, float]:
        return (self.optimizer, self.opt_period, self.lr)


@dataclass
class FinetuneResults:
    target: str
    base: str  # the upstream commit (or source digest) the llama.cpp tree is at
    model: dict[str, Any]  # sha256, seed, dims, n_vocab, vocab_file, vocab_sha256
    data: dict[str, Any]  # files, sha256, tokens (from the program's config line)
    program: dict[str, Any]  # name, sha256 of its source and of the harness
    runs: list[Run] = field(default_factory=list)
    cache_key: str = ""
    schema_version: int = SCHEMA_VERSION
    source: dict[str, Any] = field(default_factory=dict)  # the target's source: description, upstream commit
    series: dict[str, Any] = field(
        default_factory=dict
    )  # sha256 (canonical, as results.json), rendered_sha256, patches
    toolchain: dict[str, Any] = field(default_factory=dict)  # compiler, CMake, ... (run/toolchain.py)
    timings: dict[str, Any] = field(default_factory=dict)  # seconds of the run that made these results

    def to_json(self) -> str:
        """The results with the verdicts computed from them (a reader recomputes them, never trusts them)."""
        plain = _to_plain(self)
        plain["verdicts"] = [v.as_dict() for v in verdicts(self)]
        return json.dumps(plain, indent=2, sort_keys=True, allow_nan=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "FinetuneResults":
        """finetune.json, validated as untrusted input (it may come from anyone's disk): a ValueError
        naming the first field that is not what `ggml-patch evidence` writes."""
        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise ValueError(f"not valid JSON ({str(e).splitlines()[0][:80]})") from None
        if not isinstance(d, dict):
            raise ValueError("expected a JSON object")
        if d.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"finetune results: schema_version {d.get('schema_version')!r}, expected {SCHEMA_VERSION}")
        validate(d)
        known = {f for f in cls.__dataclass_fields__ if f != "runs"}
        runs = [
            Run(
                **{
                    **{k: v for k, v in r.items() if k in Run.__dataclass_fields__},
                    "epochs": [Epoch(**e) for e in r["epochs"]],
                }
            )
            for r in d["runs"]
        ]
        return cls(**{k: v for k, v in d.items() if k in known}, runs=runs)

    def cases(self) -> list[tuple[str, int, float]]:
        """(optimizer, opt_period, lr) in first-seen order."""
        seen: dict[tuple[str, int, float], None] = {}
        for r in self.runs:
            seen.setdefault(r.case, None)
        return list(seen)

    def run(self, variant: str, optimizer: str, opt_period: int, lr: Optional[float] = None) -> Optional[Run]:
        """The run of a variant and case (lr None: the first with any lr)."""
        for r in self.runs:
            if r.variant == variant and r.case[:2] == (optimizer, opt_period) and lr in (None, r.lr):
                return r
        return None


# ---------------------------------------------------------------------------------------------
# finetune.json as untrusted input (the bundle reads it from a results folder)

_HEX = {"type": "string", "pattern": r"^[0-9a-f]{7,64}\Z"}
_SHA256 = {"type": "string", "pattern": r"^[0-9a-f]{64}\Z"}
_TEXT = {"type": "string", "maxLength": 4096}
_PATH = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*\Z",
    "maxLength": 200,
}
_NUMBER = {"type": "number"}  # nan and inf included: a diverged run's loss
_MAYBE_NUMBER = {"type": ["number", "null"]}
_INFO = {
    "type": "object",
    "maxProperties": 64,
    "additionalProperties": {"type": ["string", "number", "boolean", "null", "object", "array"]},
}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["schema_version", "target", "base", "model", "data", "program", "runs"],
    "properties": {
        "schema_version": {"const": SCHEMA_VERSION},
        "target": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._ /-]{0,199}\Z"},
        "base": _HEX,
        "cache_key": {"anyOf": [_SHA256, {"const": ""}]},
        "model": {
            **_INFO,
            "properties": {
                "sha256": _SHA256,
                "vocab_sha256": _SHA256,
                "seed": {"type": "integer", "minimum": 0, "maximum": 2**32 - 1},
                "n_vocab": {"type": "integer", "minimum": 1},
                "n_params": {"type": "integer", "minimum": 1},
                "vocab_file": _PATH,
            },
        },
        "data": {
            **_INFO,
            "properties": {
                "sha256": _SHA256,
                "files": {"type": "array", "maxItems": 16, "items": _PATH},
                "tokens": {"type": ["integer", "null"], "minimum": 0},
            },
        },
        "program": {**_INFO, "properties": {"name": _TEXT, "sha256": _SHA256}},
        "source": _INFO,
        "series": {
            **_INFO,
            "properties": {
                "sha256": _SHA256,
                "rendered_sha256": _SHA256,
                "patches": {"type": "array", "maxItems": 64, "items": _TEXT},
            },
        },
        "toolchain": {"type": "object", "maxProperties": 32, "additionalProperties": _TEXT},
        "timings": _INFO,
        "verdicts": {"type": "array"},  # recomputed on reading, never used as read
        "runs": {
            "type": "array",
            "maxItems": 64,
            "items": {
                "type": "object",
                "required": ["variant", "optimizer", "opt_period", "n_batch", "n_ubatch", "lr", "command", "epochs"],
                "properties": {
                    "variant": {"enum": list(VARIANTS)},
                    "optimizer": {"enum": list(OPTIMIZERS)},
                    "opt_period": {"type": "integer", "minimum": 1, "maximum": 64},
                    "n_batch": {"type": "integer", "minimum": 1},
                    "n_ubatch": {"type": "integer", "minimum": 1},
                    "lr": {"type": "number", "exclusiveMinimum": 0, "maximum": 10},
                    "command": {"type": "array", "maxItems": 64, "items": _TEXT},
                    "exit_code": {"type": ["integer", "null"]},
                    "seconds": _MAYBE_NUMBER,
                    "cpu_seconds": _MAYBE_NUMBER,
                    "outcome": {"enum": ["ok", "failed", "timed out", "crashed"]},
                    "epochs": {
                        "type": "array",
                        "maxItems": MAX_EPOCHS,
                        "items": {
                            "type": "object",
                            "required": ["epoch", "train_loss", "eval_loss"],
                            "additionalProperties": False,
                            "properties": {
                                "epoch": {"type": "integer", "minimum": 1, "maximum": MAX_EPOCHS},
                                "train_loss": _NUMBER,
                                "eval_loss": _NUMBER,
                                "train_acc": _MAYBE_NUMBER,
                                "eval_acc": _MAYBE_NUMBER,
                            },
                        },
                    },
                },
            },
        },
    },
}


def validate(d: Any) -> None:
    """A ValueError naming the first field of `d` that is not what `ggml-patch evidence` writes
    (the schema, then: one run per variant and case, epochs numbered 1, 2, ... in order)."""
    import jsonschema

    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(d))
    if err is not None:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        value = repr(err.instance)
        value = value if len(value) <= 60 else value[:57] + "..."
        if err.validator == "required":
            raise ValueError(f"{where}: {err.message}")
        raise ValueError(f"{where}: {value} is not valid here ({err.validator} {_short(err.validator_value)})")
    seen = set()
    for i, r in enumerate(d["runs"]):
        key = (r["variant"], r["optimizer"], r["opt_period"], r["lr"])
        if key in seen:
            raise ValueError(
                f"runs.{i}: a second {r['variant']} run of {r['optimizer']} lr {r['lr']:g} opt_period {r['opt_period']}"
            )
        seen.add(key)
        numbers = [e["epoch"] for e in r["epochs"]]
        if numbers != list(range(1, len(numbers) + 1)):
            raise ValueError(f"runs.{i}.epochs: epochs {numbers[:8]} are not numbered 1, 2, ... in order")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _to_plain(obj: Any) -> Any:
    if hasattr(obj, "__dataclass_fields__"):
        return {k: _to_plain(v) for k, v in asdict(obj).items()}
    return obj


# ---------------------------------------------------------------------------------------------
# verdict rules
#
# Thresholds, relative to the loss (cross-entropy, about 10.4 at the start for 32,000 tokens):
# DIFFER_REL: two runs "differ" when some epoch's train or eval loss differs by more than 0.1%.
#   The program is deterministic for a thread count (no shuffling, fixed model), so identical code
#   gives identical numbers; 0.1% is far above the 8-digit printing and far below the bug's effect.
# STEP_REL: one epoch "falls" or "rises" against the previous one by more than 0.1%: smaller moves
#   are flat (they say nothing about learning or overshooting).

DIFFER_REL = 1e-3
STEP_REL = 1e-3


def _rel(a: float, b: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return math.inf if a != b else 0.0
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


def moves(losses: list[float], rel: float = STEP_REL) -> list[int]:
    """Per epoch after the first: -1 fell, +1 rose, 0 flat (within `rel`); a non-finite loss counts
    as a rise (the run diverged)."""
    out = []
    for prev, cur in itertools.pairwise(losses):
        if not math.isfinite(cur) and math.isfinite(prev):
            out.append(1)
        elif _rel(prev, cur) <= rel:
            out.append(0)
        else:
            out.append(1 if cur > prev else -1)
    return out


def direction_changes(steps: list[int]) -> int:
    """How often the non-flat moves change sign (down-up-down is 2)."""
    signs = [s for s in steps if s]
    return sum(1 for a, b in itertools.pairwise(signs) if a != b)


@dataclass(frozen=True)
class Verdict:
    optimizer: str
    opt_period: int
    lr: float
    epochs: int
    differ: bool  # the curves differ between variants
    max_rel_diff: float
    fixed_falls: bool  # with the fix, the eval loss ends lower than it started and never rises
    rises_where_fixed_falls: tuple[int, ...]  # epochs where the eval loss rose without the fix and fell with it
    oscillates: bool  # without the fix, the eval (or train) loss changes direction at least twice
    diverged: bool  # without the fix, a loss became nan or inf
    ends_worse: bool  # without the fix, the last eval loss is higher than with it (beyond DIFFER_REL)
    label: str

    def as_dict(self) -> dict:
        return asdict(self)


def verdict(optimizer: str, opt_period: int, lr: float, fixed: list[Epoch], unfixed: list[Epoch]) -> Verdict:
    """The rules, on the epochs both runs reported:
    - "no difference": the curves do not differ (the fix changed nothing on this path: suspicious);
    - "undecided": fewer than 2 common epochs, or the fixed run's eval loss does not fall overall
      (it did not learn, so a rise without the fix says nothing);
    - "bug visible": they differ and, without the fix, the run diverges, or its eval loss rises in
      an epoch where the fixed run's falls, or it oscillates while the fixed run falls throughout;
    - "differs, no harm shown": they differ but none of those happened in the epochs measured
      (e.g. it only learned faster)."""
    n = min(len(fixed), len(unfixed))
    f, u = list(fixed[:n]), list(unfixed[:n])
    diffs = [_rel(a.train_loss, b.train_loss) for a, b in zip(f, u, strict=True)] + [
        _rel(a.eval_loss, b.eval_loss) for a, b in zip(f, u, strict=True)
    ]
    max_diff = max(diffs, default=0.0)
    differ = max_diff > DIFFER_REL
    f_eval, u_eval = [e.eval_loss for e in f], [e.eval_loss for e in u]
    u_train = [e.train_loss for e in u]
    f_moves, u_moves = moves(f_eval), moves(u_eval)
    fixed_falls = n >= 2 and math.isfinite(f_eval[-1]) and f_eval[-1] < f_eval[0] and 1 not in f_moves
    rises = tuple(f[i + 1].epoch for i, (a, b) in enumerate(zip(f_moves, u_moves, strict=True)) if a == -1 and b == 1)
    oscillates = max(direction_changes(u_moves), direction_changes(moves(u_train))) >= 2
    diverged = any(not math.isfinite(x) for x in u_eval + u_train)
    ends_worse = n >= 1 and (
        not math.isfinite(u_eval[-1]) or (u_eval[-1] > f_eval[-1] and _rel(u_eval[-1], f_eval[-1]) > DIFFER_REL)
    )
    if n >= 1 and not differ:
        label = "no difference"
    elif n < 2 or not fixed_falls:
        label = "undecided"
    elif diverged or rises or oscillates:
        label = "bug visible"
    else:
        label = "differs, no harm shown"
    return Verdict(
        optimizer, opt_period, lr, n, differ, max_diff, fixed_falls, rises, oscillates, diverged, ends_worse, label
    )


def run_outcome(exit_code: Optional[int], timed_out: bool, complete: bool) -> str:
    """How a run ended: ok (exit 0 and its last line), timed out, crashed (a signal), or failed."""
    if timed_out:
        return "timed out"
    if exit_code is not None and exit_code < 0:
        return "crashed"
    return "ok" if exit_code == 0 and complete else "failed"


def unfinished(results: FinetuneResults) -> list[Run]:
    return [r for r in results.runs if r.outcome != "ok"]


def no_case_differs(results: FinetuneResults) -> bool:
    """Reverting the fix changed no case's curves (the evidence's negative control survived)."""
    vs = verdicts(results)
    return bool(vs) and all(v.label == "no difference" for v in vs)


def verdicts(results: FinetuneResults) -> list[Verdict]:
    """One verdict per case that has both variants."""
    out = []
    for opt, period, lr in results.cases():
        f, u = results.run("with_fix", opt, period, lr), results.run("without_fix", opt, period, lr)
        if f and u:
            out.append(verdict(opt, period, lr, f.epochs, u.epochs))
    return out


# ---------------------------------------------------------------------------------------------
# cache key


def data_digest(files: Iterable[tuple[str, bytes]]) -> str:
    """sha256 of the training text as the program reads it: (relative path, content) in order.
    The path is part of it so a renamed file is a different input even with equal bytes."""
    h = hashlib.sha256()
    for name, content in files:
        h.update(name.encode() + b"\0" + hashlib.sha256(content).hexdigest().encode() + b"\n")
    return h.hexdigest()


def cache_key(
    *,
    base: str,
    series: str,
    model_sha256: str,
    data_sha256: str,
    program_sha256: str,
    flags: dict[str, Any],
    cases: list[dict[str, Any]],
    toolchain: dict[str, Any],
) -> str:
    """A stable sha256 of everything that decides the finetune results (pure):
    base: the upstream tree (commit or source digest); series: digest of the rendered series;
    model/data: the model file's and the text's sha256; program: the driver source and harness;
    flags: CMake flags and the program's fixed options; cases: the runs (optimizer, n_batch,
    n_ubatch, lr, epochs); toolchain: compiler and CMake versions."""
    parts = {
        "v": KEY_VERSION,
        "kind": "finetune",
        "base": base,
        "series": series,
        "model": model_sha256,
        "data": data_sha256,
        "program": program_sha256,
        "flags": flags,
        "cases": cases,
        "toolchain": toolchain,
    }
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


# ---------------------------------------------------------------------------------------------
# table and plot


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return "—"
    return f"{x:.4f}" if math.isfinite(x) else str(x)


def table_markdown(results: FinetuneResults) -> str:
    """A verdict table, then per case: epoch | train/eval loss with the fix | train/eval without."""
    vs = verdicts(results)
    lines = [
        "| optimizer | lr | opt_period | epochs | verdict | max rel. diff | eval rises without the fix (epochs) | oscillates | diverged | ends worse |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in vs:
        lines.append(
            f"| {v.optimizer} | {v.lr:g} | {v.opt_period} | {v.epochs} | **{v.label}** | {v.max_rel_diff:.3g} | "
            f"{', '.join(map(str, v.rises_where_fixed_falls)) or 'none'} | {'yes' if v.oscillates else 'no'} | "
            f"{'yes' if v.diverged else 'no'} | {'yes' if v.ends_worse else 'no'} |"
        )
    for opt, period, lr in results.cases():
        f, u = results.run("with_fix", opt, period, lr), results.run("without_fix", opt, period, lr)
        rows: dict[int, list[Optional[Epoch]]] = {}
        first = f or u
        assert first is not None  # a case exists because one of its runs does
        for i, run in enumerate((f, u)):
            for e in run.epochs if run else []:
                rows.setdefault(e.epoch, [None, None])[i] = e
        lines += [
            "",
            f"**{opt}, lr {lr:g}, opt_period {period}** (n_batch {first.n_batch}, n_ubatch {first.n_ubatch})",
            "",
            "| epoch | train loss, with the fix | eval loss, with the fix | train loss, without | eval loss, without |",
            "|---|---|---|---|---|",
        ]
        for n in sorted(rows):
            a, b = rows[n]
            lines.append(
                f"| {n} | {_fmt(a.train_loss if a else None)} | {_fmt(a.eval_loss if a else None)} | "
                f"{_fmt(b.train_loss if b else None)} | {_fmt(b.eval_loss if b else None)} |"
            )
    return "\n".join(lines) + "\n"


def figure(results: FinetuneResults):
    """A grid of small panels, rows = optimizer and learning rate, columns = opt_period: train
    (solid) and eval (dashed) loss per epoch, with the fix (blue) and without (red)."""
    try:
        import matplotlib
    except ImportError as e:  # the [plot] extra
        raise RuntimeError("the finetune plot needs matplotlib (pip install 'ggml-patch[plot]')") from e
    matplotlib.use("Agg")  # no display on CI machines
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    cases = results.cases()
    opts = list(dict.fromkeys((o, lr) for o, _, lr in cases))
    periods = sorted(dict.fromkeys(p for _, p, _ in cases))
    fig, axes = plt.subplots(
        len(opts), len(periods), figsize=(3.6 * len(periods), 2.8 * len(opts)), dpi=110, squeeze=False
    )
    for i, (opt, lr) in enumerate(opts):
        for j, period in enumerate(periods):
            ax = axes[i][j]
            for variant, colour, label in (
                ("with_fix", "tab:blue", "with the fix"),
                ("without_fix", "tab:red", "without"),
            ):
                run = results.run(variant, opt, period, lr)
                if not run:
                    continue
                xs = [e.epoch for e in run.epochs]
                ax.plot(xs, [e.train_loss for e in run.epochs], "-o", ms=3, color=colour, label=f"train, {label}")
                ax.plot(
                    xs, [e.eval_loss for e in run.epochs], "--s", ms=3, color=colour, alpha=0.7, label=f"eval, {label}"
                )
            if _spans_decades(ax):
                ax.set_yscale("log")  # a diverging run would flatten the other curves
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(f"{opt} lr {lr:g}, opt_period {period}", fontsize=9)
            ax.set_xlabel("epoch", fontsize=8)
            ax.set_ylabel("cross-entropy loss", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=6)
    where = results.target + (
        f", upstream {results.source['upstream_commit'][:12]}"
        if isinstance(results.source.get("upstream_commit"), str)
        else ""
    )
    fig.suptitle(f"llama_opt_epoch, tiny llama model, with and without the fix\n{where}", fontsize=9)
    fig.tight_layout()
    return fig


def _spans_decades(ax) -> bool:
    ys = [y for line in ax.lines for y in line.get_ydata() if math.isfinite(y) and y > 0]
    return bool(ys) and max(ys) / min(ys) > 10


def plot(results: FinetuneResults, path: Path) -> Path:
    """Write finetune-loss.png (no version stamp in the metadata: same data, same bytes)."""
    import matplotlib.pyplot as plt

    fig = figure(results)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------------------------
# summary.md's section


SECTION_TITLE = "Fine-tuning evidence: llama_opt_epoch with and without the fix"


def provenance_rows(results: FinetuneResults) -> list[tuple[str, str]]:
    """(what, value) rows: where the numbers come from (data only)."""
    m, d = results.model, results.data
    dims = m.get("dims") or {}
    model = ", ".join(f"{k} {dims[k]}" for k in ("n_layer", "n_embd", "n_head", "n_ff", "n_ctx") if k in dims)
    tokens = f", {d['tokens']} tokens" if d.get("tokens") is not None else ""
    runs = [r for r in results.runs if r.cpu_seconds is not None]
    return [
        ("target", f"{results.target}: {results.source.get('description', '')}".rstrip(": ")),
        ("base commit", f"`{results.base}`"),
        ("upstream commit", f"`{results.source['upstream_commit']}`" if results.source.get("upstream_commit") else "—"),
        ("series sha256", f"`{results.series['sha256']}`" if results.series.get("sha256") else "—"),
        (
            "program",
            f"`native_tests/{results.program.get('name', PROGRAM)}.cpp` (llama_opt_init, llama_opt_epoch), "
            f"CPU, {THREADS} threads, n_ctx {N_CTX}, n_ubatch {N_UBATCH}, val-split {VAL_SPLIT:g}",
        ),
        (
            "model",
            f"tiny llama, seed {m.get('seed', '—')}, {model}, n_vocab {m.get('n_vocab', '—')}, F32, "
            f"{m.get('n_params', '—')} parameters, sha256 `{m.get('sha256', '—')}`",
        ),
        ("data", f"{' + '.join(d.get('files') or [])} of the tree{tokens}, sha256 `{d.get('sha256', '—')}`"),
        (
            "CPU seconds per epoch",
            f"{sum(r.cpu_seconds or 0 for r in runs) / max(1, sum(len(r.epochs) for r in runs)):.1f}" if runs else "—",
        ),
    ]


def summary_section(results: FinetuneResults, plot_note: str) -> str:
    """The section of summary.md: provenance, then the verdicts and the loss tables."""
    lines = [f"## {SECTION_TITLE}", "", plot_note, "", "| | |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in provenance_rows(results)]
    return "\n".join(lines) + "\n\n" + table_markdown(results)
