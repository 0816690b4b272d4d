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

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from .. import outdir
from ..cache import Cache
from ..config import Backend, Matrix, Target
from ..patchset.files import load_series
from ..progress import Reporter
from ..redact import redact
from ..run import resultcache
from ..run.cell import APPLY, CONFIGURE, FETCH, provenance_of
from ..run.options import CellOptions
from ..run.pipeline import CellContext, Step, new_context, run_steps
from ..vcs.snapshots import SnapshotRepo
from .build import BUILD_CONTROL, BUILD_PATCHED, PROVENANCE, TRAINING_PLAN, children_cpu, since
from .cases import SEEDS, Case
from .commands import PROGRAM, PROGRAM_SOURCE
from .inputs import INPUTS, inputs_step, llama_target
from .outputs import REAL_SUBDIR, RESULTS_SUBDIR, cached_result, results_cache_dir, write_outputs
from .record import (
    FinetuneResults,
    ModelInfo,
    PretrainInfo,
    ProgramInfo,
    Run,
    SeriesInfo,
    SourceInfo,
)
from .runs import PRETRAIN, plan_runs, runs_step, side_by_side
from .verdict import finetune_json

# the names this module had before it was split by job (inputs, build, runs, outputs)
__all__ = [
    "TRAINING_BUILD_STEPS",
    "TRAINING_INPUT_STEPS",
    "TrainingEvidence",
    "assemble",
    "llama_target",
    "plan_runs",
    "results_cache_dir",
    "run_training_evidence",
    "side_by_side",
]

BUILD_SUBDIR = "build-finetune"
EVIDENCE_TOPIC = "accumulator-reset"


@dataclass
class TrainingEvidence:
    """What `ggml-patch evidence` made: the record, whether it was the cached one, the files."""

    results: FinetuneResults
    cached: bool
    files: list[Path]  # what was written, finetune.json first
    plot_note: str  # where the plot is, or why there is none
    seconds: float


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
        cached = None if rerun else cached_result(cached_dir, key)
        if cached is not None:
            ctx.steps.done(
                f"cached result, nothing changed (key {key[:12]}; --rerun to run it again)"
            )
            # a cached result: its own logs, not an older run's
            resultcache.copy_logs(cached_dir, key, out_dir / "logs", replace=True)
            files, note = write_outputs(cached, cached_dir / key, out_dir, results_dir, predicted)
            return TrainingEvidence(cached, True, files, note, since(t_all))
        ctx.steps.done(f"key {key[:12]}")
        # this run's logs only (the folder is the tool's own)
        shutil.rmtree(ctx.logs, ignore_errors=True)
        # the cell's worktree: never during a matrix run's control
        with cache.lock(f"cell-{cell_id}"):
            run_steps(ctx, TRAINING_BUILD_STEPS)
        runs = runs_step(cases)
        c_runs = children_cpu()
        run_steps(ctx, (PROVENANCE, PRETRAIN, runs))
        timings = {"apply_s": ctx.seconds[APPLY.name], "configure_s": ctx.seconds["configure"]}
        for variant, step in (("patched", BUILD_PATCHED), ("control", BUILD_CONTROL)):
            built = ctx.got(step)
            timings[f"build_{variant}_s"] = built.seconds
            timings[f"build_{variant}_cpu_s"] = built.cpu_seconds
        timings["pretrain_s"] = ctx.seconds[PRETRAIN.name]
        timings["runs_s"] = ctx.seconds[runs.name]
        timings["runs_cpu_s"] = round(children_cpu() - c_runs, 2)
        timings["total_s"] = since(t_all)
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
