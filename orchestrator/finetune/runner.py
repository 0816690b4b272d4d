"""The fine-tuning evidence's run (`ggml-patch evidence`) on the cell pipeline (run/cell.py):

    fetch -> inputs + key -> (cached: copy, done) -> apply -> configure -> build with the fix
          -> (fix reverted: build without it; restored) -> each binary checked to hold (or lack) the
          fix -> pre-train once (fixed build, cached) -> every case in both variants, noise runs -> store

In the CPU cell's worktree, under its lock (never interleaved with a matrix run's control), in a build
tree of its own (`cells/<target>-cpu/build-finetune`, llama-finetune only; ccache shared). Each variant's
binary is copied out (linked statically): the long runs happen after the lock is released. Models and
texts are cached by sha256, the result in run/resultcache.py under a hash of everything that decides it.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional

from .. import outdir
from ..cache import Cache
from ..config import Backend, Matrix, Target
from ..errors import BuildFailed, ConfigError
from ..model.layout import BuildPlan, get_layout
from ..patchset.files import load_series
from ..patchset.render import render
from ..progress import Reporter
from ..redact import redact
from ..run import resultcache, toolchain
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
from . import results as ft
from . import section as evidence_section
from . import tiny_model
from .bundle import PLOT

BUILD_SUBDIR = "build-finetune"
RESULTS_SUBDIR = "evidence"
NO_PLOT = "no plot: matplotlib is not installed (pip install 'ggml-patch[plot]'); the tables are all there is"
# the tree's own CMake project, static, examples on (llama-common comes with them); only the
# llama-finetune target is built, so the other examples, tests, tools and server never compile
_ON = dict(
    CMAKE_BUILD_TYPE="Release",
    BUILD_SHARED_LIBS="OFF",
    LLAMA_BUILD_COMMON="ON",
    LLAMA_BUILD_EXAMPLES="ON",
)
_OFF = "LLAMA_BUILD_TESTS LLAMA_BUILD_TOOLS LLAMA_BUILD_SERVER LLAMA_BUILD_APP LLAMA_OPENSSL LLAMA_CURL".split()
DEFINITIONS = tuple((_ON | dict.fromkeys(_OFF, "OFF")).items())


@dataclass
class EvidenceRun:
    results: ft.FinetuneResults
    cached: bool
    files: list[Path]  # what was written, finetune.json first
    plot_note: str  # where the plot is, or why there is none
    seconds: float


@dataclass(frozen=True)
class Inputs:
    """Everything the result depends on, found before any build (the cache key's parts)."""

    base: str
    series_sha256: str  # the canonical series (as results.json records it)
    rendered_sha256: str
    model: dict  # the random model's metadata
    model_path: Path
    pretrain_data: dict
    pretrain_paths: tuple[Path, ...]
    data: dict
    data_paths: tuple[Path, ...]
    program_sha256: str  # finetune.cpp in the tree
    flags: dict
    toolchain: dict
    markers: tuple[str, ...] = ()  # string literals the fix adds (provenance check)

    def pretrain_key(self) -> str:
        """The pre-trained model's cache key: the random model, the text, how, and the fixed build."""
        parts: dict[str, Any] = dict(
            v=ft.FINETUNE_KEY_VERSION, random=self.model["sha256"], how=ft.pretrain_options()
        )
        parts |= dict(
            data=self.pretrain_data["sha256"], base=self.base, series=self.rendered_sha256
        )
        parts |= dict(
            program=self.program_sha256, flags=self.flags.get("cmake"), toolchain=self.toolchain
        )
        return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()

    def key(self, cases: tuple[ft.Case, ...]) -> str:
        return ft.cache_key(
            base=self.base,
            series=self.rendered_sha256,
            model=self.model["sha256"],
            data=self.data["sha256"],
            program=self.program_sha256,
            flags=self.flags,
            cases=[c.key() for c in cases],
            toolchain=self.toolchain,
            pretrain=self.pretrain_key(),
        )


# ---------------------------------------------------------------- checks before any work


def llama_target(matrix: Matrix, name: str) -> Target:
    """The target, if its layout can have llama.cpp's training API; else one line (exit 2)."""
    target = matrix.target(name)
    if target.layout != "llama.cpp":
        raise ConfigError(
            f"--target {name}: the {target.layout} layout has no libllama and no llama_opt_epoch "
            "(llama.cpp's training API); the fine-tuning evidence runs on a llama.cpp target "
            f"({', '.join(n for n, t in matrix.targets.items() if t.layout == 'llama.cpp') or 'none'})"
        )
    return target


# ---------------------------------------------------------------- inputs: model, data, program, key


def evidence_dir(cache: Cache) -> Path:
    return cache.root / "evidence"


def data_files(cache: Cache, files: list[tuple[str, bytes]]) -> tuple[dict, tuple[Path, ...]]:
    """The training text (the tree's own files) copied once into the cache, by its digest."""
    digest = ft.data_digest(files)
    folder = evidence_dir(cache) / "data" / digest[:16]
    paths = []
    for name, content in files:
        path = folder / name.replace("/", "_")
        if not path.is_file() or path.read_bytes() != content:
            resultcache.write_atomic(path, content)
        paths.append(path)
    return {"files": [n for n, _ in files], "sha256": digest}, tuple(paths)


def _made(path: Path, **expected: object) -> Optional[dict]:
    """The metadata kept beside a file the evidence made (`<file>.json`) while it still describes it:
    the same sha256 (a changed or damaged file is made again) and `expected`."""
    meta = resultcache.load(path.parent, path.stem)
    if (
        not isinstance(meta, dict)
        or any(meta.get(k) != v for k, v in expected.items())
        or not path.is_file()
    ):
        return None
    return meta if meta.get("sha256") == sha256_of(path) else None


def model_file(
    cache: Cache, vocab_name: str, vocab: bytes, seed: int, log: Callable[[str], None]
) -> tuple[dict, Path]:
    """The tiny model for this vocab and seed, made once into the cache."""
    vocab_sha = hashlib.sha256(vocab).hexdigest()
    path = evidence_dir(cache) / "models" / f"tiny-llama-{seed}-{vocab_sha[:12]}.gguf"
    meta = _made(path, gguf=version("gguf"))
    if meta is not None:
        return meta, path
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(
        prefix=cache.scratch_prefix("vocab"), dir=cache.scratch()
    ) as scratch:
        (Path(scratch) / Path(vocab_name).name).write_bytes(vocab)
        made = tiny_model.make(Path(scratch) / Path(vocab_name).name, path, seed)
    meta = {k: v for k, v in asdict(made).items() if k != "path"} | {
        "vocab_file": vocab_name,
        "gguf": version("gguf"),
    }
    log(f"made {path.name} ({made.n_params} parameters, {time.monotonic() - t0:.1f} s)")
    resultcache.store(path.parent, path.stem, meta)
    return meta, path


def gather_inputs(
    ctx: CellContext,
    snap: Snapshot,
    log: Callable[[str], None],
    seed: int = tiny_model.DEFAULT_SEED,
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

    rendered = render(
        ctx.options.series,
        get_layout(ctx.options.series.layout),
        ctx.layout,
        lambda p: repo.read_blob(commit, p),
    )
    program = hashlib.sha256(blob(ft.PROGRAM_SOURCE)).hexdigest()
    pretrain, pretrain_paths = data_files(ctx.cache, [(f, blob(f)) for f in ft.PRETRAIN_FILES])
    data, data_paths = data_files(ctx.cache, [(f, blob(f)) for f in ft.DATA_FILES])
    model, model_path = model_file(
        ctx.cache, tiny_model.DEFAULT_VOCAB, blob(tiny_model.DEFAULT_VOCAB), seed, log
    )
    flags = {
        "definitions": [list(d) for d in DEFINITIONS],
        "cmake": ctx.module.configure_flags(ctx.backend),
    }
    flags |= {"env": ctx.module.test_env(ctx.backend), "program": ft.program_options()}
    flags["ccache"] = bool(shutil.which("ccache"))
    fix_paths = set(rendered.fix_paths())
    fix_diff = "\n".join(f.text for p in rendered.patches for f in p.files if f.path in fix_paths)
    return Inputs(
        base=commit,
        series_sha256=ctx.options.series.sha256,
        rendered_sha256=rendered.sha256,
        model=model,
        model_path=model_path,
        pretrain_data=pretrain,
        pretrain_paths=pretrain_paths,
        data=data,
        data_paths=data_paths,
        program_sha256=program,
        flags=flags,
        toolchain=toolchain.versions(),
        markers=tuple(ft.fix_markers(fix_diff)),
    )


# ---------------------------------------------------------------- build: both variants, under the cell's lock


class Built(NamedTuple):
    """A variant's llama-finetune copied out of the build tree, what it was built from (`_sources`),
    and what its build cost (wall and CPU seconds, the revert and restore included)."""

    binary: Path
    built_from: dict
    seconds: float
    cpu_seconds: float


def training_plan(ctx: CellContext) -> Planned:
    """llama.cpp's own CMake project (DEFINITIONS) in the cell's worktree, llama-finetune only."""
    llama_dir = str(ctx.worktree.path / ctx.layout.prefix).rstrip("/")
    plan = BuildPlan(llama_dir, DEFINITIONS, (ft.PROGRAM,), programs=())
    detail = f"llama.cpp's own CMake project, target {ft.PROGRAM}, {ctx.options.build_subdir}"
    return Planned(plan, detail, "cmake configure (fine-tuning evidence)")


def build_patched(ctx: CellContext) -> Built:
    """llama-finetune with the fix, copied out of the build tree."""
    t0, c0 = time.monotonic(), _children_cpu()
    binary, built_from = _built(ctx, "with_fix"), _sources(ctx, ctx.got(APPLY), "with_fix")
    return Built(binary, built_from, _since(t0), round(_children_cpu() - c0, 2))


def build_control(ctx: CellContext) -> Built:
    """llama-finetune with only the fix reverted (the control's tree; patched again after)."""
    t0, c0 = time.monotonic(), _children_cpu()
    tree = ctx.got(APPLY)
    with fix_reverted(tree) as reverted:
        ctx.steps.done(f"reverted {', '.join(reverted)}")
        binary, built_from = _built(ctx, "without_fix"), _sources(ctx, tree, "without_fix")
    return Built(binary, built_from, _since(t0), round(_children_cpu() - c0, 2))


def _since(t0: float) -> float:
    return round(time.monotonic() - t0, 2)


def _sources(ctx: CellContext, tree: Tree, variant: str) -> dict:
    """Read right after a variant's build: the fix's files as blob ids in the tree and as expected (the
    patched commit's, or the base's), and the sha256 of the `<file>.o` each was compiled into."""
    paths = tree.rendered.fix_paths()
    rev = ctx.cell.patched_commit if variant == "with_fix" else tree.snap.commit
    objects = {p: sorted(ctx.build_dir.glob(f"**/{Path(p).name}.o")) for p in paths}
    return {
        "blobs": dict(zip(paths, ctx.repo.hash_blobs(tree.worktree.path, paths), strict=True)),
        "expected": {p: (ctx.repo.object_id(rev, p) if rev else None) for p in paths},
        "objects": {
            p: hashlib.sha256(o[0].read_bytes()).hexdigest() if o else None
            for p, o in objects.items()
        },
    }


def _built(ctx: CellContext, variant: str) -> Path:
    rec = build_variant(ctx, variant, (ft.PROGRAM,))
    if not (rec.build and rec.build.ok):
        error = rec.build.error if rec.build else ""
        raise BuildFailed(
            f"{ctx.target.name}: {ft.PROGRAM} {variant.replace('_', ' ')}: build failed: {error} "
            f"(log: {rec.build.log if rec.build else ctx.logs})"
        )
    dst = ctx.build_dir / "variants" / variant / ft.PROGRAM
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(dst.name + ".tmp")
    shutil.copy2(ctx.build_dir / "bin" / ft.PROGRAM, tmp)
    os.replace(tmp, dst)
    return dst


def check_provenance(
    binaries: dict[str, Path],
    markers: tuple[str, ...],
    built_from: Optional[dict[str, dict]] = None,
) -> dict[str, dict]:
    """{variant: {sha256, holds_fix, how it was checked, ...}}: before any run, each binary is what it
    claims: built from the fix's files as the patched commit (with_fix) or the base (without_fix) has
    them, each compiled into an object of its own, the two binaries different; and, when the fix adds
    string literals, the with-fix binary holds them all and the other none. A BuildFailed otherwise."""
    built_from = built_from or {}
    out: dict[str, dict] = {}
    for variant, path in binaries.items():
        data, want, name = path.read_bytes(), variant == "with_fix", variant.replace("_", " ")
        holds = ft.holds_fix(data, markers)
        if markers and holds is not want:
            raise BuildFailed(
                f"{path}: the {name} binary {'lacks' if want else 'holds'} the fix "
                f"(looked for the fix's string {markers[0][:60]!r}): the builds are not what they claim; not run"
            )
        src = built_from.get(variant) or {}
        wrong = [
            p
            for p, blob in (src.get("blobs") or {}).items()
            if blob != (src.get("expected") or {}).get(p)
        ]
        if wrong:
            raise BuildFailed(
                f"{path}: the {name} binary was built from {', '.join(wrong)} as neither the "
                f"{'patched commit' if want else 'base'} has it: the builds are not what they claim; not run"
            )
        checks = ["fix's strings in the binary"] if markers else []
        checks += ["fix's files at build time"] if src.get("blobs") else []
        out[variant] = dict(
            sha256=hashlib.sha256(data).hexdigest(), holds_fix=want if checks else holds, how=checks
        )
        out[variant] |= {
            "checked": bool(checks),
            "markers": list(markers),
            **({"sources": src} if src else {}),
        }
    if len(out) == 2 and out["with_fix"]["checked"]:
        objs = [
            tuple(sorted((out[v].get("sources") or {}).get("objects", {}).items()))
            for v in ft.VARIANTS
        ]
        if out["with_fix"]["sha256"] == out["without_fix"]["sha256"] or (
            objs[0] and objs[0] == objs[1]
        ):
            raise BuildFailed(
                "the with-fix and without-fix builds of llama-finetune are the same (binary or the fix's "
                "objects): reverting the fix changed nothing that was compiled; not run"
            )
    return out


def _children_cpu() -> float:
    return sum(resource.getrusage(resource.RUSAGE_CHILDREN)[:2])  # user + system


# ---------------------------------------------------------------- the runs


def _run(
    ctx: CellContext, argv: list[str], epochs: int, log: str
) -> tuple[TestRun, ft.ProgramOutput, float, str]:
    """The program run (cancellable at each line of output), what it printed, its CPU seconds, how it ended."""
    c0, timeout_s = (
        _children_cpu(),
        60.0 + 120.0 * epochs,
    )  # far above the ~7 CPU s an epoch costs: a loaded machine
    run = run_program(
        ft.PROGRAM, argv, timeout_s, ctx.env, ctx.logs / log, lambda line: ctx.steps.cancel.check()
    )
    out = ft.parse_output(run.output)
    return (
        run,
        out,
        _children_cpu() - c0,
        ft.run_outcome(run.exit_code, run.timed_out, out.complete(epochs)),
    )


def run_case(
    ctx: CellContext,
    binary: Path,
    model: Path,
    inputs: Inputs,
    case: ft.Case,
    variant: str,
    threads: int,
    repeat: int,
) -> ft.Run:
    """One case in one variant at a thread count (repeat: the same again, for the noise floor)."""
    out_model = (
        ctx.cell_dir / "finetune-out" / "finetuned.gguf"
    )  # llama-finetune always saves one; not kept
    out_model.parent.mkdir(parents=True, exist_ok=True)
    argv = ft.command(
        str(binary), str(model), [str(p) for p in inputs.data_paths], case, threads, str(out_model)
    )
    ctx.steps.step(
        f"run {variant.replace('_', ' ')}",
        f"{case.label()}, {case.epochs} epochs, {threads} threads",
    )
    log = f"{variant}-{case.optimizer}-lr{case.lr:g}-p{case.opt_period}-t{threads}{f'-r{repeat}' if repeat else ''}.log"
    run, out, cpu, outcome = _run(ctx, argv, case.epochs, log)
    out_model.unlink(missing_ok=True)
    last = out.epochs[-1] if out.epochs else None
    said = f": eval loss {last.eval_loss:.5f} after epoch {last.epoch}" if last else ""
    ctx.steps.done(
        outcome + said + ("" if outcome == "ok" else f" (exit {run.exit_code}; log {run.log})")
    )
    ran = dict(
        variant=variant,
        opt_period=case.opt_period,
        command=argv,
        exit_code=run.exit_code,
        outcome=outcome,
    )
    ran |= dict(
        seconds=round(run.duration_s, 2), cpu_seconds=round(cpu, 2), threads=threads, repeat=repeat
    )
    return ft.Run(
        **{**case.key(), **ran, "epochs": list(out.epochs), "warnings": list(out.warnings)}
    )


def pretrained_model(ctx: CellContext, inputs: Inputs, binary: Path) -> tuple[dict, Path]:
    """The random model pre-trained with the fixed build, once per pre-training key (see `_made`)."""
    key = inputs.pretrain_key()
    path = evidence_dir(ctx.cache) / "models" / f"pretrained-{key[:16]}.gguf"
    meta = _made(path)
    if meta is not None:
        return meta, path
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    argv = ft.pretrain_command(
        str(binary), str(inputs.model_path), [str(p) for p in inputs.pretrain_paths], str(tmp)
    )
    pre = ft.PRETRAIN
    ctx.steps.step("pre-train", f"{pre.optimizer} lr {pre.lr:g}, {pre.epochs} epochs, with the fix")
    run, out, cpu, outcome = _run(ctx, argv, pre.epochs, "pretrain.log")
    if outcome != "ok" or not tmp.is_file():
        tmp.unlink(missing_ok=True)
        raise BuildFailed(
            f"pre-training the tiny model: {outcome} (exit {run.exit_code}; log {run.log})"
        )
    os.replace(tmp, path)
    meta = {
        "sha256": sha256_of(path),
        "key": key,
        "random_sha256": inputs.model["sha256"],
        **ft.pretrain_options(),
    }
    meta |= {
        "data_sha256": inputs.pretrain_data["sha256"],
        "train_loss": [e.train_loss for e in out.epochs],
    }
    meta |= {"eval_loss": [e.eval_loss for e in out.epochs], "seconds": round(run.duration_s, 2)}
    meta["cpu_seconds"] = round(cpu, 2)
    ctx.steps.done(
        f"eval loss {meta['eval_loss'][0]:.4f} -> {meta['eval_loss'][-1]:.4f}; {path.name}"
    )
    resultcache.store(path.parent, path.stem, meta)
    return meta, path


def plan_runs(cases: tuple[ft.Case, ...]) -> list[tuple[ft.Case, str, int, int]]:
    """(case, variant, threads, repeat) in order, fixed before any result: every case in both
    variants, then the first case's fixed build again and at the other thread counts (noise floor)."""
    runs = [(c, v, ft.THREADS, 0) for c in cases for v in ft.VARIANTS]
    if cases:
        runs.append((cases[0], "with_fix", ft.THREADS, 1))
        runs += [(cases[0], "with_fix", t, 0) for t in ft.NOISE_THREADS if t != ft.THREADS]
    return runs


# ---------------------------------------------------------------- the whole run


def inputs_step(ctx: CellContext) -> Inputs:
    ctx.steps.step("inputs", "model, data, program, toolchain")
    return gather_inputs(ctx, ctx.got(FETCH), ctx.steps.done)


def provenance_step(ctx: CellContext) -> dict[str, dict]:
    """Each binary checked to hold (or lack) the fix before any run."""
    patched, control = ctx.got(BUILD_PATCHED), ctx.got(BUILD_CONTROL)
    binaries = {"with_fix": patched.binary, "without_fix": control.binary}
    built_from = {"with_fix": patched.built_from, "without_fix": control.built_from}
    ctx.steps.step("provenance", "each binary holds (or lacks) the fix")
    provenance = check_provenance(binaries, ctx.got(INPUTS).markers, built_from)
    said = ", ".join(
        f"{v.replace('_', ' ')} {'holds' if p['holds_fix'] else 'lacks'} it"
        for v, p in provenance.items()
    )
    said = f"checked: {said} (by the {' and the '.join(provenance['with_fix']['how'])})"
    if not provenance["with_fix"]["checked"]:
        said = "not checked: nothing to check it by"
    ctx.steps.done(said)
    return provenance


def pretrain_step(ctx: CellContext) -> tuple[dict, Path]:
    return pretrained_model(ctx, ctx.got(INPUTS), ctx.got(BUILD_PATCHED).binary)


def runs_step(cases: tuple[ft.Case, ...]) -> Step[list[ft.Run]]:
    """The step that runs `cases` (plan_runs' order) on the builds the earlier steps made."""

    def run_all(ctx: CellContext) -> list[ft.Run]:
        binaries = {"with_fix": ctx.got(BUILD_PATCHED), "without_fix": ctx.got(BUILD_CONTROL)}
        model = ctx.got(PRETRAIN)[1]
        inputs = ctx.got(INPUTS)
        runs = []
        for case, variant, threads, repeat in plan_runs(cases):
            binary = binaries[variant].binary
            runs.append(run_case(ctx, binary, model, inputs, case, variant, threads, repeat))
        return runs

    return Step("runs", run_all)


INPUTS = Step("inputs", inputs_step)
TRAINING_PLAN = Step("plan", training_plan)
BUILD_PATCHED: Step[Built] = Step("build", build_patched)
BUILD_CONTROL: Step[Built] = Step("control", build_control)
PROVENANCE = Step("provenance", provenance_step)
PRETRAIN = Step("pretrain", pretrain_step)

# the training evidence's steps: what decides the result (its cache key), then under the cell's
# lock the builds (the cell's apply and configure), then PROVENANCE, PRETRAIN and runs_step
TRAINING_INPUT_STEPS: tuple[Step[Any], ...] = (FETCH, INPUTS)
TRAINING_BUILD_STEPS: tuple[Step[Any], ...] = (
    APPLY,
    TRAINING_PLAN,
    CONFIGURE,
    BUILD_PATCHED,
    BUILD_CONTROL,
)


# ---------------------------------------------------------------- the whole run


def run_evidence(
    matrix: Matrix,
    cache: Cache,
    results_dir: Path,
    target: Target,
    cases: tuple[ft.Case, ...],
    rerun: bool,
    reporter: Reporter,
) -> EvidenceRun:
    """The training evidence for `target` (llama_target's) in results_dir/evidence/ and a section
    of results_dir/summary.md: its steps on the CPU cell's context, the result in the result
    cache."""
    t_all = time.monotonic()
    # never a folder of the user's files
    out_dir = outdir.claim(results_dir / RESULTS_SUBDIR, "--results")
    series = load_series(matrix)
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
    with cache.lock(f"evidence-{target.name}"):
        run_steps(ctx, TRAINING_INPUT_STEPS)
        inputs = ctx.got(INPUTS)
        key = inputs.key(cases)
        cached = None if rerun else _cached(cached_dir, key)
        if cached is not None:
            ctx.steps.done(
                f"cached result, nothing changed (key {key[:12]}; --rerun to run it again)"
            )
            resultcache.copy_logs(cached_dir, key, out_dir / "logs", replace=True)
            files, note = write_outputs(cached, cached_dir / key, out_dir, results_dir)
            return EvidenceRun(cached, True, files, note, round(time.monotonic() - t_all, 3))
        ctx.steps.done(f"key {key[:12]}")
        # this run's logs only (the folder is the tool's own)
        shutil.rmtree(ctx.logs, ignore_errors=True)
        # the cell's worktree: never during a matrix run's control
        with cache.lock(f"cell-{cell_id}"):
            run_steps(ctx, TRAINING_BUILD_STEPS)
        runs = runs_step(cases)
        c_runs = _children_cpu()
        run_steps(ctx, (PROVENANCE, PRETRAIN, runs))
        runs_cpu_s = round(_children_cpu() - c_runs, 2)
        timings = {"apply_s": ctx.seconds[APPLY.name], "configure_s": ctx.seconds["configure"]}
        for variant, step in (("with_fix", BUILD_PATCHED), ("without_fix", BUILD_CONTROL)):
            built = ctx.got(step)
            timings[f"build_{variant}_s"] = built.seconds
            timings[f"build_{variant}_cpu_s"] = built.cpu_seconds
        timings["pretrain_s"] = ctx.seconds[PRETRAIN.name]
        timings["runs_s"] = ctx.seconds[runs.name]
        timings["runs_cpu_s"] = runs_cpu_s
        timings["total_s"] = round(time.monotonic() - t_all, 2)
        results = assemble(ctx, key, timings, ctx.got(runs))
        entry = json.loads(redact(results.to_json()))
        resultcache.store_with_logs(cached_dir, key, entry, ctx.logs)
        files, note = write_outputs(results, cached_dir / key, out_dir, results_dir)
    return EvidenceRun(results, False, files, note, round(time.monotonic() - t_all, 3))


def assemble(ctx: CellContext, key: str, timings: dict, runs: list[ft.Run]) -> ft.FinetuneResults:
    """finetune.json's record from what the steps returned."""
    inputs, (pre, _) = ctx.got(INPUTS), ctx.got(PRETRAIN)
    snap = ctx.got(FETCH)
    # the random model's metadata, then the pre-trained checkpoint's
    model = {k: v for k, v in inputs.model.items() if k not in ("sha256", "gguf")}
    model |= {
        "sha256": pre["sha256"],
        "random_sha256": inputs.model["sha256"],
        "pretrained": True,
    }
    model["pretrain"] = {k: pre[k] for k in ft.PretrainInfo.model_fields if k in pre}
    series = ctx.options.series
    made = dict(
        sha256=inputs.series_sha256,
        rendered_sha256=inputs.rendered_sha256,
        patches=[p.name for p in series.patches],
        patched_commit=ctx.got(APPLY).head,
    )
    source = provenance_of(ctx, snap)
    return ft.FinetuneResults(
        target=ctx.target.name,
        base=inputs.base,
        model=model,
        data=inputs.data,
        program=dict(
            name=ft.PROGRAM,
            source=ft.PROGRAM_SOURCE,
            sha256=inputs.program_sha256,
            unmodified=True,
        ),
        provenance=ctx.got(PROVENANCE),
        runs=runs,
        cache_key=key,
        source=source.model_dump(include={"description", "upstream_commit", "kind"}),
        series=made,
        toolchain=inputs.toolchain,
        timings=timings,
    )


# ---------------------------------------------------------------- the result cache and the outputs


def results_cache_dir(cache: Cache) -> Path:
    """The training evidence's results: in the one result cache, beside the cells' (run/cell.py)."""
    return cell_results_cache_dir(cache)


def _cached(directory: Path, key: str) -> Optional[ft.FinetuneResults]:
    try:
        return ft.FinetuneResults.from_json(json.dumps(resultcache.load(directory, key)))
    except (ValueError, TypeError):
        return None  # absent, half-written or of another version: not a hit


def write_outputs(
    results: ft.FinetuneResults, entry: Path, out_dir: Path, results_dir: Path
) -> tuple[list[Path], str]:
    """results/evidence/ (finetune.json, .md, the plot with matplotlib, the logs) and the evidence section of
    results/summary.md (the rest untouched). `entry`: the result cache's `<key>` (.json, -logs, .png)."""
    json_path = out_dir / "finetune.json"
    resultcache.write_atomic(json_path, redact(results.to_json()).encode())
    files = [json_path]
    png = out_dir / PLOT
    data = f"[{RESULTS_SUBDIR}/finetune.json]({RESULTS_SUBDIR}/finetune.json)"
    if can_plot():
        made = Path(f"{entry}.png")
        if (
            not made.is_file()
        ):  # a cached result made where matplotlib was not installed: plotted now
            ft.plot(results, made)
        shutil.copyfile(made, png)
        files.append(png)
        note = f"Plot: [{RESULTS_SUBDIR}/{PLOT}]({RESULTS_SUBDIR}/{PLOT}); data: {data}."
    else:
        png.unlink(missing_ok=True)  # an older run's plot would not match these numbers
        note = f"{NO_PLOT}. Data: {data}."
    section = redact(ft.summary_section(results, note))
    md = out_dir / "finetune.md"
    md.write_text(section, encoding="utf-8")
    summary = results_dir / "summary.md"
    old = summary.read_text(encoding="utf-8", errors="replace") if summary.is_file() else None
    resultcache.write_atomic(
        summary, evidence_section.splice(old, evidence_section.marked(section)).encode()
    )
    return files + [md, summary], (f"plot {png}" if png in files else NO_PLOT)
