"""Issue 49 point 3: the commands a bundle's PR body shows are the ones the verification ran. A
small real CMake project shaped like upstream's (a library with the fix, a test program under
tests/, the tests behind LLAMA_BUILD_TESTS, one more test program that does not even compile, so
only the shown target may be built), its fix and test commits as `git format-patch` files,
verified with the real cmake, make and git: the argv of each log is the shown line's, the lines
the body quotes are in that run's output, and a test that fails with the fix fails the
verification in one line."""

import shlex
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from orchestrator.errors import BundleVerificationFailed
from orchestrator.model.testspec import TestSpec
from orchestrator.upstream import contributor, pr_body
from orchestrator.upstream.verification import Shown, format_patch, verify
from orchestrator.upstream.views import SeriesCommit
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree
from tests.helpers.samples import sample

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("make") is None, reason="needs make (CMake's default)"),
]

TOP = """cmake_minimum_required(VERSION 3.14)
project(fake CXX)
option(LLAMA_BUILD_TESTS "build the tests" OFF)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
add_library(opt STATIC src/opt.cpp)
target_include_directories(opt PUBLIC include)
if (LLAMA_BUILD_TESTS)
    add_executable(test-opt tests/test-opt.cpp)
    target_link_libraries(test-opt PRIVATE opt)
    add_executable(test-other tests/test-other.cpp)
endif()
"""
# the bug: one step does not advance
BUGGY = '#include "opt.h"\nint opt_step(int x) { return x; }\n'
FIXED = '#include "opt.h"\nint opt_step(int x) { return x + 1; }\n'
WRONG = '#include "opt.h"\nint opt_step(int x) { return x + 2; }\n'
TEST = r"""#include "opt.h"
#include <cstdio>
#include <cstdlib>
int main() {
    const char * token = std::getenv("GITHUB_TOKEN");
    std::printf("home=%s token=%s\n", std::getenv("HOME"), token ? "set" : "unset");
    int ok = 1;
    std::printf("test_base: OK\n");
    CASES
    std::printf("%d/%d tests passed\n", ok, TOTAL);
    return ok == TOTAL ? 0 : 1;
}
"""
OLD_TEST = TEST.replace("CASES", "").replace("TOTAL", "1")
NEW_TEST = TEST.replace(
    "CASES",
    'if (opt_step(1) == 2) { ok++; std::printf("test_step: OK\\n"); } '
    'else { std::printf("test_step: FAIL\\n"); }',
).replace("TOTAL", "2")
TESTS = (TestSpec("test-opt"),)


