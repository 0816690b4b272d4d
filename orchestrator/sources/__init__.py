"""Source kinds behind one shape: `snapshot(source, cache, repo) -> Snapshot`.

Each kind turns a matrix.yaml source into a base commit in the tool's snapshot repository,
fetched once and reused between runs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..cache import Cache
from ..config import Source
from ..errors import ConfigError, SourceUnavailable
from ..vcs.snapshots import SnapshotRepo


class SourceUnreachable(SourceUnavailable):
    """The network (or a remote) could not be reached: a status, not a crash, for `status`."""


@dataclass(frozen=True)
class Snapshot:
    commit: str  # base commit in the snapshot repository
    description: str  # e.g. "llama-cpp-python==0.3.36 (vendor/llama.cpp)"
    provenance: dict = field(default_factory=dict)  # sha256, upstream commit, url, ...


def snapshot(source: Source, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    return _kind(source)(source, cache, repo)


def _kind(source: Source) -> Callable[[Source, Cache, SnapshotRepo], Snapshot]:
    from . import git, local, pypi_sdist, tarball

    kinds = {"pypi-sdist": pypi_sdist.snapshot, "git": git.snapshot, "local": local.snapshot,
             "tarball": tarball.snapshot}
    try:
        return kinds[source.kind]
    except KeyError:
        raise ConfigError(f"{source.key}.kind: source kind {source.kind!r} is not supported yet "
                          f"(supported: {', '.join(kinds)})") from None
