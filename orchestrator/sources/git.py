"""Source kind `git`: a repository URL and a branch, tag
or commit (`ref`; "HEAD": the default branch).

Fetched into a bare mirror in the cache, one per URL (a pinned commit already there needs no
network), then copied with its history into the snapshot repository: at the repository's root the
base IS the upstream commit, so bundles can name it and `git am -3` finds the series' index blobs.
A `subdirectory`, or `submodules` to fill in (a fork vendored as a submodule), give a deterministic
commit of the resulting tree instead, recording the upstream commit.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Optional

from ..cache import Cache, slug
from ..config_records import RELPATH, Source, Str, Unique, checked
from ..errors import ConfigError, ToolError
from ..redact import redact
from ..urls import FULL_SHA, git_url_problem, ref_problem, strip_credentials
from ..vcs import mirror as remote
from ..vcs.runner import GitError, init_bare
from ..vcs.snapshots import SnapshotRepo
from .base import Snapshot, SourceUnreachable

_MISSING_REF = (
    "couldn't find remote ref",
    "not our ref",
    "no such remote ref",
    "unadvertised object",
    "remote did not send all necessary objects",
)
# curl's "after N ms" differs run to run; the drift issue would edit its body for it
_ELAPSED = re.compile(r" after \d+ ms")


class GitSource(Source):
    """matrix.yaml's keys for this kind: `url` a git URL or path (never an option or a transport
    helper), `ref` a ref name; `submodules` of the superproject to fill in (a vendored fork)."""

    kind: Literal["git"]
    url: Annotated[Str, checked(git_url_problem)]
    ref: Annotated[Str, checked(ref_problem)]
    subdirectory: RELPATH = ""
    submodules: Annotated[tuple[RELPATH, ...], Unique] = ()


class Pinned(GitSource):
    """A git source a run's plan pinned (pins.py): `ref` is the commit, `pinned_from` the
    ref matrix.yaml names; or `unreachable`, why the plan could not reach it.
    Never in matrix.yaml."""

    pinned_from: str = ""
    pinned_ref: str = ""
    unreachable: str = ""


def snapshot(source: GitSource, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    url, ref = source.url, source.ref
    pin = source if isinstance(source, Pinned) else None
    if pin and pin.unreachable:  # the run's plan found it unreachable: no second try
        raise SourceUnreachable(f"source unavailable: {pin.unreachable} (found by the run's plan)")
    asked = (pin and pin.pinned_from) or ref  # the ref matrix.yaml names
    subdir = source.subdirectory.strip("/")
    submodules = [s.strip("/") for s in source.submodules]
    commit, resolved = import_commit(cache, repo, url, ref, source.key)
    if pin and pin.pinned_from:
        resolved = pin.pinned_ref or resolved
    provenance: dict[str, Any] = {
        "url": strip_credentials(url),  # a record names the remote, never its credentials
        "ref": asked,
        "resolved_ref": resolved,
        "upstream_commit": commit,
    }
    description = f"{_short_url(url)} {asked} ({commit[:12]})" + (f" ({subdir})" if subdir else "")
    if not subdir and not submodules:
        return Snapshot(commit, description, provenance)
    tree = _tree(repo, commit)
    for path in submodules:
        sub_commit, sub_url = gitlink(repo, commit, path, url, source.key)
        import_commit(cache, repo, sub_url, sub_commit, f"{source.key}.submodules")
        tree = repo.tree_with_subtree(tree, path, _tree(repo, sub_commit))
        provenance.setdefault("submodules", {})[path] = {"url": sub_url, "commit": sub_commit}
    if subdir:
        sub_tree = repo.tree_of(tree, subdir)
        if sub_tree is None:
            raise ConfigError(
                f"{source.key}.subdirectory: {subdir!r} is not "
                f"a directory at {commit[:12]} of {url}"
            )
        tree = sub_tree
    spec = hashlib.sha256(repr((subdir, submodules)).encode()).hexdigest()[:12]
    message = (
        f"snapshot of {redact(url)} at {commit}\n\nupstream-commit: {commit}\n"
        f"subdirectory: {subdir or '.'}\n"
        + "".join(
            f"submodule: {p} {v['commit']}\n" for p, v in provenance.get("submodules", {}).items()
        )
    )
    base = repo.commit_tree(tree, f"refs/snapshots/git/{mirror_name(url)}/{commit}-{spec}", message)
    return Snapshot(base, description, provenance)


def _tree(repo: SnapshotRepo, commit: str) -> str:
    tree = repo.tree_of(commit)
    if tree is None:  # the commit was fetched into the repository a moment ago
        raise ToolError(f"{repo.path}: commit {commit[:12]} has no tree")
    return tree


def import_commit(
    cache: Cache, repo: SnapshotRepo, url: str, ref: str, key: str
) -> tuple[str, str]:
    """(commit, the remote ref it came from): fetched into the
    mirror, then into the snapshot repository."""
    name = mirror_name(url)
    with cache.lock(f"mirror-{name}"):
        mirror = cache.root / "mirrors" / f"{name}.git"
        init_bare(mirror)
        commit, resolved = resolve(mirror, url, ref, key)
        snap_ref = f"refs/snapshots/git/{name}/{commit}"
        if not repo.ref_commit(snap_ref):
            repo.fetch(str(mirror), f"+refs/pinned/{commit}:{snap_ref}")
    return commit, resolved


def mirror_name(url: str) -> str:
    """A file-name-safe, collision-free name for a URL's mirror."""
    return f"{slug(_short_url(url))[-60:]}-{hashlib.sha256(url.encode()).hexdigest()[:10]}"


