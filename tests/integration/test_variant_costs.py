"""Issue 24, point 4: the control and each mutant pay no fixed cost the by-hand route does not.
The control's revert is one git process (`git restore --source=BASE --worktree`), and the files go
back from the bytes kept in memory (no git process, the index untouched, an unchanged file not
touched, so nothing recompiles for it); builds call ninja itself, not `cmake --build`."""

import os

import pytest

from orchestrator.run import cmake
from orchestrator.run.cell import files_kept
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree

from .test_snapshots import BASE, _patch_for, _tree


@pytest.fixture
def patched(tmp_path):
    repo = SnapshotRepo(tmp_path / "s.git")
    base = repo.import_tree(_tree(tmp_path / "snap", BASE), "refs/snapshots/x", "x")
    wt = Worktree(repo, tmp_path / "cell" / "src")
    wt.ensure(base)
    head = wt.am([_patch_for(tmp_path)])
    return wt, base, head


def test_the_control_reverts_in_one_process_and_the_bytes_come_back(patched):
    wt, base, head = patched
    fixed = (wt.path / "src/opt.cpp").read_bytes()
    with files_kept(wt.path, ["src/opt.cpp", "tests/new.cpp"]):
        wt.restore_from(base, ["src/opt.cpp", "tests/new.cpp"])
        assert (wt.path / "src/opt.cpp").read_text() == BASE["src/opt.cpp"]
        assert not (wt.path / "tests/new.cpp").exists()  # not in the base: removed
        assert wt.git("diff", "--cached", "--name-only") == ""  # the index keeps HEAD's
    assert (wt.path / "src/opt.cpp").read_bytes() == fixed
    assert (wt.path / "tests/new.cpp").read_text() == "int main() {}\n"
    assert wt.is_clean() and wt.head() == head


def test_files_kept_restores_on_an_error_removes_what_it_did_not_have_and_leaves_the_rest(patched):
    wt, _, _ = patched
    src, kept_same = wt.path / "src/opt.cpp", wt.path / "tests/new.cpp"
    os.utime(kept_same, (1_000_000, 1_000_000))
    before = src.read_bytes()
    with pytest.raises(RuntimeError):
        with files_kept(wt.path, ["src/opt.cpp", "tests/new.cpp", "src/added.cpp"]):
            src.write_text("mutant\n")
            (wt.path / "src/added.cpp").write_text("x\n")
            raise RuntimeError("interrupted")
    assert src.read_bytes() == before
    assert not (wt.path / "src/added.cpp").exists()
    assert kept_same.stat().st_mtime == 1_000_000  # unchanged: not rewritten, never recompiled
    assert wt.is_clean()


def test_a_build_calls_ninja_itself(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.14)\nproject(t NONE)\n"
        "add_custom_target(a ALL COMMAND ${CMAKE_COMMAND} -E touch a.stamp)\n"
    )
    from orchestrator.model.layout import BuildPlan

    plan = BuildPlan(str(tmp_path / "src"), (), ("a",), ())
    build = tmp_path / "build"
    assert cmake.configure(plan, build, [], tmp_path / "configure.log", {}).ok
    step = cmake.build(build, ("a",), tmp_path / "build.log", {}, None, 1)
    assert step.ok, (tmp_path / "build.log").read_text()
    assert (tmp_path / "build.log").read_text().splitlines()[
        0
    ] == f"$ {cmake.ninja_exe()} -C {build} -j 1 a"
    assert (build / "a.stamp").exists()
