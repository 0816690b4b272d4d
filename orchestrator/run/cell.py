"""One cell of the matrix as a list of steps (MATRIX_STEPS, run by run/pipeline.py's run_steps):
fetch, apply, plan, configure, test-opt controls, build, test, control, mutants, competing,
training, conclude, store.
Each takes the cell's context (CellContext: what the cell is, its CellOptions, what the earlier
steps returned) and returns its typed result, which the context records; apply's Stop (a cached
result) ends the list. The matrix runs them in two phases (MATRIX_PHASES, cut after control):
every cell's first verdict, then every cell's known-wrong and competing fixes. The bundle's
verification runs BUNDLE_STEPS on a tree it applied itself. A BuildFailed fails the cell, any
other GgmlPatchError is its error; the other cells go on."""

from __future__ import annotations

import itertools
import shutil
import sys
import time
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Optional, Union

from .. import __version__, buildenv, sources
from ..cache import Cache, slug
from ..cancel import CancelToken
from ..config import Backend, Target
from ..errors import BuildFailed, ExitCode, GgmlPatchError, SeriesDoesNotApply
from ..model.layout import (
    GATE_TEST,
    PRECOMPILE_CMAKE,
    TESTS,
    UPSTREAM_TEST,
    BuildPlan,
    build_plan,
    get_layout,
)
from ..model.results import (
    COMPETING_PREFIX,
    CONTROL_PREFIX,
    MUTANT_PREFIX,
    AttributionEntry,
    AttributionLabel,
    Build,
    CachedFrom,
    Cell,
    CellStatus,
    CompetingInfo,
    CompetingVerdict,
    DeviceRow,
    MutantInfo,
    MutantTally,
    Provenance,
    RecordStatus,
    TestRecord,
    TrainingComparison,
    TrainingRun,
    VariantRecord,
    Verdict,
)
from ..patchset.files import write_patches
from ..patchset.render import render
from ..patchset.series import Series
from ..progress import Reporter
from ..records import Record
from ..vcs.runner import GitError
from ..vcs.snapshots import SnapshotRepo, Worktree
from ..verdicts import attribution, classify, training
from ..verdicts.competing import CompetingFix, first_failing_line
from ..verdicts.competing import judge as judge_competing
from ..verdicts.mutants import Mutant, overall_verdict, per_test_verdicts
from . import cmake, resultcache, toolchain
from .options import CellOptions, RunOptions
from .pipeline import (
    CellContext,
    CellProgress,
    Phase,
    Step,
    Stop,
    new_context,
    phases,
    run_steps,
)
from .testrun import TestRun, run_program

__all__ = ["CellContext", "CellOptions", "CellProgress", "RunOptions", "Step", "Stop", "run_steps"]

# the gate test is built from here (extra-programs.cmake) unless the series carries it
_HARNESS_FILES = (
    "CMakeLists.txt",
    "extra-programs.cmake",
    PRECOMPILE_CMAKE,
    "train-opt-dynamic.cpp",
    f"{GATE_TEST}.cpp",
)


# ---------------------------------------------------------------- what the steps return


class Tree(NamedTuple):
    """What apply made: the worktree on the base (`snap`) with the series rendered for the target
    applied, and the commit `git am` made (`head`)."""

    snap: sources.Snapshot
    rendered: Series
    worktree: Worktree
    head: str = ""
    key: str = ""  # the result cache's key of the cell's inputs


class Planned(NamedTuple):
    """What configure and the builds work from: the build plan and how the steps name it."""

    plan: BuildPlan
    detail: str  # configure's progress line
    what: str  # configure's failure names it


class Controlled(NamedTuple):
    """The control's record (the first topic's, judged by the gate and test-opt) and, where its
    tests ran, each failing test's attribution; `topics`: each later topic's control."""

    record: VariantRecord
    attribution: Optional[list[AttributionEntry]] = None
    failure_kind: Optional[AttributionLabel] = None
    topics: tuple[VariantRecord, ...] = ()


class Configured(NamedTuple):
    plan: BuildPlan
    reused: bool  # the build tree as it was: nothing changed


class Variants(NamedTuple):
    """The known-wrong fixes' tally (None: the cell has none) and their records."""

    tally: Optional[MutantTally]
    records: list[VariantRecord]


class Conclusion(NamedTuple):
    status: CellStatus
    reason: str
    exit_code: int


# ---------------------------------------------------------------- the steps


def fetch(ctx: CellContext) -> sources.Snapshot:
    ctx.steps.step("fetch", f"{ctx.target.source.kind} {ctx.target.source.key}")
    with ctx.timing("fetch"):
        snap = sources.snapshot(ctx.target.source, ctx.cache, ctx.repo)
    ctx.steps.done(snap.description)
    return snap


def provenance_of(ctx: CellContext, snap: sources.Snapshot) -> Provenance:
    """Where the cell's base comes from, as results.json records it."""
    return Provenance(
        kind=ctx.target.source.kind,
        description=snap.description,
        **snap.provenance,
        base_commit=snap.commit,
    )


def _record_source(ctx: CellContext, snap: sources.Snapshot) -> None:
    ctx.cell.source = provenance_of(ctx, snap)


def apply(ctx: CellContext) -> Union[Tree, Stop]:
    """The series rendered into the target's layout, applied on the base; a Stop: the cached
    result is the cell's."""
    snap, series, repo = ctx.got(FETCH), ctx.options.series, ctx.repo
    ctx.steps.step("apply", f"{len(series.patches)} patches, layout {ctx.layout.name}")
    with ctx.timing("apply"):
        rendered = render(
            series,
            get_layout(series.layout),
            ctx.layout,
            lambda p: repo.read_blob(snap.commit, p),
        )
        key = resultcache.cell_key(cache_inputs(ctx, snap, rendered))
        if not ctx.options.rerun and reuse_cached(ctx, key):
            ctx.steps.done(
                f"cached result, nothing changed (key {key[:12]}; --rerun to run it again)"
            )
            return Stop("cached result")
        try:
            head = apply_series(ctx.worktree, snap.commit, rendered, ctx.cell_dir)
        except SeriesDoesNotApply as e:
            raise SeriesDoesNotApply(
                f"the series does not apply to {snap.description}: {e}"
            ) from None
    ctx.steps.done(f"patched commit {head[:12]}")
    return Tree(snap, rendered, ctx.worktree, head, key)