def resolve(mirror: Path, url: str, ref: str, key: str) -> tuple[str, str]:
    """The commit `ref` names at `url`, present in the mirror under refs/pinned/<commit>."""
    if FULL_SHA.match(ref):
        if not remote.has_commit(mirror, ref):
            _network(lambda: remote.fetch(mirror, url, f"+{ref}:refs/pinned/{ref}"), url, ref, key)
            if not remote.has_commit(mirror, ref):
                raise ConfigError(f"{key}.ref: commit {ref} does not exist at {url}")
        return remote.pin(mirror, ref), ref
    remote_ref = ls_remote(url, ref, key, mirror)[1]
    if remote_ref == "HEAD":  # a remote whose HEAD names no branch: nothing to fetch it by
        raise ConfigError(f"{key}.ref: {url} has no default branch (HEAD)")
    _network(lambda: remote.fetch(mirror, url, f"+{remote_ref}:{remote_ref}"), url, ref, key)
    return remote.pin(mirror, remote_ref), remote_ref


def ls_remote(url: str, ref: str, key: str, mirror: Optional[Path] = None) -> tuple[str, str]:
    """(commit, full remote ref) that a branch, tag or HEAD names at `url` (ls-remote: one round
    trip, nothing fetched; an annotated tag's commit, not the tag); a full commit id is itself."""
    if FULL_SHA.match(ref):
        return ref, ref
    head = ref == "HEAD"
    candidates = (
        [ref] if head or ref.startswith("refs/") else [f"refs/heads/{ref}", f"refs/tags/{ref}"]
    )
    peeled = [f"{c}^{{}}" for c in candidates if c.startswith("refs/tags/")]
    out = _network(
        lambda: remote.ls_remote(url, [*candidates, *peeled], symref=head, mirror=mirror),
        url,
        ref,
        key,
    )
    found, symref = {}, "HEAD"
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        if sha.startswith("ref: "):  # --symref: the branch HEAD names
            symref = sha[len("ref: ") :]
        else:
            found[name] = sha
    for c in candidates:
        if c in found:
            return found.get(c + "^{}", found[c]), symref if c == "HEAD" else c
    if head:
        raise ConfigError(f"{key}.ref: {url} has no default branch (HEAD)")
    raise ConfigError(f"{key}.ref: {ref!r} is not a branch, tag or full commit id at {url}")


def gitlink(repo: SnapshotRepo, commit: str, path: str, url: str, key: str) -> tuple[str, str]:
    """(commit, url) of the submodule at `path` of a
    superproject commit, from its tree and .gitmodules."""
    entry = repo.tree_entry(commit, path)
    if entry is None or entry[0] != "160000":
        raise ConfigError(
            f"{key}.submodules: {path!r} is not a submodule at {commit[:12]} of {url}"
        )
    for sub in repo.gitmodules(commit).values():
        if sub.get("path", "").strip("/") == path and "url" in sub:
            return entry[2], checked_url(
                resolve_submodule_url(url, sub["url"]), f"{key}.submodules ({path})"
            )
    raise ConfigError(
        f"{key}.submodules: {path!r} has no url in .gitmodules at {commit[:12]} of {url}"
    )


def checked_url(url: str, key: str) -> str:
    """A URL from upstream content (.gitmodules) before it reaches
    git: never an option or a transport helper."""
    why = git_url_problem(url)
    if why:
        raise ConfigError(f"{key}: {url!r} {why}")
    return url


def resolve_submodule_url(super_url: str, sub_url: str) -> str:
    """A .gitmodules url as git resolves it: "../x" and
    "./x" are relative to the superproject's URL."""
    if not sub_url.startswith(("./", "../")):
        return sub_url
    base, rel = super_url.rstrip("/").removesuffix(".git"), sub_url
    while rel.startswith(("./", "../")):
        if rel.startswith("../"):
            base = base.rsplit("/", 1)[0]
        rel = rel.split("/", 1)[1]
    return posixpath.join(base, rel) if "://" not in base else f"{base}/{rel}"


def _network(call: Callable[[], Optional[str]], url: str, ref: str, key: str) -> str:
    """A network command's output, its failure worded: the
    ref is missing, or the remote unreachable."""
    try:
        return call() or ""
    except GitError as e:
        if any(m in e.output for m in _MISSING_REF):
            raise ConfigError(f"{key}.ref: {ref!r} does not exist at {url}") from None
        raise SourceUnreachable(
            f"{key}.url: {url} is unreachable: {_ELAPSED.sub('', e.reason)}"
        ) from None


def _short_url(url: str) -> str:
    m = re.match(r"^[a-z+]+://(?:[^@/]*@)?(.*?)(?:\.git)?/?$", url)
    return m.group(1) if m else url
