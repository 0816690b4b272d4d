"""Commits read and written byte for byte, a message kept exactly (upstream/authorship.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .runner import git_bytes


def ids(git_dir: Path, base: str, head: str) -> list[str]:
    return (
        git_bytes("rev-list", "--reverse", "--end-of-options", f"{base}..{head}", git_dir=git_dir)
        .decode()
        .split()
    )


def raw(git_dir: Path, sha: str) -> bytes:
    return git_bytes("cat-file", "commit", sha, git_dir=git_dir, strip=False)


def with_trailer(git_dir: Path, message: bytes, trailer: str) -> bytes:
    """The message with the trailer added, unless the same trailer is already there."""
    return git_bytes(
        "interpret-trailers",
        "--if-exists",
        "addIfDifferent",
        "--trailer",
        trailer,
        git_dir=git_dir,
        input=message,
        strip=False,
    )


def commit_tree(
    git_dir: Path, tree: str, parent: str, message: bytes, env: Optional[dict[str, str]] = None
) -> str:
    out = git_bytes(
        "commit-tree",
        tree,
        "-p",
        parent,
        "-F",
        "-",
        git_dir=git_dir,
        input=message,
        env=env,
        strip=False,
    )
    return out.decode().strip()
