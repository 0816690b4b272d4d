"""The fine-tuning evidence's pure parts: upstream's unmodified `llama-finetune` (examples/training/
finetune.cpp) built with the fix and with it reverted fine-tunes a tiny llama model (tiny_model.py),
pre-trained once with the fixed build on one text of the tree (PRETRAIN_FILES), on another
(DATA_FILES); llama-finetune's own validation split is the held-out eval set. Here: command lines,
the results model (finetune.json, untrusted input), noise floor, verdicts, cache key, tables, plot.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Optional, Sequence, Union

from pydantic import ConfigDict, Field, StringConstraints, ValidationError

from ..model.values import Sha256
from ..records import Record, error_line
from ..run import resultcache
from .cases import MAX_EPOCHS, N_CTX, Case, number, parse_case, parse_cases  # noqa: F401 (parse_case(s): re-exported)

FINETUNE_SCHEMA_VERSION = 2
FINETUNE_KEY_VERSION = 2  # bump when the meaning of a cached finetune result changes
VARIANTS = ("with_fix", "without_fix")
PROGRAM = "llama-finetune"  # the target's own examples/training/finetune.cpp, unmodified
PROGRAM_SOURCE = "examples/training/finetune.cpp"

# The texts, shipped in the llama.cpp tree (paths relative to its root): the model is pre-trained on
# one and fine-tuned on the other, so fine-tuning starts from a model that has learned something.
PRETRAIN_FILES = ("CONTRIBUTING.md",)
DATA_FILES = ("docs/docker.md",)
# finetune.cpp's other defaults (the cases, n_ctx and the limits: finetune/cases.py, light for `--help`)
VAL_SPLIT = 0.05
THREADS = 2
# Pre-training (once per model, data and build, cached by a content hash): the fixed build, AdamW at
# ggml-opt's own default step 1e-3, -c = -b = -ub.
PRETRAIN = Case("adamw", 1e-3, 1, 8)
# The noise floor: the same fixed build and case run again (run to run) and at other thread counts
# (summation order); the first case is measured so, before any verdict is drawn.
NOISE_THREADS = (1, 2)
PRETRAINED = "pretrained.gguf"
TREE = "$LLAMA_CPP"  # the llama.cpp tree, in the commands a reader runs
BINARY = f"./build/bin/{PROGRAM}"  # ... and the program built from it


def program_options() -> dict[str, Any]:
    """The program's options that are the same for every case (part of the cache key)."""
    fixed = dict(
        n_ctx=N_CTX, val_split=VAL_SPLIT, threads=THREADS, noise_threads=list(NOISE_THREADS)
    )
    return fixed | {"pretrain": pretrain_options()}


def pretrain_options() -> dict[str, Any]:
    p = PRETRAIN
    return {
        "optimizer": p.optimizer,
        "lr": p.lr,
        "epochs": p.epochs,
        "n_ctx": N_CTX,
        "files": list(PRETRAIN_FILES),
    }


# llama-finetune built from a llama.cpp tree as the evidence builds it (only that target)
BUILD_COMMANDS = (
    f"cmake -S {TREE} -B build -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_EXAMPLES=ON "
    "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_OPENSSL=OFF",
    f"cmake --build build --target {PROGRAM}",
)


def command(
    binary: str, model: str, data: Sequence[str], case: Case, threads: int = THREADS, out: str = ""
) -> list[str]:
    """llama-finetune's command line for a case: -c = -b = 256, -ub = 256 / opt_period; -f takes one file."""
    assert len(data) == 1, "llama-finetune reads one -f file"
    opts = {
        "-m": model,
        "-f": data[0],
        "-c": N_CTX,
        "-b": N_CTX,
        "-ub": case.n_ubatch,
        "-opt": case.optimizer,
    }
    opts |= {
        "-lr": f"{case.lr:g}",
        "-epochs": case.epochs,
        "-val-split": f"{VAL_SPLIT:g}",
        "-t": threads,
    }
    return [
        binary,
        *(s for k, v in {**opts, "-o": out or "/dev/null"}.items() for s in (k, str(v))),
    ]


