"""End to end: the real CPU matrix on both pinned upstream targets (real sdists, CMake, tests).

Slow (about a minute cold on 2 cores; the sdists are fetched once into the tool's cache).
"""
import json
import re
from pathlib import Path
import subprocess

import pytest

from .conftest import run_tool

pytestmark = pytest.mark.e2e

FAILURE_LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"


@pytest.fixture(scope="module")
def matrix_run(repo_root, tool_cache, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    proc = run_tool("matrix", "--matrix", str(repo_root / "matrix.yaml"),
                    "--results", str(results), "--cache", str(tool_cache), cwd=results)
    return proc, results


def test_matrix_exits_zero_and_writes_results(matrix_run):
    proc, results = matrix_run
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert (results / "results.json").exists() and (results / "summary.md").exists()
    assert "2 passed, 0 failed, 0 skipped" in proc.stdout
    # progress names the cell and the step
    assert "[1/2] llama.cpp/cpu: build patched" in proc.stderr
    assert "[2/2] ggml/cpu: control" in proc.stderr


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_each_target_patched_passes_and_control_is_killed(matrix_run, target):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    cell = next(c for c in data["cells"] if c["target"] == target)
    assert cell["status"] == "passed", cell
    assert cell["source"]["base_commit"] and cell["patched_commit"]
    recs = {r["variant"]: r for r in data["records"] if r["target"] == target}

    patched = recs["patched"]
    assert patched["tests"]["test-opt"]["outcome"] == "passed"
    assert {(r["device"], r["optimizer"], r["status"]) for r in patched["tests"]["test-opt"]["rows"]} == {
        ("CPU", "adamw", "OK"), ("CPU", "sgd", "OK")}
    gate = patched["tests"]["test-opt-dynamic-accum"]
    assert gate["outcome"] == "passed"
    assert [(r["opt_period"], r["status"]) for r in gate["rows"]] == [(1, "OK"), (2, "OK"), (3, "OK")]

    control = recs["control"]
    assert control["verdict"] == "killed"
    assert control["failure_line"] == FAILURE_LINE
    assert control["tests"]["test-opt-dynamic-accum"]["exit_code"] == 1
    assert control["tests"]["test-opt"]["outcome"] == "passed"
    assert control["reverted"] == (["ggml/src/ggml-opt.cpp"] if target == "llama.cpp" else ["src/ggml-opt.cpp"])
    # the control reused the patched build tree: only the reverted file and the relinks were rebuilt
    steps = re.findall(r"^\[(\d+)/(\d+)\]", Path(control["build"]["log"]).read_text(), re.M)
    assert steps and int(steps[-1][1]) <= 6, steps


def test_summary_names_the_failure_line(matrix_run):
    _, results = matrix_run
    summary = (results / "summary.md").read_text()
    assert "2/2 cells passed" in summary
    assert summary.count(FAILURE_LINE) == 2


def test_the_upstream_base_commit_is_recorded(matrix_run):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    llama = next(c for c in data["cells"] if c["target"] == "llama.cpp")
    assert llama["source"]["upstream_commit"] == "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


def test_rerun_reuses_the_tree_and_the_exported_series_applies_with_plain_git_am(matrix_run, repo_root, tool_cache, tmp_path):
    """`ggml-patch export` writes the ggml-layout series; plain `git am` applies it to the
    same snapshot checked out fresh, and the gate test there is the series' own."""
    out = tmp_path / "series"
    proc = run_tool("export", "--matrix", str(repo_root / "matrix.yaml"), "--cache", str(tool_cache),
                    "--target", "ggml", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    patches = sorted(out.glob("*.patch"))
    assert len(patches) == 2
    assert "src/ggml-opt.cpp" in patches[0].read_text() and "ggml/src/" not in patches[0].read_text()
    assert "set(TEST_TARGET test-opt-dynamic-accum)" in patches[1].read_text()

    from orchestrator.snapshots import SnapshotRepo
    repo = SnapshotRepo(tool_cache / "snapshots.git")
    ref = next(r for r in repo.git("for-each-ref", "--format=%(refname)", "refs/snapshots/").split() if "ggml-python" in r)
    clone = tmp_path / "ggml"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    env = {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", repo.ref_commit(ref)], check=True)
    am = subprocess.run(["git", "-C", str(clone), "am", *map(str, patches)], capture_output=True, text=True, env=env)
    assert am.returncode == 0, am.stderr
    assert (clone / "tests/test-opt-dynamic-accum.cpp").read_text() == (
        repo_root / "native_tests/test-opt-dynamic-accum.cpp").read_text()
