"""git as the user has it: their own configuration (name, email,
safe.directory) and their checkouts, read only, which the tool's isolated git
(runner.py) would hide. Every command has a timeout."""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .runner import GitError, git, git_bytes

USER_TIMEOUT_S = 30  # reading a configuration value or a version
_READ_ONLY = {"GIT_OPTIONAL_LOCKS": "0"}  # reading a checkout never takes its index lock


def _user_git(*args: str, cwd: Optional[str] = None) -> Optional[str]:
    """stdout of `git ARGS` in the user's own environment, or None when it fails or hangs."""
    try:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        proc = subprocess.run(
            ["git", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=USER_TIMEOUT_S
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def config_value(key: str, cwd: Optional[str] = None) -> Optional[str]:
    return (_user_git("config", "--get", key, cwd=cwd) or "").strip() or None


def version() -> str:
    """`git --version`'s line, or why there is none."""
    out = _user_git("--version")
    return out.strip().splitlines()[0] if out and out.strip() else "not found"


def safe_directories() -> list[str]:
    """The user's own safe.directory entries, as -c
    values: the tool's isolated git would drop them."""
    where = (
        "HOME",
        "XDG_CONFIG_HOME",
        "GIT_CONFIG_GLOBAL",
        "GIT_CONFIG_SYSTEM",
        "GIT_CONFIG_NOSYSTEM",
    )
    return [f"safe.directory={d}" for d in _safe_dirs(tuple(os.environ.get(k) for k in where))]


@functools.cache
def _safe_dirs(where: tuple[Optional[str], ...]) -> tuple[str, ...]:
    """Read once per `where` (the variables that decide which configuration files git reads)."""
    scopes = ("--system", "--global")  # the user's own configuration, read only
    out = "\n".join(
        _user_git("config", scope, "--get-all", "safe.directory") or "" for scope in scopes
    )
    return tuple(dict.fromkeys(ln.strip() for ln in out.splitlines() if ln.strip()))


# a checkout's own configuration runs nothing while the tool reads it: no textconv or external
# diff (a diff driver's command), no filter, no hook (runner.SAFE_CONFIG has the rest)
_INERT = ("diff.external=", "core.attributesFile=/dev/null", "core.hooksPath=/dev/null")


def _read_config() -> list[str]:
    return [*safe_directories(), *_INERT]


def _in_checkout(root: Path, *args: str) -> str:
    return git(*args, cwd=root, env=_READ_ONLY, config=_read_config()).strip()


def is_work_tree(root: Path) -> bool:
    """Whether git sees `root` as (inside) a work tree;
    GitError for another user's (dubious ownership)."""
    try:
        return _in_checkout(root, "rev-parse", "--is-inside-work-tree") == "true"
    except GitError as e:
        if "dubious ownership" in e.output or "unsafe repository" in e.output:
            raise
        return False


def head(root: Path, rev: str = "HEAD") -> Optional[str]:
    """The commit HEAD names in the checkout (`rev` "HEAD:./": its tree at `root`), or None."""
    try:
        return _in_checkout(root, "rev-parse", "--verify", "--quiet", rev) or None
    except GitError:
        return None


def ls_files(root: Path, *args: str) -> list[str]:
    """`git ls-files -z ARGS` of the checkout (--stage: "<mode>
    <sha> <stage>\\t<path>"). Raises GitError."""
    out = git_bytes(
        "ls-files", "-z", *args, cwd=root, env=_READ_ONLY, config=safe_directories(), strip=False
    )
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


@dataclass(frozen=True)
class Change:
    """A commit or a range of the user's checkout: its diff and its commits, oldest first."""

    base: str
    head: str
    diff: str  # `git diff --full-index base head`, a/ and b/ prefixes whatever the user's config
    commits: tuple[tuple[str, str, str, str, str], ...]  # (sha, author, date, subject, body)


def change_of(root: Path, rev: str) -> Change:
    """REV (a commit: its own change; A..B: the range) of the checkout at `root`, read only.
    GitError when git cannot resolve it or `root` is no checkout."""
    if ".." in rev:
        first, last = rev.split("..", 1)
        base = _in_checkout(
            root, "rev-parse", "--verify", "--end-of-options", f"{first}^{{commit}}"
        )
    else:
        last = rev
        base = ""
    head = _in_checkout(root, "rev-parse", "--verify", "--end-of-options", f"{last}^{{commit}}")
    if not base:
        base = _in_checkout(root, "rev-parse", "--verify", "--end-of-options", f"{head}^")
    diff = git_bytes(
        "diff",
        "--full-index",
        "--no-color",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--src-prefix=a/",
        "--dst-prefix=b/",
        base,
        head,
        cwd=root,
        env=_READ_ONLY,
        config=_read_config(),
        strip=False,
    ).decode("utf-8", "surrogateescape")
    fmt = "%H%x00%an <%ae>%x00%aD%x00%s%x00%b%x1e"
    log = _in_checkout(root, "log", "--reverse", f"--format={fmt}", f"{base}..{head}")
    commits = []
    for entry in log.split("\x1e"):
        fields = entry.strip("\n").split("\x00")
        if len(fields) == 5:
            sha, author, date, subject, body = fields
            commits.append((sha, author, date, subject, body.strip()))
    return Change(base, head, diff, tuple(commits))


def remote_url(root: Path) -> Optional[str]:
    """The checkout's `origin` URL, or None (read from its own configuration, read only)."""
    try:
        return _in_checkout(root, "config", "--get", "remote.origin.url") or None
    except GitError:
        return None