def _record_tree(ctx: CellContext, tree: Tree) -> None:
    ctx.cell.cache_key, ctx.cell.patched_commit = tree.key, tree.head


def plan(ctx: CellContext) -> Planned:
    """The layout's build plan on the cell's worktree: the tests this backend runs, the training
    program where the options ask for it."""
    found = build_plan(
        ctx.layout, str(ctx.worktree.path), str(harness(ctx.native_tests, ctx.cell_dir))
    )
    targets = tuple(t for t in found.targets if t not in ctx.skipped_tests)
    found = replace(found, targets=targets)
    if not ctx.options.programs:
        found = replace(found, programs=())
    return Planned(found, f"cmake {ctx.module.name}", "cmake configure")


def configure(ctx: CellContext) -> Configured:
    """The build tree configured for the plan step's plan (reused as it is when nothing changed)."""
    planned = ctx.got(PLAN)
    ctx.steps.step("configure", planned.detail)
    with ctx.timing("configure"):
        flags = ctx.module.configure_flags(ctx.backend)
        log = ctx.logs / "configure.log"
        step = cmake.configure(planned.plan, ctx.build_dir, flags, log, ctx.env)
    cmake.require(step, planned.what)
    ctx.steps.done("reused" if step.skipped else "configured")
    return Configured(planned.plan, step.skipped)


def early_controls(ctx: CellContext) -> dict[str, VariantRecord]:
    """The controls test-opt alone judges (a queue's topics but the gate's), first: the fixed
    tree's test-opt built and run, then each such topic's hunks reverted, test-opt rebuilt (one
    translation unit), run and judged, the files put back. The cheapest complete verdicts come
    before anything they do not need is built (the gate, the training program: the build step's,
    after). Each topic's control record, by topic; none where test-opt is not run here."""
    tree, plan = ctx.got(APPLY), ctx.got(CONFIGURE).plan
    topics = tree.rendered.topics
    early = [t for t in topics if not tree.rendered.judged_by_gate(t)] if len(topics) > 1 else []
    if not early or UPSTREAM_TEST not in plan.targets or UPSTREAM_TEST in ctx.skipped_tests:
        return {}
    with ctx.timing("build_patched_first"):
        first = build_variant(ctx, "patched", (UPSTREAM_TEST,), "patched-first", timed=False)
    if first.build is None or not first.build.ok:
        return {}  # the build step builds it again and says why it fails
    if ctx.runs_tests:
        reference = _run_test(ctx, "patched", UPSTREAM_TEST, "patched-first").output or ""
    found = {}
    for topic in early:
        variant = "control" if topic == topics[0] else f"{CONTROL_PREFIX}{topic}"
        with ctx.timing("control" if topic == topics[0] else f"control_{topic}"):
            rec = _topic_control(ctx, tree, (UPSTREAM_TEST,), topic, variant)
        if ctx.runs_tests and rec.verdict is None:
            _judge_topic_control(ctx, tree.rendered, rec, reference)
        found[topic] = rec
    return found


def build(ctx: CellContext) -> VariantRecord:
    """The patched variant built (every target of the plan); a BuildFailed when it does not
    build."""
    plan = ctx.got(CONFIGURE).plan
    rec = build_variant(ctx, "patched", plan.targets + plan.programs)
    if rec.build is None or not rec.build.ok:
        error = rec.build.error if rec.build else ""
        log = rec.build.log if rec.build else ctx.logs
        raise BuildFailed(f"{ctx.cell.cell}: build failed: {error} (log: {log})")
    return rec


def run_tests(ctx: CellContext) -> VariantRecord:
    """The patched variant's tests and training program run (none with --build-only)."""
    patched = ctx.got(BUILD)
    if ctx.runs_tests:
        _run_variant(ctx, ctx.got(CONFIGURE).plan.programs, patched)
    return patched


def _add_record(ctx: CellContext, rec: VariantRecord) -> None:
    ctx.records.append(rec)


def control(ctx: CellContext) -> Controlled:
    """The negative controls, in the same tree: with one topic (or a plain series) the fix reverted
    (the tests kept); with a queue, for each topic the whole queue with only that topic's source
    hunks reverted. Each rebuilt (one translation unit and the relinks), the tests run again,
    judged (killed, survived, invalid); the tree put back after each. The first topic's control
    is judged by the gate and test-opt (as before the queue), each later one by test-opt's cases
    its own test patch adds: those the test-opt controls step ran already are taken from it."""
    tree, plan, patched = ctx.got(APPLY), ctx.got(CONFIGURE).plan, ctx.got(TEST)
    topics = tree.rendered.topics
    early = ctx.got(EARLY_CONTROLS)
    if topics and topics[0] in early:
        rec = early[topics[0]]
    elif len(topics) < 2:
        fix_paths = tree.rendered.fix_paths()
        ctx.steps.step("control", f"revert {', '.join(fix_paths)}, keep the test")
        # the control's whole marginal cost: revert, rebuild, tests, restore
        with ctx.timing("control"), fix_reverted(tree):
            rec = build_variant(ctx, "control", plan.targets + plan.programs)
            if ctx.runs_tests and rec.status != RecordStatus.BUILD_FAILED:
                _run_variant(ctx, plan.programs, rec)
        rec.reverted = fix_paths
        rec.topic = topics[0] if topics else None
    else:
        with ctx.timing("control"):
            rec = _topic_control(ctx, tree, plan.targets + plan.programs, topics[0], "control")
    others = []
    opt_skipped = ctx.skipped_tests.get(UPSTREAM_TEST)
    for topic in topics[1:]:
        variant = f"{CONTROL_PREFIX}{topic}"
        if topic in early:
            others.append(early[topic])
            continue
        if opt_skipped and not tree.rendered.judged_by_gate(topic):
            # its own cases are in test-opt: nothing here could judge it, so it is not built
            others.append(_unjudged_control(ctx, variant, topic, opt_skipped))
            continue
        with ctx.timing(f"control_{topic}"):
            other = _topic_control(ctx, tree, plan.targets, topic, variant)
        if ctx.runs_tests and other.verdict is None:
            _judge_topic_control(ctx, tree.rendered, other, _opt_output(patched))
        others.append(other)
    if not ctx.runs_tests:
        return Controlled(rec, topics=tuple(others))
    if rec.verdict is None and not tree.rendered.judged_by_gate(rec.topic):
        # a run without the gate's topic: its first topic's control is judged as the others are
        _judge_topic_control(ctx, tree.rendered, rec, _opt_output(patched))
    entries = _judge_control(ctx, patched, rec) if rec.verdict is None else []
    ctx.steps.verdict(verdict_line(patched, rec))
    return Controlled(rec, entries, attribution.failure_kind(entries), tuple(others))


