"""The one way the tool runs git: a clean environment, one error type.

Every git command goes through `git()` or `git_bytes()`: no user or system git configuration leaks
in (hooks, url rewrites, autocrlf, signing), no GIT_* variable of the caller, no configuration that
runs a command (hooks, core.fsmonitor, credential helpers, the ext:: transport), even from a
repository's own .git/config; git never prompts. Refs and URLs from input go after
`--end-of-options` (or are resolved to a commit id first: `git checkout` has no `--end-of-options`).
"""

from __future__ import annotations

import os
import signal
import subprocess
from contextlib import suppress
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import ToolError

# `git am` everywhere (matrix, bundle verification, status, pr): the committer date is the
# author's, so the same series on the same base gives the same commit; CRs in the patch are kept.
AM_FLAGS = ("--committer-date-is-author-date", "--keep-cr")

_COMMITTER = {"GIT_COMMITTER_NAME": "ggml-patch", "GIT_COMMITTER_EMAIL": "ggml-patch@localhost"}
_DATES = {"GIT_AUTHOR_DATE": "@946684800 +0000", "GIT_COMMITTER_DATE": "@946684800 +0000"}
FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "ggml-patch",
    "GIT_AUTHOR_EMAIL": "ggml-patch@localhost",
    **_COMMITTER,
    **_DATES,
}
# No user or system configuration, no prompt; a committer
# identity for the reflogs am and checkout write.
ISOLATED = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
    **_COMMITTER,
}

# any git command without its own limit: a local one that takes longer has hung
LOCAL_TIMEOUT_S = 1800.0
# The caller's GIT_* variables kept: how to reach a remote over ssh and which CAs to trust (the
# user's own transport setup); every other GIT_* variable is dropped.
KEPT_GIT_ENV = ("GIT_SSH", "GIT_SSH_COMMAND", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH")
# Configuration that runs a command or changes what git reads, off for every git the tool runs
# (command-line -c wins over a repository's own .git/config).
SAFE_CONFIG = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "credential.helper=",
    "protocol.ext.allow=never",
    "core.pager=cat",
)
# git's own line, by precedence: what stopped it (fatal), what went wrong (error), a refused ref
# (push), where `git am` stopped
_LINE_PREFIXES = ("fatal:", "error:", "! [", "Patch failed at")


def isolated_env(**extra: str) -> dict[str, str]:
    """This process's environment without its GIT_* variables
    (but KEPT_GIT_ENV), isolated, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in KEPT_GIT_ENV}
    return {**base, "LC_ALL": "C", "LANGUAGE": "C", **ISOLATED, **extra}


def error_line(text: str, prefer: Sequence[str] = ()) -> str:
    """git's own line: the first starting with one of
    `prefer`, then of _LINE_PREFIXES; else the last."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for prefix in (*prefer, *_LINE_PREFIXES):
        for ln in lines:
            if ln.startswith(prefix):
                return ln[:300]
    return lines[-1][:300] if lines else ""


class GitError(ToolError):
    """A git command failed or timed out: `line` git's own line, `output` all it printed. The
    message never holds the command line (it may hold a URL with credentials)."""

    def __init__(
        self,
        args: Sequence[str],
        status: Optional[int],
        stderr: str,
        stdout: str = "",
        timeout: Optional[float] = None,
    ):
        self.stderr, self.stdout, self.output = stderr, stdout, f"{stderr}\n{stdout}"
        self.timed_out = timeout is not None
        # the subcommand: "am", "fetch"...
        self.command = next((a for a in args if not a.startswith("-")), "")
        self.line = (
            f"timed out after {timeout:g} s"
            if self.timed_out
            else error_line(self.output) or f"exit {status}"
        )
        super().__init__(f"git {self.command}: {self.line}")

    @property
    def reason(self) -> str:
        """git's line without its "fatal: " or "error: " prefix."""
        return next(
            (self.line[len(p) :] for p in ("fatal: ", "error: ") if self.line.startswith(p)),
            self.line,
        )


def git_bytes(
    *args: str,
    cwd: Optional[Path] = None,
    git_dir: Optional[Path] = None,
    env: Optional[dict[str, str]] = None,
    input: Optional[bytes] = None,
    timeout: Optional[float] = None,
    config: Sequence[str] = (),
    strip: bool = True,
) -> bytes:
    """`git ARGS` isolated, its stdout (`strip`: less one final
    newline); GitError on failure or timeout."""
    timeout = LOCAL_TIMEOUT_S if timeout is None else timeout
    argv = [
        "git",
        *(["-C", str(cwd)] if cwd is not None else []),
        *([f"--git-dir={git_dir}"] if git_dir else []),
    ]
    argv += [*(x for c in (*SAFE_CONFIG, *config) for x in ("-c", c)), *args]
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=isolated_env(**(env or {})),
        start_new_session=True,  # a timeout kills git and its helpers (remote-https, ssh)
    )
    try:
        out, err = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        out, err = proc.communicate()
        raise GitError(args, None, "", out.decode(errors="replace"), timeout) from None
    except BaseException:
        _kill(proc)
        raise
    if proc.returncode != 0:
        raise GitError(
            args, proc.returncode, err.decode(errors="replace"), out.decode(errors="replace")
        )
    return out[:-1] if strip and out.endswith(b"\n") else out


def _kill(proc: subprocess.Popen) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL) if proc.pid == os.getpgid(proc.pid) else proc.kill()
    proc.wait()


def git(*args: str, **options: Any) -> str:
    """`git_bytes`, decoded (undecodable bytes kept as surrogates, so paths round-trip)."""
    return git_bytes(*args, **options).decode("utf-8", "surrogateescape")


def succeeds(*args: str, **options: Any) -> bool:
    """Whether the git command exits 0 (a question, e.g. `cat-file -e`, `apply --check`)."""
    try:
        git_bytes(*args, **options)
    except GitError:
        return False
    return True


def init_bare(path: Path) -> None:
    """A bare repository at `path` (made once; an existing one is left as it is)."""
    if not (Path(path) / "HEAD").exists():
        Path(path).mkdir(parents=True, exist_ok=True)
        git("init", "-q", "--bare", str(path))
