"""Source kinds behind one shape: `snapshot(source, cache, repo) -> Snapshot`, a matrix.yaml
source as a base commit in the tool's snapshot repository, fetched once and reused between runs."""

from __future__ import annotations

import sys
from typing import Callable

from ..cache import Cache
from ..config_records import Source
from ..redact import redact, redact_data
from ..vcs.snapshots import SnapshotRepo
from .base import Snapshot, SourceUnreachable

__all__ = ["Snapshot", "SourceUnreachable", "snapshot"]


def snapshot(source: Source, cache: Cache, repo: SnapshotRepo) -> Snapshot:
    """The source's base commit. Its description and provenance are redacted here, the one place
    every kind returns through: they reach results.json, summary.md and the PR body."""
    snap = _kind(source)(source, cache, repo)
    return Snapshot(snap.commit, redact(snap.description), redact_data(snap.provenance))


def _kind(source: Source) -> Callable[[Source, Cache, SnapshotRepo], Snapshot]:
    """The `snapshot` of the source's kind: in the module of the kind's model."""
    return sys.modules[type(source).__module__].snapshot
