"""A backend's skip_tests through the real pipeline steps (configure, build, test, control,
mutants, conclude) on the fake project of test_mutants.py (CMake and Ninja, no compiler): the
skipped test is never built and never run in any variant, recorded skipped with its reason in
each; the control's verdict rests on the gate alone and says so; the cell passes."""

from dataclasses import replace

import pytest

from orchestrator import backends
from orchestrator.backends.cpu import Cpu
from orchestrator.cache import Cache
from orchestrator.config import Backend, Target
from orchestrator.model.layout import GATE_TEST, UPSTREAM_TEST
from orchestrator.model.results import Cell, CellStatus, Outcome, RecordStatus, Verdict
from orchestrator.model.testspec import TestSpec
from orchestrator.patchset.series import Series, parse_patch, unified_file_diff
from orchestrator.run import cell as cell_mod
from orchestrator.run.cell import APPLY, MATRIX_STEPS, Tree
from orchestrator.run.options import CellOptions
from orchestrator.run.pipeline import new_context, run_steps
from orchestrator.sources import Snapshot
from orchestrator.sources.local import LocalSource

from ..helpers.tools import ROOT
from .test_mutants import FAIL_LINE, FIXED, _mutants, fake_project

WHY = "test-opt leaks under LeakSanitizer (test stand-in)"
UNFIXED = FIXED.replace("echo 'device=CPU opt_period=1: OK'", f"echo '{FAIL_LINE}'").replace(
    "exit 0", "exit 1"
)


class SkipsTestOpt(Cpu):
    name = "cpu-sanitize"
    skip_tests = {UPSTREAM_TEST: WHY}


@pytest.fixture
def skipping_cell(tmp_path, monkeypatch):
    src, repo, base, cell_dir, wt = fake_project(tmp_path, UNFIXED)
    (wt.path / "src" / "ggml-opt.cpp").write_text(FIXED)
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    wt.git("commit", "-q", "-am", "fix", env=env)
    fix = parse_patch("0001-fix.patch", unified_file_diff("src/ggml-opt.cpp", UNFIXED, FIXED))
    fix = replace(fix, topic="t")
    tests = (("t", (TestSpec(UPSTREAM_TEST), TestSpec(GATE_TEST))),)
    target = Target(
        "fake", "ggml", source=LocalSource(kind="local", path=str(src)).at("targets.fake.source")
    )
    backend = Backend("cpu-sanitize", timeout=5)
    c = Cell(
        cell="fake/cpu-sanitize",
        target="fake",
        backend="cpu-sanitize",
        layout="ggml",
        status=CellStatus.ERROR,
    )
    options = CellOptions(
        series=Series("llama.cpp", (), ("t",), topic_tests=tests),
        mutant_files=tuple(_mutants()[:1]),
        programs=False,
    )
    ctx = new_context(
        target,
        backend,
        Cache(tmp_path / "cache"),
        repo,
        ROOT / "native_tests",
        cell_dir,
        tmp_path / "logs",
        options,
        worktree=wt,
        module=SkipsTestOpt(),
    )
    ctx.cell = c
    tree = Tree(Snapshot(base, "fake base"), Series("ggml", (fix,), ("t",), topic_tests=tests), wt)
    # the fake project is its own CMake source dir: the layout's plan pointed at it
    monkeypatch.setattr(
        cell_mod,
        "build_plan",
        lambda layout, worktree, harness, targets, programs, native: cell_mod.BuildPlan(
            worktree, (), targets, programs
        ),
    )
    return ctx, tree


def configure_to_conclude(ctx, tree):
    """The steps from plan to conclude on the fake tree (what apply would have made); the plan."""
    ctx.results[APPLY.name] = tree
    names = [s.name for s in MATRIX_STEPS]
    run_steps(ctx, MATRIX_STEPS[names.index("plan") : names.index("store")])
    return ctx.results["configure"].plan


