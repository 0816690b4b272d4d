"""Cell results cached by a content hash of everything that decides them (cell.cache_inputs): a changed
byte in the series re-runs every cell, a changed backend flag only that backend's cells."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Optional

KEY_VERSION = (
    2  # bump when the meaning of a cached result changes (2: log paths relative to the logs dir)
)


def cell_key(parts: dict[str, Any]) -> str:
    """A stable sha256 of a JSON-able description of the cell's inputs (pure)."""
    blob = json.dumps(
        {"v": KEY_VERSION, **parts}, sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(blob.encode()).hexdigest()


def load(directory: Path, key: str) -> Optional[dict]:
    try:
        return json.loads((directory / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # absent or half-written by an interrupted run: not a hit


def store(directory: Path, key: str, entry: dict) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(entry, f)
    os.replace(tmp, directory / f"{key}.json")  # atomic: a reader sees all or nothing
