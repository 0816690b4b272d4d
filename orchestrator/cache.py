"""The tool's own cache: downloads, the snapshot repository, per-cell worktrees and builds.

Nothing outside it (and the results directory) is ever written.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import filelock


def default_cache_dir() -> Path:
    env = os.environ.get("GGML_PATCH_CACHE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ggml-patch"


def slug(text: str) -> str:
    """A file-name-safe form of a key ("llama.cpp/cpu" -> "llama.cpp-cpu")."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


@dataclass(frozen=True)
class Cache:
    root: Path

    @property
    def downloads(self) -> Path:
        return self._dir("downloads")

    @property
    def snapshots_git(self) -> Path:
        return self.root / "snapshots.git"

    def cell_dir(self, cell_id: str) -> Path:
        return self._dir("cells") / slug(cell_id)

    def scratch(self) -> Path:
        return self._dir("tmp")

    def _dir(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    @contextmanager
    def lock(self, name: str, timeout: float = -1) -> Iterator[None]:
        """An inter-process lock; released on any exit, so no stale lock survives an interrupt."""
        lock_dir = self._dir("locks")
        with filelock.FileLock(str(lock_dir / f"{slug(name)}.lock"), timeout=timeout):
            yield
