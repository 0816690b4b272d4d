"""One variant model: a Variant says what is changed in the tree (a topic's source hunks
reverted, a diff applied, or nothing: the patched tree), which tests judge it, which training
program runs with it; `run_variant` is the one runner (change the tree, build what its tests need,
run them, judge, put the tree back) for the patched tree, every topic's control, every known-wrong
and competing fix."""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Union

from ..model.layout import get_layout
from ..model.results import (
    COMPETING_PREFIX,
    MUTANT_PREFIX,
    Build,
    CompetingInfo,
    DeviceRow,
    MutantInfo,
    RecordStatus,
    TestRecord,
    TrainingRun,
    VariantRecord,
    control_name,
)
from ..model.testspec import BACKEND_OPS, TestSpec, programs
from ..patchset.series import Series
from ..vcs.runner import GitError
from ..verdicts import attribution, backend_ops, classify, training
from ..verdicts.competing import CompetingFix, first_failing_line
from ..verdicts.mutants import Mutant
from . import cmake
from .judge import judge, tests_pass
from .pipeline import CellContext
from .testrun import TestRun, run_program
from .tree import Tree, TreeChange, changed

Kind = Literal["patched", "control", "mutant", "competing"]


@dataclass(frozen=True)
class Variant:
    """One variant of a cell: what it changes, what judges it, what is expected of it."""

    name: str  # results.json's: "patched", "control:<topic>", "mutant:<name>", "competing:<name>"
    kind: Kind
    tests: tuple[TestSpec, ...]  # what it runs: what judges it
    training: tuple[str, ...] = ()  # training programs run after the tests (their epochs kept)
    topic: Optional[str] = None  # the topic it belongs to
    reverts: Optional[str] = None  # the topic whose source hunks it reverts
    diff: Optional[Union[Mutant, CompetingFix]] = None  # the diff it applies on top
    log_name: str = ""  # its logs' names ("": its own name)

    @property
    def targets(self) -> tuple[str, ...]:
        """What its build makes: its tests' programs, then its training programs."""
        return programs(self.tests) + self.training

    @property
    def logs_as(self) -> str:
        return self.log_name or self.name.replace(":", "-")


def patched(tests: tuple[TestSpec, ...], training: tuple[str, ...]) -> Variant:
    """The patched tree, as it is: every declared test, every training program."""
    return Variant("patched", "patched", tests, training)


def control(series: Series, topic: str, with_training: bool = True) -> Variant:
    """The whole queue with only `topic`'s source hunks reverted, judged by its own tests."""
    train = series.training_of(topic) if with_training else ()
    return Variant(
        control_name(topic), "control", series.tests_of(topic), train, topic, reverts=topic
    )


def known_wrong(series: Series, m: Mutant, tests: tuple[TestSpec, ...]) -> Variant:
    """A known-wrong fix applied on the patched tree, judged by `tests` (its topic's that pass
    with the fix)."""
    name = f"{MUTANT_PREFIX}{m.name}"
    return Variant(name, "mutant", tests, (), m.topic or None, diff=m, log_name=f"mutant-{m.name}")


def competing(series: Series, c: CompetingFix, tests: tuple[TestSpec, ...]) -> Variant:
    """A competing fix applied on the tree without its topic's fix, judged by `tests`."""
    # a plain series (no queue): the whole fix reverted (its patches are topic "")
    topic = c.topic or (series.topics[0] if series.topics else "")
    return Variant(
        f"{COMPETING_PREFIX}{c.name}",
        "competing",
        tests,
        (),
        c.topic or None,
        reverts=topic,
        diff=c,
        log_name=f"competing-{c.name}",
    )


def new_record(ctx: CellContext, v: Variant, status: RecordStatus) -> VariantRecord:
    """The variant's record, its header (a known-wrong or competing fix's) in it."""
    d = v.diff
    if isinstance(d, Mutant):
        info = MutantInfo(name=d.name, title=d.title, why_wrong=d.why)
        rec = ctx.record(v.name, status, mutant=info)
    elif isinstance(d, CompetingFix):
        info_c = CompetingInfo.model_validate(d, from_attributes=True)
        rec = ctx.record(v.name, status, competing=info_c)
    else:
        rec = ctx.record(v.name, status)
    rec.topic = v.topic
    return rec


def skipped_record(ctx: CellContext, v: Variant, why: str) -> VariantRecord:
    """A variant not run here (why: the backend, --no-mutants, ...), judged as such."""
    rec = new_record(ctx, v, RecordStatus.PENDING)
    judge(rec, v.kind, skipped=why)
    return rec


