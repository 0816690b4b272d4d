"""Source kinds behind one shape: `snapshot(source, cache, repo) -> Snapshot`.

Each kind turns a matrix.yaml source into a base commit in the tool's snapshot repository,
fetched once and reused between runs.
"""

from __future__ import annotations

from types import ModuleType

from ..cache import Cache
from ..config_records import Source
from ..redact import redact, redact_data
from ..vcs.snapshots import SnapshotRepo
from .base import Snapshot, SourceUnreachable

__all__ = ["Snapshot", "SourceUnreachable", "snapshot"]


def snapshot(source: Source, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    """The source's base commit. Its description and provenance are redacted here, the one place
    every kind returns through: they reach results.json, summary.md and the PR body."""

    snap = _modules()[source.kind].snapshot(source, cache, repo)  # its kind: matrix.yaml's models say which
    return Snapshot(snap.commit, redact(snap.description), redact_data(snap.provenance))


def _modules() -> dict[str, ModuleType]:
    """Each kind's module: its `snapshot` and the model of its matrix.yaml keys."""
    from . import git, local, pypi_sdist, tarball  # requests and the rest on first use (start-up)

    return {"pypi-sdist": pypi_sdist, "git": git, "local": local, "tarball": tarball}


def names() -> list[str]:
    return list(_modules())