def _unjudged_control(ctx: CellContext, variant: str, topic: str, why: str) -> VariantRecord:
    """A topic's control on a backend that does not run test-opt: skipped, with why."""
    rec = ctx.record(variant, RecordStatus.SKIPPED)
    rec.topic = topic
    rec.verdict_reason = f"not run: its cases are in test-opt, not run on this backend ({why})"
    ctx.steps.verdict(f"the control of {topic}: {rec.verdict_reason}")
    return rec


def _topic_control(
    ctx: CellContext, tree: Tree, targets: tuple[str, ...], topic: str, variant: str
) -> VariantRecord:
    """The whole queue with only `topic`'s source hunks reverted, built, its tests run, the files
    put back; a record judged invalid when they do not revert."""
    paths = sorted({f.path for f in tree.rendered.topic_fix_diffs(topic)})
    ctx.steps.step(f"control {topic}", f"revert its hunks in {', '.join(paths)}, keep the tests")
    try:
        with topic_reverted(ctx, tree, topic):
            ctx.steps.done("reverted")
            rec = build_variant(ctx, variant, targets)
            if ctx.runs_tests and rec.status != RecordStatus.BUILD_FAILED:
                programs = tuple(t for t in targets if t not in TESTS)
                # what it built, and what this backend skips (recorded with why)
                tests = tuple(t for t in TESTS if t in targets or t in ctx.skipped_tests)
                _run_variant(ctx, programs, rec, tests)
    except GitError as e:
        rec = ctx.record(variant, RecordStatus.INVALID)
        rec.verdict = Verdict.INVALID
        rec.verdict_reason = f"its hunks do not revert on the whole queue: {e.line}"
        ctx.steps.done(rec.verdict_reason)
    rec.reverted, rec.topic = paths, topic
    return rec


@contextmanager
def topic_reverted(ctx: CellContext, tree: Tree, topic: str) -> Iterator[list[str]]:
    """The worktree with only `topic`'s source hunks reverted (`git apply -R` of them on the whole
    queue), put back whatever happens; a GitError when they do not revert."""
    diffs = tree.rendered.topic_fix_diffs(topic)
    paths = sorted({f.path for f in diffs})
    patch = ctx.cell_dir / "controls" / f"{topic}.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text("".join(f.text for f in diffs), encoding="utf-8")
    with files_kept(tree.worktree.path, paths):
        tree.worktree.unapply(patch)
        yield paths


def _opt_output(rec: VariantRecord) -> str:
    opt = rec.test(UPSTREAM_TEST)
    return (opt.output or "") if opt else ""


def _judge_topic_control(
    ctx: CellContext, series: Series, rec: VariantRecord, reference: str = ""
) -> None:
    """A later topic's control judged by test-opt and the cases its own test patch adds (where a
    crash stopped it: from `reference`, the fixed tree's test-opt output)."""
    topic = rec.topic or ""
    opt = rec.test(UPSTREAM_TEST)
    crash = dict(series.control_crash).get(topic)
    v = classify.topic_control_verdict(
        bool(rec.build and rec.build.ok),
        rec.outcome(UPSTREAM_TEST),
        opt.exit_code if opt else None,
        (opt.output or "") if opt else "",
        series.topic_cases(topic),
        crash,
        reference,
    )
    rec.status, rec.verdict, rec.verdict_reason = RecordStatus(v.verdict.value), v.verdict, v.reason
    if opt and v.verdict == Verdict.KILLED:
        output = opt.output or ""
        # a crash has no FAIL line: its signal and the case it died in say what went wrong
        if opt.outcome == classify.CRASHED:
            rec.failure_line = classify.crash_line(opt.exit_code, output, reference)
        else:
            rec.failure_line = first_failing_line(UPSTREAM_TEST, output)
    ctx.steps.verdict(f"the control of {topic} (its hunks reverted): {v.verdict} ({v.reason})")


def _record_control(ctx: CellContext, found: Controlled) -> None:
    ctx.records.append(found.record)
    ctx.records += found.topics
    if found.attribution is not None:
        ctx.cell.attribution = found.attribution
        ctx.cell.failure_kind = found.failure_kind