def change_of(ctx: CellContext, tree: Tree, v: Variant) -> TreeChange:
    """How `v` changes the patched tree."""
    reverts = tuple(tree.rendered.topic_fix_diffs(v.reverts)) if v.reverts is not None else ()
    diff, paths = "", tuple[str, ...]()
    if v.diff is not None:
        src = get_layout(ctx.options.series.layout)  # the diff is in the queue's layout
        diff, paths = v.diff.rendered(src, ctx.layout), tuple(v.diff.paths(src, ctx.layout))
    return TreeChange(reverts, diff, paths, v.logs_as)


def run_built(ctx: CellContext, v: Variant, rec: VariantRecord) -> VariantRecord:
    """The runner's second half on a variant built already (the patched tree, on a tree the
    cell applied or one given as it is): its tests and training run, judged."""
    if ctx.runs_tests and rec.build and rec.build.ok:
        run_tests(ctx, v, rec)
    return judge(rec, v.kind, ctx=ctx, series=ctx.options.series)


def run_variant(
    ctx: CellContext,
    tree: Tree,
    v: Variant,
    patched_rec: Optional[VariantRecord] = None,
) -> VariantRecord:
    """The one runner: the tree changed as `v` says, its targets built, its tests and training
    run, the tree put back; then judged (against `patched_rec`, the patched tree's record, where
    its kind needs it)."""
    rec = new_record(ctx, v, RecordStatus.PENDING)
    change = change_of(ctx, tree, v)
    if change.paths:
        ctx.steps.step(f"{v.kind} {v.topic or v.name}", _describe(v, change.paths))
    try:
        with changed(tree.worktree, ctx.cell_dir, change) as done:
            rec.reverted = done.reverted if v.reverts is not None else None
            if done.error is None:
                if change.paths:
                    ctx.steps.done("changed")
                build_into(ctx, v, rec)
                if ctx.runs_tests and rec.build and rec.build.ok:
                    run_tests(ctx, v, rec)
                    # its tests pass: asked only then (a failure shows the change was built)
                    if tests_pass(rec) and (why := _not_built_here(ctx, tree, v, change.paths)):
                        return judge(rec, v.kind, skipped=why)
            else:
                ctx.steps.done(f"did not apply: {done.error}")
    except GitError as e:  # the hunks do not revert on the whole queue
        ctx.steps.done(f"its hunks do not revert: {e.line}")
        return judge(rec, v.kind, not_reverted=e.line)
    return judge(
        rec,
        v.kind,
        ctx=ctx,
        series=tree.rendered,
        patched=patched_rec,
        apply_error=done.error,
        judged=[t.name for t in v.tests],
    )


def _not_built_here(ctx: CellContext, tree: Tree, v: Variant, paths: list[str]) -> Optional[str]:
    """Why `v` cannot be judged on this cell: none of the files it changes is read by the build
    of its targets here (another backend's sources, say: a CUDA fix on a Vulkan cell), so its
    programs are the patched tree's own and its tests could only pass. None: some file is."""
    if not paths:
        return None
    ctx.steps.step(f"check {v.name}", f"does its build read {', '.join(paths)}?")
    read = cmake.read_by_build(ctx.build_dir, v.targets)
    if read is None or any((tree.worktree.path / p).resolve() in read for p in paths):
        ctx.steps.done("yes" if read is not None else "ninja cannot say")
        return None
    why = (
        f"{', '.join(paths)} not compiled into {' '.join(v.targets)} here (the "
        f"{ctx.backend.name} build): its programs are the fix's own"
    )
    ctx.steps.done(f"no: cannot be judged here: {why}")
    return why


def _describe(v: Variant, paths: list[str]) -> str:
    if v.kind == "control":
        return f"revert its hunks in {', '.join(paths)}, keep the tests"
    title = v.diff.title if v.diff is not None else v.name
    return str(title)


