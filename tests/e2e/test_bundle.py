"""The bundle end to end: a real run bundled, its series applied with plain `git am` to a clean
base, the PR_BODY.md checked against results.json, the pull request pushed to a local fork."""
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from ..helpers.bundle_checks import check_body_against_results
from ..helpers.samples import GATE, UPSTREAM, control_survived, results_dir
from ..helpers.tools import run_tool


TOKEN = "ghp_bundleTEST_7f3c9a1e5b2d4f60"  # unique: scanned for in every output


def _scan_for_token(paths: list[Path], texts: list[str]) -> None:
    for t in texts:
        assert TOKEN not in t
    for root in paths:
        for f in [root] if root.is_file() else root.rglob("*"):
            if f.is_file() and not f.is_symlink():
                assert TOKEN.encode() not in f.read_bytes(), f


@pytest.fixture(scope="module")
def real_run(repo_root, tool_cache, tmp_path_factory):
    """The real CPU matrix once, then its bundle, with GITHUB_TOKEN set to a value scanned for later."""
    results = tmp_path_factory.mktemp("bundle-e2e") / "results"
    matrix = str(repo_root / "matrix.yaml")
    run = run_tool("matrix", "--matrix", matrix, "--results", str(results), "--cache", str(tool_cache),
                   "--backend", "cpu", cwd=results.parent)
    assert run.returncode == 0, run.stderr[-3000:]
    os.environ["GITHUB_TOKEN"] = TOKEN
    try:
        proc = run_tool("bundle", "--matrix", matrix, "--results", str(results), "--cache", str(tool_cache),
                        cwd=results.parent)
    finally:
        del os.environ["GITHUB_TOKEN"]
    return results, proc




def test_bundle_of_a_real_run(real_run):
    results, proc = real_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "2 bundle(s) in" in proc.stdout
    for target in ("llama.cpp", "ggml"):
        d = results / "bundle" / target
        assert sorted(p.name for p in d.iterdir()) == [
            "0001-ggml-opt-zero-gradient-accumulators-each-period-with.patch",
            "0002-tests-add-test-opt-dynamic-accum-for-per-step-gradie.patch",
            "PR_BODY.md", "PR_TITLE", "manifest.json", "training-loss.png"]
        assert (d / "training-loss.png").read_bytes().startswith(b"\x89PNG")
        # the verification time, for the record (warm cache: a second or two)
        print(re.search(rf"^{re.escape(target)}: .*verified in [\d.]+ s.*$", proc.stdout, re.M).group(0))


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_the_series_applies_with_plain_git_am_to_a_clean_base_and_the_gate_passed_there(real_run, tool_cache, tmp_path, target):
    results, _ = real_run
    d = results / "bundle" / target
    man = json.loads((d / "manifest.json").read_text())
    data = json.loads((results / "results.json").read_text())
    cell = next(c for c in data["cells"] if c["target"] == target)
    base, patched = cell["source"]["base_commit"], cell["patched_commit"]
    assert man["base"]["snapshot_commit"] == base and man["patched_commit"] == patched
    assert man["base"]["upstream_commit"] == cell["source"].get("upstream_commit")

    clone = tmp_path / "clean"
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(tool_cache / "snapshots.git"), str(clone)],
                   check=True, capture_output=True)  # the snapshot repository has no HEAD: "empty" is expected
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", "--detach", base], check=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_COMMITTER_NAME": "maintainer", "GIT_COMMITTER_EMAIL": "m@example.org"}
    patches = sorted(str(p) for p in d.glob("*.patch"))
    am = subprocess.run(["git", "-C", str(clone), "am", *patches], capture_output=True, text=True, env=env)
    assert am.returncode == 0, am.stderr
    tree = lambda rev, where: subprocess.run(["git", "-C", str(where), "rev-parse", f"{rev}^{{tree}}"],  # noqa: E731
                                             capture_output=True, text=True, check=True).stdout.strip()
    assert tree("HEAD", clone) == tree(patched, clone)  # exactly the tree the matrix proved

    v = man["verification"]  # the bundle's own git am + build + run on a fresh copy of the base
    assert v["head_is_patched_commit"] and v["tree_is_patched_tree"]
    assert v["tests"][GATE]["outcome"] == "passed" and v["tests"][UPSTREAM]["outcome"] == "passed"
    assert "3/3 device*opt_period passed" in Path(v["tests"][GATE]["log"]).read_text()


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_body_title_and_manifest_come_from_the_run(real_run, target):
    results, _ = real_run
    d = results / "bundle" / target
    data = json.loads((results / "results.json").read_text())
    body = (d / "PR_BODY.md").read_text()
    check_body_against_results(body, data, target)
    assert (d / "PR_TITLE").read_text() == "ggml-opt : zero gradient accumulators each period with per-step graphs\n"
    man = json.loads((d / "manifest.json").read_text())
    assert man["results"]["sha256"] == hashlib.sha256((results / "results.json").read_bytes()).hexdigest()
    assert man["series"]["results_series_sha256"] == data["series"]["sha256"]
    assert set(man["files"]) == {p.name for p in d.iterdir()} - {"manifest.json"}
    for name, digest in man["files"].items():
        assert hashlib.sha256((d / name).read_bytes()).hexdigest() == digest
    assert man["incomplete"] is False and man["warnings"] == []
    assert re.search(r"^- C\+\+ compiler: \S+ \d+\.\d+", body, re.M)
    assert "- CMake: cmake version" in body and "- git: git version" in body


