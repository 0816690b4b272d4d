"""The machine's cores shared by the cells of one run: a GNU make jobserver (a named pipe holding
one byte per core) that every cell and every ninja of the run draw from. A cell holds one core
while its steps run; its ninja (1.13 and newer joins the jobserver named in MAKEFLAGS) uses that
one and takes more while they are free. So one cell's cold build gets every core, two cells
building at once share them, and a cell that only recompiles one file leaves the other core to
another cell: never more compile jobs than cores in all, and no core idle while a cell waits."""

from __future__ import annotations

import functools
import os
import re
import select
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from ..cancel import CancelToken

# ninja joins a jobserver from this version on (the fifo style, POSIX)
NINJA_JOBSERVER = (1, 13)
_VERSION = re.compile(r"^(\d+)\.(\d+)")
_POLL_S = 0.2  # how often a cell waiting for a core checks for an interrupt


@functools.lru_cache(maxsize=None)
def ninja_joins_jobserver(ninja: str) -> bool:
    """Whether this ninja takes its parallelism from a jobserver (and not its own -j)."""
    try:
        out = subprocess.run(
            [ninja, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return False
    m = _VERSION.match(out.stdout.strip())
    if m is None:
        return False
    return (int(m.group(1)), int(m.group(2))) >= NINJA_JOBSERVER


class CoreTokens:
    """A jobserver with `cores` tokens in a fifo under `parent` (the tool's cache), removed on
    close. `makeflags` is what a ninja needs in its environment to join it."""

    def __init__(self, cores: int, parent: Path, prefix: str = "cores-"):
        self.cores = cores
        # `prefix` names this process (Cache.scratch_prefix): a folder a kill -9 left is cleaned
        self._dir = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
        self.path = self._dir / "jobserver"
        os.mkfifo(self.path, 0o600)
        # read and write ends in one: opening never blocks, and the tokens outlive any client
        self._fd = os.open(self.path, os.O_RDWR | os.O_NONBLOCK)
        os.write(self._fd, b"+" * cores)
        self.makeflags = f"-j{cores} --jobserver-auth=fifo:{self.path}"

    @classmethod
    def for_run(cls, cores: int, parent: Path, prefix: str, ninja: str) -> Optional[CoreTokens]:
        """A jobserver where this ninja and this system can use one (None: they cannot, and the
        run plans its compile jobs itself); a path ninja would split (whitespace) is not used."""
        if cores < 2 or not hasattr(os, "mkfifo") or not ninja_joins_jobserver(ninja):
            return None
        if any(c.isspace() for c in str(parent)):
            return None
        return cls(cores, parent, prefix)

    @contextmanager
    def core(self, cancel: CancelToken) -> Iterator[None]:
        """One core held for the block; waits (checking for an interrupt) while none is free."""
        token = self._take(cancel)
        try:
            yield
        finally:
            os.write(self._fd, token)

    def _take(self, cancel: CancelToken) -> bytes:
        while True:
            cancel.check()
            ready, _, _ = select.select([self._fd], [], [], _POLL_S)
            if not ready:
                continue
            try:
                token = os.read(self._fd, 1)
            except BlockingIOError:  # another reader took it first
                continue
            if token:
                return token

    def close(self) -> None:
        os.close(self._fd)
        shutil.rmtree(self._dir, ignore_errors=True)