def run_mutants(ctx: CellContext) -> Variants:
    """Each known-wrong fix on the patched tree: applied, the judged tests rebuilt, each run and
    judged on its own (which test kills it), the files put back. Nothing is rebuilt after a
    restore: no later step runs a binary, and the next build sees the restored file newer than its
    object."""
    mutant_files, patched = ctx.options.mutant_files, ctx.got(TEST)
    if not mutant_files:
        return Variants(None, [])
    reason = ctx.module.mutants_skip_reason
    if reason:  # none run, none recorded: the plain backend's cell has them
        return Variants(MutantTally(total=0, killed=0, skipped=reason), [])
    skipped = _why_mutants_are_skipped(ctx, patched)
    if skipped:
        recs = [_diff_record(ctx, m, RecordStatus.SKIPPED, skipped) for m in mutant_files]
        return Variants(MutantTally(total=len(mutant_files), killed=0, skipped=skipped), recs)
    recs = []
    with ctx.timing("mutants"):
        # each topic's share too (the bench's cost per topic): they come in queue order
        for topic, group in itertools.groupby(mutant_files, key=lambda m: m.topic):
            with ctx.timing(f"mutants_{topic}"):
                recs += [_run_mutant(ctx, ctx.worktree, patched, m) for m in group]
    killed_by = {}
    for t in _judged_tests(patched):
        killed_by[t] = sum(1 for r in recs if (r.kills or {}).get(t) == Verdict.KILLED)
    tally = MutantTally(
        total=len(recs),
        killed=sum(1 for r in recs if r.verdict == Verdict.KILLED),
        survived=[r.mutant.name for r in recs if r.verdict == Verdict.SURVIVED and r.mutant],
        invalid=[r.mutant.name for r in recs if r.verdict == Verdict.INVALID and r.mutant],
        killed_by=killed_by,
    )
    return Variants(tally, recs)


def _record_mutants(ctx: CellContext, found: Variants) -> None:
    ctx.records += found.records
    if found.tally is not None:
        ctx.cell.mutants = found.tally


def run_competing(ctx: CellContext) -> list[VariantRecord]:
    """Each competing fix on the UNFIXED tree (the control's): applied, rebuilt, run, judged, the
    files put back."""
    competing, patched = ctx.options.competing_files, ctx.got(TEST)
    # as the mutants: the plain backend's cell has them
    if not competing or ctx.module.mutants_skip_reason:
        return []
    skipped = _why_mutants_are_skipped(ctx, patched)
    if skipped:
        return [_diff_record(ctx, c, RecordStatus.SKIPPED, skipped) for c in competing]
    tree = ctx.got(APPLY)
    if len(tree.rendered.topics) < 2:
        with ctx.timing("competing"), fix_reverted(tree):
            return [_run_competing(ctx, tree.worktree, patched, c) for c in competing]
    # a queue: each on the whole queue with only its own topic's hunks reverted
    recs = []
    with ctx.timing("competing"):
        for topic, group in itertools.groupby(competing, key=lambda c: c.topic):
            with ctx.timing(f"competing_{topic}"):
                for c in group:
                    with topic_reverted(ctx, tree, c.topic or tree.rendered.topics[0]):
                        recs.append(_run_competing(ctx, tree.worktree, patched, c))
    return recs


def _add_records(ctx: CellContext, recs: list[VariantRecord]) -> None:
    ctx.records += recs


def compare_training(ctx: CellContext) -> Optional[TrainingComparison]:
    """The training program's epochs with the fix against the control's (None: not run)."""
    p, c = ctx.got(TEST), ctx.got(CONTROL).record
    if p.training is None or c.training is None:
        return None
    p_ep, c_ep = p.training.epochs, c.training.epochs
    return TrainingComparison(
        patched=p_ep,
        control=c_ep,
        diverges_as_predicted=training.diverges_as_predicted(p_ep, c_ep),
    )


def _record_training(ctx: CellContext, found: Optional[TrainingComparison]) -> None:
    if found is not None:
        ctx.cell.training = found


def conclude(ctx: CellContext) -> Conclusion:
    """The cell's status, reason and exit code from the patched variant, the control and the
    known-wrong fixes' tally."""
    cell, patched, control = ctx.cell, ctx.got(TEST), ctx.got(CONTROL).record
    if not ctx.runs_tests:
        for rec in (control, *ctx.got(CONTROL).topics):
            if rec.status != RecordStatus.BUILD_FAILED:
                continue
            error = rec.build.error if rec.build else ""
            which = "the control" if rec is control else f"the control of {rec.topic}"
            reason = f"built with the fix, but {which} (fix reverted) did not build: {error}"
            return Conclusion(CellStatus.FAILED, reason, int(ExitCode.BUILD_FAILED))
        reason = f"built with and without the fix; tests not run: {ctx.build_only_reason}"
        return Conclusion(CellStatus.BUILD_ONLY, reason, 0)
    outcomes = {n: t.outcome for n, t in patched.tests.items()}
    built = bool(patched.build and patched.build.ok)
    judged = None
    if control.verdict:
        judged = classify.GateVerdict(control.verdict, control.verdict_reason)
    gate_why = ctx.options.series.gate_skip_reason()
    status, reason = classify.cell_status(
        built,
        outcomes,
        judged,
        attribution.summary(cell.attribution or []),
        {GATE_TEST: gate_why} if gate_why else None,
    )
    code = ExitCode.OK
    if status != CellStatus.PASSED:
        if not built:
            code = ExitCode.BUILD_FAILED
        elif any(o not in (classify.PASSED, classify.SKIPPED) for o in outcomes.values()):
            code = ExitCode.EXPECTATIONS_NOT_MET
        else:
            code = ExitCode.CONTROL_NOT_KILLED
    for other in ctx.got(CONTROL).topics:
        if other.verdict == Verdict.KILLED:
            continue
        if other.status == RecordStatus.SKIPPED:  # the backend runs none of its cases: named
            reason += f"; the control of {other.topic} {other.verdict_reason}"
            continue
        # one topic's control not killed fails the cell; the others' verdicts stay recorded
        reason += f"; the control of {other.topic} was {other.verdict}: {other.verdict_reason}"
        if status == CellStatus.PASSED:
            status, code = CellStatus.FAILED, ExitCode.CONTROL_NOT_KILLED
    survived = cell.mutants.survived if cell.mutants else []
    if survived:  # the gate passes a known-wrong fix: it is not gate enough
        reason += f"; {len(survived)} known-wrong fix(es) survived the gate: {', '.join(survived)}"
        if status == CellStatus.PASSED:
            status, code = CellStatus.FAILED, ExitCode.CONTROL_NOT_KILLED
    return Conclusion(status, reason, int(code))


def _record_conclusion(ctx: CellContext, found: Conclusion) -> None:
    ctx.cell.status, ctx.cell.reason, ctx.cell.exit_code = found


