"""ggml-patch pr: push a bundle's branch to a fork and
open the pull request (a dry run by default)."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import BundleRefused, ConfigError, ExitCode, SubmissionNotAutomated
from ..redact import shell_line
from . import add_api_url, add_seconds, shown_request

HELP = (
    "push a bundle's series to a fork branch and open the pull request (dry "
    "run unless --open); where the target's policy says submit manual or "
    "none, --open prints the steps instead (exit 27)"
)


def add_arguments(p) -> None:
    p.add_argument(
        "--bundle",
        required=True,
        metavar="DIR",
        help="one target's bundle, e.g. results/bundle/ggml",
    )
    p.add_argument(
        "--repo",
        required=True,
        metavar="OWNER/NAME",
        help="the repository to open the pull request on",
    )
    p.add_argument(
        "--head-remote",
        required=True,
        metavar="URL",
        help="your fork's git URL (https uses GITHUB_TOKEN, ssh your ssh keys)",
    )
    p.add_argument("--branch", required=True, metavar="NAME", help="the branch to push to the fork")
    p.add_argument(
        "--base",
        default="master",
        metavar="BRANCH",
        help="the branch to merge into (default: master)",
    )
    add_api_url(p)
    p.add_argument(
        "--head-owner",
        metavar="NAME",
        help="the fork's owner for the pull request's head (default: from --head-remote)",
    )
    p.add_argument(
        "--onto",
        metavar="COMMIT",
        help="apply the series on this commit of the fork (default: the bundle's upstream commit "
        "when known, else its snapshot base)",
    )
    add_seconds(
        p,
        "--timeout",
        30.0,
        "bound on the whole API request: connect, each read and "
        "the total, in seconds (default: 30)",
    )
    add_seconds(
        p,
        "--git-timeout",
        600.0,
        "bound on git fetch and git push to the fork, in seconds (default: 600)",
    )
    p.add_argument(
        "--open",
        action="store_true",
        help="really push and open the pull request (needs GITHUB_TOKEN)",
    )


def run(args, matrix, cache) -> ExitCode:
    from ..upstream import github, submission
    from ..upstream.bundle import read_bundle

    # every argument and the whole bundle are checked before anything is touched (all untrusted; the
    # timeouts by argparse)
    repo = github.check_repo(args.repo)
    branch = github.check_branch(args.branch)
    github.check_branch(args.base, "--base")
    github.check_remote(args.head_remote)
    github.check_api_url(args.api_url)
    if args.onto:
        github.check_commit(args.onto, "--onto")
    owner = (
        github.check_owner(args.head_owner)
        if args.head_owner
        else github.owner_from_remote(args.head_remote)
    )
    bundle = read_bundle(Path(args.bundle))
    policy = submission.policy_of(bundle.manifest, f"{bundle.path}/manifest.json")
    mode = str(policy.submit.value or "manual")
    # the target's own rules first: nothing is pushed or
    # sent where they say a person submits, or nobody
    if mode == "none":
        print("\n".join(submission.no_pull_request(policy, bundle.target)))
        raise SubmissionNotAutomated(
            f"{bundle.target}: submit is none ({submission.role_of(policy).text}): "
            "no pull request from this bundle"
        )
    if args.open and mode == "manual":
        # the steps to submit by hand: nothing touches the network
        with cache.lock(f"pr-{bundle.target}"):
            onto, workdir = _onto_and_workdir(args, cache, bundle)
            steps = submission.manual_steps(
                policy,
                repo=repo,
                branch=branch,
                base=args.base,
                remote=args.head_remote,
                api_url=args.api_url,
                patches=bundle.patch_files,
                bundle=bundle.path,
                workdir=str(workdir),
                onto=onto,
                fetch=not github.has_commit(workdir, onto),
                owner=owner,
            )
            print("\n".join(steps))
        raise SubmissionNotAutomated(
            f"{bundle.target}: submit is manual: open the pull request yourself "
            "(the steps are above); nothing was pushed or sent"
        )
    if bundle.manifest.draft:
        reasons = bundle.manifest.draft_reasons
        raise BundleRefused(
            f"{bundle.path} is a draft ({'; '.join(reasons[:3])}"
            + (f"; {len(reasons) - 3} more" if len(reasons) > 3 else "")
            + "): write patches/cover.md, fix what READINESS.md fails, re-run `ggml-patch bundle`"
        )
    declared = policy.repo.value
    if mode == "api" and declared and declared != repo:
        raise ConfigError(
            f"--repo {repo}: this target is submitted through the API only to {declared}, "
            "the fork matrix.yaml declares as upstream.repo"
        )
    token = os.environ.get("GITHUB_TOKEN", "")
    if args.open and not token:
        raise ConfigError(
            "--open needs GITHUB_TOKEN in the environment (a token with pull-request write access "
            f"to {args.repo}); without --open nothing is sent"
        )
    pr = github.PullRequest(
        repo, bundle.title, bundle.body, f"{owner}:{branch}" if owner else branch, args.base
    )
    # one pr per target at a time: they share the work repository
    with cache.lock(f"pr-{bundle.target}"):
        return _push_and_open(args, cache, bundle, pr, token)


def _onto_and_workdir(args, cache, bundle, snapshot_too: bool = False):
    """The commit the series goes on (--onto, the upstream
    commit, the snapshot) and the work repository."""
    from ..cache import slug  # start-up: as every command module, imported when run
    from ..upstream import github

    base = bundle.manifest.base
    onto = args.onto or base.upstream_commit or base.snapshot_commit
    if not onto or (snapshot_too and not base.snapshot_commit):
        raise ConfigError(
            f"{bundle.path}/manifest.json: no base commit recorded; re-run `ggml-patch bundle`"
        )
    return onto, github.work_repo(cache.root / "pr" / slug(bundle.target), cache.snapshots_git)


def _push_and_open(args, cache, bundle, pr, token: str) -> ExitCode:
    from ..upstream import github
    from ..upstream.github_api import body_json

    secrets = (token,) if token else ()
    remote, branch = args.head_remote, args.branch

    def say(
        line: str, end: str = "\n"
    ) -> None:  # everything printed goes through the one redaction
        print(github.redact(line, secrets), end=end)

    snapshot, upstream = bundle.manifest.base.snapshot_commit, bundle.manifest.base.upstream_commit
    onto, workdir = _onto_and_workdir(args, cache, bundle, snapshot_too=True)
    askpass = (
        github.askpass_script(workdir / ".git", github.token_host(args.api_url)) if token else None
    )
    notes, local_onto = [], onto
    if not github.has_commit(workdir, onto):
        if args.open:
            github.fetch_commit(workdir, remote, onto, askpass, secrets, timeout=args.git_timeout)
        else:  # a dry run touches no network: check the series on the snapshot, the same tree
            local_onto = snapshot
            notes.append(
                f"with --open: git fetch {remote} {onto} (the series then goes on that commit)"
            )
    if not upstream and not args.onto:
        notes.append(
            f"the branch is based on the ggml-patch snapshot {snapshot[:12]}, not "
            "an upstream commit: GitHub opens the pull request only if the fork "
            "shares that history; pass --onto COMMIT"
        )
    br = github.series_branch(workdir, local_onto, bundle.patch_files)
    # each word redacted before quoting: a quoted password (one with "'") is no longer a URL
    push_argv = github.push_argv(workdir, remote, branch)
    push_cmd = shell_line(push_argv, secrets)
    url = github.pulls_url(args.api_url, pr.repo)
    if not args.open:
        say("dry run: nothing pushed or sent; add --open (with GITHUB_TOKEN set) to do it")
        say(
            f"branch: {br.head} = {len(bundle.patch_files)} patches of "
            f"{bundle.path} applied with git am on {local_onto}"
        )
    for n in notes:
        say(f"note: {n}")
    say(f"push: {push_cmd}")
    if not args.open:
        say(shown_request("POST", url, token, body_json(pr.payload())), end="")
        return ExitCode.OK
    github.push(workdir, remote, branch, askpass, secrets, timeout=args.git_timeout)
    say(f"POST {url}")
    say(f"pull request opened: {github.create_pull_request(args.api_url, pr, token, args.timeout)}")
    return ExitCode.OK