def pretrain_command(binary: str, model: str, data: Sequence[str], out: str) -> list[str]:
    return command(binary, model, data, PRETRAIN, THREADS, out)


# ---------------------------------------------------------------- llama-finetune's output
# ggml_opt_epoch_callback_progress_bar on stderr, redrawn with \r; the line that reaches data=N/N is
# an epoch's final (train, then val), its loss the mean over the epoch.

_BAR = re.compile(
    r"^(?P<kind>train|val):\s*\[[^\]]*\]\s*data=(?P<i>\d+)/(?P<n>\d+)\s+loss=(?P<loss>[^±\s]+)±\S+"
    r"\s+acc=(?P<acc>[^±\s]+)±"
)
WARNING = re.compile(r"(?i)\bwarn|will not receive gradients")
_LOG_TIME = re.compile(r"^\d+\.\d+\.\d+\.\d+\s+")


Loss = float  # nan and inf included: a diverged run's loss (written as NaN / Infinity)


class Epoch(Record):
    """One epoch of one run: llama-finetune's mean train loss and its eval (validation) loss."""

    model_config = ConfigDict(frozen=True)

    epoch: Annotated[int, Field(ge=1, le=MAX_EPOCHS)]
    train_loss: Loss
    eval_loss: Loss
    train_acc: Optional[float] = None
    eval_acc: Optional[float] = None


@dataclass(frozen=True)
class ProgramOutput:
    epochs: tuple[Epoch, ...]
    warnings: tuple[str, ...]  # libllama's and finetune.cpp's warnings, shown in the record

    def complete(self, epochs: int) -> bool:
        return len(self.epochs) == epochs


def parse_output(text: str) -> ProgramOutput:
    """llama-finetune's output -> one Epoch per (train, val) pair of final progress lines, and its warnings."""
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
            epochs.append(
                Epoch(
                    epoch=len(epochs) + 1,
                    train_loss=train[0],
                    eval_loss=loss,
                    train_acc=train[1],
                    eval_acc=acc,
                )
            )
            train = None
    return ProgramOutput(tuple(epochs), tuple(warnings))


# ---------------------------------------------------------------- the results' data model


Text = Annotated[str, StringConstraints(max_length=4096)]
Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
# a plain relative path of the tree: never absolute, never "..", no option
TreePath = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$", max_length=200
    ),
]
Seconds = Annotated[float, Field(ge=0)]


class Info(Record):
    """An open object of finetune.json (model, data, ...): the keys named are checked, others kept;
    read like a dict (`.get`, `[]`) as the report code reads it."""

    model_config = ConfigDict(extra="allow")

    def get(self, key: str, default: Any = None) -> Any:
        value = dict(self).get(key)  # the fields and the other keys alike
        return default if value is None else value

    def __getitem__(self, key: str) -> Any:
        if self.get(key) is None:
            raise KeyError(key)
        return self.get(key)


class PretrainInfo(Info):
    """How the checkpoint was pre-trained (once per key, with the fixed build)."""

    files: Optional[Annotated[list[TreePath], Field(max_length=16)]] = None
    optimizer: Optional[Literal["sgd", "adamw"]] = None
    lr: Optional[Annotated[float, Field(gt=0, le=10)]] = None
    epochs: Optional[Annotated[int, Field(ge=1, le=MAX_EPOCHS)]] = None
    n_ctx: Optional[Annotated[int, Field(ge=1)]] = None
    data_sha256: Optional[Sha256] = None
    key: Optional[Sha256] = None
    train_loss: Optional[Annotated[list[Loss], Field(max_length=MAX_EPOCHS)]] = None
    eval_loss: Optional[Annotated[list[Loss], Field(max_length=MAX_EPOCHS)]] = None


