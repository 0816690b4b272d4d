"""The project's own CI (.github/workflows/ggml-patch-ci.yml), on every push and pull request that
touches the tool: the fast tests, the generated workflows current (`ci-workflow --check`),
actionlint with shellcheck, zizmor, ruff and mypy. Everything comes from the `test` and `lint`
extras, installed once.
"""

from __future__ import annotations

from typing import Optional

from . import common
from .actions import DEFAULT_PINS, Pins

PATH = ".github/workflows/ggml-patch-ci.yml"
NAME = "ggml-patch CI"
DEFAULT_BRANCH = "main"
CONCURRENCY = "ggml-patch-ci-${{ github.head_ref && github.ref || github.run_id }}"
PATHS = [
    "orchestrator/**",
    "patches/**",
    "native_tests/**",
    "matrix.yaml",
    "tests/**",
    "noxfile.py",
    "pyproject.toml",
    "constraints.txt",  # the exact tree CI installs: a bump of it alone must be tested
    ".github/**",
]
# the fast tiers (tests/unit, tests/integration: offline); tests/e2e builds real ggml for minutes
FAST_TESTS = 'python -m pytest -m "unit or integration" -ra\n'
# requires-python's lowest version and the newest one checked: constraints.txt must install on
# both (its markers), and the fast tiers pass (3.10's fromisoformat, say, reads no `Z`)
OLDEST_PYTHON = "3.10"
NEWEST_PYTHON = "3.13"  # the newest this project has run its tiers on (3.13.0)
# as in noxfile.py's lint session
# what noxfile.py's lint session checks (LINTED there)
LINTED = "orchestrator tests benchmarks noxfile.py"
LINT = f"ruff check {LINTED}\nmypy\nruff format --check {LINTED}\n"
# zizmor refuses an empty token: without one (the job run in act, offline) only its offline audits
ZIZMOR = (
    'if [ -n "$GH_TOKEN" ]; then zizmor --format github .github\n'
    "else unset GH_TOKEN GITHUB_TOKEN; zizmor --offline --format github .github\n"
    "fi\n"
)


def workflow(matrix, pins: Optional[Pins] = None) -> dict:
    pins = pins or DEFAULT_PINS
    always = "${{ !cancelled() }}"  # each check reports, whatever the one before it did
    steps = [
        *common.first_steps(pins, extra="test,lint"),
        {"name": "Fast tests", "run": FAST_TESTS},
        {"name": "Lint (nox -s lint's commands)", "if": always, "run": LINT},
        # the installed `ggml-patch` (pip built and installed a wheel, not an editable install):
        # what the tool reads of itself must ship in it (tests/integration/test_wheel.py)
        {
            "name": "The generated workflows are current",
            "if": always,
            "run": "ggml-patch ci-workflow --check\n",
        },
        {"name": "actionlint (with shellcheck)", "if": always, "run": "actionlint\n"},
        # online audits too (impostor commits, the version comment of each pin), with the job's
        # own token
        {"name": "zizmor", "if": always, "env": {"GH_TOKEN": "${{ github.token }}"}, "run": ZIZMOR},
    ]
    python = "${{ matrix.python }}"
    versions = [
        *common.first_steps(pins, extra="test,plot,lint", python=python),
        {"name": "Fast tests", "run": FAST_TESTS},
    ]
    strategy = {"fail-fast": False, "matrix": {"python": [OLDEST_PYTHON, NEWEST_PYTHON]}}
    return {
        "name": NAME,
        # one run per change: a branch's pushes are tested by its pull request, main's by push
        "on": {
            "push": {"branches": [DEFAULT_BRANCH], "paths": PATHS},
            "pull_request": {"paths": PATHS},
        },
        "permissions": {},
        # a pull request's newer push cancels its older run; a run on main is never cancelled
        # (each has its own group: head_ref is empty there)
        "concurrency": {"group": CONCURRENCY, "cancel-in-progress": True},
        "jobs": {
            "checks": common.job("Tests and workflow checks", 30, steps),
            "pythons": common.job(
                f"Install and fast tests on Python {python}", 30, versions, strategy=strategy
            ),
        },
    }


def workflow_yaml(matrix, pins: Optional[Pins] = None) -> str:
    return common.dump(workflow(matrix, pins), pins)
