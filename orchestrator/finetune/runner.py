"""The fine-tuning evidence (`ggml-patch evidence`): llama.cpp's own training path, a tiny llama model
fine-tuned with llama_opt_epoch, with the fix and with the fix reverted.

    fetch -> inputs + key -> (cached: copy, done) -> apply -> configure -> build with the fix
          -> (fix reverted: build without it; restored) -> run every case in both variants -> store

The cell pipeline does what a cell does: its `fetch` and `apply` steps put the series on the base in
the CPU cell's own worktree (run/cell.py), and its control's `fix_reverted` reverts only the fix's
hunks and puts them back. The evidence builds in a build tree of its own beside the cell's
(`cells/<target>-cpu/build-evidence`: libllama through native_tests/llama-harness, a different
CMake project; ccache shared), under the cell's lock, so it never interleaves with a matrix run's
control. Each variant's program is copied out (linked statically), so the long runs happen after
the lock is released. The model is made once per vocab file into the cache, checked by sha256;
the data are the tree's own files, copied into the cache. The result is cached by a content hash
of everything that decides it (finetune.cache_key): a re-run with nothing changed copies it.
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
from pathlib import Path
from typing import Callable, Optional

from .. import backends, outdir
from ..cache import Cache, slug
from ..config import Backend, Matrix, Target
from ..errors import BuildFailed, ConfigError
from ..evidence.training import can_plot
from ..patchset.files import load_series
from ..patchset.layout import BuildPlan, get_layout
from ..patchset.render import render
from ..progress import Reporter
from ..redact import redact
from ..report.model import Cell
from ..run import cmake, toolchain
from ..run.cell import CellContext, Steps, apply, fix_reverted, run_steps
from ..run.testrun import run_program
from ..vcs.runner import GitError, git_bytes
from ..vcs.snapshots import SnapshotRepo
from . import results as ft
from . import section as evidence_section
from . import tiny_model as tm

HARNESS = "llama-harness"  # native_tests/llama-harness/CMakeLists.txt
PROGRAM_FILES = (f"{HARNESS}/CMakeLists.txt", f"{ft.PROGRAM}.cpp")
BUILD_SUBDIR = "build-evidence"
RESULTS_SUBDIR = "evidence"
PLOT = "finetune-loss.png"
NO_PLOT = "no plot: matplotlib is not installed (pip install 'ggml-patch[plot]'); the tables are all there is"
# libllama and the program only: no common/, tests, tools, examples or server (add_subdirectory makes
# llama.cpp non-standalone, these say it anyway); static, so each variant's program can be copied out
DEFINITIONS = (
    ("CMAKE_BUILD_TYPE", "Release"),
    ("BUILD_SHARED_LIBS", "OFF"),
    ("LLAMA_BUILD_COMMON", "OFF"),
    ("LLAMA_BUILD_TESTS", "OFF"),
    ("LLAMA_BUILD_EXAMPLES", "OFF"),
    ("LLAMA_BUILD_SERVER", "OFF"),
    ("LLAMA_BUILD_TOOLS", "OFF"),
    ("LLAMA_CURL", "OFF"),
)


def run_timeout_s(epochs: int) -> float:
    """One run's time limit: far above the ~7 CPU s an epoch costs, for a loaded machine."""
    return 60.0 + 120.0 * epochs


