"""Issue 35: a no-change re-run starts no `--version` process. The toolchain's versions are kept
in the tool's cache beside each executable's identity and probed again only when it changed."""

import json
import os
from pathlib import Path

import pytest

from orchestrator.run import toolchain


def _fake(path: Path, version: str, counter: Path) -> str:
    """An executable that prints `version` and counts its runs in `counter`."""
    path.write_text(f'#!/bin/sh\necho run >> "{counter}"\necho "{version}"\n')
    path.chmod(0o755)
    return str(path)


def _runs(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


@pytest.fixture
def fakes(tmp_path, monkeypatch):
    bin_dir, counter = tmp_path / "bin", tmp_path / "runs"
    bin_dir.mkdir()
    exes = {
        name: _fake(bin_dir / name, f"{name} version 1.0", counter)
        for name in ("cmake", "ninja", "cc", "c++")
    }
    monkeypatch.setattr(toolchain, "cmake_exe", lambda: exes["cmake"])
    monkeypatch.setattr(toolchain, "ninja_exe", lambda: exes["ninja"])
    monkeypatch.setenv("CC", exes["cc"])
    monkeypatch.setenv("CXX", exes["c++"])
    git_runs = []
    monkeypatch.setattr(toolchain.user_git, "version", lambda: git_runs.append(1) or "git 2.39")
    toolchain._first_line.cache_clear()
    yield exes, counter, git_runs
    toolchain._first_line.cache_clear()


def test_versions_are_probed_once_and_again_only_for_a_changed_executable(tmp_path, fakes):
    exes, counter, git_runs = fakes
    memo = tmp_path / "cache-results"
    first = toolchain.versions(memo)
    assert (first["cmake"], first["cc"], first["git"]) == (
        "cmake version 1.0",
        "cc version 1.0",
        "git 2.39",
    )
    assert _runs(counter) == 4 and len(git_runs) == 1
    assert json.loads((memo / toolchain.MEMO_FILE).read_text())["cc"]["line"] == "cc version 1.0"
    # a new process (the in-process memo is gone): nothing started, the same versions
    toolchain._first_line.cache_clear()
    assert toolchain.versions(memo) == first
    assert _runs(counter) == 4 and len(git_runs) == 1
    # an upgraded compiler: probed again, and only it
    _fake(Path(exes["cc"]), "cc version 2.0 (upgraded)", counter)
    os.utime(exes["cc"], ns=(1, 1))  # a new mtime even where the clock's grain is coarse
    toolchain._first_line.cache_clear()
    again = toolchain.versions(memo)
    assert again["cc"] == "cc version 2.0 (upgraded)" and again["cxx"] == "c++ version 1.0"
    assert _runs(counter) == 5 and len(git_runs) == 1


def test_without_a_memo_folder_every_version_is_probed(fakes):
    _, counter, git_runs = fakes
    toolchain.versions()
    toolchain._first_line.cache_clear()
    toolchain.versions()
    assert _runs(counter) == 8 and len(git_runs) == 2


def test_a_half_written_memo_is_probed_again(tmp_path, fakes):
    _, counter, _ = fakes
    memo = tmp_path / "m"
    memo.mkdir()
    (memo / toolchain.MEMO_FILE).write_text('{"cc": ')
    assert toolchain.versions(memo)["cc"] == "cc version 1.0"
    assert _runs(counter) == 4
    assert json.loads((memo / toolchain.MEMO_FILE).read_text())["cc"]["line"] == "cc version 1.0"
