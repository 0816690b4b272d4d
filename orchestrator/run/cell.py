"""One cell of the matrix as a list of steps (MATRIX_STEPS, run by run/pipeline.py's run_steps):
fetch, apply, plan, configure, early controls, build, test, control, mutants, competing, training,
conclude, store.
Each takes the cell's context (CellContext: what the cell is, its CellOptions, what the earlier
steps returned) and returns its typed result, which the context records; apply's Stop (a cached
result) ends the list. Every variant (the patched tree, each topic's control, each known-wrong and
competing fix) is a Variant run by run/variants.py's one runner. The matrix runs the steps in two
phases (MATRIX_PHASES, cut after control): every cell's first verdict, then every cell's
known-wrong and competing fixes. The drift behaviour check runs BUNDLE_STEPS on a tree it applied
itself (the bundle's verification runs the bundle's own shown commands instead:
upstream/contributor.py). A BuildFailed fails the cell, any other GgmlPatchError is its error;
the other cells go on."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, NamedTuple, Optional, Union

from .. import sources
from ..cache import Cache
from ..config import Backend, Target
from ..errors import BuildFailed, ExitCode, SeriesDoesNotApply
from ..model.layout import BuildPlan, build_plan, get_layout
from ..model.results import (
    AttributionEntry,
    AttributionLabel,
    CellStatus,
    MutantTally,
    Provenance,
    RecordStatus,
    TrainingComparison,
    VariantRecord,
    Verdict,
)
from ..model.testspec import TestSpec, programs
from ..patchset.render import render
from ..patchset.series import Series
from ..vcs.snapshots import SnapshotRepo, Worktree
from ..verdicts import attribution, classify, training
from . import cmake, resultcache
from .cellcache import cache_inputs, results_cache_dir, reuse_cached, store
from .judge import control_attribution, passing_with_fix
from .options import CellOptions, RunOptions
from .pipeline import CellContext, CellProgress, Step, Stop, new_context, phases, run_steps
from .tree import Tree, apply_series, files_kept, fix_reverted, harness
from .variants import (
    Variant,
    build_into,
    build_variant,
    competing,
    control,
    known_wrong,
    new_record,
    patched,
    record_of_run,
    run_built,
    run_test,
    run_variant,
    skipped_record,
    test_argv,
)

__all__ = [
    "CellContext",
    "CellOptions",
    "CellProgress",
    "RunOptions",
    "Step",
    "Stop",
    "Tree",
    "build_variant",
    "provenance_of",
    "files_kept",
    "fix_reverted",
    "record_of_run",
    "results_cache_dir",
    "run_steps",
    "test_argv",
]


# ---------------------------------------------------------------- what the steps return


class Planned(NamedTuple):
    """What configure and the builds work from: the build plan and how the steps name it."""

    plan: BuildPlan
    detail: str  # configure's progress line
    what: str  # configure's failure names it


class Controlled(NamedTuple):
    """Every topic's control, in queue order; `primary`: the one the cell's status rests on (the
    first judged by a gate, else the first), with each failing test's attribution where its
    tests ran."""

    records: tuple[VariantRecord, ...]
    primary: Optional[VariantRecord] = None
    attribution: Optional[list[AttributionEntry]] = None
    failure_kind: Optional[AttributionLabel] = None


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


def _patched(ctx: CellContext) -> Variant:
    """The patched tree's variant: every declared test, the training programs where asked."""
    series = ctx.options.series
    return patched(series.tests(), series.training_programs() if ctx.options.programs else ())


def _control(ctx: CellContext, topic: str) -> Variant:
    return control(ctx.options.series, topic, with_training=ctx.options.programs)


def plan(ctx: CellContext) -> Planned:
    """The layout's build plan on the cell's worktree: the test programs the topics declare (less
    those this backend skips), the training programs where the options ask for them."""
    v = _patched(ctx)
    targets = tuple(p for p in programs(v.tests) if p not in ctx.skipped_tests)
    found = build_plan(
        ctx.layout,
        str(ctx.worktree.path),
        str(harness(ctx.native_tests, ctx.cell_dir)),
        targets,
        v.training,
        ctx.native_programs,
    )
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


def _early_topics(ctx: CellContext, series: Series) -> list[str]:
    """The topics judged by upstream tests alone (no gate, no training program), whose controls
    run before anything else is built: the cheapest complete verdicts first. None where every
    topic is such (nothing is built later for them to go ahead of)."""
    natives = set(ctx.native_programs)
    early = []
    for topic in series.topics:
        tests = series.tests_of(topic)
        runnable = [t for t in tests if t.program not in ctx.skipped_tests]
        own = not any(t.program in natives for t in tests) and not series.training_of(topic)
        if own and runnable:
            early.append(topic)
    return early if len(early) < len(series.topics) else []


