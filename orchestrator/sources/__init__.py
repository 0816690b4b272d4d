"""Source kinds behind one shape: `snapshot(source, cache, repo) -> Snapshot`, a matrix.yaml
source as a base commit in the tool's snapshot repository, fetched once and reused between runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, TypeVar

from ..cache import Cache
from ..config_records import Source
from ..redact import redact, redact_data
from ..vcs.snapshots import SnapshotRepo
from . import git, local, pypi_sdist, tarball
from .base import Snapshot, SourceUnreachable

__all__ = ["KINDS", "Kind", "Snapshot", "SourceUnreachable", "snapshot"]
K = TypeVar("K", bound=Source)


@dataclass(frozen=True)
class Kind(Generic[K]):
    """A source kind: the model of its matrix.yaml options, and the function that takes its
    snapshot (the type checker checks that the two agree)."""

    model: type[K]
    snapshot: Callable[[K, Cache, SnapshotRepo], Snapshot]


def _entry(model: type[K], snapshot: Callable[[K, Cache, SnapshotRepo], Snapshot]) -> Kind[Any]:
    """One entry (a call of its own, so that the type checker matches the two for each kind)."""
    return Kind(model, snapshot)


# every source kind, by its `kind:` in matrix.yaml; config.py's union lists the same models
KINDS: dict[str, Kind[Any]] = {
    "pypi-sdist": _entry(pypi_sdist.PypiSdist, pypi_sdist.snapshot),
    "git": _entry(git.GitSource, git.snapshot),
    "local": _entry(local.LocalSource, local.snapshot),
    "tarball": _entry(tarball.TarballSource, tarball.snapshot),
}


def snapshot(source: Source, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    """The source's base commit. Its description and provenance are redacted here, the one place
    every kind returns through: they reach results.json, summary.md and the PR body."""
    snap = KINDS[source.kind].snapshot(source, cache, repo)
    return Snapshot(snap.commit, redact(snap.description), redact_data(snap.provenance))
