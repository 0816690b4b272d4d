"""Mutants (known-wrong fixes): the file format, the verdicts, and the pipeline's mutants step on a
fake project (CMake and Ninja, no compiler: the "build" turns the source into a shell script
that plays the gate), so each verdict is reached for real: does not apply, does not build,
crashes, times out, survives, is killed. The files are put back after each one."""

import json
import xml.etree.ElementTree as ET
from dataclasses import replace
from types import SimpleNamespace

import pytest

from orchestrator import backends
from orchestrator.cache import Cache
from orchestrator.config import Backend, Target
from orchestrator.errors import ConfigError, ExitCode
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
    results_of,
)
from orchestrator.model.testspec import TestSpec
from orchestrator.patchset.series import Series, unified_file_diff
from orchestrator.report.junit import junit_xml, mutant_case_name
from orchestrator.report.summary import summary_markdown
from orchestrator.run import cmake
from orchestrator.run.cell import APPLY, COMPETING, CONCLUDE, MUTANTS, TEST, Controlled, Tree
from orchestrator.run.options import CellOptions
from orchestrator.run.pipeline import new_context, run_steps
from orchestrator.sources.base import Snapshot
from orchestrator.sources.local import LocalSource
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree
from orchestrator.verdicts.classify import FAILED, PASSED
from orchestrator.verdicts.mutants import parse_mutant

from ..helpers.patches import OPT, mutant_text
from ..helpers.tools import ROOT

FAIL_LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"

# ---- the file format ----


# ---- the verdicts (pure) ----


# ---- the mutants step, on a fake project ----

FIXED = (
    "#!/bin/sh\necho 'device=CPU opt_period=1: OK'\n"
    "echo '1/1 device*opt_period passed, 0 skipped'\nexit 0\n"
)
FAKE_CMAKE = """cmake_minimum_required(VERSION 3.16)
project(fake NONE)
foreach(t test-opt test-opt-dynamic-accum)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/bin/${t}
    COMMAND ${CMAKE_COMMAND} -DSRC=${CMAKE_SOURCE_DIR}/src/ggml-opt.cpp
            -DOUT=${CMAKE_BINARY_DIR}/bin/${t}
            -P ${CMAKE_SOURCE_DIR}/make.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/src/ggml-opt.cpp ${CMAKE_SOURCE_DIR}/make.cmake)
  add_custom_target(${t} DEPENDS ${CMAKE_BINARY_DIR}/bin/${t})
endforeach()
"""
# "compiling": a source with BROKEN in it does not build; any other becomes the test program
MAKE = """file(READ ${SRC} text)
if(text MATCHES "BROKEN")
  message(FATAL_ERROR "error: ggml-opt.cpp does not compile")
endif()
file(WRITE ${OUT} "${text}")
file(CHMOD ${OUT} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
"""
WRONG = {
    "01-killed": FIXED.replace("echo 'device=CPU opt_period=1: OK'", f"echo '{FAIL_LINE}'").replace(
        "exit 0", "exit 1"
    ),
    "02-survives": FIXED.replace(
        "exit 0\n", "# the accumulators are not reset here either\nexit 0\n"
    ),
    "03-crashes": FIXED.replace("exit 0\n", "kill -SEGV $$\n"),
    "04-hangs": FIXED.replace("exit 0\n", "sleep 30\n"),
    "05-does-not-build": FIXED.replace("exit 0\n", "BROKEN\n"),
}
EXPECTED = {
    "01-killed": Verdict.KILLED,
    "02-survives": Verdict.SURVIVED,
    "03-crashes": Verdict.INVALID,
    "04-hangs": Verdict.INVALID,
    "05-does-not-build": Verdict.INVALID,
    "06-does-not-apply": Verdict.INVALID,
}


def _mutants() -> list:
    files = [
        parse_mutant(f"{n}.patch", mutant_text(n, FIXED, w, title=n)) for n, w in WRONG.items()
    ]
    files.append(
        parse_mutant("06-does-not-apply.patch", mutant_text("06", "other\ntext\n", "other\nTEXT\n"))
    )
    return files