class ModelInfo(Info):
    sha256: Optional[Sha256] = None  # the pre-trained checkpoint the cases start from
    random_sha256: Optional[Sha256] = None  # the random model it was pre-trained from
    vocab_sha256: Optional[Sha256] = None
    seed: Optional[Annotated[int, Field(ge=0, le=2**32 - 1)]] = None
    n_vocab: Optional[Annotated[int, Field(ge=1)]] = None
    n_params: Optional[Annotated[int, Field(ge=1)]] = None
    vocab_file: Optional[TreePath] = None
    pretrained: Optional[bool] = None
    pretrain: Optional[PretrainInfo] = None


class DataInfo(Info):
    sha256: Optional[Sha256] = None
    files: Optional[Annotated[list[TreePath], Field(max_length=16)]] = None
    tokens: Optional[Annotated[int, Field(ge=0)]] = None


class SeriesInfo(Info):
    sha256: Optional[Sha256] = None  # canonical, as results.json records it
    rendered_sha256: Optional[Sha256] = None
    patches: Optional[Annotated[list[Text], Field(max_length=64)]] = None


class Run(Record):
    """One run of llama-finetune: a variant (with or without the fix) of one case, at a thread count;
    repeat 1 is the same run again (the noise floor's run-to-run measure)."""

    variant: Literal["with_fix", "without_fix"]
    optimizer: Literal["sgd", "adamw"]
    opt_period: Annotated[int, Field(ge=1, le=64)]
    n_batch: Annotated[int, Field(ge=1)]
    n_ubatch: Annotated[int, Field(ge=1)]
    lr: Annotated[float, Field(gt=0, le=10)]
    command: Annotated[list[Text], Field(max_length=64)]
    epochs: Annotated[list[Epoch], Field(max_length=MAX_EPOCHS)] = []
    exit_code: Optional[int] = None
    seconds: Optional[Seconds] = None
    outcome: Literal["ok", "failed", "timed out", "crashed"] = "ok"  # as the runner classified it
    cpu_seconds: Optional[Seconds] = (
        None  # user + system CPU of the program (wall time depends on the load)
    )
    threads: Annotated[int, Field(ge=1, le=256)] = THREADS
    repeat: Annotated[int, Field(ge=0, le=16)] = 0
    warnings: Annotated[list[Text], Field(max_length=20)] = []

    @property
    def case(self) -> tuple[str, int, float]:
        return (self.optimizer, self.opt_period, self.lr)

    @property
    def primary(self) -> bool:
        """A run the verdict compares (the others measure the noise floor)."""
        return self.threads == THREADS and self.repeat == 0


COMPUTED = (
    "noise",
    "thresholds",
    "verdicts",
)  # written for the reader, recomputed on reading, never trusted


