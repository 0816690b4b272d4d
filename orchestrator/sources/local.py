"""Source kind `local`: a checkout on this machine (a fork, work in progress), taken as it is now.

The checkout is only read: its files (uncommitted changes and untracked files git does not ignore
included) are hashed straight into the snapshot repository and committed deterministically. In the
checkout git only lists files, with GIT_OPTIONAL_LOCKS=0 so not even the index's stat cache is
refreshed. A populated submodule is read the same way (a fork vendored in a superproject, a
`prefix:` layout); a directory that is not a git checkout is read whole.
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Literal

from ..cache import Cache, slug
from ..config_records import RELPATH, Source, Str
from ..errors import ConfigError
from ..vcs import user as user_git
from ..vcs.runner import GitError
from ..vcs.snapshots import SnapshotRepo
from .base import Snapshot

_GITLINK = "160000"


class LocalSource(Source):
    kind: Literal["local"]
    path: Str
    subdirectory: RELPATH = ""


def snapshot(source: LocalSource, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    root = ((source.base_dir or Path.cwd()) / Path(os.path.expanduser(source.path))).absolute()
    if not root.is_dir():
        raise ConfigError(f"{source.key}.path: {root} is not a directory")
    subdir = source.subdirectory.strip("/")
    expanded, plain = checkout_tree(repo, root, source.key)
    head = user_git.head(root)
    dirty = (
        user_git.head(root, "HEAD:./") if head else None
    ) != plain  # HEAD's tree against the files
    tree = repo.tree_of(expanded, subdir) if subdir else expanded
    if tree is None:
        raise ConfigError(f"{source.key}.subdirectory: {subdir!r} is not a directory in {root}")
    provenance = {"path": str(root), "head": head, "uncommitted_changes": dirty}
    state = f"HEAD {head[:12]}" if head else "no commits"
    description = (
        f"local {root}{'/' + subdir if subdir else ''} "
        f"({state}{', uncommitted changes' if dirty else ''})"
    )
    message = (
        f"snapshot of local checkout {root}\n\nhead: {head or '-'}\n"
        f"uncommitted-changes: {str(dirty).lower()}\nsubdirectory: {subdir or '.'}\n"
    )
    root_hash = hashlib.sha256(str(root).encode()).hexdigest()[:10]
    ref = f"refs/snapshots/local/{slug(root.name)}-{root_hash}"
    return Snapshot(repo.commit_tree(tree, ref, message), description, provenance)


def checkout_tree(repo: SnapshotRepo, root: Path, key: str) -> tuple[str, str]:
    """(tree with populated submodules filled in, tree as `git commit -a` plus untracked files
    would record it, submodules as gitlinks: compared with HEAD's tree to tell a clean checkout)."""
    # a checkout another user owns is never read as a plain folder (its ignored files, no HEAD)
    try:
        checkout = user_git.is_work_tree(root)
    except GitError:
        raise ConfigError(
            f"{key}.path: git refuses to read {root}: it is owned by another user (dubious "
            f"ownership); if you trust it, run: git config --global --add safe.directory {root}"
        ) from None
    if not checkout:
        tree = repo.tree_from_entries(_entries(repo, root, _walk(root)))
        return tree, tree
    files, gitlinks = working_files(root)
    entries = _entries(repo, root, files)
    subtrees = []
    for path, recorded in gitlinks:
        sub = root / path
        if (sub / ".git").exists():
            sub_tree, _ = checkout_tree(repo, sub, key)
            subtrees.append((path, sub_tree))
            recorded = user_git.head(sub) or recorded
        entries.append((_GITLINK, recorded, path))
    plain = repo.tree_from_entries(entries)
    expanded = plain
    for path, sub_tree in subtrees:
        expanded = repo.tree_with_subtree(expanded, path, sub_tree)
    return expanded, plain


def working_files(root: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """(tracked and untracked-not-ignored files, [(submodule path,
    recorded commit)]) by `git ls-files` only."""
    staged = [
        (meta.split(), path)
        for meta, _, path in (r.partition("\t") for r in _listed(root, "--stage"))
    ]
    gitlinks = {path: sha for (mode, sha, _), path in staged if mode == _GITLINK}
    # an untracked nested repository (a name ending in "/"): not ours to read
    others = [p for p in _listed(root, "--others", "--exclude-standard") if not p.endswith("/")]
    files = {
        p
        for p in [*(path for _, path in staged), *others]
        if p not in gitlinks and _is_file_or_link(root / p)
    }
    return sorted(files), sorted(gitlinks.items())


def _entries(repo: SnapshotRepo, root: Path, paths: list[str]) -> list[tuple[str, str, str]]:
    """(mode, blob id, path) of each file: the regular ones hashed in one git process."""
    regular = [p for p in paths if not (root / p).is_symlink()]
    for p in regular:
        if "\n" in p:  # hash-object --stdin-paths reads one name a line
            raise ConfigError(
                f"{root / p}: a file name with a newline cannot be read into a snapshot"
            )
    blobs = dict(zip(regular, repo.hash_blobs(root, regular), strict=True))
    return [
        ("100755" if os.lstat(root / p).st_mode & 0o111 else "100644", blobs[p], p)
        if p in blobs
        else ("120000", repo.hash_data(os.fsencode(os.readlink(root / p))), p)
        for p in paths
    ]


def _is_file_or_link(path: Path) -> bool:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False  # deleted in the working tree: not part of it
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def _walk(root: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        # a folder's own git metadata is not content
        dirnames[:] = [d for d in dirnames if d != ".git"]
        paths = (Path(dirpath) / f for f in filenames if f != ".git")
        out += [p.relative_to(root).as_posix() for p in paths if _is_file_or_link(p)]
    return sorted(out)


def _listed(root: Path, *args: str) -> list[str]:
    try:
        return user_git.ls_files(root, *args)
    except GitError as e:
        raise ConfigError(f"{root}: git ls-files failed: {e.line}") from None