def fake_project(tmp_path, ggml_opt: str):
    """The fake project with `ggml_opt` as its src/ggml-opt.cpp, imported as a snapshot, checked out
    in a cell's worktree: (its source dir, the snapshot repo, the
    base commit, the cell dir, the worktree)."""
    src = tmp_path / "tree"
    (src / "src").mkdir(parents=True)
    (src / "src" / "ggml-opt.cpp").write_text(ggml_opt)
    (src / "CMakeLists.txt").write_text(FAKE_CMAKE)
    (src / "make.cmake").write_text(MAKE)
    repo = SnapshotRepo(tmp_path / "s.git")
    base = repo.import_tree(src, "refs/snapshots/fake", "fake")
    cell_dir = tmp_path / "cell"
    wt = Worktree(repo, cell_dir / "src")
    wt.ensure(base)
    return src, repo, base, cell_dir, wt


# a plain series (no queue) that declares the tests: what judges its known-wrong fixes
JUDGED = Series("llama.cpp", (), topic_tests=(("", (TestSpec("test-opt"), TestSpec(GATE_TEST))),))


@pytest.fixture
def fake_cell(tmp_path):
    """A cell context on the fake project, configured, its patched variant passed (with the
    worktree, the plan, the patched and control records the earlier steps would have returned)."""
    src, repo, base, cell_dir, wt = fake_project(tmp_path, FIXED)
    target = Target(
        "fake", "ggml", source=LocalSource(kind="local", path=str(src)).at("targets.fake.source")
    )
    backend = Backend("cpu", timeout=2)
    cell = Cell(
        cell="fake/cpu", target="fake", backend="cpu", layout="ggml", status=CellStatus.ERROR
    )
    options = CellOptions(series=JUDGED, mutant_files=tuple(_mutants()))
    (tmp_path / f"{GATE_TEST}.cpp").write_text("// the gate: a program of native_tests/\n")
    ctx = new_context(
        target,
        backend,
        Cache(tmp_path / "cache"),
        repo,
        tmp_path,
        cell_dir,
        tmp_path / "logs",
        options,
        worktree=wt,
        module=backends.get("cpu"),
    )
    ctx.cell = cell
    plan = BuildPlan(str(wt.path), (), ("test-opt", GATE_TEST), ())
    assert cmake.configure(plan, ctx.build_dir, [], ctx.logs / "configure.log", {}).ok
    assert cmake.build(ctx.build_dir, plan.targets, ctx.logs / "build.log", {}).ok
    patched = VariantRecord(
        cell=cell.cell,
        target="fake",
        backend="cpu",
        variant="patched",
        status=RecordStatus.PASSED,
        build=Build(ok=True),
        tests={GATE_TEST: TestRecord(outcome=PASSED, exit_code=0, gate=True)},
    )
    control = VariantRecord(
        cell=cell.cell,
        target="fake",
        backend="cpu",
        variant="control:t",
        topic="t",
        status=RecordStatus.KILLED,
        build=Build(ok=True),
        verdict=Verdict.KILLED,
        verdict_reason="killed",
    )
    # what the test and control steps would have returned
    tree = Tree(Snapshot(base, "fake"), JUDGED, wt)
    ctx.results.update(
        {APPLY.name: tree, TEST.name: patched, "control": Controlled((control,), control)}
    )
    return SimpleNamespace(ctx=ctx, worktree=wt, plan=plan, patched=patched, control=control)


def test_each_mutant_gets_its_verdict_and_the_tree_is_put_back(fake_cell):
    f, ctx = fake_cell, fake_cell.ctx
    run_steps(ctx, [MUTANTS])
    got = {r.mutant.name: r for r in ctx.records}
    assert {n: r.verdict for n, r in got.items()} == EXPECTED
    assert "did not apply" in got["06-does-not-apply"].verdict_reason
    assert (
        "did not build" in got["05-does-not-build"].verdict_reason
        and not got["05-does-not-build"].build.ok
    )
    assert "crashed (SIGSEGV)" in got["03-crashes"].verdict_reason
    # each test the fix passes judges it on its own (here
    # the gate alone: the fake test-opt is not run)
    assert got["04-hangs"].verdict_reason == f"{GATE_TEST}: the gate test timed out"
    assert got["01-killed"].kills == {GATE_TEST: Verdict.KILLED}
    assert got["01-killed"].failure_line == FAIL_LINE
    assert all(r.variant == f"mutant:{n}" for n, r in got.items())
    assert ctx.cell.mutants.to_json() == {
        "total": 6,
        "killed": 1,
        "survived": ["02-survives"],
        "invalid": ["03-crashes", "04-hangs", "05-does-not-build", "06-does-not-apply"],
        "skipped": None,
        "killed_by": {GATE_TEST: 1},
    }
    assert f.worktree.is_clean() and (f.worktree.path / "src/ggml-opt.cpp").read_text() == FIXED
    # a surviving mutant fails a cell that otherwise passed: exit 7
    ctx.cell.attribution = []
    run_steps(ctx, [CONCLUDE])
    assert (
        ctx.cell.status == CellStatus.FAILED
        and ctx.cell.exit_code == ExitCode.CONTROL_NOT_KILLED == 7
    )
    assert "1 known-wrong fix(es) survived the gate: 02-survives" in ctx.cell.reason


