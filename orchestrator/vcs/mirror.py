"""A bare mirror of a git URL in the cache, and `ls-remote`; network commands give up on a stalled
transfer and have deadlines."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .runner import git, succeeds

FETCH_TIMEOUT_S = 1800  # a first fetch of llama.cpp's whole history takes minutes
LS_REMOTE_TIMEOUT_S = 300
# Give up on a stalled transfer instead of hanging a scheduled job (bytes/s over seconds).
NETWORK_CONFIG = ("http.lowSpeedLimit=1000", "http.lowSpeedTime=60", "protocol.version=2")


def has_commit(mirror: Path, sha: str) -> bool:
    return succeeds("cat-file", "-e", "--end-of-options", f"{sha}^{{commit}}", git_dir=mirror)


def fetch(mirror: Path, url: str, refspec: str) -> None:
    git(
        "fetch",
        "--quiet",
        "--no-tags",
        "--end-of-options",
        url,
        refspec,
        git_dir=mirror,
        config=NETWORK_CONFIG,
        timeout=FETCH_TIMEOUT_S,
    )


def ls_remote(
    url: str, refs: list[str], symref: bool = False, mirror: Optional[Path] = None
) -> str:
    """`git ls-remote` of `refs` at `url` (no repository needed: it talks to the remote only)."""
    options = ["--symref"] if symref else []
    return git(
        "ls-remote",
        *options,
        "--end-of-options",
        url,
        *refs,
        git_dir=mirror,
        config=NETWORK_CONFIG,
        timeout=LS_REMOTE_TIMEOUT_S if mirror is None else FETCH_TIMEOUT_S,
    )


def pin(mirror: Path, rev: str) -> str:
    """The commit `rev` names in the mirror, kept as refs/pinned/<commit>; the commit."""
    commit = git("rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}", git_dir=mirror)
    git("update-ref", "--end-of-options", f"refs/pinned/{commit}", commit, git_dir=mirror)
    return commit
