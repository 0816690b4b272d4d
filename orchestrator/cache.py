"""The tool's own cache: downloads, the snapshot repository, per-cell worktrees and builds. Nothing
outside it (and the results directory) is ever written."""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from .errors import ConfigError
from .locking import hold
from .outdir import CACHE_MARKER
from .redact import redact


def default_cache_dir() -> Path:
    env = os.environ.get("GGML_PATCH_CACHE")
    if env is not None and not env.strip():
        # an empty value is a mistake (an unset CI variable), not a request for the default
        raise ConfigError(
            "GGML_PATCH_CACHE is set but empty: unset it to use the default "
            "(~/.cache/ggml-patch), or name a folder (or pass --cache DIR)"
        )
    if env:
        return Path(env).expanduser().absolute()
    return (
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").absolute() / "ggml-patch"
    )


def slug(text: str) -> str:
    """A file-name-safe form of a key ("llama.cpp/cpu" -> "llama.cpp-cpu")."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


_HOST = slug(socket.gethostname()) or "host"
# <what>-<host>-pid<pid>-<random>: whose a temporary entry is, to clean it once that process is gone
_SCRATCH_ENTRY = re.compile(r"^[a-z]+-(?P<host>.+)-pid(?P<pid>\d+)-")
# entries of older versions (no pid in the name): a day is past any fetch
_UNOWNED_AFTER_S = 24 * 3600


@dataclass(frozen=True)
class Cache:
    root: Path
    lock_timeout: Optional[float] = None  # --lock-timeout: None waits as long as it takes

    def __post_init__(self):
        # absolute once: git runs in other directories (-C), a relative root would point elsewhere
        object.__setattr__(self, "root", Path(os.path.expanduser(str(self.root))).absolute())

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

    def scratch_prefix(self, what: str) -> str:
        """A temporary entry's prefix naming this host and process:
        clean_scratch removes it once they are gone."""
        return f"{what}-{_HOST}-pid{os.getpid()}-"

    @property
    def marked(self) -> bool:
        """Whether the folder carries the tool's marker (only then is anything in it cleaned)."""
        return (self.root / CACHE_MARKER).is_file()

    def clean_scratch(
        self, warn: Callable[[str], None] = lambda line: print(redact(line), file=sys.stderr)
    ) -> list[Path]:
        """Remove temporary entries whose process is gone (a kill -9 left them); the removed paths.
        Entries of live processes, of other hosts sharing the cache, or of unknown owners younger
        than a day are kept. Only in a marked cache; an entry that cannot be judged or removed
        is left there with a warning (it never stops a command)."""
        tmp = self.root / "tmp"
        if not self.marked or tmp.is_symlink() or not tmp.is_dir():
            return []
        removed = []
        for entry in tmp.iterdir():
            try:
                if not _stale(entry):
                    continue
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink(missing_ok=True)
            except (OSError, ValueError, OverflowError) as e:
                warn(
                    f"ggml-patch: warning: left {entry} in the cache's tmp/ "
                    f"({getattr(e, 'strerror', None) or e})"
                )
                continue
            removed.append(entry)
        return removed

    def _dir(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(parents=True, exist_ok=True)
        if not self.marked:
            (self.root / CACHE_MARKER).write_text(
                "This folder is ggml-patch's cache (downloads, "
                "snapshots, builds); it may be deleted whole.\n"
            )
        return d

    @contextmanager
    def lock(self, name: str, timeout: Optional[float] = None) -> Iterator[None]:
        """An inter-process lock; released on any exit, so no stale lock survives an interrupt.
        Waiting for another run says who holds it; --lock-timeout bounds the wait (exit 10)."""
        path = self._dir("locks") / f"{slug(name)}.lock"
        with hold(
            path,
            f"the lock {name!r} in {self.root}",
            self.lock_timeout if timeout is None else timeout,
        ):
            yield


def _stale(entry: Path) -> bool:
    """Whether a tmp/ entry belongs to a process that is gone (or to no one, for a day)."""
    m = _SCRATCH_ENTRY.match(entry.name)
    if not m:
        return time.time() - entry.lstat().st_mtime >= _UNOWNED_AFTER_S
    pid = int(m.group("pid"))
    # another host's, or not a real pid: not ours to judge
    if m.group("host") != _HOST or pid <= 0 or pid >= 2**31:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # it exists, another user's
    return False
