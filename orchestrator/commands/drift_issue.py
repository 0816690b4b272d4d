"""ggml-patch drift-issue: open, update or close the one GitHub issue that reports drift
(`ggml-patch status --json`) and failing default cells (results.json)."""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

from ..errors import ConfigError, ExitCode
from . import add_api_url, add_seconds, shown_request

NEEDS_MATRIX = False  # its inputs are status.json and results.json, never matrix.yaml or the cache
HELP = (
    "open one GitHub issue when a target's series stops applying as it is or a default cell fails, "
    "update it while that lasts, close it when all is clean"
)


def add_arguments(p) -> None:
    p.add_argument(
        "--status", required=True, metavar="FILE", help="the output of `ggml-patch status --json`"
    )
    p.add_argument(
        "--results",
        metavar="DIR",
        help="a matrix run's results (directory or results.json): its failed cells are reported "
        "(default: the failing cells the open issue last recorded)",
    )
    p.add_argument(
        "--repo", required=True, metavar="OWNER/NAME", help="the repository the issue lives in"
    )
    p.add_argument(
        "--bot",
        metavar="LOGIN",
        default="github-actions[bot]",
        help="the account the token writes as: only an issue it wrote (with the tool's label) is "
        "the drift issue (default: github-actions[bot], the workflows' GITHUB_TOKEN)",
    )
    p.add_argument(
        "--proven",
        metavar="FILE",
        help="the record of legs proven on github.com (.github/ggml-patch-proven.yaml): a "
        "failing cell without a proven leg is marked not yet proven on GitHub",
    )
    add_api_url(p)
    add_seconds(p, "--timeout", 30.0, "API timeout in seconds (default: 30)")
    p.add_argument(
        "--partial",
        action="store_true",
        help="the status covers only some targets (or another profile): merge it into the "
        "issue's recorded state instead of replacing it",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the requests and send none (with GITHUB_TOKEN set it reads the issue first; "
        "without, it assumes there is none)",
    )


def run_url(env=os.environ) -> str:
    """This GitHub Actions run's page, when running in one."""
    server, repo, run_id = (
        env.get("GITHUB_SERVER_URL"),
        env.get("GITHUB_REPOSITORY"),
        env.get("GITHUB_RUN_ID"),
    )
    return (
        f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}" if server and repo and run_id else ""
    )


def run(args, matrix, cache) -> ExitCode:
    from .. import untrusted
    from ..ci import drift_issue, proven
    from ..model.results import load_results
    from ..upstream import github
    from ..upstream.github_api import body_json

    repo = github.check_repo(args.repo)
    github.check_api_url(args.api_url)  # an http(s) URL, like `pr`: file:// and the rest exit 2
    token = os.environ.get("GITHUB_TOKEN", "")
    if not args.dry_run and not token:
        raise ConfigError(
            "drift-issue needs GITHUB_TOKEN in the environment (a token that may write issues on "
            f"{repo}); --dry-run sends nothing and needs none"
        )
    if not Path(args.status).exists():
        raise ConfigError(f"{args.status}: no such file ({drift_issue.STATUS_JSON})")
    status = drift_issue.read_status(untrusted.load_json(args.status, "status"), args.status)
    results = None
    if args.results:
        p = Path(args.results)
        loaded = load_results(p / "results.json" if p.is_dir() else p)[0]
        proven_cells = None
        if args.proven:
            proven_cells = proven.cells(proven.load(Path(args.proven)), loaded.profile or "")
        results = drift_issue.read_results(loaded, proven_cells)
    client = drift_issue.IssuesClient(args.api_url, repo, token, args.timeout, args.bot)
    if args.dry_run:
        print(
            "dry run: nothing sent; without --dry-run (and with "
            "GITHUB_TOKEN set) these requests are made"
        )
    # reading changes nothing (a dry run without a token: none)
    found = client.find() if token else None
    action, _ = drift_issue.decide(
        found, status, results, run_url(), _dt.datetime.now(_dt.timezone.utc), args.partial
    )
    if args.dry_run:
        for req in drift_issue.find_requests():
            print(f"GET {client.url(req.path)}  (finds the issue by its marker, every page)")
        print(
            f"found: #{found.number} ({'open' if found.open else 'closed'})"
            if found
            else "found: none"
        )
        print(f"decision: {action.kind}: {action.why}")
        for req in drift_issue.requests_for(action):
            print(
                "\n"
                + shown_request(req.method, client.url(req.path), token, body_json(req.payload)),
                end="",
            )
        return ExitCode.OK
    url = client.carry_out(action) or (found.html_url if found else "")
    where = f"#{action.number}" if action.number else ""
    said = {
        "open": f"opened {url}",
        "update": f"updated {where} {url}".rstrip(),
        "close": f"closed {where} {url}: all clean again".rstrip(),
        "reopen": f"reopened {where} {url}".rstrip(),
        "none": f"nothing to send: {action.why}",
    }[action.kind]
    print(
        f"drift-issue: {said}"
        + (f" ({action.why})" if action.kind in ("open", "update", "reopen") else "")
    )
    return ExitCode.OK