def build_into(ctx: CellContext, v: Variant, rec: VariantRecord, timed: bool = True) -> None:
    """`v`'s targets built (but those this backend skips: never built); the build's record in
    `rec` (its wall time in the cell's timings)."""
    targets = tuple(t for t in v.targets if t not in ctx.skipped_tests)
    ctx.steps.step(f"build {v.name}", f"targets {' '.join(targets)}")
    log = ctx.logs / f"build-{v.logs_as}.log"
    options = ctx.options
    step = cmake.build(
        ctx.build_dir,
        targets,
        log,
        ctx.env,
        ctx.steps.build_progress,
        options.n_jobs,
        options.makeflags,
    )
    rec.build = Build(
        ok=step.ok, duration_s=round(step.duration_s, 2), log=step.log, error=step.error
    )
    if timed and v.kind in ("patched", "control"):
        ctx.took(f"build_{v.name.replace(':', '_')}", step.duration_s)
    ctx.steps.done("built" if step.ok else f"build failed: {step.error}")
    ctx.steps.built()  # after its line: the next cell's lines come after this build's


def run_tests(ctx: CellContext, v: Variant, rec: VariantRecord) -> None:
    """`v`'s tests (one this backend skips recorded with why), then its training programs."""
    natives = set(ctx.native_programs)
    for t in v.tests:
        why = ctx.skipped_tests.get(t.program)
        rec.tests[t.name] = (
            run_test(ctx, v, t)
            if why is None
            else TestRecord.not_run(why, gate=t.program in natives)
        )
    for program in v.training:
        run = _run_binary(ctx, f"train {v.name}", [program], f"{v.logs_as}-{program}.log")
        rec.training = TrainingRun(
            program=program,
            outcome=classify.outcome(run.exit_code, run.timed_out),
            duration_s=round(run.duration_s, 3),
            log=run.log,
            epochs=training.epochs(run.output),
        )
        ctx.steps.done(f"{len(rec.training.epochs)} epochs")


def run_test(ctx: CellContext, v: Variant, t: TestSpec, log_name: str = "") -> TestRecord:
    log = f"{log_name or v.logs_as}-{'-'.join((t.program, *t.args))}.log"
    args = t.args
    if t.program == BACKEND_OPS:  # the cell's backend compared with the CPU reference
        args = backend_ops.backend_args(args, ctx.module.ops_device)
    run = _run_binary(ctx, f"test {v.name}", [t.program, *args], log)
    rec = record_of_run(run, t.program in ctx.native_programs)
    ctx.steps.done(str(rec.outcome))
    return rec


def _run_binary(ctx: CellContext, step: str, argv: list[str], log: str) -> TestRun:
    ctx.steps.step(step, " ".join(argv))
    command = test_argv(ctx.build_dir / "bin" / argv[0]) + argv[1:]
    return run_program(argv[0], command, ctx.backend.timeout, ctx.env, ctx.logs / log)


def test_argv(binary: Path) -> list[str]:
    """The test's command line, line-buffered through stdbuf where there is one: a test that crashes
    would otherwise lose its buffered stdout, and with it the per-device rows that say where."""
    stdbuf = shutil.which("stdbuf")
    if stdbuf and sys.platform.startswith("linux") and binary.exists():
        return [stdbuf, "-oL", "-eL", str(binary)]
    return [str(binary)]


def record_of_run(run: TestRun, gate: bool) -> TestRecord:
    """One test run as the results model records it (its output kept while the cell runs);
    `gate`: a native test of the project's (its rows and failure line read as the gate's)."""
    if gate:
        rows = classify.gate_rows(run.output)
    elif run.name == BACKEND_OPS:  # one row per case and device
        rows = backend_ops.device_rows(run.output)
    else:
        rows = classify.test_opt_rows(run.output)
    outcome = classify.outcome(run.exit_code, run.timed_out)
    return TestRecord(
        outcome=outcome,
        exit_code=run.exit_code,
        signal=run.signal,
        duration_s=round(run.duration_s, 3),
        log=run.log,
        rows=[DeviceRow.model_validate(r) for r in rows],
        summary_line=next(
            (ln.strip() for ln in reversed(run.output.splitlines()) if "passed" in ln), None
        ),
        gate=gate,
        # the first failing case line: the gate's row, or test-opt's FAIL line of a case
        failure_line=classify.gate_failure_line(run.output)
        if gate
        else first_failing_line(run.name, run.output),
        # the device it was on when it died, if any
        stopped_on=attribution.crash_device(run.output) if outcome != classify.PASSED else None,
        output=run.output,
    )


def build_variant(ctx: CellContext, name: str, targets: tuple[str, ...]) -> VariantRecord:
    """`targets` built in the cell's build tree as variant `name` (the training evidence's
    llama-finetune builds): its record, the build in it."""
    v = Variant(name, "patched", (), tuple(targets))
    rec = new_record(ctx, v, RecordStatus.PENDING)
    build_into(ctx, v, rec)
    return rec