def early_controls(ctx: CellContext) -> dict[str, VariantRecord]:
    """The controls upstream tests alone judge, first: the fixed tree's tests of those topics
    built and run, then each such topic's control (run/variants.py's runner). Each topic's
    control record, by topic."""
    tree = ctx.got(APPLY)
    early = _early_topics(ctx, tree.rendered)
    if not early:
        return {}
    tests = tuple(dict.fromkeys(t for topic in early for t in tree.rendered.tests_of(topic)))
    first = Variant("patched", "patched", tests, log_name="patched-first")
    rec = new_record(ctx, first, RecordStatus.PENDING)
    with ctx.timing("build_patched_first"):
        build_into(ctx, first, rec, timed=False)
    if rec.build is None or not rec.build.ok:
        return {}  # the build step builds it again and says why it fails
    if ctx.runs_tests:
        for t in tests:
            if t.program not in ctx.skipped_tests:
                rec.tests[t.name] = run_test(ctx, first, t)
    found = {}
    for topic in early:
        with ctx.timing(_timing(topic)):
            found[topic] = run_variant(ctx, tree, _control(ctx, topic), rec)
        _say_control(ctx, found[topic])
    return found


def _timing(topic: str) -> str:
    return f"control_{topic}"


def build(ctx: CellContext) -> VariantRecord:
    """The patched variant built (every target of the plan); a BuildFailed when it does not
    build."""
    v = _patched(ctx)
    rec = new_record(ctx, v, RecordStatus.PENDING)
    build_into(ctx, v, rec)
    if rec.build is None or not rec.build.ok:
        error = rec.build.error if rec.build else ""
        log = rec.build.log if rec.build else ctx.logs
        raise BuildFailed(f"{ctx.cell.cell}: build failed: {error} (log: {log})")
    return rec


def run_tests(ctx: CellContext) -> VariantRecord:
    """The patched variant's tests and training programs run (none with --build-only), judged."""
    return run_built(ctx, _patched(ctx), ctx.got(BUILD))


def _add_record(ctx: CellContext, rec: VariantRecord) -> None:
    ctx.records.append(rec)


def _not_run_here(ctx: CellContext, v: Variant) -> Optional[str]:
    """Why a control is not run on this backend (every test of its topic skipped here), or None."""
    skipped = [ctx.skipped_tests.get(t.program) for t in v.tests]
    if not v.tests or not all(skipped):
        return None
    names = ", ".join(t.name for t in v.tests)
    return f"not run: its tests ({names}) are not run on this backend ({skipped[0]})"


def _say_control(ctx: CellContext, rec: VariantRecord) -> None:
    if ctx.runs_tests and rec.verdict is not None:
        ctx.steps.verdict(
            f"the control of {rec.topic} (its hunks reverted): {rec.verdict} ({rec.verdict_reason})"
        )


def primary_control(
    series: Series, natives: tuple[str, ...], recs: tuple[VariantRecord, ...]
) -> Optional[VariantRecord]:
    """The control the cell's status rests on: the first whose topic declares a gate (a native
    test), else the first judged here, else the first."""
    gated = [r for r in recs if any(t.program in natives for t in series.tests_of(r.topic))]
    judged = [r for r in recs if r.status != RecordStatus.SKIPPED]
    found = gated or judged or list(recs)
    return found[0] if found else None


def run_controls(ctx: CellContext) -> Controlled:
    """Each topic's control (the whole queue with only its source hunks reverted, its own tests
    run, judged), in queue order: those the early step ran are taken from it; one this backend
    cannot run is recorded skipped, with why."""
    tree, patched_rec = ctx.got(APPLY), ctx.got(TEST)
    series, early = tree.rendered, ctx.got(EARLY_CONTROLS)
    recs = []
    for topic in series.topics:
        if topic in early:
            recs.append(early[topic])
            continue
        v = _control(ctx, topic)
        why = _not_run_here(ctx, v)
        if why:
            recs.append(skipped_record(ctx, v, why))
            ctx.steps.verdict(f"the control of {topic}: {why}")
            continue
        with ctx.timing(_timing(topic)):
            recs.append(run_variant(ctx, tree, v, patched_rec))
    primary = primary_control(series, ctx.native_programs, tuple(recs))
    for rec in recs:
        if rec is not primary and rec.topic not in early:
            _say_control(ctx, rec)
    if not ctx.runs_tests or primary is None or primary.status == RecordStatus.SKIPPED:
        return Controlled(tuple(recs), primary)
    entries = control_attribution(patched_rec, primary)
    ctx.steps.verdict(verdict_line(patched_rec, primary))
    return Controlled(tuple(recs), primary, entries, attribution.failure_kind(entries))


