"""README's cost estimate is recomputed from the committed workflows (ci/cost.py): a leg, a
timeout or a schedule changed there changes the estimate, and README must say the new one."""

import copy

import pytest

from orchestrator.ci import cost
from orchestrator.errors import ConfigError

from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit


def _workflows():
    read = (ROOT / ".github" / "workflows").joinpath
    return (
        cost.load(read("ggml-patch-matrix.yml").read_text(encoding="utf-8")),
        cost.load(read("ggml-patch-drift.yml").read_text(encoding="utf-8")),
    )


def test_readme_states_the_estimate_of_the_committed_workflows():
    block = cost.estimate(*_workflows())
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert block in readme, "README.md's cost estimate is stale; it should read:\n" + block


def test_the_estimate_follows_the_legs_timeouts_and_schedules():
    matrix_wf, drift_wf = _workflows()
    legs = matrix_wf["jobs"]["cell"]["strategy"]["matrix"]["include"]
    by_os, count = cost.per_run(matrix_wf)
    assert count["Linux"] + count["macOS"] == len(legs)
    timeouts = sum(j["timeout-minutes"] for n, j in matrix_wf["jobs"].items() if n != "cell")
    cell_timeout = matrix_wf["jobs"]["cell"]["timeout-minutes"]
    assert by_os["Linux"].worst == timeouts + count["Linux"] * cell_timeout
    assert by_os["macOS"].worst == count["macOS"] * cell_timeout
    before = cost.estimate(matrix_wf, drift_wf)
    more = copy.deepcopy(matrix_wf)
    more["jobs"]["cell"]["strategy"]["matrix"]["include"].append(dict(legs[0]))
    assert cost.per_run(more)[1]["Linux"] == count["Linux"] + 1
    assert cost.estimate(more, drift_wf) != before
    daily = copy.deepcopy(matrix_wf)
    daily["on"]["schedule"] = [{"cron": "17 4 * * *"}]
    assert "30.4 matrix runs" in cost.estimate(daily, drift_wf)


@pytest.mark.parametrize(
    "cron,runs", [("17 4 * * 1,4", 2 * 365.25 / 84), ("43 5 * * *", 365.25 / 12)]
)
def test_runs_a_month(cron, runs):
    assert cost.runs_a_month(cron) == pytest.approx(runs)


def test_a_schedule_it_cannot_count_is_said_not_guessed():
    with pytest.raises(ConfigError, match="only `M H \\* \\* DAYS` is estimated"):
        cost.runs_a_month("0 */6 1 * *")