def test_the_tree_is_put_back_on_an_interrupt(fake_cell, monkeypatch):
    f, ctx = fake_cell, fake_cell.ctx
    ctx.options = replace(ctx.options, mutant_files=ctx.options.mutant_files[:1])

    def interrupted(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(cmake, "build", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_steps(ctx, [MUTANTS])
    assert f.worktree.is_clean() and (f.worktree.path / "src/ggml-opt.cpp").read_text() == FIXED


def test_no_mutants_are_skipped_with_the_reason_and_reported(fake_cell):
    f, ctx = fake_cell, fake_cell.ctx
    ctx.options = replace(ctx.options, no_mutants=True)
    run_steps(ctx, [MUTANTS])
    assert {r.status for r in ctx.records} == {RecordStatus.SKIPPED}
    assert ctx.cell.mutants.skipped == "--no-mutants" and not list(
        (ctx.logs).glob("build-mutant-*")
    )
    results = Results(
        series=SeriesInfo(layout="llama.cpp", sha256="0" * 64, patches=[]),
        cells=[ctx.cell],
        records=[f.patched, f.control, *ctx.records],
    )
    cases = [
        c
        for c in ET.fromstring(junit_xml(results)).iter("testcase")
        if c.get("classname").endswith("/mutant")
    ]
    assert len(cases) == 6 and all(
        c.find("skipped").get("message") == "mutant not run: --no-mutants" for c in cases
    )


def test_results_summary_and_junit_show_every_mutant(fake_cell):
    f, ctx = fake_cell, fake_cell.ctx
    run_steps(ctx, [MUTANTS])
    results = Results(
        series=SeriesInfo(
            layout="llama.cpp",
            sha256="0" * 64,
            patches=[],
            topic_tests={"t": ["test-opt", GATE_TEST]},
        ),
        cells=[ctx.cell],
        records=[f.patched, f.control, *ctx.records],
    )
    again = results_of(json.dumps(results.to_json()))
    assert [r.verdict for r in again.mutants_of("fake/cpu")] == list(EXPECTED.values())
    md = summary_markdown(again)
    assert "- **fake/cpu**: the gate kills 1/6 known-wrong fixes" in md
    assert (
        f"| fake/cpu | 02-survives | **survived** | — | survived | {GATE_TEST}: the "
        "gate test passed with this known-wrong fix"
    ) in md
    assert f"| fake/cpu | 01-killed | **killed** | — | killed | `{FAIL_LINE}` |" in md
    root = ET.fromstring(junit_xml(again))
    cases = {
        c.get("name"): c
        for c in root.iter("testcase")
        if c.get("classname") == "ggml-patch/fake/cpu/mutant"
    }
    assert cases[mutant_case_name("01-killed", GATE_TEST)].find("failure") is None
    for name in ("02-survives", "03-crashes", "04-hangs", "05-does-not-build", "06-does-not-apply"):
        assert cases[mutant_case_name(name, GATE_TEST)].find("failure") is not None, name


def test_mutants_need_a_passing_gate_and_tests_that_run(fake_cell):
    f, ctx = fake_cell, fake_cell.ctx
    f.patched.tests[GATE_TEST] = TestRecord(outcome=FAILED, exit_code=1, gate=True)
    run_steps(ctx, [MUTANTS])
    assert ctx.cell.mutants.skipped.startswith("no test passes with the fix")


def test_no_mutant_files_records_nothing(fake_cell):
    ctx = fake_cell.ctx
    ctx.options = replace(ctx.options, mutant_files=())
    run_steps(ctx, [MUTANTS])
    assert ctx.records == [] and ctx.cell.mutants is None


def test_mutant_files_come_from_the_topics_native_tests_mutants(tmp_path):
    from orchestrator.config import load_matrix
    from orchestrator.verdicts.mutants import load_mutants

    from ..helpers.tools import ROOT as root

    native = tmp_path / "native"
    native.mkdir()
    m = tmp_path / "matrix.yaml"
    m.write_text(
        f"queue: {{path: {root / 'patches'}, layout: llama.cpp}}\nnative_tests: {native}\n"
        + (root / "matrix.yaml").read_text().split("targets:", 1)[1].join(["targets:", ""])
    )
    assert load_mutants(load_matrix(m)) == []  # no mutants/ folder: none
    mutants = native / "accumulator-reset" / "mutants"  # the topic's own folder
    mutants.mkdir(parents=True)
    (mutants / "02-b.patch").write_text(mutant_text("02", "a\n", "b\n"))
    (mutants / "01-a.patch").write_text(mutant_text("01", "a\n", "c\n"))
    (mutants / "notes.txt").write_text("not a mutant")
    assert [x.name for x in load_mutants(load_matrix(m))] == ["01-a", "02-b"]
    (mutants / "03-c.patch").write_text("Mutant: c\n\n" + unified_file_diff(OPT, "a\n", "b\n"))
    with pytest.raises(ConfigError, match=r"mutants/03-c.patch: no 'Why it is wrong: ...' line"):
        load_mutants(load_matrix(m))


def test_the_result_cache_key_covers_the_mutant_files_and_the_flag(fake_cell):
    from orchestrator.run.cellcache import cache_inputs
    from orchestrator.run.resultcache import cell_key
    from orchestrator.sources import Snapshot

    ctx = fake_cell.ctx
    ctx.native_tests = ROOT / "native_tests"  # the harness is hashed too
    snap, rendered = Snapshot("c" * 40, "fake"), Series("ggml", ())
    key = cell_key(cache_inputs(ctx, snap, rendered))
    ctx.options = replace(ctx.options, no_mutants=True)
    assert cell_key(cache_inputs(ctx, snap, rendered)) != key
    changed = parse_mutant("06-does-not-apply.patch", mutant_text("06", "other\n", "OTHER\n"))
    mutant_files = (*ctx.options.mutant_files[:-1], changed)
    ctx.options = replace(ctx.options, no_mutants=False, mutant_files=mutant_files)
    assert cell_key(cache_inputs(ctx, snap, rendered)) != key


def test_mutants_rebuild_the_gate_alone(fake_cell):
    """test-opt is not run on a mutant, so it is never
    relinked with one: only the gate target is built."""
    ctx = fake_cell.ctx
    kept = tuple(m for m in ctx.options.mutant_files if m.name in ("01-killed", "02-survives"))
    ctx.options = replace(ctx.options, mutant_files=kept)
    run_steps(ctx, [MUTANTS])
    assert (ctx.build_dir / "bin" / "test-opt").read_text() == FIXED  # as the patched build left it
    # the last mutant's
    assert (ctx.build_dir / "bin" / GATE_TEST).read_text() == WRONG["02-survives"]
    for name in ("01-killed", "02-survives"):
        log = (ctx.logs / f"build-mutant-{name}.log").read_text()
        assert (
            "bin/test-opt-dynamic-accum" in log
            and "bin/test-opt\n" not in log
            and "bin/test-opt " not in log
        )


# ---- competing fixes, on the same fake project: applied to the UNFIXED tree ----

UNFIXED = FIXED.replace("echo 'device=CPU opt_period=1: OK'", f"echo '{FAIL_LINE}'").replace(
    "exit 0", "exit 1"
)


def _competing(name: str, old: str, new: str) -> "CompetingFix":  # noqa: F821
    from orchestrator.verdicts.competing import parse_competing

    header = (
        f"Competing fix: {name}\nURL: https://github.com/o/r/pull/1\nDate: 2026-05\n"
        f"Author's summary: {name}\n\n"
    )
    return parse_competing(f"{name}.patch", header + unified_file_diff(OPT, old, new))


def test_competing_fixes_are_judged_on_the_unfixed_tree_and_the_tree_is_put_back(tmp_path):
    from orchestrator.patchset.series import parse_series
    from orchestrator.sources.base import Snapshot

    src, repo, base, cell_dir, wt = fake_project(tmp_path, UNFIXED)
    fix = parse_series(
        "ggml",
        [
            (
                "0001-fix.patch",
                "From: a <a@b>\nSubject: [PATCH] fix\n\n"
                + unified_file_diff("src/ggml-opt.cpp", UNFIXED, FIXED),
            )
        ],
    )
    files = [tmp_path / "0001-fix.patch"]
    files[0].write_text(fix.patches[0].text())
    wt.am(files)  # the patched tree: base + the fix
    target = Target(
        "fake", "ggml", source=LocalSource(kind="local", path=str(src)).at("targets.fake.source")
    )
    cell = Cell(
        cell="fake/cpu", target="fake", backend="cpu", layout="ggml", status=CellStatus.ERROR
    )
    competing_files = (
        _competing("same-as-the-fix", UNFIXED, FIXED),
        _competing("still-wrong", UNFIXED, UNFIXED.replace("step 2", "step 3")),
        _competing("does-not-apply", "other\n", "OTHER\n"),
    )
    options = CellOptions(series=JUDGED, competing_files=competing_files)
    (tmp_path / f"{GATE_TEST}.cpp").write_text("// the gate: a program of native_tests/\n")
    fix = replace(fix, topic_tests=JUDGED.topic_tests)
    ctx = new_context(
        target,
        Backend("cpu", timeout=5),
        Cache(tmp_path / "cache"),
        repo,
        tmp_path,
        cell_dir,
        tmp_path / "logs",
        options,
        worktree=wt,
        module=backends.get("cpu"),
    )
    ctx.cell = cell
    assert cmake.configure(
        BuildPlan(str(wt.path), (), ("test-opt", GATE_TEST), ()),
        ctx.build_dir,
        [],
        ctx.logs / "configure.log",
        {},
    ).ok
    patched_rec = VariantRecord(
        cell=cell.cell,
        target="fake",
        backend="cpu",
        variant="patched",
        status=RecordStatus.PASSED,
        build=Build(ok=True),
        tests={t: TestRecord(outcome=PASSED, exit_code=0) for t in ("test-opt", GATE_TEST)},
    )
    patched = (wt.path / "src/ggml-opt.cpp").read_text()
    # what apply and the test step would have returned
    ctx.results.update({APPLY.name: Tree(Snapshot(base, "fake"), fix, wt), TEST.name: patched_rec})
    run_steps(ctx, [COMPETING])
    got = {r.competing.name: r for r in ctx.records}
    assert {n: str(r.judged.verdict) for n, r in got.items()} == {
        "same-as-the-fix": "equivalent",
        "still-wrong": "wrong",
        "does-not-apply": "invalid",
    }
    wrong = got["still-wrong"].judged
    assert (
        wrong.failing_test == "test-opt" and wrong.failure_line == "test-opt failed (exit code 1)"
    )
    assert got["still-wrong"].tests[GATE_TEST].failure_line == FAIL_LINE.replace("step 2", "step 3")
    assert "does not apply to the unfixed tree" in got["does-not-apply"].judged.reason
    assert all(
        r.variant == f"competing:{n}" and r.competing.url == "https://github.com/o/r/pull/1"
        for n, r in got.items()
    )
    # the patched tree again: the fix back, the competing fix gone
    assert wt.is_clean() and (wt.path / "src/ggml-opt.cpp").read_text() == patched == FIXED
    again = Results.model_validate(
        json.loads(
            json.dumps(
                Results(
                    series=SeriesInfo(layout="llama.cpp", sha256="0" * 64, patches=[]),
                    cells=[cell],
                    records=ctx.records,
                ).to_json()
            )
        )
    )
    assert (
        "| fake/cpu | still-wrong | [2026-05](https://github.com/o/r/pull/1) | **wrong** |"
        in summary_markdown(again)
    )