def store(ctx: CellContext) -> None:
    """The finished cell and its logs in the result cache, log paths relative to the logs
    directory."""
    for rec in ctx.records:
        for t in rec.tests.values():
            t.output = None  # the tests' output is in their logs
    records = [r.model_copy(deep=True) for r in ctx.records]  # copies: paths made relative below
    # one not under this run's logs (never so today) kept as it is
    _map_logs(
        records,
        lambda p: str(Path(p).relative_to(ctx.logs)) if Path(p).is_relative_to(ctx.logs) else p,
    )
    entry = CachedResult(cell=ctx.cell, records=records).to_json()
    resultcache.store_with_logs(results_cache_dir(ctx.cache), ctx.key, entry, ctx.logs)


# ---------------------------------------------------------------- the step lists

FETCH = Step("fetch", fetch, _record_source)
APPLY = Step("apply", apply, _record_tree)
PLAN = Step("plan", plan)
CONFIGURE = Step("configure", configure)
EARLY_CONTROLS = Step("test-opt controls", early_controls)
BUILD = Step("build", build)
TEST = Step("test", run_tests, _add_record)
CONTROL = Step("control", control, _record_control, ends_phase="first verdicts")
MUTANTS = Step("mutants", run_mutants, _record_mutants)
COMPETING = Step("competing", run_competing, _add_records)
TRAINING = Step("training", compare_training, _record_training)
CONCLUDE = Step("conclude", conclude, _record_conclusion)
STORE = Step("store", store, ends_phase="known-wrong and competing fixes")

# a matrix cell: the series applied, built, tested, controlled, judged, cached
MATRIX_STEPS: tuple[Step[Any], ...] = (
    FETCH,
    APPLY,
    PLAN,
    CONFIGURE,
    EARLY_CONTROLS,
    BUILD,
    TEST,
    CONTROL,
    MUTANTS,
    COMPETING,
    TRAINING,
    CONCLUDE,
    STORE,
)
# the matrix runs every cell to its first verdict (the fix's tests, its control judged) before
# any cell's known-wrong and competing fixes: the last cell's answer is not behind the first's
MATRIX_PHASES = phases(MATRIX_STEPS)
# a tree given as it is (the bundle's, applied with git am): configured, built, tested
BUNDLE_STEPS: tuple[Step[Any], ...] = (PLAN, CONFIGURE, BUILD, TEST)


def verdict_line(patched: Optional[VariantRecord], control: VariantRecord) -> str:
    """The cell's answer once its control is judged: the fix's tests, the control's verdict."""
    passed = patched is not None and patched.status == RecordStatus.PASSED
    says = "every test passes" if passed else "a test fails"
    judged = control.verdict or control.status
    return f"with the fix {says}; the control (fix reverted): {judged}"


@contextmanager
def fix_reverted(tree: Tree) -> Iterator[list[str]]:
    """The worktree with only the fix reverted (the series' files outside tests/), put back whatever
    happens."""
    fix_paths = tree.rendered.fix_paths()
    with files_kept(tree.worktree.path, fix_paths):
        tree.worktree.restore_from(tree.snap.commit, fix_paths)
        yield fix_paths


@contextmanager
def files_kept(root: Path, paths: list[str]) -> Iterator[None]:
    """The files' bytes written back on the way out, whatever happens (one that did not exist
    removed): no git process, the index untouched, an unchanged file not touched (nothing
    recompiles)."""
    kept = {p: (root / p).read_bytes() if (root / p).is_file() else None for p in paths}
    try:
        yield
    finally:
        for p, data in kept.items():
            f = root / p
            if data is None:
                f.unlink(missing_ok=True)
            elif not f.is_file() or f.read_bytes() != data:
                f.write_bytes(data)


def _judge_control(
    ctx: CellContext, patched: VariantRecord, rec: VariantRecord
) -> list[AttributionEntry]:
    """The control's verdict in its record; each failing test's attribution returned."""
    built = bool(rec.build and rec.build.ok)
    # each test failing with the fix, against the same test (and device) without it
    entries = attribution.attribute(patched.tests, rec.tests, built)
    opt_pre = attribution.pre_existing_only(entries, UPSTREAM_TEST)
    pre = (
        attribution.describe([e for e in entries if e.test == UPSTREAM_TEST], labels=False)
        if opt_pre
        else None
    )
    gate = rec.test(GATE_TEST)
    gate_exit, gate_output = (gate.exit_code, gate.output or "") if gate else (None, "")
    opt_skipped = ctx.skipped_tests.get(UPSTREAM_TEST)
    v = classify.control_verdict(
        built,
        rec.outcome(GATE_TEST),
        gate_exit,
        gate_output,
        rec.outcome(UPSTREAM_TEST),
        pre,
        opt_skipped,
    )
    rec.status, rec.verdict, rec.verdict_reason = RecordStatus(v.verdict.value), v.verdict, v.reason
    rec.failure_line = classify.gate_failure_line(gate_output)
    return entries


class TreeTested(NamedTuple):
    patched: VariantRecord  # built, its tests run
    configure_reused: bool
    configure_s: float
    tests_s: float
    logs: Path


def tested_tree(
    target: Target,
    backend: Backend,
    cache: Cache,
    repo: SnapshotRepo,
    series: Series,
    native_tests: Path,
    work: Path,
    worktree: Worktree,
    logs: Optional[Path] = None,
) -> TreeTested:
    """BUNDLE_STEPS on a tree given as it is (a bundle's, applied with git am), in `work`; the
    logs in `logs` (default work/logs)."""
    options = CellOptions(series=series, programs=False)
    logs = logs or work / "logs"
    ctx = new_context(target, backend, cache, repo, native_tests, work, logs, options, worktree)
    run_steps(ctx, BUNDLE_STEPS)
    return TreeTested(
        ctx.got(TEST),
        ctx.got(CONFIGURE).reused,
        ctx.cell.timings.get("configure", 0.0),
        ctx.seconds[TEST.name],
        ctx.logs,
    )


# ---------------------------------------------------------------- one cell, phase by phase