def test_the_token_appears_nowhere(real_run, tool_cache):
    results, proc = real_run
    _scan_for_token([results, tool_cache / "bundle"], [proc.stdout, proc.stderr])


def test_a_run_whose_control_survived_is_refused_then_bundled_with_a_warning(real_run, repo_root, tool_cache, tmp_path):
    results, _ = real_run
    r = control_survived(json.loads((results / "results.json").read_text()))
    edited = results_dir(tmp_path, r)
    args = ["bundle", "--matrix", str(repo_root / "matrix.yaml"), "--results", str(edited), "--cache", str(tool_cache)]
    refused = run_tool(*args, cwd=tmp_path)
    assert refused.returncode == 20 and "ggml/cpu: the negative control was not killed (survived" in refused.stderr
    assert not (edited / "bundle").exists()

    made = run_tool(*args, "--allow-incomplete", "--target", "ggml", cwd=tmp_path)
    assert made.returncode == 0, made.stderr[-3000:]
    assert "warning: ggml: incomplete evidence: ggml/cpu: the negative control was not killed" in made.stderr
    body = (edited / "bundle" / "ggml" / "PR_BODY.md").read_text()
    assert body.startswith("> [!WARNING]\n> **Incomplete evidence")
    check_body_against_results(body, r, "ggml")
    man = json.loads((edited / "bundle" / "ggml" / "manifest.json").read_text())
    assert man["incomplete"] is True and "survived" in man["warnings"][0]
    assert not (edited / "bundle" / "llama.cpp").exists()


def test_pr_pushes_the_real_bundle_to_a_fork_and_opens_the_pull_request(real_run, repo_root, tool_cache, tmp_path):
    from pytest_httpserver import HTTPServer

    results, _ = real_run
    d = results / "bundle" / "ggml"
    fork = tmp_path / "fork.git"
    subprocess.run(["git", "init", "-q", "--bare", str(fork)], check=True)
    api = HTTPServer(host="127.0.0.1", port=0)
    api.start()
    try:
        api.expect_request("/repos/ggml-org/ggml/pulls", method="POST").respond_with_json(
            {"html_url": "https://github.com/ggml-org/ggml/pull/7"}, status=201)
        os.environ["GITHUB_TOKEN"] = TOKEN
        try:
            proc = run_tool("pr", "--matrix", str(repo_root / "matrix.yaml"), "--cache", str(tool_cache),
                            "--bundle", str(d), "--repo", "ggml-org/ggml", "--head-remote", str(fork),
                            "--head-owner", "me", "--branch", "ggml-opt-accumulators", "--api-url", api.url_for("/"),
                            "--open", cwd=tmp_path)
        finally:
            del os.environ["GITHUB_TOKEN"]
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().endswith("pull request opened: https://github.com/ggml-org/ggml/pull/7")
        (request, _), = api.log
        sent = json.loads(request.get_data(as_text=True))
        assert sent["body"] == (d / "PR_BODY.md").read_text() and sent["head"] == "me:ggml-opt-accumulators"
    finally:
        api.clear()
        api.stop()
    man = json.loads((d / "manifest.json").read_text())
    rev = lambda where, r: subprocess.run(["git", f"--git-dir={where}", "rev-parse", r],  # noqa: E731
                                          capture_output=True, text=True, check=True).stdout.strip()
    assert rev(fork, "refs/heads/ggml-opt-accumulators^{tree}") == rev(tool_cache / "snapshots.git",
                                                                        f"{man['patched_commit']}^{{tree}}")
    _scan_for_token([tmp_path, tool_cache / "pr" / "ggml"], [proc.stdout, proc.stderr])
