"""Opening the pull request: the branch pushed to a fork, then POST /repos/{owner}/{repo}/pulls. The
token travels only in the Authorization header (the API) or through GIT_ASKPASS (git): never in a
URL, an argument list, a file or a message. Every message that could carry a URL goes through
`redact`."""

from __future__ import annotations

import re
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urlsplit

from ..errors import ConfigError, GitHubError, PushFailed, SeriesDoesNotApply
from ..redact import redact
from ..urls import FULL_SHA, git_url_problem, http_url_problem, login_problem
from ..vcs import workrepo
from ..vcs.runner import GitError
from .github_api import Answer, Wording, raise_for_answer, send
from .submission import web_url

_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def _checked(option: str, value: str, why: Optional[str]) -> str:
    if why:
        raise ConfigError(f"{option} {value!r}: {why}")
    return value


def check_repo(repo: str) -> str:
    ok = _REPO.match(repo) and not repo.startswith("-")
    return _checked("--repo", repo, None if ok else "expected OWNER/NAME, e.g. ggml-org/llama.cpp")


def check_remote(url: str) -> str:
    """--head-remote: a git URL or path, never an option or a transport helper."""
    why = git_url_problem(url)
    expected = "expected a git URL (https://, ssh://, git@host:path) or a path"
    return _checked("--head-remote", url, why and f"{why}; {expected}")


def check_api_url(url: str) -> str:
    why = http_url_problem(url)
    return _checked("--api-url", url, why and f"{why}, e.g. https://api.github.com")


def check_commit(commit: str, option: str) -> str:
    return _checked(
        option, commit, None if FULL_SHA.match(commit) else "expected a full 40-hex commit id"
    )


def check_owner(name: str) -> str:
    return _checked("--head-owner", name, login_problem(name))


def check_branch(name: str, option: str = "--branch") -> str:
    return _checked(
        option, name, None if workrepo.is_branch_name(name) else "not a valid git branch name"
    )


def owner_from_remote(url: str) -> Optional[str]:
    """The fork's owner from its remote URL (https://host/OWNER/NAME(.git),
    git@host:OWNER/NAME.git)."""
    m = re.match(r"^[a-z][a-z0-9+.-]*://[^/]+/(?P<owner>[^/]+)/[^/]+?/?$", url, re.I) or re.match(
        r"^[^/@:\s]+@[^/:\s]+:(?P<owner>[^/]+)/[^/]+$", url
    )
    return m.group("owner") if m and not login_problem(m.group("owner")) else None


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


def create_pull_request(api_url: str, pr: PullRequest, token: str, timeout: float) -> str:
    """Open the pull request; its html_url. Each failure is its own error class and exit code."""
    url = pulls_url(api_url, pr.repo)
    got = send("POST", api_url, url, token, timeout, pr.payload())
    return answer(got.status, got.headers, got.text, pr, url, token)


def answer(
    status: int,
    headers,
    text: str,
    pr: PullRequest,
    url: str,
    token: str,
    now: Callable[[], float] = time.time,
) -> str:
    """An API answer -> the pull request's URL, or the error the user can act on."""
    got = Answer(status, headers, text)
    if status == 201:
        data = got.json()
        html = data.get("html_url") if isinstance(data, dict) else None
        if not html or not isinstance(html, str):
            raise GitHubError(f"{url}: 201 Created but no html_url in the answer")
        return redact(html, (token,))
    wording = Wording(
        access=f"pull-request write access to {pr.repo}",
        forbidden=f"permission to open pull requests on {pr.repo}",
        rejected=f"GitHub refused the pull request {pr.head} -> {pr.repo}:{pr.base}",
        repo=pr.repo,
    )
    raise_for_answer(got, url, token, wording, now)
    raise GitHubError(f"{url}: unexpected answer {status}")  # a 2xx other than 201


# ---------------------------------------------------------------- the branch on the fork


def git_env(askpass: Optional[Path]) -> dict[str, str]:
    """Added to the runner's isolated environment (no user or system git configuration, no
    prompt): no SSH_ASKPASS (git falls back to it for credentials); the token only through
    GIT_ASKPASS, which reads it from the environment."""
    return {"SSH_ASKPASS": "", **({"GIT_ASKPASS": str(askpass)} if askpass else {})}


