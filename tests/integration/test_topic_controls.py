"""Per-topic controls on the fake project of test_mutants (CMake and Ninja, no compiler: the
"build" turns src/ggml-opt.cpp into the shell script both tests run): three topics, each a line
of the script; each topic's control reverts only its own line (git apply -R on the whole queue),
is rebuilt and run, and judged by its own cases: killed by its own check, killed (crash) where
the topic declares it, survived; one topic's verdict never hides another's."""

from types import SimpleNamespace

import pytest

from orchestrator import backends
from orchestrator.cache import Cache
from orchestrator.config import Backend, Target
from orchestrator.errors import ExitCode
from orchestrator.model.layout import GATE_TEST, BuildPlan
from orchestrator.model.results import (
    Build,
    Cell,
    CellStatus,
    RecordStatus,
    Results,
    SeriesInfo,
    TestRecord,
    VariantRecord,
    Verdict,
)
from orchestrator.model.testspec import TestSpec
from orchestrator.patchset.series import FileDiff, Patch, Series, unified_file_diff
from orchestrator.report.junit import junit_xml
from orchestrator.report.summary import summary_markdown
from orchestrator.run import cmake
from orchestrator.run.cell import (
    APPLY,
    CONCLUDE,
    CONFIGURE,
    CONTROL,
    EARLY_CONTROLS,
    MUTANTS,
    TEST,
    Configured,
    Tree,
    Variants,
)
from orchestrator.run.options import CellOptions
from orchestrator.run.pipeline import new_context, run_steps
from orchestrator.sources.local import LocalSource
from orchestrator.verdicts.classify import PASSED

from .test_mutants import fake_project

OPT = "src/ggml-opt.cpp"
FILLER = "".join(f"# filler {i}\n" for i in range(8))  # the hunks' contexts apart
FAIL_LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"


def script(a: int, b: int, c: int) -> str:
    """The fake test program: topic a's bug fails the gate's row, b's crashes inside its own case
    (which, like test-opt's, prints its line only once it is done), c's is never noticed (its
    control survives)."""
    return (
        "#!/bin/sh\n"
        + f"fix_a={a}\n{FILLER}fix_b={b}\n{FILLER}fix_c={c}\n{FILLER}"
        + f"[ $fix_a = 1 ] || {{ echo '{FAIL_LINE}'; exit 1; }}\n"
        + "echo 'device=CPU opt_period=1: OK'\n"
        + "echo '  test_a(schedule=T): OK'\n"
        + "[ $fix_b = 1 ] || kill -SEGV $$\n"
        + "echo '  test_b(schedule=T): OK'\n"
        + "echo '  test_c(schedule=T): OK'\n"
        + "echo '1/1 device*opt_period passed, 0 skipped'\nexit 0\n"
    )


STATES = [script(0, 0, 0), script(1, 0, 0), script(1, 1, 0), script(1, 1, 1)]
TOPICS = ("topic-a", "topic-b", "topic-c")


def _case_patch(topic: str, case: str) -> FileDiff:
    """The topic's test patch: a case function test-opt gains (what names its own cases)."""
    text = unified_file_diff("tests/test-opt.cpp", "", f"static int {case}(int x) {{\n")
    return FileDiff("tests/test-opt.cpp", text)


def queue_series(crash: tuple[tuple[str, str], ...]) -> Series:
    patches = []
    for i, (topic, case) in enumerate(zip(TOPICS, ("test_a", "test_b", "test_c"), strict=True)):
        fix = FileDiff(OPT, unified_file_diff(OPT, STATES[i], STATES[i + 1]))
        patches.append(Patch(f"{2 * i + 1:04d}-fix.patch", "", (fix,), topic=topic))
        patches.append(
            Patch(f"{2 * i + 2:04d}-test.patch", "", (_case_patch(topic, case),), topic=topic)
        )
    # topic-a is judged by the gate (a native test) and test-opt, the others by test-opt's cases
    tests = tuple(
        (
            t,
            (TestSpec("test-opt"), TestSpec(GATE_TEST))
            if t == TOPICS[0]
            else (TestSpec("test-opt"),),
        )
        for t in TOPICS
    )
    return Series("ggml", tuple(patches), TOPICS, crash, tests)


