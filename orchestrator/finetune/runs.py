"""The training evidence's runs, after the builds: each seed's tiny model pre-trained (or the
real model requantized to F32), then every case in both variants from every model, side by side
on the cores, and the determinism runs.
"""

from __future__ import annotations

import concurrent.futures
import os
from pathlib import Path
from typing import Callable, NamedTuple, Optional

from ..cancel import CancelToken
from ..errors import BuildFailed
from ..run import cmake, resultcache
from ..run.pipeline import CellContext, Step
from ..run.testrun import TestRun, run_program
from ..sources.base import sha256_of
from . import real_model
from .build import BUILD_CONTROL, BUILD_PATCHED
from .cases import Case
from .commands import (
    DETERMINISM_THREADS,
    PROGRAM,
    THREADS,
    VARIANT_LABELS,
    VARIANTS,
    Variant,
    command,
    pretrain_command,
    run_outcome,
)
from .commands import PRETRAIN as PRETRAIN_CASE
from .inputs import INPUTS, made_record, training_evidence_dir
from .output import ProgramOutput, parse_output
from .record import Inputs, Pretrained, RandomModel, RealSource, Run, pretrain_options


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
    `made_record`)."""
    key = inputs.pretrain_key(random)
    path = training_evidence_dir(ctx.cache) / "models" / f"pretrained-{key[:16]}.gguf"
    found = made_record(path, Pretrained)
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
    """The real model as F32, made once with the patched tree's llama-quantize (made_record)."""
    path = src.with_name(f"{real_model.NAME}-{source.gguf_sha256[:12]}.F32.gguf")
    found = made_record(path, RealSource)
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
PRETRAIN = Step("pretrain", models_step)
