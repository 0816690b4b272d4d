"""The drift issue's words about data (a status file, results, the state an earlier body holds,
which anyone may have edited): each value either in a code span the tool builds whole (a command
with the value inside: one span, its fence longer than any backtick run in it, so a value can
never close it) or escaped as text (publish.text). Nothing from data becomes a mention, a link
or HTML; the only link is a GitHub Actions run's own URL."""

from __future__ import annotations

import re

from .. import publish
from ..drift.status import CONFLICT, NOT_APPLICABLE, REDERIVE, REFRESH, RESOLVE, RETIRE, THREE_WAY

# a run's page, as the workflows give it (commands/drift_issue.run_url): the only link from data
_RUN_URL = re.compile(r"https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/actions/runs/\d+")


def run_ref(run: str) -> str:
    """A run as the issue shows it: its URL when it is a GitHub Actions run's, else code."""
    if _RUN_URL.fullmatch(run) and publish.allowed_url(run):
        return run
    return publish.code(run, 300)


def _cmd(command: str) -> str:
    return publish.code(command, 600)


def _name(value: str, limit: int = 100) -> str:
    return publish.text(value, limit, start=False)


def target_todo(status: str, profile: str, target: str) -> str:
    """What to do for a target whose series does not apply as it is ("" for none)."""
    if status == CONFLICT:
        where = _cmd(f"<cache>/status/{target}/resolve/")
        status_cmd = _cmd(f"ggml-patch status --profile {profile} --target {target}")
        return (
            f"a patch does not merge: {status_cmd} leaves {where} stopped at it; resolve, "
            f"`git am --continue`, then {_cmd(f'ggml-patch refresh {target}')}"
        )
    if status == THREE_WAY:
        return (
            "the series applies only with a 3-way merge (the code moved near the fix): "
            f"{_cmd(f'ggml-patch refresh {target}')} so it applies as it is"
        )
    if status == NOT_APPLICABLE:
        return (
            "a file the fix changes, or the per-step API it fixes, is gone: "
            f"look at {_name(target)} by hand"
        )
    return ""


def topic_todo(action: str, topic: str, target: str, status: str, base: str) -> str:
    """What to do with a topic on a target (status.topic_action's `action`; "" for none)."""
    name, on = _cmd(topic), _name(target)
    if action == RETIRE:
        applied = _cmd(f"applied_upstream: {base or 'BASE'}")
        return (
            f"{name} is merged upstream on {on} ({_name(status)}): retire it, "
            f"`state: merged-upstream` and {applied} in {_cmd(f'patches/{topic}/topic.yaml')}"
        )
    if action == REFRESH:
        return (
            f"{name} applies to {on} only with a 3-way merge: refresh it, "
            f"{_cmd(f'ggml-patch refresh {target} --topic {topic}')}"
        )
    if action == REDERIVE:
        return (
            f"{name} conflicts on {on} and its own test cases fail there (the bug is still "
            f"there): re-derive its fix for {on}'s code"
        )
    if action == RESOLVE:
        # its cases not checked, or passing but never seen failing without the fix (no killed
        # control in that layout): nothing says upstream fixed it, so never "retire"
        return (
            f"{name} conflicts on {on} and its own test cases cannot tell whether upstream "
            f"fixed it there: resolve the conflict (see {on} above)"
        )
    return ""


def left_out_note(left_out: dict[str, int]) -> list[str]:
    """One line saying what the issue's bounds left out of it, if anything."""
    if not left_out:
        return []
    what = ", ".join(f"{n:,} {k}" for k, n in sorted(left_out.items()))
    return [
        f"**ggml-patch:** {publish.text(what, start=False)} left out of this issue (it stays "
        f"below GitHub's {publish.GITHUB_BODY_MAX:,} characters); `ggml-patch status --json` "
        "and results.json have them all.",
        "",
    ]
