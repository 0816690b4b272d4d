"""README's cost estimate, computed from the generated workflows: their legs (each backend's
typical minutes, `ci_minutes` in its module), their jobs' timeouts (the worst case: every job
billed to its timeout) and their schedules (runs a month). tests/integration/test_workflow.py
recomputes it from the committed workflows and finds it in README.md, between BEGIN and END.

Estimates, not measurements on github.com: GitHub bills each job in whole minutes, macOS minutes
10x on private repositories' free minutes; self-hosted legs are not billed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from .. import backends
from ..errors import ConfigError

BEGIN = "<!-- ci-cost: computed by orchestrator/ci/cost.py from the generated workflows -->"
END = "<!-- /ci-cost -->"
# the jobs other than the legs: typical billed minutes (install the tool, then little work)
JOB_MINUTES = {
    "plan": (1, 1),
    "aggregate": (5, 10),  # merges, the bundle's build (ccache hits)
    "status": (1, 5),  # fetches every live target (incremental with the mirrors)
    "report": (1, 1),
    "issue": (1, 1),
}
GIT_FETCH_MINUTES = (2, 4)  # a leg of a git target fetches it (the mirrors make it incremental)
RUNS_A_MONTH_PER_WEEKDAY = 365.25 / 7 / 12


@dataclass
class Minutes:
    low: float = 0
    high: float = 0
    worst: float = 0

    def add(self, typical: tuple[float, float], timeout: float, times: float = 1) -> None:
        self.low += typical[0] * times
        self.high += typical[1] * times
        self.worst += timeout * times


def runs_a_month(cron: str) -> float:
    """Runs a month of a `minute hour * * days` schedule (days: `*` or a list of weekdays)."""
    fields = cron.split()
    if len(fields) != 5 or fields[2:4] != ["*", "*"] or "," in fields[0] + fields[1]:
        raise ConfigError(f"cron {cron!r}: only `M H * * DAYS` is estimated")
    days = 7 if fields[4] == "*" else len(fields[4].split(","))
    return days * RUNS_A_MONTH_PER_WEEKDAY


def _os(runs_on: Any) -> str:
    label = runs_on if isinstance(runs_on, str) else runs_on[0]
    return "macOS" if label.startswith("macos-") else "Linux"


def per_run(matrix_wf: dict) -> tuple[dict[str, Minutes], dict[str, int]]:
    """Billed minutes of one matrix run by runner OS, and its legs by OS."""
    by_os: dict[str, Minutes] = {"Linux": Minutes(), "macOS": Minutes()}
    legs = {"Linux": 0, "macOS": 0}
    for name, job in matrix_wf["jobs"].items():
        timeout = job["timeout-minutes"]
        if name != "cell":
            by_os["Linux"].add(JOB_MINUTES[name], timeout)
            continue
        for leg in job["strategy"]["matrix"]["include"]:
            low, high = backends.get(leg["backend"]).ci_minutes
            if leg["git"]:
                low, high = low + GIT_FETCH_MINUTES[0], high + GIT_FETCH_MINUTES[1]
            os_ = _os(leg["runs-on"])
            by_os[os_].add((low, high), timeout)
            legs[os_] += 1
    return by_os, legs


def _range(m: Minutes, times: float = 1) -> str:
    return f"{round(m.low * times):,}-{round(m.high * times):,}"


def load(text: str) -> dict:
    """A workflow's YAML as GitHub reads it (PyYAML reads the bare key `on` as True)."""
    data = yaml.safe_load(text)
    if True in data:
        data["on"] = data.pop(True)
    return data


def estimate(matrix_wf: dict, drift_wf: dict) -> str:
    """The README paragraph (Markdown, one line per sentence), BEGIN and END around it."""
    by_os, legs = per_run(matrix_wf)
    matrix_runs = sum(runs_a_month(s["cron"]) for s in matrix_wf["on"]["schedule"])
    drift_runs = sum(runs_a_month(s["cron"]) for s in drift_wf["on"]["schedule"])
    drift = Minutes()
    for name, job in drift_wf["jobs"].items():
        drift.add(JOB_MINUTES[name], job["timeout-minutes"])
    linux, mac = by_os["Linux"], by_os["macOS"]
    lines = [
        BEGIN,
        f"Per matrix run ({legs['Linux']} Linux and {legs['macOS']} macOS legs, and "
        f"{len(matrix_wf['jobs']) - 1} other jobs): about {_range(linux)} Linux and "
        f"{_range(mac)} macOS minutes; at most {round(linux.worst):,} Linux and "
        f"{round(mac.worst):,} macOS minutes (every job billed to its timeout).",
        f"Per drift run: about {_range(drift)} Linux minutes (at most {round(drift.worst):,}).",
        f"A month of schedules ({matrix_runs:.1f} matrix runs, {drift_runs:.1f} drift runs): "
        f"about {_range(linux, matrix_runs)} Linux and {_range(mac, matrix_runs)} macOS minutes "
        f"for the matrix, {_range(drift, drift_runs)} Linux minutes for the drift workflow.",
        END,
    ]
    return "\n".join(lines) + "\n"
