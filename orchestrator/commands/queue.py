"""ggml-patch queue: the topics of the patch queue, their lifecycle, where each stands on every
target (as `ggml-patch status` finds it) and the last verdict per cell in results.json."""

from __future__ import annotations

import json
import sys

from ..errors import ExitCode
from . import add_no_behaviour, add_results, add_targets

HELP = "the patch queue: each topic's state, per-target status and last verdicts"


def add_arguments(p) -> None:
    p.add_argument("--profile", default="default", help="matrix.yaml profile (default: default)")
    add_targets(p)
    add_results(p, "the results folder whose results.json gives the last verdicts")
    add_no_behaviour(p)
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")


def run(args, matrix, cache) -> ExitCode:
    from pathlib import Path

    from ..drift.check import target_names
    from ..drift.topics import queue_report
    from ..redact import redact_data

    names = target_names(matrix, args.profile, args.target)
    report = queue_report(
        matrix, cache, names, args.profile, Path(args.results), not args.no_behaviour
    )
    if args.json:
        print(json.dumps(redact_data(report.to_json()), indent=2))
    else:
        print_table(report, names)
    return ExitCode.OK


def print_table(report, targets: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    from ..progress import safe  # no secret, no rich markup of the value's own

    console = Console(width=None if sys.stdout.isatty() else 160, highlight=False)
    title = f"ggml-patch queue (profile {report.profile})"
    table = Table(title=title, title_justify="left")
    for col in ("topic", "state", "summary", *targets, "last verdicts"):
        table.add_column(col, overflow="fold")
    for row in report.topics:
        where = []
        for t in targets:
            on = row.targets.get(t)
            where.append(safe(on.status) if on else "")
        verdicts = ", ".join(f"{c}: {v}" for c, v in row.last_verdicts.items()) or "-"
        table.add_row(row.topic, row.state, safe(row.summary), *where, safe(verdicts))
    console.print(table)
    for row in report.topics:
        for t in targets:
            on = row.targets.get(t)
            if on is not None and on.behaviour is not None:
                console.print(
                    f"{row.topic} on {t}: {safe(on.status)}: {safe(on.detail)}", soft_wrap=True
                )
    if report.results is None:
        console.print("no results.json: run `ggml-patch matrix` for the verdicts")
