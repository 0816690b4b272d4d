"""One module per `ggml-patch` command, listed in COMMANDS: HELP (one line for --help),
`add_arguments(parser)` and `run(args, matrix, cache) -> ExitCode`. cli.py adds `--matrix` and
`--cache` to every command; the options several share come from the helpers below. A command
imports its work inside `run()`: cli.py loads every command module to build `--help`, so what
a module imports at its top costs every start-up (tests/unit/test_structure.py holds every
other module to a reason per such import)."""

from __future__ import annotations

import os
from functools import partial
from typing import Optional

from ..untrusted import seconds_arg

COMMANDS = (
    "matrix queue topic export ci-workflow merge-results bundle pr status refresh drift-issue "
    "resolve-refs evidence"
).split()


def repeatable(p, flag: str, help: str, metavar: str = "NAME") -> None:
    p.add_argument(flag, action="append", default=[], metavar=metavar, help=help)


def add_topics(p) -> None:
    repeatable(
        p,
        "--topic",
        "only this topic of the queue and those it follows (repeatable; "
        "default: every active topic)",
    )


def add_no_behaviour(p) -> None:
    p.add_argument(
        "--no-behaviour",
        action="store_true",
        help="do not build and run a topic's test cases on a target where it conflicts or is "
        "already upstream (the check that finds it fixed upstream by its behaviour)",
    )


def add_targets(p) -> None:
    repeatable(p, "--target", "only this target (repeatable)")


def add_results(p, help: str) -> None:
    p.add_argument("--results", default="results", metavar="DIR", help=help)


def add_seconds(p, flag: str, default: Optional[float], help: str, zero: bool = False) -> None:
    p.add_argument(
        flag, type=partial(seconds_arg, zero=zero), default=default, metavar="S", help=help
    )


def add_api_url(p) -> None:
    p.add_argument(
        "--api-url",
        default=os.environ.get("GITHUB_API_URL") or "https://api.github.com",
        metavar="URL",
        help="GitHub REST API base URL (default: $GITHUB_API_URL, which every Actions runner sets, "
        "GitHub Enterprise Server included; else https://api.github.com)",
    )


def shown_request(method: str, url: str, token: str, body: str) -> str:
    """A request as a dry run prints it: never the token, only whether there is one."""
    from ..redact import REDACTED
    from ..upstream.github_api import request_headers  # start-up: --help loads this module

    auth = REDACTED if token else "(GITHUB_TOKEN is not set)"
    headers = "".join(f"{k}: {v}\n" for k, v in request_headers().items())
    return f"{method} {url}\nAuthorization: Bearer {auth}\n{headers}\n{body}"
