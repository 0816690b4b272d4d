"""Issue 16, points 6 and 7: every user error is exit 2 with one line, found before work starts;
and the smaller items (non-finite timeouts, a missing native_tests, CRLF series, a series writing
under .git/, kill -9 leftovers in <cache>/tmp/, GGML_PATCH_CACHE='')."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.patchset.files import read_series

from ..helpers.security import ROOT, isolated_env, tiny_matrix, tiny_tree, tool


def no_cell_ran(proc, cache):
    assert "[1/1]" not in proc.stderr, proc.stderr
    assert not (cache / "cells").exists()


# ---------------------------------------------------------------- output paths, up front


def test_a_results_path_that_is_a_file_is_refused_before_any_cell(tmp_path):
    m = tiny_matrix(tmp_path)
    results = tmp_path / "results"
    results.write_text("a file")
    proc = tool(
        "matrix",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--results",
        results,
        env=isolated_env(tmp_path),
    )
    line = proc.error_line(2)
    assert "--results" in line and str(results) in line and "not a folder" in line
    no_cell_ran(proc, tmp_path / "cache")


def test_a_results_path_below_a_file_is_refused_before_any_cell(tmp_path):
    m = tiny_matrix(tmp_path)
    (tmp_path / "f").write_text("")
    proc = tool(
        "matrix",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "f" / "r",
        env=isolated_env(tmp_path),
    )
    assert "--results" in proc.error_line(2)
    no_cell_ran(proc, tmp_path / "cache")


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["export", "--target", "tiny", "--out", "{tmp}/o"],
        ["matrix", "--results", "{tmp}/r"],
    ],
)
def test_a_cache_that_is_a_file_is_refused(tmp_path, command):
    m = tiny_matrix(tmp_path)
    cache = tmp_path / "cache-file"
    cache.write_text("")
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    line = tool(*args, "--matrix", m, "--cache", cache, env=isolated_env(tmp_path)).error_line(2)
    assert "--cache" in line and "not a folder" in line


def test_merge_results_out_that_is_a_file(tmp_path):
    out = tmp_path / "out"
    out.write_text("")
    r = tmp_path / "r"
    r.mkdir()
    shutil.copy(ROOT / "tests" / "data" / "results-cpu-sample.json", r / "results.json")
    line = tool(
        "merge-results",
        "--matrix",
        ROOT / "matrix.yaml",
        "--cache",
        tmp_path / "c",
        "--out",
        out,
        r,
        env=isolated_env(tmp_path),
    ).error_line(2)
    assert "--out" in line and "not a folder" in line


def test_a_relative_cache_works(tmp_path):
    m = tiny_matrix(tmp_path)
    proc = tool(
        "status",
        "--matrix",
        m.name,
        "--cache",
        "rel-cache",
        env=isolated_env(tmp_path),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "rel-cache" / "snapshots.git").is_dir()
    assert "not applicable" in proc.stdout


def test_a_relative_cache_from_the_environment_works(tmp_path):
    m = tiny_matrix(tmp_path)
    proc = tool(
        "status",
        "--matrix",
        m,
        env=isolated_env(tmp_path, GGML_PATCH_CACHE="env-cache"),
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "env-cache" / "snapshots.git").is_dir()


def test_an_empty_ggml_patch_cache_is_refused(tmp_path):
    m = tiny_matrix(tmp_path)
    line = tool(
        "status", "--matrix", m, env=isolated_env(tmp_path, GGML_PATCH_CACHE="")
    ).error_line(2)
    assert "GGML_PATCH_CACHE" in line and "empty" in line
    assert not (tmp_path / "home" / ".cache").exists()


# ---------------------------------------------------------------- matrix values


def test_a_late_env_key_error_used_to_abort_the_run(tmp_path):
    m = tiny_matrix(tmp_path, backends="  cpu: {env: {'A=B': '1'}}\n")
    proc = tool(
        "matrix",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    assert "backends.cpu.env" in proc.error_line(2)
    no_cell_ran(proc, tmp_path / "cache")


def test_a_missing_native_tests_folder_is_refused_before_any_cell(tmp_path):
    m = tiny_matrix(tmp_path)
    m.write_text(m.read_text().replace(str(ROOT / "native_tests"), str(tmp_path / "nowhere")))
    proc = tool(
        "matrix",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    line = proc.error_line(2)
    assert f"{m}:2: native_tests: " in line and "nowhere" in line
    no_cell_ran(proc, tmp_path / "cache")


# ---------------------------------------------------------------- results files

BAD_RESULTS = {
    "cells-not-objects": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "cells": [1],
        "records": [],
    },
    "cell-without-status": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "cells": [{"cell": "x/cpu", "target": "x"}],
        "records": [],
    },
    "series-without-patches": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "cells": [],
        "records": [],
    },
    "records-not-a-list": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "cells": [],
        "records": {},
    },
    "target-escapes": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "records": [],
        "cells": [
            {
                "cell": "../x/cpu",
                "target": "../x",
                "backend": "cpu",
                "status": "passed",
                "exit_code": 0,
                "reason": "",
                "timings": {},
            }
        ],
    },
    "patched-commit-is-an-option": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "records": [],
        "cells": [
            {
                "cell": "x/cpu",
                "target": "x",
                "backend": "cpu",
                "status": "passed",
                "exit_code": 0,
                "reason": "",
                "timings": {},
                "patched_commit": "--output=/tmp/x",
            }
        ],
    },
    "record-tests-not-a-mapping": {
        "series": {"sha256": "a" * 64},
        "profile": "p",
        "cells": [],
        "records": [{"cell": "x/cpu", "variant": "patched", "build": {}, "tests": []}],
    },
}


@pytest.mark.parametrize("case", BAD_RESULTS)
@pytest.mark.parametrize("command", ["bundle", "merge-results"])
def test_malformed_results_files_are_one_line(tmp_path, case, command):
    r = tmp_path / "r"
    r.mkdir()
    (r / "results.json").write_text(json.dumps(BAD_RESULTS[case]))
    common = ["--matrix", ROOT / "matrix.yaml", "--cache", tmp_path / "c"]
    args = (
        ["bundle", "--results", r, "--out", tmp_path / "b", "--author", "T <t@example.com>"]
        if command == "bundle"
        else ["merge-results", "--out", tmp_path / "m", r]
    )
    line = tool(*args[:1], *common, *args[1:], env=isolated_env(tmp_path)).error_line(2)
    assert "results.json" in line


# ----------------------------------------------------------------
# a checkout git refuses (ownership)


def foreign(path, env):
    """Make git see `path` as another user's: chown it when running as root; otherwise git's own
    test switch GIT_TEST_ASSUME_DIFFERENT_OWNER, which runs the very same ownership check."""
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "12345:12345", str(path)], check=True)
    else:
        env["GIT_TEST_ASSUME_DIFFERENT_OWNER"] = "1"


def git_checkout(path):
    tiny_tree(path)
    (path / ".gitignore").write_text("build/\n")
    (path / "build").mkdir()
    (path / "build" / "ignored.o").write_text("object\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (
        ["init", "-q"],
        ["add", "."],
        ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
    ):
        subprocess.run(["git", *args], cwd=path, check=True, env=env, capture_output=True)
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, env=env, capture_output=True, text=True
    ).stdout.strip()


def test_a_checkout_git_refuses_for_ownership_is_named_with_the_fix(tmp_path):
    co = tmp_path / "co"
    git_checkout(co)
    env = isolated_env(tmp_path)
    foreign(co, env)
    m = tiny_matrix(tmp_path, source=f"{{kind: local, path: '{co}'}}")
    line = tool("status", "--matrix", m, "--cache", tmp_path / "cache", env=env).error_line(2)
    assert "owned by another user" in line
    assert f"git config --global --add safe.directory {co}" in line


def test_the_fix_it_names_works(tmp_path):
    from orchestrator.sources import snapshot
    from orchestrator.vcs.snapshots import SnapshotRepo

    co = tmp_path / "co"
    head = git_checkout(co)
    env = isolated_env(tmp_path)
    foreign(co, env)
    (tmp_path / "home" / ".gitconfig").write_text(f"[safe]\n\tdirectory = {co}\n")
    m = tiny_matrix(tmp_path, source=f"{{kind: local, path: '{co}'}}")
    proc = tool("status", "--matrix", m, "--cache", tmp_path / "cache", env=env)
    assert proc.returncode == 0, proc.stderr
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        snap = snapshot(
            load_matrix(m).target("tiny").source,
            Cache(tmp_path / "cache"),
            SnapshotRepo(tmp_path / "cache" / "snapshots.git"),
        )
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    # read as a git checkout: HEAD kept, ignored files left out
    assert snap.provenance["head"] == head
    repo = SnapshotRepo(tmp_path / "cache" / "snapshots.git")
    assert repo.read_blob(snap.commit, "build/ignored.o") is None


# ---------------------------------------------------------------- the series


def series_copy(tmp_path):
    """A copy of the queue; the folder of its topic 1 and that topic's patches."""
    q = tmp_path / "series"
    shutil.copytree(ROOT / "patches", q)
    d = q / "accumulator-reset"
    return d, sorted(d.glob("*.patch"))


