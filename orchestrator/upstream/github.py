"""Opening the pull request: the branch pushed to a fork, then POST /repos/{owner}/{repo}/pulls.

The token is read from the environment by the caller and only ever travels in the
Authorization header (the API) or through GIT_ASKPASS (git): never in a URL, an argument
list, a file or a message. Every message that could carry a URL goes through `redact`.
"""
from __future__ import annotations

import datetime as _dt
import json
import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import requests

from ..vcs.runner import AM_FLAGS, GitError, git, succeeds
from ..errors import (ConfigError, GitHubAuthFailed, GitHubError, GitHubUnreachable, PullRequestRejected,
                     PushFailed, RateLimited, SeriesDoesNotApply)

REDACTED = "***"
API_VERSION = "2022-11-28"
_URL_USERINFO = re.compile(r"(?i)\b(https?://)[^/\s@]+@")  # https://user:secret@host -> https://***@host
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` without any of `secrets` and without credentials embedded in an http(s) URL."""
    for s in secrets:
        if s:
            text = text.replace(s, REDACTED)
    return _URL_USERINFO.sub(rf"\g<1>{REDACTED}@", text)


def check_repo(repo: str) -> str:
    if not _REPO.match(repo):
        raise ConfigError(f"--repo {repo!r}: expected OWNER/NAME, e.g. ggml-org/llama.cpp")
    return repo


def owner_from_remote(url: str) -> Optional[str]:
    """The fork's owner from its remote URL (https://host/OWNER/NAME(.git), git@host:OWNER/NAME.git);
    None for a local path."""
    m = re.match(r"^[a-z][a-z0-9+.-]*://[^/]+/(?P<owner>[^/]+)/[^/]+?/?$", url, re.I) \
        or re.match(r"^[^/@:\s]+@[^/:\s]+:(?P<owner>[^/]+)/[^/]+$", url)
    return m.group("owner") if m else None


# ---------------------------------------------------------------- the REST call

@dataclass(frozen=True)
class PullRequest:
    repo: str  # OWNER/NAME the pull request is opened against
    title: str
    body: str
    head: str  # "fork-owner:branch", or "branch" for a branch of repo itself
    base: str  # the branch to merge into

    def payload(self) -> dict:
        return {"title": self.title, "body": self.body, "head": self.head, "base": self.base}


def pulls_url(api_url: str, repo: str) -> str:
    return f"{api_url.rstrip('/')}/repos/{repo}/pulls"


def request_json(pr: PullRequest) -> str:
    """The exact bytes POSTed (and shown by a dry run)."""
    return json.dumps(pr.payload(), indent=2, ensure_ascii=False) + "\n"


def request_headers() -> dict[str, str]:
    """Every header but Authorization, which `_Bearer` adds."""
    return {"Accept": "application/vnd.github+json", "X-GitHub-Api-Version": API_VERSION,
            "Content-Type": "application/json; charset=utf-8", "User-Agent": "ggml-patch"}


class _Bearer(requests.auth.AuthBase):
    """Explicit auth, so requests never replaces the header with ~/.netrc credentials."""

    def __init__(self, token: str):
        self.token = token

    def __call__(self, r):
        r.headers["Authorization"] = f"Bearer {self.token}"
        return r


def create_pull_request(api_url: str, pr: PullRequest, token: str, timeout: float) -> str:
    """Open the pull request; its html_url. Each failure is its own error class and exit code."""
    url = pulls_url(api_url, pr.repo)
    try:
        resp = requests.post(url, data=request_json(pr).encode("utf-8"), headers=request_headers(),
                             auth=_Bearer(token), timeout=timeout, allow_redirects=False)
    except requests.Timeout:
        raise GitHubUnreachable(redact(f"{api_url}: no answer within {timeout:g} s (timed out); "
                                       "check --api-url and the network, then retry", (token,))) from None
    except requests.ConnectionError as e:
        why = "connection refused" if "refused" in str(e).lower() else "cannot connect"
        raise GitHubUnreachable(redact(f"{api_url}: {why}; check --api-url and the network, then retry",
                                       (token,))) from None
    except requests.RequestException as e:
        raise GitHubUnreachable(redact(f"{api_url}: {type(e).__name__}; check --api-url", (token,))) from None
    return answer(resp.status_code, resp.headers, resp.text, pr, url, token)


def _message(text: str) -> str:
    """GitHub's own words: "message", then each errors[].message."""
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:200]
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message", ""))]
    for err in data.get("errors") or []:
        if isinstance(err, dict) and (err.get("message") or err.get("code")):
            parts.append(str(err.get("message") or f"{err.get('field', '')} {err.get('code')}".strip()))
        elif isinstance(err, str):
            parts.append(err)
    return ": ".join(" ".join(p.split()) for p in parts if p)[:400]


def answer(status: int, headers, text: str, pr: PullRequest, url: str, token: str,
           now: Callable[[], float] = time.time) -> str:
    """An API answer -> the pull request's URL, or the error the user can act on."""
    msg = redact(_message(text), (token,))
    if status == 201:
        try:
            html = json.loads(text).get("html_url")
        except (ValueError, AttributeError):
            html = None
        if not html:
            raise GitHubError(f"{url}: 201 Created but no html_url in the answer")
        return redact(html, (token,))
    if status == 401:
        raise GitHubAuthFailed(f"GitHub rejected GITHUB_TOKEN (401 {msg or 'Unauthorized'}): use a valid token "
                               f"with pull-request write access to {pr.repo}")
    if status in (403, 429) and (headers.get("X-RateLimit-Remaining") == "0" or headers.get("Retry-After")):
        raise RateLimited(f"GitHub API rate limit exceeded ({status} {msg or 'rate limited'}): "
                          f"{_retry_when(headers, now())}")
    if status == 403:
        raise GitHubAuthFailed(f"GitHub refused the request (403 {msg or 'Forbidden'}): the token lacks "
                               f"permission to open pull requests on {pr.repo}")
    if status == 422:
        raise PullRequestRejected(f"GitHub refused the pull request {pr.head} -> {pr.repo}:{pr.base} "
                                  f"(422 {msg or 'Unprocessable Entity'})")
    if status == 404:
        raise GitHubError(f"{url}: 404 {msg or 'Not Found'}: {pr.repo} does not exist or the token cannot see it")
    raise GitHubError(f"{url}: unexpected answer {status} {msg}".rstrip())


def _retry_when(headers, now: float) -> str:
    reset = headers.get("X-RateLimit-Reset")
    if reset and reset.strip().isdigit():
        at = int(reset)
        when = _dt.datetime.fromtimestamp(at, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"retry after {when} (in {max(0, at - int(now))} s; X-RateLimit-Reset {at})"
    after = headers.get("Retry-After")
    if after and after.strip().isdigit():
        return f"retry in {int(after)} s (Retry-After)"
    return "retry later"


# ---------------------------------------------------------------- the branch on the fork

NETWORK_TIMEOUT_S = 600  # a push or fetch that takes longer has stalled


def git_env(askpass: Optional[Path]) -> dict[str, str]:
    """Added to the runner's isolated environment (no user or system git configuration, no
    prompt): no SSH_ASKPASS (git falls back to it for credentials); the token only through
    GIT_ASKPASS, which reads it from the environment."""
    env = {"SSH_ASKPASS": ""}
    if askpass:
        env["GIT_ASKPASS"] = str(askpass)
    return env


_ASKPASS = """#!/bin/sh
# git asks for a user name, then a password: GitHub takes any user name with the token as password
case "$1" in
  Username*) echo x-access-token ;;
  *) printf '%s\\n' "$GITHUB_TOKEN" ;;
esac
"""


def askpass_script(directory: Path) -> Path:
    """A GIT_ASKPASS helper holding no secret: it prints $GITHUB_TOKEN when git asks."""
    path = directory / "askpass.sh"
    if not path.exists() or path.read_text() != _ASKPASS:
        path.write_text(_ASKPASS)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@dataclass
class Branch:
    workdir: Path
    head: str
    onto: str  # the commit the series was applied on
    onto_is_upstream: bool


def work_repo(path: Path, snapshots_git: Path) -> Path:
    """A repository of its own (so a shallow fetch never touches the snapshot repository) that
    borrows the snapshots' objects through alternates: no copy of the source tree's history."""
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        try:
            git("init", "-q", cwd=path)
        except GitError as e:
            raise PushFailed(f"{path}: git init failed: {e.line}") from None
    alternates = path / ".git" / "objects" / "info" / "alternates"
    alternates.parent.mkdir(parents=True, exist_ok=True)
    alternates.write_text(str(Path(snapshots_git).resolve() / "objects") + "\n")
    return path


def has_commit(workdir: Path, commit: str) -> bool:
    return succeeds("cat-file", "-e", "--end-of-options", f"{commit}^{{commit}}", cwd=workdir)


def fetch_commit(workdir: Path, remote: str, commit: str, askpass: Optional[Path], secrets: tuple[str, ...]) -> None:
    try:
        git("fetch", "-q", "--no-tags", "--depth=1", "--end-of-options", remote, commit, cwd=workdir,
            env=git_env(askpass), timeout=NETWORK_TIMEOUT_S)
    except GitError as e:
        if e.timed_out:
            raise PushFailed(redact(f"git fetch from {remote} {e.line}; check the network and retry", secrets)) from None
        raise PushFailed(redact(f"the fork {remote} does not have commit {commit[:12]}, the upstream base of this "
                                f"bundle ({e.line}): sync the fork with upstream, or pass --onto "
                                "a commit of the fork with the same tree", secrets)) from None


def apply_series(workdir: Path, onto: str, patches: tuple[Path, ...], upstream: bool) -> Branch:
    """The bundle's series applied with git am on `onto`, in the work repository."""
    try:
        git("am", "--abort", cwd=workdir)  # whatever an interrupted run left
    except GitError:
        pass  # none in progress: the normal case
    try:
        # a commit id first: `git checkout` has no --end-of-options, and `onto` may come from --onto
        commit = git("rev-parse", "--verify", "--end-of-options", f"{onto}^{{commit}}", cwd=workdir)
        git("checkout", "-q", "--force", "--detach", commit, "--", cwd=workdir)
        git("clean", "-fdxq", cwd=workdir)
    except GitError as e:
        raise PushFailed(f"{workdir}: git {e.command} {onto[:12]} failed: {e.line}") from None
    try:
        git("am", "-q", *AM_FLAGS, "--", *map(str, patches), cwd=workdir)
    except GitError as e:
        try:
            git("am", "--abort", cwd=workdir)
        except GitError:
            pass  # am stopped before creating its state
        raise SeriesDoesNotApply(f"the bundle's series does not apply with git am on {onto[:12]}: {e.line}") from None
    return Branch(workdir, git("rev-parse", "HEAD", cwd=workdir), onto, upstream)


def push_args(remote: str, branch: str) -> list[str]:
    return ["push", "--end-of-options", remote, f"HEAD:refs/heads/{branch}"]


def push_argv(workdir: Path, remote: str, branch: str) -> list[str]:
    """The push as a command line a person can run (what `pr` prints)."""
    return ["git", "-C", str(workdir), *push_args(remote, branch)]


def push(workdir: Path, remote: str, branch: str, askpass: Optional[Path], secrets: tuple[str, ...]) -> None:
    try:
        git(*push_args(remote, branch), cwd=workdir, env=git_env(askpass), timeout=NETWORK_TIMEOUT_S)
    except GitError as e:
        if e.timed_out:
            raise PushFailed(redact(f"git push to {remote} {e.line}", secrets)) from None
        hint = ("; the branch exists on the fork with other commits: pick another --branch"
                if "[rejected]" in e.stderr or "non-fast-forward" in e.stderr else "")
        raise PushFailed(redact(f"git push to {remote} failed: {e.line}{hint}", secrets)) from None


def check_branch(name: str) -> str:
    if name.startswith("-") or not succeeds("check-ref-format", "--branch", name):
        raise ConfigError(f"--branch {name!r}: not a valid git branch name")
    return name
