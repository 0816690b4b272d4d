"""Output folders: checked before any work, and written only when the tool owns them. `export --out`
and `bundle --out` replace what they wrote before (old patches, an old bundle), so they write
only into a folder that is new, empty, or marked by an earlier run of the tool with MARKER.
Anything else holds a user's files: refused with exit 2 naming the folder, and nothing in it
is touched. `--results` and `--cache` are checked up front for being writable folders, so a
bad path never surfaces after the cells ran."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from . import untrusted
from .errors import ConfigError

MARKER = ".ggml-patch-output"
_MARKER_TEXT = (
    "This folder was created by ggml-patch ({what}). ggml-patch replaces what it wrote here on the "
    "next run; remove this file to keep ggml-patch out of the folder.\n"
)
RESULTS_ENTRIES = frozenset(
    {"results.json", "summary.md", "junit.xml", "logs", "evidence", "bundle", MARKER}
)
CACHE_MARKER = ".ggml-patch-cache"
# what a cache of an earlier version holds (no marker yet): claimed as the tool's own
CACHE_ENTRIES = frozenset(
    {
        "downloads",
        "snapshots.git",
        "cells",
        "tmp",
        "locks",
        "bundle",
        "status",
        "mirrors",
        "evidence",
        "results",
        "pr",
    }
    # vulkan-sdk: orchestrator/scripts/setup-vulkan-lavapipe.sh writes it there
    | {"snapshots.git.lock", "vulkan-sdk"}
)


def writable_dir(path: Path | str, option: str) -> Path:
    """`path` (absolute) if it is, or can be created as, a
    folder that can be written; creates nothing."""
    path = Path(os.path.expanduser(str(path))).absolute()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{option} {path}: not a folder (a file is there); name a folder")
    base = path  # the nearest folder that exists
    while not base.exists() and not base.is_symlink() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise ConfigError(f"{option} {path}: not a folder ({base} is a file); name a folder")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ConfigError(f"{option} {path}: cannot write in {base} (permission denied)")
    return path


def writable_file(path: Path | str, option: str) -> Path:
    """`path` (absolute) if a file can be written there: not a folder, its folder creatable."""
    path = Path(os.path.expanduser(str(path))).absolute()
    if path.is_dir():
        raise ConfigError(f"{option} {path}: a folder; name a file")
    writable_dir(path.parent, option)
    return path


def check(path: Path | str, option: str, legacy: Optional[Callable[[Path], bool]] = None) -> Path:
    """Refuse (exit 2) a folder the tool may not write into; writes nothing."""
    path = writable_dir(path, option)
    if path.is_dir() and not (
        (path / MARKER).is_file() or not any(path.iterdir()) or (legacy and legacy(path))
    ):
        raise ConfigError(
            f"{option} {path}: the folder holds files ggml-patch did not create; give a new or "
            f"empty folder (ggml-patch writes only into folders it made, marked by {MARKER})"
        )
    return path


def claim(path: Path | str, option: str, legacy: Optional[Callable[[Path], bool]] = None) -> Path:
    """The folder, created if needed and marked as the
    tool's own; refused like `check` otherwise."""
    path = check(path, option, legacy)
    path.mkdir(parents=True, exist_ok=True)
    if not (path / MARKER).is_file():
        (path / MARKER).write_text(_MARKER_TEXT.format(what=option))
    return path


def made_results(path: Path) -> bool:
    """A results folder from before the marker existed: only RESULTS_ENTRIES (what `matrix`,
    `merge-results` and `evidence` write), and its results.json, when there, is ggml-patch's."""
    if not all(e.name in RESULTS_ENTRIES for e in path.iterdir()):
        return False
    # its results.json says it is ggml-patch's: a folder of a summary.md alone, or a results.json
    # without the "tool" key, may be anyone's
    data = _document(path / "results.json", "results", root=path)
    tool = data.get("tool") if data is not None else None
    return isinstance(tool, str) and tool.startswith("ggml-patch")


def _document(path: Path, kind: str, root: Optional[Path] = None) -> Optional[dict]:
    """A JSON object the tool may have written, or None (absent, unreadable, not an object)."""
    try:
        data = untrusted.load_json(path, kind, root)
    except ConfigError:
        return None
    return data if isinstance(data, dict) else None


def replaceable_file(path: Path | str, option: str, made: Callable[[Path], bool]) -> Path:
    """`path` (absolute) if writing there loses no user's
    file: absent, or one the tool wrote (`made`)."""
    path = writable_file(path, option)
    if (path.exists() or path.is_symlink()) and not (
        path.is_file() and not path.is_symlink() and made(path)
    ):
        raise ConfigError(
            f"{option} {path}: a file ggml-patch did not write is there; "
            "name a new file (nothing is overwritten)"
        )
    return path


def cache_problem(path: Path) -> Optional[str]:
    """Why `path` cannot be the tool's cache (a user's files), or
    None: absent, empty, marked or cache-only."""
    if not path.is_dir() or (path / CACHE_MARKER).is_file():
        return None
    foreign = sorted({e.name for e in path.iterdir()} - CACHE_ENTRIES)
    if not foreign:
        return None
    return (
        f"{path}: the folder holds files that are not ggml-patch's cache ({foreign[0]!r}); "
        f"give a new or empty folder (a cache is marked by {CACHE_MARKER})"
    )


def made_bundles(path: Path) -> bool:
    """A bundle folder from before the marker: each entry a
    made_bundle, or an interrupted bundle's staging."""
    return all(
        made_bundle(e) or (e.name.startswith(".") and e.name.endswith(".partial") and e.is_dir())
        for e in path.iterdir()
    )


def made_bundle(folder: Path) -> bool:
    """`folder` holds a bundle ggml-patch wrote for the target
    it is named after (its manifest says so)."""
    man = _document(folder / "manifest.json", "manifest", root=folder)
    return man is not None and man.get("tool") == "ggml-patch" and man.get("target") == folder.name