class CellRun:
    """One cell of a matrix run, taken through MATRIX_PHASES one phase at a time (run/matrix.py
    runs every cell's first phase before any cell's second): skipped, or its steps run under the
    cell's lock, held from its first phase to its end. A Stop (a cached result), a failure or the
    last phase ends it; its result line is printed then."""

    def __init__(
        self,
        opts: RunOptions,
        options: CellOptions,
        target: Target,
        backend: Backend,
        repo: SnapshotRepo,
        reporter: Reporter,
        cancel: CancelToken,
    ):
        self.id = f"{target.name}/{backend.name}"
        self.opts, self.options, self.reporter = opts, options, reporter
        self.ctx = new_context(
            target,
            backend,
            opts.cache,
            repo,
            opts.matrix.native_tests_dir,
            opts.cache.cell_dir(self.id),
            opts.results_dir / "logs" / slug(self.id),
            options,
            reporter=reporter,
            cancel=cancel,
        )
        self.index = 0  # its place in the run's progress lines
        self.ended = False
        self._seconds = 0.0  # its phases' wall time: skip probes and waiting for the lock included
        self._reported = True  # a skip is reported as one, not with a result line
        self._lock = ExitStack()
        self._locked = False

    @property
    def cell(self) -> Cell:
        return self.ctx.cell

    @property
    def records(self) -> list[VariantRecord]:
        return self.ctx.records

    def run_phase(
        self, number: int, phase: Phase, last: bool, n_jobs: Optional[int] = None
    ) -> None:
        """The phase's steps (`n_jobs`: its compile jobs, where not the cell's own); the first phase
        starts the cell (skipped, or run)."""
        t0 = time.monotonic()
        if n_jobs is not None:
            self.ctx.options = replace(self.ctx.options, n_jobs=n_jobs)
        try:
            if number == 0:
                self.index = self.reporter.start_cell(self.id)
                going = self._start()
            else:
                self.reporter.resume_cell(self.index, self.id, phase.name)
                going = True
            going = going and self._run(phase.steps) and not last
        except BaseException:  # Ctrl-C, a bug: the lock released, the run ends
            self.close()
            raise
        self._seconds += time.monotonic() - t0
        if not going:
            self._end()

    def close(self) -> None:
        """The cell's lock released (again: a no-op); nothing waits on its milestones."""
        self._lock.close()
        self.pass_milestones()

    def pass_milestones(self) -> None:
        """Its first build and first verdict counted as done, whether or not it had them (a
        build-only cell has no verdict): the cells that wait for them go on."""
        self.ctx.steps.first_build.set()
        self.ctx.steps.first_verdict.set()

    def _start(self) -> bool:
        """Whether the cell runs (or builds only); a skip is recorded (and reported) here."""
        ctx, cell, module = self.ctx, self.ctx.cell, self.ctx.module
        backend, options = ctx.backend, self.options
        action, why = cell_action(
            module.missing_toolchain(backend),
            module.missing_device(backend),
            module.build_only_ok,
            options.build_only,
        )
        if action == "skip" and options.required:
            why = (
                f"{backend.name} is required here (--require-backend {backend.name}) "
                f"but cannot run: {why}"
            )
            cell.status, cell.reason = CellStatus.FAILED, why
            cell.exit_code = int(ExitCode.BACKEND_MISSING)
            return False
        if action == "skip":
            self.reporter.skip(why)
            cell.status, cell.reason, cell.exit_code = CellStatus.SKIPPED, why, 0
            self._reported = False
            return False
        cell.device = module.device_info(backend)
        ctx.build_only_reason = why if action == "build-only" else None
        return True

    def _run(self, steps: tuple[Step[Any], ...]) -> bool:
        """`steps` under the cell's lock (taken at its first step); False: the cell ended."""
        cell = self.ctx.cell
        try:
            if not self._locked:
                self._lock.enter_context(self.opts.cache.lock(f"cell-{self.id}"))
                self._locked = True
            return run_steps(self.ctx, steps) is None
        except BuildFailed as e:
            cell.status, cell.reason, cell.exit_code = CellStatus.FAILED, str(e), int(e.exit_code)
        except GgmlPatchError as e:
            cell.status, cell.reason, cell.exit_code = CellStatus.ERROR, str(e), int(e.exit_code)
        return False

    def _end(self) -> None:
        self.close()
        self.ended = True
        cell = self.ctx.cell
        cell.timings["total"] = round(self._seconds, 2)
        if self._reported:
            self.reporter.cell_result(cell.status, cell.reason, cell.timings["total"])


def cell_action(
    no_toolchain: Optional[str], no_device: Optional[str], build_only_ok: bool, build_only: bool
) -> tuple[str, str]:
    """("run" | "build-only" | "skip", why): a skip names everything missing; without the device, a
    cell is built on request (--build-only) where that means something (CUDA), and never counts as
    passed."""
    if no_toolchain:
        also = f"; {no_device}" if no_device and no_device not in no_toolchain else ""
        return "skip", no_toolchain + also
    if no_device:
        return ("build-only" if build_only and build_only_ok else "skip"), no_device
    return "run", ""


# ---------------------------------------------------------------- the result cache


class CachedResult(Record):
    """A result-cache entry: the finished cell and its records, log paths relative to the entry's
    logs."""

    cell: Cell
    records: list[VariantRecord]


