"""Who the bundle's commits belong to: the contributor (`--author`, else git's user.name and
user.email), with an `Assisted-by:` trailer when asked; never `Co-authored-by:`. The messages
are otherwise the series' own, byte for byte."""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..errors import ConfigError

_IDENTITY = re.compile(r"^(?P<name>[^<>\n]*[^<>\s])\s+<(?P<email>[^<>\s@]+@[^<>\s]+)>$")
_ASSISTANT = re.compile(r"^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$")  # one line of printable ASCII
# the committer `git am` records in the bundle's verification (vcs.runner.ISOLATED): the same
# commits come out there, so the verified head is the bundle's own commit
COMMITTER = ("ggml-patch", "ggml-patch@localhost")


@dataclass(frozen=True)
class Identity:
    name: str
    email: str
    source: str  # "--author" or "git config"

    def __str__(self) -> str:
        return f"{self.name} <{self.email}>"


def parse_author(text: str) -> Identity:
    m = _IDENTITY.match(text.strip())
    if not m:
        raise ConfigError(f'--author {text!r}: expected "Name <email>"')
    return Identity(m["name"].strip(), m["email"], "--author")


def check_assistant(name: Optional[str]) -> Optional[str]:
    if name is None:
        return None
    if not _ASSISTANT.match(name) or name.lower().startswith(("co-authored-by", "assisted-by")):
        raise ConfigError(
            f"--assisted-by {name!r}: expected the assistant's name, one line of ASCII "
            '(e.g. --assisted-by "Claude Sonnet")'
        )
    return name


def from_git_config(cwd: Optional[str] = None) -> tuple[Optional[str], Optional[str]]:
    """user.name and user.email as git resolves them for the user here. Not through vcs.runner,
    whose isolation hides exactly this: the user's own global and system configuration."""

    def get(key: str) -> Optional[str]:
        try:
            proc = subprocess.run(
                ["git", "config", "--get", key],
                capture_output=True,
                text=True,
                cwd=cwd,
                env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout.strip() or None if proc.returncode == 0 else None

    return get("user.name"), get("user.email")


def resolve(author: Optional[str], config: tuple[Optional[str], Optional[str]]) -> Identity:
    """--author, else git's user.name/user.email; a one-line refusal when neither gives both."""
    if author is not None:
        return parse_author(author)
    name, mail = config
    if name and mail:
        ident = parse_author(f"{name} <{mail}>")
        return Identity(ident.name, ident.email, "git config")
    missing = " and ".join(k for k, v in (("user.name", name), ("user.email", mail)) if not v)
    raise ConfigError(
        f'no author for the bundle\'s commits: pass --author "Name <email>" or set git config '
        f"{missing} (the commits must carry the contributor's identity)"
    )


# ---------------------------------------------------------------- the commits, re-made


def _git(git_dir: str, args: list[str], data: Optional[bytes] = None, env: Optional[dict] = None) -> bytes:
    """The one git layer, isolated: exact bytes in and out (a message is kept byte for byte)."""
    from ..vcs.runner import git_bytes

    return git_bytes(*args, git_dir=Path(git_dir), input=data, env=env, strip=False)


def split_commit(raw: bytes) -> tuple[dict[str, bytes], bytes]:
    """`git cat-file commit` -> (first value of each header, the message's exact bytes)."""
    head, _, message = raw.partition(b"\n\n")
    headers: dict[str, bytes] = {}
    for line in head.split(b"\n"):
        key, _, value = line.partition(b" ")
        headers.setdefault(key.decode(), value)
    return headers, message


def with_trailer(git_dir: str, message: bytes, assistant: Optional[str]) -> bytes:
    if not assistant:
        return message
    return _git(
        git_dir,
        ["interpret-trailers", "--if-exists", "addIfDifferent", "--trailer", f"Assisted-by: {assistant}"],
        message,
    )


def reauthor(git_dir: str, base: str, patched: str, who: Identity, assistant: Optional[str]) -> str:
    """base..patched again, each commit with the same tree, author date and message, authored by
    `who` (and the Assisted-by trailer); the new head."""
    parent = base
    for sha in _git(git_dir, ["rev-list", "--reverse", f"{base}..{patched}"]).decode().split():
        headers, message = split_commit(_git(git_dir, ["cat-file", "commit", sha]))
        date = headers["author"].rsplit(b" ", 2)[-2:]  # "<seconds> <zone>" after "Name <email>"
        when = b" ".join(date).decode()
        env = {
            "GIT_AUTHOR_NAME": who.name,
            "GIT_AUTHOR_EMAIL": who.email,
            "GIT_AUTHOR_DATE": when,
            "GIT_COMMITTER_NAME": COMMITTER[0],
            "GIT_COMMITTER_EMAIL": COMMITTER[1],
            "GIT_COMMITTER_DATE": when,
        }
        parent = (
            _git(
                git_dir,
                ["commit-tree", headers["tree"].decode(), "-p", parent, "-F", "-"],
                with_trailer(git_dir, message, assistant),
                env,
            )
            .decode()
            .strip()
        )
    return parent
