"""The result cache: finished results kept by a content hash of everything that decides them
(cell.cache_inputs, the training evidence's key): a changed byte in the series re-runs every cell,
a changed backend flag only that backend's cells. An entry is `<key>.json` and its logs beside it
(`<key>-logs/`). The matrix's cells and the training evidence both keep theirs here."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

import filelock

# bump when the meaning of a cached result changes (2: log paths relative to the logs dir)
KEY_VERSION = 2


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
    write_atomic(directory / f"{key}.json", json.dumps(entry).encode())


def store_with_logs(directory: Path, key: str, entry: dict, logs: Path) -> None:
    """The entry and a copy of `logs` beside it (the logs first: a hit has them). Two cells with
    the same inputs have the same key and may store or read it at once: the key's lock orders
    them, and the logs are copied aside and renamed in, so an interrupted copy is never the
    entry's."""
    entry_logs = directory / f"{key}-logs"
    directory.mkdir(parents=True, exist_ok=True)
    with _key_lock(directory, key):
        if logs.is_dir():
            fresh = Path(tempfile.mkdtemp(prefix=f".{key[:16]}-logs.", dir=directory))
            shutil.copytree(logs, fresh, dirs_exist_ok=True)
            old = fresh.with_name(fresh.name + ".old")
            if entry_logs.is_dir():
                os.rename(entry_logs, old)
            os.rename(fresh, entry_logs)
            shutil.rmtree(old, ignore_errors=True)
        else:
            shutil.rmtree(entry_logs, ignore_errors=True)
        store(directory, key, entry)


def copy_logs(directory: Path, key: str, dest: Path, replace: bool = False) -> None:
    """An entry's logs copied to `dest` (`replace`: dest emptied first, so no older log stays). A
    log `dest` already holds from the same entry (same size and time: copies keep the time) is
    not copied again: a re-run into the same results writes nothing it does not change."""
    if replace:
        shutil.rmtree(dest, ignore_errors=True)
    entry_logs = directory / f"{key}-logs"
    if not entry_logs.is_dir():
        return
    with _key_lock(directory, key):  # not while another cell of the same key stores it
        if entry_logs.is_dir():
            shutil.copytree(entry_logs, dest, dirs_exist_ok=True, copy_function=_copy_if_changed)


def _key_lock(directory: Path, key: str) -> filelock.FileLock:
    """One entry's lock (an OS lock: released on any exit); held for a copy of logs only."""
    return filelock.FileLock(str(directory / f"{key}.lock"), thread_local=False)


def _copy_if_changed(src: str, dst: str) -> None:
    try:
        there, here = os.stat(dst), os.stat(src)
    except OSError:
        there = None
    if there is not None and (there.st_size, there.st_mtime_ns) == (here.st_size, here.st_mtime_ns):
        return
    shutil.copy2(src, dst)


def write_atomic(path: Path, data: bytes) -> None:
    """`data` in `path`, atomically: a reader sees all or nothing (mode 0644, folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name[:40]}.", suffix=".tmp", dir=path.parent)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