def cache_inputs(ctx: CellContext, snap: sources.Snapshot, rendered: Series) -> dict:
    """Everything that decides the cell's result (its result-cache key hashes these)."""
    runs_mutants = not ctx.module.mutants_skip_reason
    # a backend that runs no mutant keeps its key when they change
    mutants = {}
    if runs_mutants:
        mutants = {m.name: [f.text for f in m.files] for m in ctx.options.mutant_files}
    inputs = {
        "tool": __version__,
        "base": snap.commit,
        "series": rendered.sha256,
        "layout": [ctx.layout.name, ctx.layout.prefix],
        "harness": harness_files(ctx.native_tests),
        "flags": ctx.module.configure_flags(ctx.backend),
        "env": ctx.env,
        "timeout": ctx.backend.timeout,
        "build_only": ctx.build_only_reason is not None,
        # probed again only when an executable changed: a no-change re-run starts none of them
        "toolchain": toolchain.versions(results_cache_dir(ctx.cache)),
        "mutants": mutants,
        # the key's name kept: cached results stay valid
        "mutants_enabled": not ctx.options.no_mutants,
    }
    competing = ctx.options.competing_files
    if competing and runs_mutants:
        inputs["competing"] = {c.name: [f.text for f in c.files] for c in competing}
    # only where a backend skips tests, so every other cell keeps its key
    if ctx.skipped_tests:
        inputs["skip_tests"] = ctx.skipped_tests
    # CC, CFLAGS, ... as set now (buildenv.BUILD_VARIABLES); none set: the key is unchanged
    build_env = buildenv.key_part()
    if build_env:
        inputs["build_env"] = build_env
    return inputs


def results_cache_dir(cache: Cache) -> Path:
    return cache.root / "results"


def reuse_cached(ctx: CellContext, key: str) -> bool:
    """The cached result of exactly these inputs (`key`), its logs copied into this run's, if
    there is one."""
    try:
        found = CachedResult.model_validate(resultcache.load(results_cache_dir(ctx.cache), key))
    except ValueError:  # pydantic's ValidationError is one
        return False  # none, or an entry this version cannot read: not a hit
    resultcache.copy_logs(results_cache_dir(ctx.cache), key, ctx.logs)
    _map_logs(found.records, lambda p: str(ctx.logs / p) if p else p)
    timings = ctx.cell.timings  # this run's: the cached run's are kept apart
    for name in Cell.model_fields:
        setattr(ctx.cell, name, getattr(found.cell, name))
    ctx.cell.cache_key, ctx.cell.timings = key, timings
    ctx.cell.cached = CachedFrom(key=key, timings_of_the_run=found.cell.timings)
    ctx.records += found.records
    return True


def _map_logs(records: list[VariantRecord], fn: Callable[[str], str]) -> None:
    for rec in records:
        for r in (rec.build, *rec.tests.values(), rec.training):
            if r and r.log:
                r.log = fn(r.log)


# ---------------------------------------------------------------- the tree, the harness


class TreeState(Record):
    """The cell's state.json: the base and series its worktree holds, and the commit `git am`
    made."""

    base: str
    series: str
    head: str


def apply_series(worktree: Worktree, base: str, rendered: Series, cell_dir: Path) -> str:
    """The worktree on base + series; one already there left untouched (no file times change:
    nothing recompiles)."""
    state_file = cell_dir / "state.json"
    try:
        state: Optional[TreeState] = TreeState.model_validate_json(state_file.read_text())
    except (OSError, ValueError):
        state = None  # none, or unreadable: the series is applied again
    if state and (state.base, state.series) == (base, rendered.sha256) and state.head:
        if worktree.path.exists() and worktree.head() == state.head and worktree.is_clean():
            return state.head
    files = write_patches(rendered, cell_dir / "series")
    state_file.unlink(missing_ok=True)
    worktree.ensure(base)
    head = worktree.am(files)
    state_file.write_text(TreeState(base=base, series=rendered.sha256, head=head).model_dump_json())
    return head


def harness_files(native_tests: Path) -> dict[str, str]:
    return {name: (native_tests / name).read_text(encoding="utf-8") for name in _HARNESS_FILES}


def harness(native_tests: Path, cell_dir: Path) -> Path:
    """The CMake harness and the training program copied into the cell (unchanged files untouched):
    the build tree does not depend on where this checkout lives, so a second clone reuses it."""
    out = cell_dir / "harness"
    out.mkdir(parents=True, exist_ok=True)
    for name, text in harness_files(native_tests).items():
        dst = out / name
        if not dst.exists() or dst.read_text(encoding="utf-8") != text:
            dst.write_text(text, encoding="utf-8")
    return out


# ---------------------------------------------------------------- variants: build, tests, program


def build_variant(
    ctx: CellContext, variant: str, targets: tuple[str, ...], log_name: str = "", timed: bool = True
) -> VariantRecord:
    rec = ctx.record(variant)
    ctx.steps.step(f"build {variant}", f"targets {' '.join(targets)}")
    log = ctx.logs / f"build-{log_name or variant}.log"
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
    if timed and not variant.startswith(MUTANT_PREFIX):
        ctx.cell.timings[f"build_{variant}"] = round(step.duration_s, 2)
    rec.status = RecordStatus.BUILT if step.ok else RecordStatus.BUILD_FAILED
    ctx.steps.done("built" if step.ok else f"build failed: {step.error}")
    ctx.steps.built()  # after its line: the next cell's lines come after this build's
    return rec


def _run_variant(
    ctx: CellContext, programs: tuple[str, ...], rec: VariantRecord, tests: tuple[str, ...] = TESTS
) -> None:
    """The tests (both unless `tests` says; one the backend skips recorded with why), then the
    training program, on a built variant."""
    for t in tests:
        why = ctx.skipped_tests.get(t)
        rec.tests[t] = (
            _run_test(ctx, rec.variant, t)
            if why is None
            else TestRecord.not_run(why, gate=t == GATE_TEST)
        )
    outcomes = [t.outcome for t in rec.tests.values() if t.outcome != classify.SKIPPED]
    passed = outcomes and all(o == classify.PASSED for o in outcomes)
    rec.status = RecordStatus.PASSED if passed else RecordStatus.FAILED
    for program in programs:
        run = _run_binary(ctx, f"train {rec.variant}", program, f"{rec.variant}-{program}.log")
        rec.training = TrainingRun(
            program=program,
            outcome=classify.outcome(run.exit_code, run.timed_out),
            duration_s=round(run.duration_s, 3),
            log=run.log,
            epochs=training.epochs(run.output),
        )
        ctx.steps.done(f"{len(rec.training.epochs)} epochs")