_ASKPASS = """#!/bin/sh
# The token only for https://HOST, the configured GitHub host: git names the URL in its prompt,
# so another host, plain http, or a redirect elsewhere gets nothing (git then fails to log in).
case "$1" in
  "Username for 'https://HOST': ") echo x-access-token ;;
  "Password for 'https://"*"@HOST': ")
    user=${1#"Password for 'https://"}; user=${user%"@HOST': "}
    case "$user" in *[@/:\\ ]*|"") exit 1 ;; esac
    printf '%s\\n' "$GITHUB_TOKEN" ;;
  *) exit 1 ;;
esac
"""
# git never follows a redirect for a push or fetch that may carry the token
NO_REDIRECTS = ("http.followRedirects=false",)
_HOST = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]{1,5})?\Z")


def token_host(api_url: str) -> str:
    """The host git may give the token to: the web host of --api-url (github.com by default)."""
    parts = urlsplit(web_url(api_url))
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    if not _HOST.match(host):
        raise ConfigError(f"--api-url {redact(api_url)!r}: no usable host for git's credentials")
    return host


def askpass_script(directory: Path, host: str = "github.com") -> Path:
    """A GIT_ASKPASS helper holding no secret: it prints $GITHUB_TOKEN when git asks for the
    password of https://`host`, and nothing for any other URL."""
    if not _HOST.match(host):
        raise ConfigError(f"{host!r}: not a host name")
    text = _ASKPASS.replace("HOST", host)
    path = directory / "askpass.sh"
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@dataclass
class Branch:
    workdir: Path
    head: str
    onto: str  # the commit the series was applied on


def work_repo(path: Path, snapshots_git: Path) -> Path:
    """A repository of its own (a shallow fetch never touches the snapshots') borrowing their
    objects."""
    try:
        workrepo.init(path, snapshots_git)
    except GitError as e:
        raise PushFailed(f"{path}: git init failed: {e.line}") from None
    return path


has_commit = workrepo.has_commit
push_argv = workrepo.push_argv


def _remote_failed(e: GitError, what: str, secrets: tuple[str, ...], otherwise: str) -> PushFailed:
    """A git fetch or push to the fork that stalled (--git-timeout) or failed (`otherwise`),
    redacted."""
    if e.timed_out:
        stalled = (
            f"{what} {e.line} (--git-timeout); check the remote URL and the network, then retry"
        )
        return PushFailed(redact(stalled, secrets))
    return PushFailed(redact(otherwise, secrets))


def fetch_commit(
    workdir: Path,
    remote: str,
    commit: str,
    askpass: Optional[Path],
    secrets: tuple[str, ...],
    timeout: float,
) -> None:
    try:
        workrepo.fetch_commit(
            workdir, remote, commit, git_env(askpass), timeout, config=NO_REDIRECTS
        )
    except GitError as e:
        missing = (
            f"the fork {remote} does not have commit {commit[:12]}, the upstream base of this "
            f"bundle ({e.line}): "
            "sync the fork with upstream, or pass --onto a commit of the fork with the same tree"
        )
        raise _remote_failed(e, f"git fetch from {remote}", secrets, missing) from None


def series_branch(workdir: Path, onto: str, patches: tuple[Path, ...]) -> Branch:
    """The bundle's series applied with git am on `onto`, in the work repository."""
    try:
        workrepo.checkout_clean(workdir, onto)
    except GitError as e:
        raise PushFailed(f"{workdir}: git {e.command} {onto[:12]} failed: {e.line}") from None
    try:
        head = workrepo.am(workdir, patches)
    except GitError as e:
        raise SeriesDoesNotApply(
            f"the bundle's series does not apply with git am on {onto[:12]}: {e.line}"
        ) from None
    return Branch(workdir, head, onto)


def push(
    workdir: Path,
    remote: str,
    branch: str,
    askpass: Optional[Path],
    secrets: tuple[str, ...],
    timeout: float,
) -> None:
    try:
        workrepo.push(workdir, remote, branch, git_env(askpass), timeout, config=NO_REDIRECTS)
    except GitError as e:
        rejected = "[rejected]" in e.stderr or "non-fast-forward" in e.stderr
        hint = (
            "; the branch exists on the fork with other commits: pick another --branch"
            if rejected
            else ""
        )
        raise _remote_failed(
            e, f"git push to {remote}", secrets, f"git push to {remote} failed: {e.line}{hint}"
        ) from None
