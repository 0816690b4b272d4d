"""ggml-patch pr: push a bundle's branch to a fork and open the pull request (a dry run by default)."""
from __future__ import annotations

import os
import shlex
from pathlib import Path

from ..errors import ConfigError, ExitCode

HELP = "push a bundle's series to a fork branch and open the pull request (dry run unless --open)"


def add_arguments(p) -> None:
    p.add_argument("--bundle", required=True, metavar="DIR", help="one target's bundle, e.g. results/bundle/ggml")
    p.add_argument("--repo", required=True, metavar="OWNER/NAME", help="the repository to open the pull request on")
    p.add_argument("--head-remote", required=True, metavar="URL",
                   help="your fork's git URL (https uses GITHUB_TOKEN, ssh your ssh keys)")
    p.add_argument("--branch", required=True, metavar="NAME", help="the branch to push to the fork")
    p.add_argument("--base", default="master", metavar="BRANCH", help="the branch to merge into (default: master)")
    p.add_argument("--api-url", default="https://api.github.com", metavar="URL",
                   help="GitHub REST API base URL (default: https://api.github.com)")
    p.add_argument("--head-owner", metavar="NAME",
                   help="the fork's owner for the pull request's head (default: from --head-remote)")
    p.add_argument("--onto", metavar="COMMIT",
                   help="apply the series on this commit of the fork (default: the bundle's upstream commit "
                        "when known, else its snapshot base)")
    p.add_argument("--timeout", type=float, default=30.0, metavar="S", help="API timeout in seconds (default: 30)")
    p.add_argument("--open", action="store_true", help="really push and open the pull request (needs GITHUB_TOKEN)")


def run(args, matrix, cache) -> ExitCode:
    from ..upstream import github
    from ..upstream.bundle import read_bundle

    token = os.environ.get("GITHUB_TOKEN", "")
    if args.open and not token:
        raise ConfigError("--open needs GITHUB_TOKEN in the environment (a token with pull-request write access "
                          f"to {args.repo}); without --open nothing is sent")
    if args.timeout <= 0:
        raise ConfigError(f"--timeout {args.timeout:g}: expected a number of seconds above 0")
    repo = github.check_repo(args.repo)
    branch = github.check_branch(args.branch)
    bundle = read_bundle(Path(args.bundle))
    owner = args.head_owner or github.owner_from_remote(args.head_remote)
    pr = github.PullRequest(repo, bundle.title, bundle.body, f"{owner}:{branch}" if owner else branch, args.base)
    with cache.lock(f"pr-{bundle.target}"):  # one pr per target at a time: they share the work repository
        return _push_and_open(args, cache, bundle, pr, token)


def _push_and_open(args, cache, bundle, pr, token: str) -> ExitCode:
    from ..upstream import github
    from ..cache import slug

    secrets = (token,) if token else ()
    remote, branch = args.head_remote, args.branch
    base = bundle.manifest.get("base") or {}
    snapshot, upstream = base.get("snapshot_commit"), base.get("upstream_commit")
    onto = args.onto or upstream or snapshot
    if not onto or not snapshot:
        raise ConfigError(f"{bundle.path}/manifest.json: no base commit recorded; re-run `ggml-patch bundle`")
    workdir = github.work_repo(cache.root / "pr" / slug(bundle.target), cache.snapshots_git)
    askpass = github.askpass_script(workdir / ".git") if token else None
    notes, local_onto = [], onto
    if not github.has_commit(workdir, onto):
        if args.open:
            github.fetch_commit(workdir, remote, onto, askpass, secrets)
        else:  # a dry run touches no network: check the series on the snapshot, the same tree
            local_onto = snapshot
            notes.append(f"with --open: git fetch {github.redact(remote, secrets)} {onto} "
                         "(the series then goes on that commit)")
    if not upstream and not args.onto:
        notes.append(f"the branch is based on the ggml-patch snapshot {snapshot[:12]}, not an upstream commit: "
                     "GitHub opens the pull request only if the fork shares that history; pass --onto COMMIT")
    br = github.apply_series(workdir, local_onto, bundle.patch_files, upstream=onto == upstream)
    push_cmd = github.redact(shlex.join(github.push_argv(workdir, remote, branch)), secrets)
    url = github.pulls_url(args.api_url, pr.repo)
    if not args.open:
        print("dry run: nothing pushed or sent; add --open (with GITHUB_TOKEN set) to do it")
        print(f"branch: {br.head} = {len(bundle.patch_files)} patches of {bundle.path} applied with git am on "
              f"{local_onto}")
        for n in notes:
            print(f"note: {n}")
        print(f"push: {push_cmd}")
        print(f"POST {url}")
        print(f"Authorization: Bearer {github.REDACTED if token else '(GITHUB_TOKEN is not set)'}")
        for k, v in github.request_headers().items():
            print(f"{k}: {v}")
        print()
        print(github.redact(github.request_json(pr), secrets), end="")
        return ExitCode.OK
    for n in notes:
        print(f"note: {n}")
    print(f"push: {push_cmd}")
    github.push(workdir, remote, branch, askpass, secrets)
    print(f"POST {url}")
    print(f"pull request opened: {github.create_pull_request(args.api_url, pr, token, args.timeout)}")
    return ExitCode.OK