def _record_control(ctx: CellContext, found: Controlled) -> None:
    ctx.records += found.records
    if found.attribution is not None:
        ctx.cell.attribution = found.attribution
        ctx.cell.failure_kind = found.failure_kind


def _judging(series: Series, patched_rec: VariantRecord, topic: str) -> tuple[TestSpec, ...]:
    """The tests a known-wrong or competing fix of `topic` is judged by: its topic's that pass
    with the fix."""
    tests = series.tests_of(topic) if topic else series.tests()
    passing = passing_with_fix(patched_rec, [t.name for t in tests])
    return tuple(t for t in tests if t.name in passing)


def _why_fixes_are_skipped(ctx: CellContext, patched_rec: VariantRecord) -> Optional[str]:
    if ctx.options.no_mutants:
        return "--no-mutants"
    if not ctx.runs_tests:
        return f"tests not run: {ctx.build_only_reason}"
    if not passing_with_fix(patched_rec, list(patched_rec.tests)):
        return "no test passes with the fix, so a known-wrong fix proves nothing"
    return None


def _run_each(
    ctx: CellContext, kind: str, variants: list[Variant], patched_rec: VariantRecord
) -> list[VariantRecord]:
    """Each variant run (one without a test that passes with its topic's fix: skipped), timed
    per topic (the bench's cost per topic): they come in queue order."""
    tree, recs = ctx.got(APPLY), []
    no_test = "no test of its topic passes with the fix, so it proves nothing"
    with ctx.timing(kind):
        for topic, group in itertools.groupby(variants, key=lambda v: v.topic):
            with ctx.timing(f"{kind}_{topic}"):
                for v in group:
                    if not v.tests:
                        recs.append(skipped_record(ctx, v, no_test))
                        continue
                    recs.append(run_variant(ctx, tree, v, patched_rec))
    return recs


def run_mutants(ctx: CellContext) -> Variants:
    """Each known-wrong fix on the patched tree: applied, its topic's tests rebuilt, each run and
    judged on its own (which test kills it), the files put back. Nothing is rebuilt after a
    restore: no later step runs a binary, and the next build sees the restored file newer than its
    object."""
    mutant_files, patched_rec = ctx.options.mutant_files, ctx.got(TEST)
    if not mutant_files:
        return Variants(None, [])
    reason = ctx.module.mutants_skip_reason
    if reason:  # none run, none recorded: the plain backend's cell has them
        return Variants(MutantTally(total=0, killed=0, skipped=reason), [])
    series = ctx.options.series
    variants = [
        known_wrong(series, m, _judging(series, patched_rec, m.topic)) for m in mutant_files
    ]
    skipped = _why_fixes_are_skipped(ctx, patched_rec)
    if skipped:
        recs = [skipped_record(ctx, v, skipped) for v in variants]
        return Variants(MutantTally(total=len(mutant_files), killed=0, skipped=skipped), recs)
    recs = _run_each(ctx, "mutants", variants, patched_rec)
    judged = dict.fromkeys(t.name for v in variants for t in v.tests)
    killed_by = {
        t: sum(1 for r in recs if (r.kills or {}).get(t) == Verdict.KILLED) for t in judged
    }
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
    """Each competing fix on the whole queue with only its own topic's hunks reverted: applied,
    rebuilt, run, judged against the fix, the files put back."""
    files, patched_rec = ctx.options.competing_files, ctx.got(TEST)
    # as the mutants: the plain backend's cell has them
    if not files or ctx.module.mutants_skip_reason:
        return []
    series = ctx.options.series
    variants = [competing(series, c, _judging(series, patched_rec, c.topic)) for c in files]
    skipped = _why_fixes_are_skipped(ctx, patched_rec)
    if skipped:
        return [skipped_record(ctx, v, skipped) for v in variants]
    return _run_each(ctx, "competing", variants, patched_rec)


def _add_records(ctx: CellContext, recs: list[VariantRecord]) -> None:
    ctx.records += recs


def compare_training(ctx: CellContext) -> Optional[TrainingComparison]:
    """The training program's epochs with the fix against its topic's control's (None: not
    run)."""
    p = ctx.got(TEST)
    c = next((r for r in ctx.got(CONTROL).records if r.training is not None), None)
    if p.training is None or c is None or c.training is None:
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


