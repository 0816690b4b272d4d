"""The daily drift workflow (.github/workflows/ggml-patch-drift.yml): `ggml-patch status` of the
live profile, then `ggml-patch drift-issue`, which opens, updates or closes the one issue.

Cheap (no build), so it runs every day; it also keeps the git mirrors cache fresh and in use
(GitHub evicts a cache unused for 7 days), which every job fetching git restores.
Scheduled runs happen only in matrix.yaml's `ci.repository`; without one, on demand only.
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
    on: dict = {"schedule": [{"cron": CRON}]} if matrix.ci_repository else {}
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
    week = common.MIRRORS_KEY + "${{ steps.week.outputs.week }}"
    status_env = {
        "PROFILE": f"${{{{ inputs.profile || '{profile}' }}}}",
        "TARGETS": "${{ inputs.targets }}",
    }
    kept = {"if-no-files-found": "warn", "retention-days": 14}
    partial = f"${{{{ inputs.targets != '' || (inputs.profile != '' && inputs.profile != '{profile}') }}}}"
    steps = [
        {
            "name": "This week",
            "id": "week",
            "run": 'echo "week=$(date -u +%G-W%V)" >> "$GITHUB_OUTPUT"\n',
        },
        common.cache_step(
            "Git mirrors", common.MIRRORS_PATH, week, pins, common.MIRRORS_KEY, action="cache"
        ),
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
        "jobs": {"drift": common.with_if(job, common.owner_only(matrix))},
    }


def workflow_yaml(matrix, pins: Optional[Pins] = None) -> str:
    return common.dump(workflow(matrix, pins), pins)
