"""The daily drift workflow (.github/workflows/ggml-patch-drift.yml): `ggml-patch status` of the
live profile, then `ggml-patch drift-issue`, which opens, updates or closes the one issue.

Two jobs: `status` (read-only: it fetches the targets and runs their code) uploads status.json;
`issue` (the one with `issues: write`) reads only that artifact. Cheap (no build), so it runs
every day; the status job also keeps the git mirrors cache fresh and in use (GitHub evicts a
cache unused for 7 days), which every job fetching git restores: this week's, else the latest,
saved once a week (common.save_mirrors: complete and within the cap).
Scheduled runs happen where the repository variable GGML_PATCH_SCHEDULE is 'true'; on demand
anywhere.
"""

from __future__ import annotations

from typing import Optional

from . import common
from .actions import DEFAULT_PINS, Pins
from .workflow import drift_profile

PATH = ".github/workflows/ggml-patch-drift.yml"
NAME = "ggml-patch drift"
CRON = "43 5 * * *"  # daily, off the hour, after the matrix's 04:17 start

_STATUS = """args=(--profile "$PROFILE" --json)
read -r -a targets <<< "$TARGETS"
for t in "${targets[@]}"; do args+=(--target "$t"); done
""" + common.STATUS.format('"${args[@]}"')
_ISSUE = """if [ "$DRY_RUN" = true ]; then args+=(--dry-run); fi
# a dispatch for some targets or another profile adds to the issue's state, never replaces it
if [ "$PARTIAL" = true ]; then args+=(--partial); fi
"""


def workflow(matrix, pins: Optional[Pins] = None) -> dict:
    pins = pins or DEFAULT_PINS
    profile = drift_profile(matrix)
    on: dict = {"schedule": [{"cron": CRON}]}
    inputs = {
        "profile": ("the matrix.yaml profile whose targets are checked", "string", profile),
        "targets": (
            "only these targets (space-separated; default: every target of the profile)",
            "string",
            "",
        ),
        "dry-run": ("print the issue requests instead of sending them", "boolean", False),
    }
    on["workflow_dispatch"] = {
        "inputs": {
            k: {"description": d, "type": t, "required": False, "default": v}
            for k, (d, t, v) in inputs.items()
        }
    }
    status_env = {
        "PROFILE": f"${{{{ inputs.profile || '{profile}' }}}}",
        "TARGETS": "${{ inputs.targets }}",
    }
    other = f"inputs.profile != '' && inputs.profile != '{profile}'"
    partial = f"${{{{ inputs.targets != '' || ({other}) }}}}"
    # the status fetches the targets and runs their code (the behaviour check): no write token
    steps = [
        *common.first_steps(pins),
        *common.restore_weekly_mirrors(pins),
        *common.status_steps(pins, _STATUS, status_env),
        *common.save_mirrors(pins, "mirrors", "status"),
    ]
    status = common.job("Status of the series (read-only)", 60, steps, env=common.CACHE_ENV)
    issue_env = {"DRY_RUN": "${{ inputs.dry-run }}", "PARTIAL": partial}
    head = {"needs": "status", "if": "${{ !cancelled() && needs.status.result == 'success' }}"}
    issue = common.issue_job("Drift issue", 15, pins, [], issue_env, _ISSUE, **head)
    return {
        "name": NAME,
        "on": on,
        "permissions": {},
        "concurrency": {"group": "ggml-patch-drift", "cancel-in-progress": False},
        "jobs": {"status": common.with_if(status, common.SCHEDULED_GUARD), "issue": issue},
    }


def workflow_yaml(matrix, pins: Optional[Pins] = None) -> str:
    return common.dump(workflow(matrix, pins), pins)