class FinetuneResults(Record):
    """finetune.json: what `ggml-patch evidence` ran and measured (the floor and verdicts are computed)."""

    schema_version: Literal[2] = 2  # FINETUNE_SCHEMA_VERSION
    target: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._ /-]{0,199}$")]
    base: Hex  # the upstream commit (or source digest) the llama.cpp tree is at
    cache_key: Union[Sha256, Literal[""]] = ""
    model: ModelInfo
    data: DataInfo
    program: Info  # name, source path, sha256 of that source in the tree
    runs: Annotated[list[Run], Field(max_length=64)]
    source: Info = Info()  # the target's source: description, upstream commit
    series: SeriesInfo = SeriesInfo()
    provenance: Info = Info()  # per variant: binary sha256, whether it holds the fix
    toolchain: Annotated[dict[str, Text], Field(max_length=32)] = {}
    timings: Info = Info()  # seconds of the run that made these results

    def to_json(self) -> str:  # type: ignore[override]
        """finetune.json's text, with the noise floor, thresholds and verdicts (a reader recomputes them)."""
        plain = self.model_dump(mode="json")
        plain |= {"noise": asdict(noise_floor(self)), "thresholds": THRESHOLDS}
        plain["verdicts"] = [asdict(v) for v in verdicts(self)]
        return json.dumps(plain, indent=2, sort_keys=True, allow_nan=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "FinetuneResults":
        """finetune.json validated as untrusted input (anyone's disk): a ValueError naming the first bad key."""
        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise ValueError(f"not valid JSON ({str(e).splitlines()[0][:80]})") from None
        if not isinstance(d, dict):
            raise ValueError("expected a JSON object")
        if (version := d.get("schema_version")) != FINETUNE_SCHEMA_VERSION:
            raise ValueError(
                f"finetune results: schema_version {version!r}, expected {FINETUNE_SCHEMA_VERSION}"
            )
        try:
            plain = json.dumps({k: v for k, v in d.items() if k not in COMPUTED}, allow_nan=True)
            found = cls.model_validate_json(plain, strict=True)
        except ValidationError as e:
            raise ValueError(error_line(e)) from None
        found.check_runs()
        return found

    def check_runs(self) -> None:
        """One run per variant, case, thread count and repeat; epochs numbered 1, 2, ... in order."""
        seen = set()
        for i, r in enumerate(self.runs):
            key = (r.variant, r.optimizer, r.opt_period, r.lr, r.threads, r.repeat)
            if key in seen:
                raise ValueError(
                    f"runs[{i}]: a second {r.variant} run of {r.optimizer} lr {r.lr:g} opt_period {r.opt_period} "
                    f"at {r.threads} threads (repeat {r.repeat})"
                )
            seen.add(key)
            numbers = [e.epoch for e in r.epochs]
            if numbers != list(range(1, len(numbers) + 1)):
                raise ValueError(
                    f"runs[{i}].epochs: epochs {numbers[:8]} are not numbered 1, 2, ... in order"
                )

    def cases(self) -> list[tuple[str, int, float]]:
        """(optimizer, opt_period, lr) in first-seen order."""
        return list(dict.fromkeys(r.case for r in self.runs))

    def run(
        self, variant: str, optimizer: str, opt_period: int, lr: Optional[float] = None
    ) -> Optional[Run]:
        """The primary run of a variant and case (lr None: the first with any lr)."""
        found = (
            r
            for r in self.runs
            if r.primary and r.variant == variant and r.case[:2] == (optimizer, opt_period)
        )
        return next((r for r in found if lr in (None, r.lr)), None)


# ---------------------------------------------------------------- the noise floor and the verdict rule
#
# Losses are llama-finetune's mean cross-entropy per epoch, printed with 5 decimals (PRINT_RESOLUTION).
# The noise floor is the largest difference in any epoch's train or eval loss between runs of the
# same build and case that differ only in run (repeat) or thread count, never below the print
# resolution. A difference between the variants is:
# - "bug visible": the unfixed run's last eval loss is higher than the fixed one's by more than the
#   floor AND by at least MIN_EFFECT of the fixed one (or it is not finite while the fixed one is);
# - "differs, no harm shown": some epoch differs by more than the floor, but not that;
# - "no difference": every epoch within the floor;
# - "undecided": the runs have no epoch in common.

PRINT_RESOLUTION = 1e-5
MIN_EFFECT = 0.01  # relative to the fixed run's last eval loss: 1 %


THRESHOLDS = {
    "print_resolution": PRINT_RESOLUTION,
    "min_effect_rel": MIN_EFFECT,
    "rule": "bug visible: unfixed last eval loss - fixed > noise floor and >= min_effect_rel x fixed",
}


@dataclass(frozen=True)
class Noise:
    floor: float  # absolute, in loss units
    measured: Optional[float]  # the largest same-build difference seen (None: no pair measured)
    pairs: tuple[
        str, ...
    ]  # which runs were compared, e.g. "with_fix adamw lr 1e-05 opt_period 1: t2 vs t1"


def _max_abs_diff(a: Sequence[Epoch], b: Sequence[Epoch]) -> float:
    out = 0.0
    for x, y in zip(a, b, strict=False):
        for u, v in ((x.train_loss, y.train_loss), (x.eval_loss, y.eval_loss)):
            d = (
                abs(u - v)
                if math.isfinite(u) and math.isfinite(v)
                else (0.0 if u == v else math.inf)
            )
            out = max(out, d)
    return out


def noise_floor(results: FinetuneResults) -> Noise:
    """The floor from every pair (primary run, other run of the same variant and case) in the results."""
    measured: Optional[float] = None
    pairs = []
    for r in results.runs:
        p = None if r.primary or r.outcome != "ok" else results.run(r.variant, *r.case)
        if p is None or p.outcome != "ok":
            continue
        d = _max_abs_diff(p.epochs, r.epochs)
        measured = d if measured is None else max(measured, d)
        case = f"{r.variant} {r.optimizer} lr {r.lr:g} opt_period {r.opt_period}"
        pairs.append(
            f"{case}: t{p.threads} vs t{r.threads}{f' repeat {r.repeat}' if r.repeat else ''}: {d:.5g}"
        )
    return Noise(max(PRINT_RESOLUTION, measured or 0.0), measured, tuple(pairs))


@dataclass(frozen=True)
class FinetuneVerdict:
    optimizer: str
    opt_period: int
    lr: float
    epochs: int
    max_abs_diff: float  # largest |unfixed - fixed| of any epoch's train or eval loss
    end_diff: float  # unfixed - fixed last eval loss (positive: the unfixed run ends worse)
    end_diff_rel: float  # end_diff / fixed last eval loss
    floor: float
    better_epochs: (
        int  # epochs where the unfixed eval loss is lower than the fixed one by more than the floor
    )
    worse_epochs: int  # ... higher
    diverged: bool  # without the fix, a loss became nan or inf (with the fix it did not)
    label: str


def finetune_verdict(
    optimizer: str,
    opt_period: int,
    lr: float,
    fixed: Sequence[Epoch],
    unfixed: Sequence[Epoch],
    floor: float,
) -> FinetuneVerdict:
    """The rule above, on the epochs both runs reported (pure)."""
    n = min(len(fixed), len(unfixed))
    f, u = list(fixed[:n]), list(unfixed[:n])
    max_diff = _max_abs_diff(f, u)
    finite = [math.isfinite(e.train_loss) and math.isfinite(e.eval_loss) for e in f + u]
    diverged = all(finite[:n]) and not all(finite[n:])  # without the fix only
    end, end_rel = 0.0, 0.0
    if n:
        fe, ue = f[-1].eval_loss, u[-1].eval_loss
        if math.isfinite(fe) and math.isfinite(ue):
            end = ue - fe
        else:  # the unfixed run's loss not finite: infinitely worse
            end = math.inf if math.isfinite(fe) else (0.0 if fe == ue else -math.inf)
        end_rel = end / abs(fe) if math.isfinite(fe) and fe != 0 else (math.inf if end > 0 else 0.0)
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
        optimizer, opt_period, lr, n, max_diff, end, end_rel, floor, better, worse, diverged, label
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
    return bool(vs := verdicts(results)) and all(v.label == "no difference" for v in vs)


def verdicts(results: FinetuneResults) -> list[FinetuneVerdict]:
    """One verdict per case that has both variants, against the results' own noise floor."""
    floor = noise_floor(results).floor
    pairs = [
        (c, results.run("with_fix", *c), results.run("without_fix", *c)) for c in results.cases()
    ]
    return [finetune_verdict(*c, f.epochs, u.epochs, floor) for c, f, u in pairs if f and u]


# ---------------------------------------------------------------- cache key


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
    model: str,
    data: str,
    program: str,
    flags: dict[str, Any],
    cases: list[dict[str, Any]],
    toolchain: dict[str, Any],
    pretrain: str = "",
) -> str:
    """A stable sha256 of all that decides the results (pure): series is the rendered series' digest, model
    the random model's, data the training text's, program finetune.cpp's, pretrain the pre-training's key."""
    parts: dict[str, Any] = dict(
        base=base, series=series, model=model, data=data, program=program, flags=flags
    )
    parts |= dict(
        cases=cases, toolchain=toolchain, pretrain=pretrain, v=FINETUNE_KEY_VERSION, kind="finetune"
    )
    return resultcache.cell_key(parts)


