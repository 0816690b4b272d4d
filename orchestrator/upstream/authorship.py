"""Who the bundle's commits belong to: the contributor (`--author`, else git's user.name and
user.email), with an `Assisted-by:` trailer when asked; never `Co-authored-by:`. The messages
are otherwise the series' own, byte for byte, except a secret in one (a token, a URL's
password): redacted as `***`, and the caller told which commits held one."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..errors import ConfigError
from ..redact import REDACTED, redact
from ..vcs import commits
from ..vcs import user as user_git

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
    """user.name and user.email as git resolves them for the user here (vcs/user.py: not the
    isolated runner, whose isolation hides exactly this)."""
    return user_git.config_value("user.name", cwd), user_git.config_value("user.email", cwd)


def resolve(author: Optional[str], config: tuple[Optional[str], Optional[str]]) -> Identity:
    """--author, else git's user.name/user.email; a one-line refusal when neither gives both."""
    if author is not None:
        return parse_author(author)
    name, mail = config
    if name and mail:
        return dataclasses.replace(parse_author(f"{name} <{mail}>"), source="git config")
    missing = " and ".join(k for k, v in (("user.name", name), ("user.email", mail)) if not v)
    raise ConfigError(
        f'no author for the bundle\'s commits: pass --author "Name <email>" or set git config '
        f"{missing} (the commits must carry the contributor's identity)"
    )


# ---------------------------------------------------------------- the commits, re-made


def reauthor(
    git_dir: str,
    base: str,
    patched: str,
    who: Identity,
    assistant: Optional[str],
    notice: Callable[[str], None] = lambda line: None,
) -> str:
    """base..patched again, same trees, dates and messages, authored by `who` (+ Assisted-by);
    the head. A message holding a secret is redacted, and `notice` told in one line: the
    bundle's patches are made from these commits, so none carries it."""
    repo, parent = Path(git_dir), base
    for number, sha in enumerate(commits.ids(repo, base, patched), 1):
        # the message's exact bytes after the headers
        head, _, message = commits.raw(repo, sha).partition(b"\n\n")
        message = _without_secrets(message, number, notice)
        lines = (ln.partition(b" ") for ln in head.split(b"\n"))
        # one each
        headers = {key.decode(): value for key, _, value in lines if key in (b"tree", b"author")}
        when = b" ".join(
            headers["author"].rsplit(b" ", 2)[-2:]
        ).decode()  # "<seconds> <zone>" after "Name <email>"
        env = {"GIT_AUTHOR_NAME": who.name, "GIT_AUTHOR_EMAIL": who.email, "GIT_AUTHOR_DATE": when}
        env |= {
            "GIT_COMMITTER_NAME": COMMITTER[0],
            "GIT_COMMITTER_EMAIL": COMMITTER[1],
            "GIT_COMMITTER_DATE": when,
        }
        if assistant:
            message = commits.with_trailer(repo, message, f"Assisted-by: {assistant}")
        parent = commits.commit_tree(repo, headers["tree"].decode(), parent, message, env)
    return parent


def _without_secrets(message: bytes, number: int, notice: Callable[[str], None]) -> bytes:
    """`message` with any secret redacted (the bytes kept as they are otherwise)."""
    text = message.decode("utf-8", "surrogateescape")
    clean = redact(text)
    if clean == text:
        return message
    notice(
        f"commit {number}'s message held a secret (a token, a URL's credentials): "
        f"written as {REDACTED} in patch {number:04d}"
    )
    return clean.encode("utf-8", "surrogateescape")