def test_a_skipped_test_is_never_built_or_run_and_the_cell_passes(skipping_cell):
    ctx, tree = skipping_cell
    plan = configure_to_conclude(ctx, tree)
    assert plan.targets == (GATE_TEST,)
    assert not (ctx.build_dir / "bin" / UPSTREAM_TEST).exists()  # never built
    assert not list(ctx.logs.glob(f"*-{UPSTREAM_TEST}.log"))  # never run
    recs = {r.variant: r for r in ctx.records}
    for variant in ("patched", "control:t"):
        t = recs[variant].tests[UPSTREAM_TEST]
        assert t.outcome is Outcome.SKIPPED and t.skipped == WHY and t.exit_code is None
    assert recs["patched"].status == RecordStatus.PASSED
    assert recs["patched"].tests[GATE_TEST].outcome is Outcome.PASSED
    control = recs["control:t"]
    assert control.verdict is Verdict.KILLED and control.failure_line == FAIL_LINE
    assert control.verdict_reason.endswith(
        f"(verdict on the gate alone: test-opt is not run on this backend: {WHY})"
    )
    mutant = recs["mutant:01-killed"]
    assert mutant.verdict is Verdict.KILLED and set(mutant.tests) == {GATE_TEST}
    assert ctx.cell.status == CellStatus.PASSED and ctx.cell.exit_code == 0, ctx.cell.reason
    assert "test-opt not run on this backend" in ctx.cell.reason
    assert tree.worktree.is_clean()


def test_the_result_cache_key_names_the_skips_only_where_there_are_some(skipping_cell):
    from orchestrator.run.cellcache import cache_inputs

    ctx, tree = skipping_cell
    ctx.env = {}
    assert cache_inputs(ctx, tree.snap, tree.rendered)["skip_tests"] == {UPSTREAM_TEST: WHY}
    ctx.module = backends.get("cpu")
    # every other backend keeps its key
    assert "skip_tests" not in cache_inputs(ctx, tree.snap, tree.rendered)


def test_the_result_cache_key_follows_what_judges_each_topic(skipping_cell):
    """topic.yaml's control_crash declared after a first run (the README's test-backend-ops
    walk): a new key, so the first run's verdict is not reused; the same inputs, the same key."""
    from orchestrator.run.cellcache import cache_inputs
    from orchestrator.run.resultcache import cell_key

    ctx, tree = skipping_cell
    ctx.env = {}
    before = cache_inputs(ctx, tree.snap, tree.rendered)
    assert before["judged_by"] == {"tests": [["t", [UPSTREAM_TEST, GATE_TEST]]]}
    assert cell_key(cache_inputs(ctx, tree.snap, tree.rendered)) == cell_key(before)
    crash = replace(ctx.options.series, control_crash=(("t", "a NULL dereference"),))
    ctx.options = replace(ctx.options, series=crash)
    after = cache_inputs(ctx, tree.snap, tree.rendered)
    assert after["judged_by"]["control_crash"] == [["t", "a NULL dereference"]]
    assert cell_key(after) != cell_key(before)


class NoMutants(SkipsTestOpt):
    mutants_skip_reason = "mutants run under the plain backend (test stand-in)"


def test_a_backend_without_mutants_runs_and_records_none_and_keeps_its_key(skipping_cell):
    """cpu-sanitize's mutants_skip_reason: no known-wrong fix applied, built or
    recorded there (the plain cpu cell runs them); the cell passes on its
    control; the cache key ignores the mutants' text."""
    from orchestrator.backends.cpu_sanitize import CpuSanitize
    from orchestrator.run.cellcache import cache_inputs

    assert CpuSanitize.mutants_skip_reason  # the real backend declares it
    ctx, tree = skipping_cell
    ctx.module = NoMutants()
    configure_to_conclude(ctx, tree)
    assert [r.variant for r in ctx.records] == ["patched", "control:t"]
    assert not list(ctx.logs.glob("*mutant*"))
    assert ctx.cell.mutants.to_json() == {
        "total": 0,
        "killed": 0,
        "survived": [],
        "invalid": [],
        "skipped": NoMutants.mutants_skip_reason,
    }
    assert ctx.cell.status == CellStatus.PASSED, ctx.cell.reason
    ctx.env = {}
    assert cache_inputs(ctx, tree.snap, tree.rendered)["mutants"] == {}
    ctx.module = SkipsTestOpt()
    # a backend that runs them has them in its key
    assert cache_inputs(ctx, tree.snap, tree.rendered)["mutants"]