@dataclass
class EvidenceOptions:
    matrix: Matrix
    cache: Cache
    results_dir: Path  # results/: finetune.json and the rest go to results/evidence/
    target: str = "llama.cpp"
    cases: tuple[ft.Case, ...] = ()
    rerun: bool = False
    seed: int = tm.DEFAULT_SEED


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
    model: dict
    model_path: Path
    data: dict
    data_paths: tuple[Path, ...]
    program_sha256: str
    flags: dict
    toolchain: dict

    def key(self, cases: tuple[ft.Case, ...]) -> str:
        return ft.cache_key(
            base=self.base,
            series=self.rendered_sha256,
            model_sha256=self.model["sha256"],
            data_sha256=self.data["sha256"],
            program_sha256=self.program_sha256,
            flags=self.flags,
            cases=[c.key() for c in cases],
            toolchain=self.toolchain,
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


def require_training_api(read_blob: Callable[[str], Optional[str]], target: Target) -> None:
    """The tree has llama_opt_epoch, the vocab file and the data files; else one line (exit 2)."""
    prefix = get_layout(target.layout, target.prefix).prefix
    header = read_blob(f"{prefix}include/llama.h") or ""
    if "llama_opt_epoch" not in header:
        raise ConfigError(
            f"--target {target.name}: {prefix}include/llama.h has no llama_opt_epoch "
            "(llama.cpp's training API, since mid-2025): nothing to fine-tune with"
        )


# ---------------------------------------------------------------- inputs: model, data, program, key


def _blob(repo: SnapshotRepo, commit: str, path: str, target: Target) -> bytes:
    try:
        return git_bytes("cat-file", "blob", "--end-of-options", f"{commit}:{path}", git_dir=repo.path, strip=False)
    except GitError:
        raise ConfigError(
            f"--target {target.name}: {path} is not in the tree at {commit[:12]}; the fine-tuning evidence needs it"
        ) from None


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
            _write_atomic(path, content)
        paths.append(path)
    return {"files": [n for n, _ in files], "sha256": digest}, tuple(paths)


def model_file(cache: Cache, vocab_name: str, vocab: bytes, seed: int, log: Callable[[str], None]) -> tuple[dict, Path]:
    """The tiny model for this vocab and seed: made once into the cache, reused while its sha256
    matches the one recorded beside it (a changed or damaged file is made again)."""
    vocab_sha = hashlib.sha256(vocab).hexdigest()
    path = evidence_dir(cache) / "models" / f"tiny-llama-{seed}-{vocab_sha[:12]}.gguf"
    meta_path = path.with_suffix(".json")
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        if meta.get("sha256") == tm.sha256_file(path) and meta.get("gguf") == _gguf_version():
            return meta, path
    except (OSError, ValueError, AttributeError):
        pass
    t0 = time.monotonic()
    scratch = Path(tempfile.mkdtemp(prefix=cache.scratch_prefix("vocab"), dir=cache.scratch()))
    try:
        (scratch / Path(vocab_name).name).write_bytes(vocab)
        made = tm.make(scratch / Path(vocab_name).name, path, seed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    meta = {
        "sha256": made.sha256,
        "seed": seed,
        "dims": asdict(made.dims),
        "n_vocab": made.n_vocab,
        "n_params": made.n_params,
        "vocab_file": vocab_name,
        "vocab_sha256": vocab_sha,
        "gguf": _gguf_version(),
    }
    _write_atomic(meta_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode())
    log(f"made {path.name} ({made.n_params} parameters, {time.monotonic() - t0:.1f} s)")
    return meta, path


def _gguf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gguf")
    except PackageNotFoundError:
        return "unknown"


def program_sha256(native_tests: Path) -> str:
    h = hashlib.sha256()
    for name in PROGRAM_FILES:
        h.update(name.encode() + b"\0" + (native_tests / name).read_bytes() + b"\0")
    return h.hexdigest()


def gather_inputs(ctx: CellContext, opts: EvidenceOptions, log: Callable[[str], None]) -> Inputs:
    """Model, data, program, flags and toolchain, read from the snapshot repository (not the
    worktree: a cached result needs no worktree and no lock)."""
    assert ctx.snap is not None and ctx.series is not None and ctx.repo is not None
    repo, snap, target = ctx.repo, ctx.snap, ctx.target
    require_training_api(lambda p: repo.read_blob(snap.commit, p), target)
    ctx.rendered = render(
        ctx.series, get_layout(ctx.series.layout), ctx.layout, lambda p: repo.read_blob(snap.commit, p)
    )
    prefix = ctx.layout.prefix
    data, data_paths = data_files(
        opts.cache, [(f, _blob(repo, snap.commit, prefix + f, target)) for f in ft.DATA_FILES]
    )
    model, model_path = model_file(
        opts.cache, tm.DEFAULT_VOCAB, _blob(repo, snap.commit, prefix + tm.DEFAULT_VOCAB, target), opts.seed, log
    )
    flags = {
        "definitions": [list(d) for d in DEFINITIONS],
        "cmake": ctx.module.configure_flags(ctx.backend),
        "env": ctx.module.test_env(ctx.backend),
        "program": ft.program_options(),
        "ccache": bool(shutil.which("ccache")),
    }
    return Inputs(
        snap.commit,
        ctx.series.sha256,
        ctx.rendered.sha256,
        model,
        model_path,
        data,
        data_paths,
        program_sha256(ctx.native_tests),
        flags,
        toolchain.versions(),
    )


# ---------------------------------------------------------------- build: both variants, under the cell's lock


def harness(native_tests: Path, cell_dir: Path) -> Path:
    """native_tests/llama-harness and the program copied into the cell (as cell.harness does for
    the matrix's harness), so the build tree does not depend on where this checkout lives.
    Unchanged files are not rewritten, so nothing recompiles."""
    out = cell_dir / "harness-evidence"
    for name in PROGRAM_FILES:
        dst, text = out / name, (native_tests / name).read_text(encoding="utf-8")
        if not dst.is_file() or dst.read_text(encoding="utf-8") != text:
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_text(text, encoding="utf-8")
    return out / HARNESS


def build_variants(ctx: CellContext, timings: dict) -> dict[str, Path]:
    """The program built with the fix, then with only the fix reverted (the control's tree), each
    copied out of the build tree: {variant: binary}. The tree is patched again on the way out."""
    assert ctx.worktree is not None
    llama_dir = str(ctx.worktree.path / ctx.layout.prefix).rstrip("/")
    ctx.plan = BuildPlan(
        str(harness(ctx.native_tests, ctx.cell_dir)),
        DEFINITIONS + (("LLAMA_SOURCE_DIR", llama_dir),),
        (ft.PROGRAM,),
        programs=(),
    )
    ctx.steps.step("configure", f"{HARNESS}: libllama + {ft.PROGRAM}, {ctx.build_subdir}")
    t0 = time.monotonic()
    step = cmake.configure(
        ctx.plan, ctx.build_dir, ctx.module.configure_flags(ctx.backend), ctx.logs / "configure.log", ctx.env
    )
    cmake.require(step, "cmake configure (fine-tuning evidence)")
    timings["configure_s"] = round(time.monotonic() - t0, 2)
    ctx.steps.done("reused" if step.skipped else "configured")
    binaries = {}
    for variant in ft.VARIANTS:
        t0, c0 = time.monotonic(), _children_cpu()
        if variant == "with_fix":
            binaries[variant] = _built(ctx, variant)
        else:
            with fix_reverted(ctx) as reverted:
                ctx.steps.done(f"reverted {', '.join(reverted)}")
                binaries[variant] = _built(ctx, variant)
        timings[f"build_{variant}_s"] = round(time.monotonic() - t0, 2)
        timings[f"build_{variant}_cpu_s"] = round(_children_cpu() - c0, 2)
    return binaries


def _built(ctx: CellContext, variant: str) -> Path:
    from ..run.cell import build_variant

    rec = build_variant(ctx, variant)
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


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- the runs


def run_case(ctx: CellContext, binary: Path, inputs: Inputs, case: ft.Case, variant: str) -> ft.Run:
    """One case in one variant, its epochs reported as they come."""
    argv = ft.command(str(binary), str(inputs.model_path), [str(p) for p in inputs.data_paths], case)
    ctx.steps.step(f"run {variant.replace('_', ' ')}", f"{case.label()}, {case.epochs} epochs")

    def on_line(line: str) -> None:
        e = ft.parse_output(line).epochs
        if e:
            ctx.steps.done(
                f"epoch {e[0].epoch}/{case.epochs}: train loss {e[0].train_loss:.4f}, eval loss {e[0].eval_loss:.4f}"
            )
        ctx.steps.cancel.check()

    c0 = _children_cpu()
    run = run_program(
        ft.PROGRAM,
        argv,
        run_timeout_s(case.epochs),
        ctx.env,
        ctx.logs / f"{variant}-{case.optimizer}-lr{case.lr:g}-p{case.opt_period}.log",
        on_line,
    )
    cpu = _children_cpu() - c0
    out = ft.parse_output(run.output)
    outcome = ft.run_outcome(run.exit_code, run.timed_out, out.complete)
    if outcome != "ok":
        ctx.steps.done(f"{outcome} (exit {run.exit_code}; log {run.log})")
    if out.config.get("tokens") is not None:
        inputs.data.setdefault("tokens", out.config["tokens"])
    return ft.Run(
        variant=variant,
        optimizer=case.optimizer,
        opt_period=case.opt_period,
        n_batch=case.n_batch,
        n_ubatch=ft.N_UBATCH,
        lr=case.lr,
        command=argv,
        epochs=list(out.epochs),
        exit_code=run.exit_code,
        seconds=round(run.duration_s, 2),
        outcome=outcome,
        cpu_seconds=round(cpu, 2),
    )


# ---------------------------------------------------------------- the whole run


def run_evidence(opts: EvidenceOptions, reporter: Reporter) -> EvidenceRun:
    t_all = time.monotonic()
    target = llama_target(opts.matrix, opts.target)
    out_dir = outdir.claim(opts.results_dir / RESULTS_SUBDIR, "--results")  # never a folder of the user's files
    series = load_series(opts.matrix)
    backend = opts.matrix.backends.get("cpu") or Backend("cpu")
    cell_id = f"{target.name}/cpu"
    reporter.start_cell(f"{cell_id} fine-tuning evidence")
    ctx = CellContext(
        target,
        backend,
        backends.get("cpu", opts.cache.root),
        opts.cache,
        opts.matrix.native_tests_dir,
        opts.cache.cell_dir(cell_id),
        out_dir / "logs",
        Steps(reporter),
        Cell(cell_id, target.name, "cpu", target.layout),
        series,
        SnapshotRepo(opts.cache.snapshots_git),
        rerun=True,  # apply never stops at the matrix's cached cell result: the tree is needed
        programs=False,
        build_subdir=BUILD_SUBDIR,
    )
    with opts.cache.lock(f"evidence-{target.name}"):
        run_steps(ctx, ("fetch",))
        ctx.steps.step("inputs", "model, data, program, toolchain")
        inputs = gather_inputs(ctx, opts, ctx.steps.done)
        key = inputs.key(opts.cases)
        entry = evidence_dir(opts.cache) / "results" / key
        if not opts.rerun:
            cached = _cached(entry)
            if cached is not None:
                ctx.steps.done(f"cached result, nothing changed (key {key[:12]}; --rerun to run it again)")
                files, note = write_outputs(cached, entry, out_dir, opts.results_dir, copy_logs=True)
                return EvidenceRun(cached, True, files, note, round(time.monotonic() - t_all, 3))
        ctx.steps.done(f"key {key[:12]}")
        shutil.rmtree(ctx.logs, ignore_errors=True)  # this run's logs only (the folder is the tool's own)
        timings: dict = {}
        with opts.cache.lock(f"cell-{cell_id}"):  # the cell's worktree: never during a matrix run's control
            t0 = time.monotonic()
            apply(ctx)
            timings["apply_s"] = round(time.monotonic() - t0, 2)
            binaries = build_variants(ctx, timings)
        runs, t0, c0 = [], time.monotonic(), _children_cpu()
        for case in opts.cases:
            for variant in ft.VARIANTS:
                runs.append(run_case(ctx, binaries[variant], inputs, case, variant))
        timings["runs_s"], timings["runs_cpu_s"] = round(time.monotonic() - t0, 2), round(_children_cpu() - c0, 2)
        timings["total_s"] = round(time.monotonic() - t_all, 2)
        assert ctx.snap is not None and ctx.rendered is not None
        snap = ctx.snap
        results = ft.FinetuneResults(
            target=target.name,
            base=inputs.base,
            model={**inputs.model, "path": str(inputs.model_path)},
            data=inputs.data,
            program={
                "name": ft.PROGRAM,
                "sha256": inputs.program_sha256,
                "files": [f"native_tests/{f}" for f in PROGRAM_FILES],
            },
            runs=runs,
            cache_key=key,
            source={
                "description": snap.description,
                "upstream_commit": snap.provenance.get("upstream_commit"),
                "kind": target.source.kind,
            },
            series={
                "sha256": inputs.series_sha256,
                "rendered_sha256": inputs.rendered_sha256,
                "patches": [p.name for p in series.patches],
                "patched_commit": ctx.cell.patched_commit,
            },
            toolchain=inputs.toolchain,
            timings=timings,
        )
        store(entry, results, ctx.logs)
        files, note = write_outputs(results, entry, out_dir, opts.results_dir, copy_logs=False)
    return EvidenceRun(results, False, files, note, round(time.monotonic() - t_all, 3))


# ---------------------------------------------------------------- the result cache and the outputs


def _cached(entry: Path) -> Optional[ft.FinetuneResults]:
    try:
        return ft.FinetuneResults.from_json((entry / "finetune.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError):
        return None  # absent, half-written or of another version: not a hit


def store(entry: Path, results: ft.FinetuneResults, logs: Path) -> None:
    """The finished result kept in the cache (finetune.json, the runs' logs), written whole."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
    (staging / "finetune.json").write_text(redact(results.to_json()), encoding="utf-8")
    if logs.is_dir():
        shutil.copytree(logs, staging / "logs")
    if entry.exists():
        shutil.rmtree(entry)
    staging.rename(entry)


def write_outputs(
    results: ft.FinetuneResults, entry: Path, out_dir: Path, results_dir: Path, copy_logs: bool
) -> tuple[list[Path], str]:
    """results/evidence/: finetune.json, finetune.md, the plot (with matplotlib), the logs; and the
    evidence section of results/summary.md (added or replaced, the rest untouched)."""
    json_path = out_dir / "finetune.json"
    _write_atomic(json_path, redact(results.to_json()).encode())
    files = [json_path]
    if copy_logs:  # a cached result: its own logs, not an older run's
        shutil.rmtree(out_dir / "logs", ignore_errors=True)
        if (entry / "logs").is_dir():
            shutil.copytree(entry / "logs", out_dir / "logs")
    png = out_dir / PLOT
    if can_plot():
        made = entry / PLOT
        if not made.is_file():  # a cached result made where matplotlib was not installed: plotted now
            ft.plot(results, made)
        shutil.copyfile(made, png)
        files.append(png)
        note = f"Plot: [{RESULTS_SUBDIR}/{PLOT}]({RESULTS_SUBDIR}/{PLOT}); data: [{RESULTS_SUBDIR}/finetune.json]({RESULTS_SUBDIR}/finetune.json)."
    else:
        png.unlink(missing_ok=True)  # an older run's plot would not match these numbers
        note = f"{NO_PLOT}. Data: [{RESULTS_SUBDIR}/finetune.json]({RESULTS_SUBDIR}/finetune.json)."
    section = redact(ft.summary_section(results, note))
    md = out_dir / "finetune.md"
    md.write_text(section, encoding="utf-8")
    summary = results_dir / "summary.md"
    old = summary.read_text(encoding="utf-8", errors="replace") if summary.is_file() else None
    _write_atomic(summary, evidence_section.splice(old, evidence_section.marked(section)).encode())
    return files + [md, summary], (f"plot {png}" if png in files else NO_PLOT)


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{slug(path.name)}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