@pytest.fixture
def queue_cell(tmp_path):
    """A cell on the fake project with the whole queue in its worktree, configured, built, its
    patched variant passed."""
    src, repo, base, cell_dir, wt = fake_project(tmp_path, STATES[-1])
    native = tmp_path / "native_tests"
    native.mkdir()
    (native / f"{GATE_TEST}.cpp").write_text("// the gate: a program of native_tests/\n")

    def context(crash, backend="cpu"):
        series = queue_series(crash)
        target = Target(
            "fake", "ggml", source=LocalSource(kind="local", path=str(src)).at("t.fake.source")
        )
        ctx = new_context(
            target,
            Backend("cpu", timeout=5),
            Cache(tmp_path / "cache"),
            repo,
            native,
            cell_dir,
            tmp_path / "logs",
            CellOptions(series=series),
            worktree=wt,
            module=backends.get(backend),
        )
        ctx.cell = Cell(
            cell="fake/cpu", target="fake", backend="cpu", layout="ggml", status=CellStatus.ERROR
        )
        plan = BuildPlan(str(wt.path), (), ("test-opt", GATE_TEST), ())
        assert cmake.configure(plan, ctx.build_dir, [], ctx.logs / "configure.log", {}).ok
        assert cmake.build(ctx.build_dir, plan.targets, ctx.logs / "build.log", {}).ok
        passed = TestRecord(outcome=PASSED, exit_code=0)
        patched = VariantRecord(
            cell="fake/cpu",
            target="fake",
            backend="cpu",
            variant="patched",
            status=RecordStatus.PASSED,
            build=Build(ok=True),
            tests={GATE_TEST: passed.model_copy(update={"gate": True}), "test-opt": passed},
        )
        tree = Tree(SimpleNamespace(commit=base), series, wt)
        ctx.results.update(
            {
                APPLY.name: tree,
                CONFIGURE.name: Configured(plan, False),
                TEST.name: patched,
                MUTANTS.name: Variants(None, []),
            }
        )
        ctx.records.append(patched)
        return ctx

    return SimpleNamespace(context=context, worktree=wt)


def _verdicts(ctx):
    return {r.topic: (r.variant, r.verdict) for r in ctx.records if r.variant != "patched"}


def test_each_topic_is_judged_by_its_own_cases_and_none_hides_another(queue_cell):
    ctx = queue_cell.context((("topic-b", "its bug is a NULL dereference"),))
    run_steps(ctx, [EARLY_CONTROLS, CONTROL])  # as the matrix runs them
    assert _verdicts(ctx) == {
        "topic-a": ("control:topic-a", Verdict.KILLED),
        "topic-b": ("control:topic-b", Verdict.KILLED),
        "topic-c": ("control:topic-c", Verdict.SURVIVED),
    }
    by_topic = {r.topic: r for r in ctx.records}
    assert "crash: SIGSEGV in its own case test_b" in by_topic["topic-b"].verdict_reason
    assert by_topic["topic-b"].reverted == [OPT]
    # where it died: the case the passing run printed after the last line it printed
    assert by_topic["topic-b"].failure_line == "test-opt: SIGSEGV in test_b"
    # the tree is the whole queue again, nothing left reverted
    assert (queue_cell.worktree.path / OPT).read_text() == STATES[-1]
    # topic-c's control survived: the cell fails (exit 7), and says which topic
    ctx.cell.attribution = []
    run_steps(ctx, [CONCLUDE])
    assert ctx.cell.status == CellStatus.FAILED
    assert ctx.cell.exit_code == ExitCode.CONTROL_NOT_KILLED
    assert "the control of topic-c was survived" in ctx.cell.reason
    assert "topic-b" not in ctx.cell.reason
    results = Results(
        series=SeriesInfo(layout="ggml", sha256="0" * 64, patches=[]),
        cells=[ctx.cell],
        records=list(ctx.records),
    )
    summary = summary_markdown(results)
    assert "| fake/cpu | topic-b | **killed** |" in summary
    assert "| fake/cpu | topic-c | **survived** |" in summary
    xml = junit_xml(results)
    assert 'name="control of topic-b"' in xml and 'name="control of topic-c"' in xml


def test_a_crash_counts_only_for_the_topic_that_declares_it(queue_cell):
    ctx = queue_cell.context(())  # no topic declares a crash
    run_steps(ctx, [EARLY_CONTROLS, CONTROL])  # as the matrix runs them
    got = {r.topic: r for r in ctx.records}
    assert got["topic-b"].verdict == Verdict.INVALID
    assert "declares no control_crash" in got["topic-b"].verdict_reason
    assert got["topic-a"].verdict == Verdict.KILLED  # topic-a's own control is unaffected
    assert (queue_cell.worktree.path / OPT).read_text() == STATES[-1]


def test_a_backend_without_test_opt_skips_the_controls_it_cannot_judge(queue_cell):
    """cpu-sanitize runs no test-opt: the gate's topic is judged by the gate alone, every other
    topic's control is skipped with why (never built), and the cell still passes, saying so."""
    ctx = queue_cell.context((), backend="cpu-sanitize")
    skipped = TestRecord.not_run("too slow under the sanitizers")
    ctx.results[TEST.name].tests["test-opt"] = skipped
    run_steps(ctx, [EARLY_CONTROLS, CONTROL])  # as the matrix runs them
    got = {r.topic: r for r in ctx.records if r.variant != "patched"}
    assert got["topic-a"].verdict == Verdict.KILLED
    for topic in ("topic-b", "topic-c"):
        rec = got[topic]
        assert (rec.status, rec.verdict, rec.build) == (RecordStatus.SKIPPED, None, None)
        assert rec.verdict_reason.startswith("not run: its tests (test-opt) are not run on this")
    ctx.cell.attribution = []
    run_steps(ctx, [CONCLUDE])
    assert ctx.cell.status == CellStatus.PASSED, ctx.cell.reason
    assert "the control of topic-c not run: its tests (test-opt) are not run" in ctx.cell.reason