def test_a_series_writing_under_dot_git_is_a_malformed_series(tmp_path):
    d, patches = series_copy(tmp_path)
    evil = (
        "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nFrom: x <x@x>\n"
        "Subject: [PATCH] hook\n\n---\n"
        "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n"
        "--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1 @@\n+touch /tmp/x\n"
    )
    (d / "0003-hook.patch").write_text(evil)
    with pytest.raises(
        ConfigError, match=r"0003-hook.patch: path '.git/hooks/post-checkout' .*\.git"
    ):
        read_series(d, "llama.cpp")
    m = tiny_matrix(tmp_path)
    m.write_text(m.read_text().replace(str(ROOT / "patches"), str(d.parent)))
    assert ".git" in tool(
        "status", "--matrix", m, "--cache", tmp_path / "c", env=isolated_env(tmp_path)
    ).error_line(2)


# ---------------------------------------------------------------- kill -9 leftovers


def dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_leftovers_of_a_killed_run_are_cleaned_at_the_next_start(tmp_path):
    cache = Cache(tmp_path / "cache")
    tmp = cache.scratch()
    host = cache.scratch_prefix("extract").split("-pid")[0]
    dead = tmp / f"{host}-pid{dead_pid()}-abc123"
    (dead / "vendor").mkdir(parents=True)
    (dead / "vendor" / "big.bin").write_bytes(b"x" * 1000)
    dead_file = tmp / f"{cache.scratch_prefix('download').split('-pid')[0]}-pid{dead_pid()}-x.part"
    dead_file.write_bytes(b"partial")
    live = tmp / f"{host}-pid{os.getpid()}-def456"  # this test's own process is alive
    live.mkdir()
    # another machine's: not ours to judge
    foreign_host = tmp / f"extract-some-other-host-pid{dead_pid()}-ghi789"
    foreign_host.mkdir()
    m = tiny_matrix(tmp_path)
    proc = tool("status", "--matrix", m, "--cache", cache.root, env=isolated_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert not dead.exists() and not dead_file.exists()
    assert live.is_dir() and foreign_host.is_dir()


@pytest.mark.parametrize("kind", ["folder", "below-a-file"])
def test_ci_workflow_output_that_cannot_be_a_file(tmp_path, kind):
    m = tiny_matrix(tmp_path)
    (tmp_path / "f").write_text("")
    out = tmp_path if kind == "folder" else tmp_path / "f" / "w.yml"
    line = tool(
        "ci-workflow",
        "--matrix",
        m,
        "--cache",
        tmp_path / "c",
        "--output",
        out,
        env=isolated_env(tmp_path),
    ).error_line(2)
    assert "--output" in line