def _git(cwd: Path, *args: str) -> str:
    ident = ["-c", "user.name=Dev", "-c", "user.email=dev@example.com"]
    return subprocess.run(
        ["git", *ident, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def _series(tmp_path: Path, fix: str):
    """The base snapshot, and the fix and test commits on it as format-patch files."""
    proj = tmp_path / "proj"
    for path, text in {
        "CMakeLists.txt": TOP,
        "include/opt.h": "int opt_step(int x);\n",
        "src/opt.cpp": BUGGY,
        "tests/test-opt.cpp": OLD_TEST,
        "tests/test-other.cpp": "#error only the shown target is built\n",
    }.items():
        (proj / path).parent.mkdir(parents=True, exist_ok=True)
        (proj / path).write_text(text)
    repo = SnapshotRepo(tmp_path / "snapshots.git")
    base = repo.import_tree(proj, "refs/snapshots/fake", "base")
    dev = Worktree(repo, tmp_path / "dev")
    dev.ensure(base)
    (dev.path / "src" / "opt.cpp").write_text(fix)
    _git(dev.path, "commit", "-qam", "opt : advance one step")
    (dev.path / "tests" / "test-opt.cpp").write_text(NEW_TEST)
    _git(dev.path, "commit", "-qam", "tests : add test_step")
    head = dev.head()
    return repo, base, head, format_patch(repo, base, head)


def _verify(tmp_path: Path, fix: str):
    repo, base, head, patches = _series(tmp_path, fix)
    work = tmp_path / "bundle"
    worktree = Worktree(repo, work / "src")
    shown = Shown(TESTS, (patches[1][0],), "llama.cpp")
    target = SimpleNamespace(name="fake")
    return patches, verify(target, repo, worktree, work, base, head, patches, shown, [])


def _block(lines: list[str], head: str) -> list[str]:
    start = lines.index(head) + 3  # the heading, a blank line, the fence
    return lines[start : lines.index("```", start)]


def test_the_verification_runs_exactly_the_commands_the_body_shows(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "x" * 36)  # never reaches the commands
    patches, v = _verify(tmp_path, FIXED)
    names = [n for n, _ in patches]
    commits = [SeriesCommit("opt", "", ("src/opt.cpp",)), SeriesCommit("t", "", ("tests/x",))]
    shown_run = pr_body.ShownRun(TESTS, v)
    body = pr_body.additional_information(
        sample(), "0" * 64, "llama.cpp", commits, names, {}, None, shown=shown_run
    )
    shown = _block(body, "Reproduce:")
    run = [c.line for c in v.commands]
    assert run == [
        "cmake -B build -DLLAMA_BUILD_TESTS=ON",
        "cmake --build build --target test-opt",
        "./build/bin/test-opt",
    ]
    assert shown[-len(run) :] == run and shown[-len(run) - 1] == f"git am {' '.join(names)}"
    for c in [*v.commands, *v.reproduction]:
        log = Path(c.log).read_text()
        ran = shlex.split(log.splitlines()[0][2:])  # "$ argv..." as the run wrote it
        words = shlex.split(c.line)
        tail = ran[len(ran) - len(words) :]  # after stdbuf, where a test is line-buffered
        assert tail[1:] == words[1:], (ran, c.line)
        if words[0].startswith("./"):  # from the worktree
            assert tail[0] == str(tmp_path / "bundle" / "src" / words[0][2:])
        else:
            assert Path(tail[0]).name == words[0]
    assert [c.line for c in v.reproduction] == run  # the same lines, the test commit alone
    # the quoted lines are that run's own output
    fixed_log = Path(v.commands[-1].log).read_text()
    assert _block(body, "With the fix:") == ["2/2 tests passed"] and "2/2 tests passed" in fixed_log
    bug_log = Path(v.reproduction[-1].log).read_text()
    before = _block(body, "Without the fix (its test commit alone):")
    assert before == ["test_step: FAIL"] and "test_step: FAIL" in bug_log
    # confined: its own HOME, no token; only the shown target built
    assert f"home={tmp_path / 'bundle' / 'home'} token=unset" in fixed_log
    assert not (tmp_path / "bundle" / "contributor-build" / "bin" / "test-other").exists()
    assert (tmp_path / "bundle" / "contributor-build" / "bin" / "test-opt").exists()
    assert v.tests["test-opt"].summary_line == "2/2 tests passed"


def test_a_repeat_reuses_the_build_folder(tmp_path):
    """Kept beside the worktree, which each checkout cleans: the second verification builds in
    the first one's folder."""
    _, first = _verify(tmp_path, FIXED)
    _, again = _verify(tmp_path, FIXED)
    assert not first.configure_reused and again.configure_reused
    assert (tmp_path / "bundle" / "contributor-build" / "CMakeCache.txt").exists()
    assert not (tmp_path / "bundle" / "src" / "build").exists()


def test_a_shown_test_that_fails_with_the_fix_fails_the_verification_in_one_line(tmp_path):
    with pytest.raises(BundleVerificationFailed) as e:
        _verify(tmp_path, WRONG)
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("fake: with the bundle applied to a fresh copy of ")
    assert "`./build/bin/test-opt` failed (exit 1; log: " in message


def test_a_deadline_stops_the_commands(tmp_path, monkeypatch):
    monkeypatch.setenv("GGML_PATCH_VERIFY_DEADLINE_S", "0.001")
    with pytest.raises(BundleVerificationFailed) as e:
        _verify(tmp_path, FIXED)
    assert "stopped at the verification's deadline" in str(e.value)


def test_the_shown_commands_are_one_list():
    """contributor.commands is what the body's block and the verification's lines come from."""
    made = contributor.commands("llama.cpp", "abc", ["0001.patch"], TESTS)
    assert made.lines[-3:] == made.run_lines