def _run_binary(ctx: CellContext, step: str, name: str, log: str) -> TestRun:
    ctx.steps.step(step, name)
    return run_program(
        name, test_argv(ctx.build_dir / "bin" / name), ctx.backend.timeout, ctx.env, ctx.logs / log
    )


def _run_test(ctx: CellContext, variant: str, test_name: str, log_name: str = "") -> TestRecord:
    rec = record_of_run(
        _run_binary(ctx, f"test {variant}", test_name, f"{log_name or variant}-{test_name}.log")
    )
    ctx.steps.done(str(rec.outcome))
    return rec


def test_argv(binary: Path) -> list[str]:
    """The test's command line, line-buffered through stdbuf where there is one: a test that crashes
    would otherwise lose its buffered stdout, and with it the per-device rows that say where."""
    stdbuf = shutil.which("stdbuf")
    if stdbuf and sys.platform.startswith("linux") and binary.exists():
        return [stdbuf, "-oL", "-eL", str(binary)]
    return [str(binary)]


def record_of_run(run: TestRun) -> TestRecord:
    """One test run as the results model records it (its output kept while the cell runs)."""
    gate = run.name == GATE_TEST
    rows = classify.gate_rows(run.output) if gate else classify.test_opt_rows(run.output)
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


# ---------------------------------------------------------------- mutants and competing fixes


def _judged_tests(patched: VariantRecord) -> list[str]:
    """The tests a known-wrong or competing fix is judged by: those that pass with the fix."""
    return [t for t in TESTS if patched.outcome(t) == classify.PASSED]


def _why_mutants_are_skipped(ctx: CellContext, patched: VariantRecord) -> Optional[str]:
    if ctx.options.no_mutants:
        return "--no-mutants"
    if not ctx.runs_tests:
        return f"tests not run: {ctx.build_only_reason}"
    if not _judged_tests(patched):
        return "no test passes with the fix, so a known-wrong fix proves nothing"
    return None


def _diff_record(
    ctx: CellContext, d: Mutant | CompetingFix, status: RecordStatus, skipped: Optional[str] = None
) -> VariantRecord:
    """A mutant's or a competing fix's record, its header (and why it is skipped) in it."""
    if isinstance(d, Mutant):
        mutant = MutantInfo(name=d.name, title=d.title, why_wrong=d.why, skipped=skipped)
        rec = ctx.record(f"{MUTANT_PREFIX}{d.name}", status, mutant=mutant)
        rec.topic = d.topic or None
        return rec
    info = CompetingInfo.model_validate(d, from_attributes=True).model_copy(
        update={"skipped": skipped}
    )
    return ctx.record(f"{COMPETING_PREFIX}{d.name}", status, competing=info)


def _variant_tests(
    ctx: CellContext,
    worktree: Worktree,
    patched: VariantRecord,
    diff: Mutant | CompetingFix,
    rec: VariantRecord,
) -> Optional[str]:
    """One diff applied to the tree as is, the tests that pass with the fix rebuilt, run, put back;
    an apply error."""
    name, kind, tests = (
        diff.name,
        "mutants" if isinstance(diff, Mutant) else "competing",
        tuple(_judged_tests(patched)),
    )
    src = get_layout(ctx.options.series.layout)
    patch = ctx.cell_dir / kind / f"{name}.patch"
    patch.parent.mkdir(parents=True, exist_ok=True)
    patch.write_text(diff.rendered(src, ctx.layout), encoding="utf-8")
    apply_error = None
    with files_kept(
        worktree.path, diff.paths(src, ctx.layout)
    ):  # the tree as it was, whatever happened
        try:
            worktree.apply(patch)
        except GitError as e:
            apply_error = e.line
        ctx.steps.done("applied" if apply_error is None else f"did not apply: {apply_error}")
        if apply_error is None:
            # the tests alone: the training program is not run here, so never relinked
            log_name = f"{kind.removesuffix('s')}-{name}"
            built = build_variant(ctx, rec.variant, tests, log_name)
            rec.build = built.build
            if built.status == RecordStatus.BUILT:
                for t in tests:
                    rec.tests[t] = _run_test(ctx, rec.variant, t, log_name)
    return apply_error


def _run_mutant(
    ctx: CellContext, worktree: Worktree, patched: VariantRecord, m: Mutant
) -> VariantRecord:
    rec = _diff_record(ctx, m, RecordStatus.PENDING)
    ctx.steps.step(f"mutant {m.name}", m.title)
    apply_error = _variant_tests(ctx, worktree, patched, m, rec)
    per_test = per_test_verdicts(
        apply_error, bool(rec.build and rec.build.ok), rec.tests, _judged_tests(patched)
    )
    v = overall_verdict(per_test)
    rec.status, rec.verdict, rec.verdict_reason = RecordStatus(v.verdict.value), v.verdict, v.reason
    rec.kills = {t: pv.verdict for t, pv in per_test.items()}
    killer = next((t for t, pv in per_test.items() if pv.verdict == Verdict.KILLED), None)
    rec.failure_line = (
        first_failing_line(killer, rec.tests[killer].output or "") if killer else None
    )
    return rec


def _run_competing(
    ctx: CellContext, worktree: Worktree, patched: VariantRecord, c: CompetingFix
) -> VariantRecord:
    rec = _diff_record(ctx, c, RecordStatus.PENDING)
    ctx.steps.step(f"competing fix {c.name}", c.title)
    apply_error = _variant_tests(ctx, worktree, patched, c, rec)
    patched_outcomes = {t: patched.outcome(t) for t in TESTS}
    j = rec.judged = judge_competing(
        apply_error, bool(rec.build and rec.build.ok), rec.tests, patched_outcomes
    )
    as_status = {
        CompetingVerdict.EQUIVALENT: RecordStatus.PASSED,
        CompetingVerdict.WRONG: RecordStatus.FAILED,
    }
    rec.status = as_status.get(j.verdict, RecordStatus.INVALID)
    ctx.steps.verdict(
        f"{c.name}: {j.verdict.value}" + (f" ({j.failure_line})" if j.failure_line else "")
    )
    return rec
