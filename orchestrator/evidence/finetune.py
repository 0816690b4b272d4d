"""Fine-tuning evidence on llama.cpp's own training path (native_tests/finetune-opt-dynamic.cpp).

A tiny llama model is fine-tuned with llama_opt_init / llama_opt_epoch, with the fix and with the fix
reverted, for each optimizer and opt_period; this module holds the results' data model (to and from
JSON), the parser of the program's output, the verdict rules, the cache key, the markdown table and
the plot. Everything but the plot's file write is pure.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional

SCHEMA_VERSION = 1
KEY_VERSION = 1  # bump when the meaning of a cached finetune result changes
VARIANTS = ("with_fix", "without_fix")
PROGRAM = "finetune-opt-dynamic"

# The data: text shipped in the llama.cpp snapshot, paths relative to its root, concatenated in
# this order with one newline between files (as the program reads them).
DATA_FILES = ("LICENSE", "CONTRIBUTING.md")


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
                    isinstance(p.get(k), (int, float)) for k in ("train_loss", "eval_loss")):
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

    @property
    def case(self) -> tuple[str, int, float]:
        return (self.optimizer, self.opt_period, self.lr)


@dataclass
class FinetuneResults:
    target: str
    base: str                 # the upstream commit (or source digest) the llama.cpp tree is at
    model: dict[str, Any]     # sha256, seed, dims, n_vocab, vocab_file, vocab_sha256
    data: dict[str, Any]      # files, sha256, tokens (from the program's config line)
    program: dict[str, Any]   # name, sha256 of its source and of the harness
    runs: list[Run] = field(default_factory=list)
    cache_key: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_json(self) -> str:
        return json.dumps(_to_plain(self), indent=2, sort_keys=True, allow_nan=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "FinetuneResults":
        d = json.loads(text)
        if d.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"finetune results: schema_version {d.get('schema_version')!r}, expected {SCHEMA_VERSION}")
        runs = [Run(**{**r, "epochs": [Epoch(**e) for e in r["epochs"]]}) for r in d.pop("runs")]
        return cls(**d, runs=runs)

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
    for prev, cur in zip(losses, losses[1:]):
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
    return sum(1 for a, b in zip(signs, signs[1:]) if a != b)


@dataclass(frozen=True)
class Verdict:
    optimizer: str
    opt_period: int
    lr: float
    epochs: int
    differ: bool                       # the curves differ between variants
    max_rel_diff: float
    fixed_falls: bool                  # with the fix, the eval loss ends lower than it started and never rises
    rises_where_fixed_falls: tuple[int, ...]  # epochs where the eval loss rose without the fix and fell with it
    oscillates: bool                   # without the fix, the eval (or train) loss changes direction at least twice
    diverged: bool                     # without the fix, a loss became nan or inf
    ends_worse: bool                   # without the fix, the last eval loss is higher than with it (beyond DIFFER_REL)
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
    diffs = [_rel(a.train_loss, b.train_loss) for a, b in zip(f, u)] + \
            [_rel(a.eval_loss, b.eval_loss) for a, b in zip(f, u)]
    max_diff = max(diffs, default=0.0)
    differ = max_diff > DIFFER_REL
    f_eval, u_eval = [e.eval_loss for e in f], [e.eval_loss for e in u]
    u_train = [e.train_loss for e in u]
    f_moves, u_moves = moves(f_eval), moves(u_eval)
    fixed_falls = n >= 2 and math.isfinite(f_eval[-1]) and f_eval[-1] < f_eval[0] and 1 not in f_moves
    rises = tuple(f[i + 1].epoch for i, (a, b) in enumerate(zip(f_moves, u_moves)) if a == -1 and b == 1)
    oscillates = max(direction_changes(u_moves), direction_changes(moves(u_train))) >= 2
    diverged = any(not math.isfinite(x) for x in u_eval + u_train)
    ends_worse = n >= 1 and (not math.isfinite(u_eval[-1]) or
                             (u_eval[-1] > f_eval[-1] and _rel(u_eval[-1], f_eval[-1]) > DIFFER_REL))
    if n >= 1 and not differ:
        label = "no difference"
    elif n < 2 or not fixed_falls:
        label = "undecided"
    elif diverged or rises or oscillates:
        label = "bug visible"
    else:
        label = "differs, no harm shown"
    return Verdict(optimizer, opt_period, lr, n, differ, max_diff, fixed_falls, rises, oscillates, diverged,
                   ends_worse, label)


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


def cache_key(*, base: str, series: str, model_sha256: str, data_sha256: str, program_sha256: str,
              flags: dict[str, Any], cases: list[dict[str, Any]], toolchain: dict[str, Any]) -> str:
    """A stable sha256 of everything that decides the finetune results (pure):
    base: the upstream tree (commit or source digest); series: digest of the rendered series;
    model/data: the model file's and the text's sha256; program: the driver source and harness;
    flags: CMake flags and the program's fixed options; cases: the runs (optimizer, n_batch,
    n_ubatch, lr, epochs); toolchain: compiler and CMake versions."""
    parts = {"v": KEY_VERSION, "kind": "finetune", "base": base, "series": series, "model": model_sha256,
             "data": data_sha256, "program": program_sha256, "flags": flags, "cases": cases,
             "toolchain": toolchain}
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
    lines = ["| optimizer | lr | opt_period | epochs | verdict | max rel. diff | eval rises without the fix (epochs) | oscillates | diverged | ends worse |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in vs:
        lines.append(f"| {v.optimizer} | {v.lr:g} | {v.opt_period} | {v.epochs} | **{v.label}** | {v.max_rel_diff:.3g} | "
                     f"{', '.join(map(str, v.rises_where_fixed_falls)) or 'none'} | {'yes' if v.oscillates else 'no'} | "
                     f"{'yes' if v.diverged else 'no'} | {'yes' if v.ends_worse else 'no'} |")
    for opt, period, lr in results.cases():
        f, u = results.run("with_fix", opt, period, lr), results.run("without_fix", opt, period, lr)
        rows: dict[int, list[Optional[Epoch]]] = {}
        for i, run in enumerate((f, u)):
            for e in (run.epochs if run else []):
                rows.setdefault(e.epoch, [None, None])[i] = e
        lines += ["", f"**{opt}, lr {lr:g}, opt_period {period}** (n_batch {(f or u).n_batch}, n_ubatch {(f or u).n_ubatch})", "",
                  "| epoch | train loss, with the fix | eval loss, with the fix | train loss, without | eval loss, without |",
                  "|---|---|---|---|---|"]
        for n in sorted(rows):
            a, b = rows[n]
            lines.append(f"| {n} | {_fmt(a and a.train_loss)} | {_fmt(a and a.eval_loss)} | "
                         f"{_fmt(b and b.train_loss)} | {_fmt(b and b.eval_loss)} |")
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
    fig, axes = plt.subplots(len(opts), len(periods), figsize=(3.6 * len(periods), 2.8 * len(opts)),
                             dpi=110, squeeze=False)
    for i, (opt, lr) in enumerate(opts):
        for j, period in enumerate(periods):
            ax = axes[i][j]
            for variant, colour, label in (("with_fix", "tab:blue", "with the fix"),
                                           ("without_fix", "tab:red", "without")):
                run = results.run(variant, opt, period, lr)
                if not run:
                    continue
                xs = [e.epoch for e in run.epochs]
                ax.plot(xs, [e.train_loss for e in run.epochs], "-o", ms=3, color=colour, label=f"train, {label}")
                ax.plot(xs, [e.eval_loss for e in run.epochs], "--s", ms=3, color=colour, alpha=0.7,
                        label=f"eval, {label}")
            if _spans_decades(ax):
                ax.set_yscale("log")  # a diverging run would flatten the other curves
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_title(f"{opt} lr {lr:g}, opt_period {period}", fontsize=9)
            ax.set_xlabel("epoch", fontsize=8)
            ax.set_ylabel("cross-entropy loss", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=6)
    fig.suptitle(f"llama_opt_epoch, tiny llama model, with and without the fix\n{results.target}", fontsize=9)
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
