"""ggml-patch status: one table of where the series stands on
every target of a profile. Builds nothing."""

from __future__ import annotations

import json
import sys

from ..errors import ExitCode
from . import add_no_behaviour, add_targets, add_topics

HELP = (
    "where the series applies: cleanly, with a 3-way merge, in conflict, already upstream, "
    "fixed upstream (behaviour), not applicable"
)

_STYLE = {
    "applies cleanly": "green",
    "applies with 3-way merge": "yellow",
    "conflict": "bold red",
    "already upstream": "cyan",
    "fixed upstream (behaviour)": "cyan",
    "not applicable": "dim",
    "source unreachable": "magenta",
    "source unavailable": "magenta",
}


def add_arguments(p) -> None:
    p.add_argument("--profile", default="default", help="matrix.yaml profile (default: default)")
    add_targets(p)
    add_topics(p)
    add_no_behaviour(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")


def run(args, matrix, cache) -> ExitCode:
    from ..drift.check import status_of_targets, target_names
    from ..drift.status import StatusReport, exit_code
    from ..redact import redact_data

    names = target_names(matrix, args.profile, args.target)
    topics = list(args.topic or [])
    rows = status_of_targets(matrix, cache, names, topics, behaviour=not args.no_behaviour)
    if args.json:
        # what was found, as found
        report = StatusReport.model_construct(profile=args.profile, targets=rows)
        print(json.dumps(redact_data(report.to_json()), indent=2))
    else:
        print_table(rows, args.profile)
    return exit_code(rows)


def print_table(rows, profile: str) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..progress import safe  # no secret, no rich markup of the value's own

    console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
    table = Table(title=f"ggml-patch status (profile {profile})", title_justify="left")
    for col in ("target", "layout", "source", "base", "status", "detail"):
        table.add_column(col, overflow="fold")
    for r in rows:
        status = f"[{_STYLE.get(r.status, '')}]{r.status}[/]"
        source, base = safe(r.source.description or r.source.kind), (r.base or "")[:12]
        table.add_row(r.target, r.layout, source, base, status, safe(r.detail))
    console.print(table)
    for r in rows:
        c = r.conflict
        if not c:
            continue
        lines = ", ".join(f"{a}-{b}" for a, b in c.lines) or "no conflict markers"
        why = f"; {safe(c.reason)}" if c.reason else ""
        action = "kept from an earlier run" if c.kept else "left for resolution"
        todo = (
            f"resolve, `git add`, `git am --continue` there, then `ggml-patch refresh {r.target}`"
        )
        if c.stale:  # made for another base or queue: what to do is to discard it
            action, todo = "STALE, kept from an earlier run", safe(c.stale)
        console.print(
            f"{r.target}: conflict in {c.file or '?'} ({safe(c.hunk)}; lines {lines}){why}\n  "
            f"worktree {action}: {c.worktree}\n  {todo}",
            soft_wrap=True,
        )
    for r in rows:
        checked = {name: on for name, on in r.topics.items() if on.behaviour is not None}
        if not checked:
            continue
        console.print(
            f"{r.target}: the topics' own test cases on the target as it is", soft_wrap=True
        )
        for name, on in checked.items():
            style = _STYLE.get(on.status, "")
            console.print(f"  {name}: [{style}]{on.status}[/]: {safe(on.detail)}", soft_wrap=True)