# ---------------------------------------------------------------- table and plot


def _cells(e: Optional[Epoch]) -> str:
    """An epoch's train and eval loss as two table cells, as llama-finetune prints them (5 decimals)."""
    if not e:
        return "— | —"
    return " | ".join(
        f"{x:.5f}" if math.isfinite(x) else str(x) for x in (e.train_loss, e.eval_loss)
    )


def table_markdown(results: FinetuneResults) -> str:
    """A verdict table, then per case: epoch | train/eval loss with the fix | train/eval without."""
    noise = noise_floor(results)
    lines = [
        f"Noise floor {noise.floor:.5g} (largest same-build difference measured: "
        f"{'none measured' if noise.measured is None else f'{noise.measured:.5g}'}; print resolution "
        f"{PRINT_RESOLUTION:g}); minimum effect {MIN_EFFECT:.0%} of the fixed run's last eval loss. "
        '"bug visible" = the unfixed run\'s last eval loss is higher by more than the floor and by at '
        "least the minimum effect.",
        "",
        "| optimizer | lr | opt_period | epochs | verdict | last eval loss, without - with | relative | "
        "max abs. diff | epochs better / worse without (eval, beyond the floor) | non-finite loss without |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts(results):
        lines.append(
            f"| {v.optimizer} | {v.lr:g} | {v.opt_period} | {v.epochs} | **{v.label}** | {v.end_diff:+.5f} | "
            f"{v.end_diff_rel:+.3%} | {v.max_abs_diff:.5f} | {v.better_epochs} / {v.worse_epochs} | "
            f"{'yes' if v.diverged else 'no'} |"
        )
    if any(not r.primary for r in results.runs):
        lines += ["", "Noise-floor runs (same build and case, another thread count or run):", ""]
        lines += [f"- {p}" for p in noise.pairs] or ["- none finished"]
    for opt, period, lr in results.cases():
        f, u = results.run("with_fix", opt, period, lr), results.run("without_fix", opt, period, lr)
        first = f or u
        assert first is not None  # a case exists because one of its runs does
        fe, ue = ({e.epoch: e for e in run.epochs} if run else {} for run in (f, u))
        lines += [
            "",
            f"**{opt}, lr {lr:g}, opt_period {period}** (n_batch {first.n_batch}, n_ubatch {first.n_ubatch})",
            "",
            "| epoch | train loss, with the fix | eval loss, with the fix | train loss, without | eval loss, without |",
            "|---|---|---|---|---|",
        ]
        lines += [f"| {n} | {_cells(fe.get(n))} | {_cells(ue.get(n))} |" for n in sorted(fe | ue)]
    return "\n".join(lines) + "\n"


_STYLES = {"with_fix": ("tab:blue", "with the fix"), "without_fix": ("tab:red", "without")}


def figure(results: FinetuneResults):
    """Rows = optimizer and lr, columns = opt_period: train (solid) and eval (dashed) loss per epoch."""
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
                ax.plot(
                    xs,
                    [e.train_loss for e in run.epochs],
                    "-o",
                    ms=3,
                    color=colour,
                    label=f"train, {label}",
                )
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
    upstream = results.source.get("upstream_commit")
    where = results.target + (f", upstream {upstream[:12]}" if isinstance(upstream, str) else "")
    title = "upstream llama-finetune, pre-trained tiny llama model, with and without the fix"
    fig.suptitle(f"{title}\n{where}", fontsize=9)
    fig.tight_layout()
    return fig


def plot(results: FinetuneResults, path: Path) -> Path:
    """Write finetune-loss.png (no version stamp in the metadata: same data, same bytes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    figure(results).savefig(path, metadata={"Software": None})
    return path


# ---------------------------------------------------------------- summary.md's section


SECTION_TITLE = "Fine-tuning evidence: upstream's llama-finetune with and without the fix"


def provenance_rows(results: FinetuneResults) -> dict[str, str]:
    """what -> value: where the numbers come from (data only)."""
    m, d, pre = results.model, results.data, results.model.get("pretrain") or {}
    dims = m.get("dims") or {}
    model = ", ".join(
        f"{k} {dims[k]}" for k in ("n_layer", "n_embd", "n_head", "n_ff", "n_ctx") if k in dims
    )
    runs = [r for r in results.runs if r.cpu_seconds is not None]
    cpu = sum(r.cpu_seconds or 0 for r in runs)
    curve = pre.get("eval_loss") or []
    numbers = curve and all(isinstance(x, (int, float)) for x in curve)
    learned = (
        f", eval loss {curve[0]:.4f} after epoch 1, {curve[-1]:.4f} after epoch {len(curve)}"
        if numbers
        else ""
    )
    prov = {
        v: results.provenance.get(v) or {}
        for v in VARIANTS
        if results.provenance.get(v) is not None
    }
    checks = "; ".join(
        f"{v.replace('_', ' ')}: {'holds' if p.get('holds_fix') else 'lacks'} the fix "
        f"(binary sha256 `{str(p.get('sha256', '—'))[:16]}`)"
        + (f", checked by the {' and the '.join(p['how'])}" if p.get("how") else "")
        for v, p in prov.items()
    )
    warnings = sorted({w for r in results.runs for w in r.warnings})
    upstream, series = results.source.get("upstream_commit"), results.series.get("sha256")
    return {
        "target": f"{results.target}: {results.source.get('description', '')}".rstrip(": "),
        "base commit": f"`{results.base}`",
        "upstream commit": f"`{upstream}`" if upstream else "—",
        "series sha256": f"`{series}`" if series else "—",
        "program": f"upstream's `{PROGRAM}` ({results.program.get('source', PROGRAM_SOURCE)} of the tree, "
        f"unmodified, sha256 `{str(results.program.get('sha256', '—'))[:16]}`), CPU, {THREADS} threads, "
        f"-c = -b = {N_CTX}, -ub = {N_CTX} / opt_period, val-split {VAL_SPLIT:g}, wd 0",
        "fix in each binary": checks or "not checked",
        "model": f"tiny llama PRE-TRAINED here, sha256 `{m.get('sha256', '—')}`: random F32 weights (seed "
        f"{m.get('seed', '—')}, {model}, n_vocab {m.get('n_vocab', '—')}, {m.get('n_params', '—')} parameters, "
        f"sha256 `{m.get('random_sha256', '—')}`) trained with the fixed build on "
        f"{' + '.join(pre.get('files') or [])} ({pre.get('optimizer', '—')} lr {pre.get('lr', '—')}, "
        f"{pre.get('epochs', '—')} epochs{learned}). Upstream keeps token embeddings frozen (tok_embd is "
        "never a parameter), so most of what trains is the output matrix.",
        "fine-tuning data": f"{' + '.join(d.get('files') or [])} of the tree (not the pre-training text), sha256 "
        f"`{d.get('sha256', '—')}`; eval = llama-finetune's own validation split (its last "
        f"{VAL_SPLIT:.0%} of datapoints, held out of training)",
        "warnings printed": "; ".join(warnings) if warnings else "none",
        "CPU seconds per epoch": f"{cpu / max(1, sum(len(r.epochs) for r in runs)):.1f}"
        if runs
        else "—",
    }


def _tables(results: FinetuneResults, cell: Any = str) -> list[str]:
    """Provenance (what -> value, each cell's text through `cell`), then the verdicts and the loss tables."""
    rows = [f"| {cell(k)} | {cell(v)} |" for k, v in provenance_rows(results).items()]
    return ["| | |", "|---|---|", *rows, "", *table_markdown(results).rstrip("\n").split("\n")]


def summary_section(results: FinetuneResults, plot_note: str) -> str:
    """The section of summary.md: provenance, then the verdicts and the loss tables."""
    return "\n".join([f"## {SECTION_TITLE}", "", plot_note, "", *_tables(results)]) + "\n"


# ---------------------------------------------------------------- provenance
# which binary holds the fix, and whether a record is of the current series


def fix_markers(fix_diff: str) -> list[str]:
    """String literals the fix adds (on '+' lines, not on any '-' line): text its binary must hold
    and the unfixed one must not (GGML_ASSERT keeps its condition's text)."""
    lit = re.compile(r'"((?:[^"\\\n]|\\.){12,})"')
    added, removed = [], set()
    for line in fix_diff.splitlines():
        if line.startswith("+") and not line.startswith("+++"):
            added += lit.findall(line)
        elif line.startswith("-") and not line.startswith("---"):
            removed.update(lit.findall(line))
    return list(dict.fromkeys(s for s in added if s not in removed and "\\" not in s))


def holds_fix(binary: bytes, markers: Sequence[str]) -> Optional[bool]:
    """True: every marker is in the binary; False: none is; None: no marker, or only some (unknown)."""
    found = {m.encode() in binary for m in markers}
    return found.pop() if len(found) == 1 else None  # every marker agrees


def staleness(found: FinetuneResults, base: str, series_sha256: str) -> Optional[str]:
    """Why this record is not evidence for (base, series), or None when it is (pure)."""
    made = str(found.series.get("sha256") or "")
    if found.base != base:
        return f"made on base {found.base[:12]}, these results are of {base[:12]}"
    if made != series_sha256:
        return f"STALE: made with series {made[:12] or '(none recorded)'}, the current series is {series_sha256[:12]}"
    return None


def pr_lines(results: Optional[FinetuneResults], level: str, cell: Any = str) -> list[str]:
    """The evidence as data for PR_BODY.md / ISSUE.md: provenance, thresholds, verdicts and losses,
    and the commands that reproduce it. `cell` makes one table cell's text safe."""
    if results is None or not results.runs:
        return []
    title = f"{level} Fine-tuning with upstream's llama-finetune: held-out eval loss per epoch with and without the fix"
    out = [title, "", *_tables(results, cell)]
    # each command as someone reproduces it: paths relative, the same for both variants (the tree decides)
    data, pre = (
        [f"{TREE}/{f}" for f in results.data.get("files") or []],
        results.model.get("pretrain") or {},
    )
    cases = [
        (Case(r.optimizer, r.lr, r.opt_period, len(r.epochs)), r.threads)
        for r in results.runs
        if r.primary
    ]
    commands = [
        " ".join(command(BINARY, PRETRAINED, data, c, t, "finetuned.gguf")) for c, t in cases
    ]
    seed, vocab = results.model.get("seed"), results.model.get("vocab_file") or ""
    random = f"tiny-llama-{seed}.gguf"
    pretrain = pretrain_command(
        BINARY, random, [f"{TREE}/{f}" for f in pre.get("files") or []], PRETRAINED
    )
    tiny = f"python -m orchestrator.finetune.tiny_model {TREE}/{vocab} {random} --seed {seed}"
    return out + [
        "",
        "```sh",
        *BUILD_COMMANDS,
        tiny,
        " ".join(pretrain),
        *dict.fromkeys(commands),
        "```",
    ]
