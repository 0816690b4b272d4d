"""The daily drift workflow (.github/workflows/ggml-patch-drift.yml): `ggml-patch status` of the
live profile, then `ggml-patch drift-issue`, which opens, updates or closes the one issue.

Cheap (no build), so it runs every day; it also keeps the git mirrors cache fresh and in use
(GitHub evicts a cache unused for 7 days), which every job fetching git restores. It restores only
this week's exact key (a job that writes issues reads no cache another job could have planted):
the first run of a week fetches whole histories once.
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
    # one entry a week, restored and used every day: an incremental fetch, never evicted
    week = common.MIRRORS_WEEK_KEY
    status_env = {
        "PROFILE": f"${{{{ inputs.profile || '{profile}' }}}}",
        "TARGETS": "${{ inputs.targets }}",
    }
    kept = {"if-no-files-found": "warn", "retention-days": 14}
    other = f"inputs.profile != '' && inputs.profile != '{profile}'"
    partial = f"${{{{ inputs.targets != '' || ({other}) }}}}"
    steps = [
        common.WEEK_STEP,
        common.cache_step("Git mirrors", common.MIRRORS_PATH, week, pins, action="cache"),
        {"name": "Status", "env": status_env, "run": _STATUS},
        common.upload_step(
            "the status", "${{ !cancelled() }}", "ggml-patch-status", "status.json", pins, **kept
        ),
    ]
    issue_env = {"DRY_RUN": "${{ inputs.dry-run }}", "PARTIAL": partial}
    job = common.issue_job("Drift of the series", 60, pins, steps, issue_env, _ISSUE)
    return {
        "name": NAME,
        "on": on,
        "permissions": {},
        "concurrency": {"group": "ggml-patch-drift", "cancel-in-progress": False},
        "jobs": {"drift": common.with_if(job, common.SCHEDULED_GUARD)},
    }


def workflow_yaml(matrix, pins: Optional[Pins] = None) -> str:
    return common.dump(workflow(matrix, pins), pins)
