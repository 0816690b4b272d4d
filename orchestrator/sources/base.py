"""What every source kind shares: the snapshot it returns, the unreachable-network error, the
provenance a snapshot's commit message records, and the downloaders' helpers."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional
from urllib.parse import urlparse

from ..cache import Cache
from ..errors import SourceUnavailable
from ..vcs.snapshots import SnapshotRepo


class SourceUnreachable(SourceUnavailable):
    """The network (or a remote) could not be reached: a status, not a crash, for `status`."""


@dataclass(frozen=True)
class Snapshot:
    commit: str  # base commit in the snapshot repository
    description: str  # e.g. "llama-cpp-python==0.3.36 (vendor/llama.cpp)"
    provenance: dict = field(default_factory=dict)  # sha256, upstream commit, url, ...


def imported(
    cache: Cache,
    repo: SnapshotRepo,
    ref: str,
    header: str,
    unpack: Callable[[Path], tuple[Path, Optional[str]]],
) -> str:
    """The commit at `ref`, made once (under a lock: concurrent runs share it) of the tree
    `unpack(a scratch folder)` gives; its message `header` and the upstream commit found."""
    with cache.lock(f"snapshot-{ref}"):
        commit = repo.ref_commit(ref)
        if not commit:
            with tempfile.TemporaryDirectory(
                prefix=cache.scratch_prefix("extract"), dir=cache.scratch()
            ) as tmp:
                tree, upstream = unpack(Path(tmp))
                commit = repo.import_tree(
                    tree, ref, header + (f"upstream-commit: {upstream}\n" if upstream else "")
                )
    return commit


def recorded(repo: SnapshotRepo, commit: str, *keys: str) -> dict[str, str]:
    """The `key: value` lines of a snapshot's commit message, as
    provenance (upstream-commit: upstream_commit)."""
    lines = (line.partition(": ") for line in repo.message(commit).splitlines())
    return {
        key.replace("-", "_"): value.strip() for key, sep, value in lines if sep and key in keys
    }


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def network_reason(e: OSError) -> str:
    """requests' long exception text -> the part a person needs."""
    text = str(e)
    request = getattr(e, "request", None)
    host = urlparse(str(request.url)).hostname if request is not None and request.url else None
    for needles, reason in (
        (
            ("NameResolutionError", "Failed to resolve", "Name or service not known"),
            "could not resolve host",
        ),
        (("Connection refused",), "connection refused"),
        (("timed out",), "timed out"),
        (("Network is unreachable",), "network is unreachable"),
    ):
        if any(n in text for n in needles):
            return f"{reason} {host}" if host else reason
    return f"{type(e).__name__}: {text[:200]}"