def _built_only(found: Controlled, why: Optional[str]) -> Conclusion:
    """A --build-only cell's conclusion: built with and without each topic's fix, or not."""
    for rec in found.records:
        if rec.status != RecordStatus.BUILD_FAILED:
            continue
        error = rec.build.error if rec.build else ""
        reason = f"built with the fix, but the control of {rec.topic} did not build: {error}"
        return Conclusion(CellStatus.FAILED, reason, int(ExitCode.BUILD_FAILED))
    reason = f"built with and without the fix; tests not run: {why}"
    return Conclusion(CellStatus.BUILD_ONLY, reason, 0)


def _unjudged(patched_rec: VariantRecord, found: Controlled) -> Conclusion:
    """No topic's control can be judged here (its tests compare nothing on this backend, or are
    not run here): neither passed nor failed, and said so; a test failing with the fix fails."""
    bad = [f"{n} {t.outcome}" for n, t in patched_rec.tests.items() if t.outcome not in _FINE]
    if bad:
        reason = "with the fix: " + ", ".join(bad)
        return Conclusion(CellStatus.FAILED, reason, int(ExitCode.EXPECTATIONS_NOT_MET))
    why = "; ".join(f"{r.topic}: {r.verdict_reason}" for r in found.records)
    return Conclusion(CellStatus.SKIPPED, f"cannot be judged here: {why}", 0)


_FINE = (classify.PASSED, classify.SKIPPED)


def conclude(ctx: CellContext) -> Conclusion:
    """The cell's status, reason and exit code from the patched variant, the controls and the
    known-wrong fixes' tally."""
    patched_rec, found = ctx.got(TEST), ctx.got(CONTROL)
    if not ctx.runs_tests:
        return _built_only(found, ctx.build_only_reason)
    outcomes = {n: t.outcome for n, t in patched_rec.tests.items()}
    built = bool(patched_rec.build and patched_rec.build.ok)
    primary, judged = found.primary, None
    if primary is not None and primary.status == RecordStatus.SKIPPED and patched_rec.tests:
        return _unjudged(patched_rec, found)
    if primary is not None and primary.verdict:
        judged = classify.GateVerdict(primary.verdict, primary.verdict_reason)
    gated = any(t.gate for t in patched_rec.tests.values())
    status, reason = classify.cell_status(
        built,
        outcomes,
        judged,
        attribution.summary(found.attribution or []),
        without=classify.GATE_KILLS if gated else classify.OWN_TESTS_KILL,
    )
    code = ExitCode.OK
    if status != CellStatus.PASSED:
        if not built:
            code = ExitCode.BUILD_FAILED
        elif any(o not in (classify.PASSED, classify.SKIPPED) for o in outcomes.values()):
            code = ExitCode.EXPECTATIONS_NOT_MET
        else:
            code = ExitCode.CONTROL_NOT_KILLED
    for other in found.records:
        if other is primary or other.verdict == Verdict.KILLED:
            continue
        if other.status == RecordStatus.SKIPPED:  # the backend runs none of its tests: named
            reason += f"; the control of {other.topic} {other.verdict_reason}"
            continue
        # one topic's control not killed fails the cell; the others' verdicts stay recorded
        reason += f"; the control of {other.topic} was {other.verdict}: {other.verdict_reason}"
        if status == CellStatus.PASSED:
            status, code = CellStatus.FAILED, ExitCode.CONTROL_NOT_KILLED
    tally = ctx.got(MUTANTS).tally
    survived = tally.survived if tally else []
    if survived:  # the gate passes a known-wrong fix: it is not gate enough
        reason += f"; {len(survived)} known-wrong fix(es) survived the gate: {', '.join(survived)}"
        if status == CellStatus.PASSED:
            status, code = CellStatus.FAILED, ExitCode.CONTROL_NOT_KILLED
    return Conclusion(status, reason, int(code))


def _record_conclusion(ctx: CellContext, found: Conclusion) -> None:
    ctx.conclude(*found)


# ---------------------------------------------------------------- the step lists

FETCH = Step("fetch", fetch, _record_source)
APPLY = Step("apply", apply, _record_tree)
PLAN = Step("plan", plan)
CONFIGURE = Step("configure", configure)
EARLY_CONTROLS = Step("early controls", early_controls)
BUILD = Step("build", build)
TEST = Step("test", run_tests, _add_record)
CONTROL = Step("control", run_controls, _record_control, ends_phase="first verdicts")
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
