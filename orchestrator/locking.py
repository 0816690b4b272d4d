"""Inter-process locks that say who holds them. The holder writes its pid, command and start time
beside the lock; a run that has to wait prints one line naming them, and gives up after
--lock-timeout seconds (exit 10) instead of waiting silently forever. The lock itself is an OS
lock (filelock): released on any exit, kill -9 included, so a stale holder file never blocks
anyone; it only names who held the lock last."""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Callable, Iterator, Optional

import filelock
from pydantic import Field

from . import untrusted
from .errors import ConfigError, LockTimedOut
from .records import Record
from .redact import redact, shell_line


def this_command(argv: Optional[list[str]] = None) -> str:
    argv = list(sys.argv if argv is None else argv)
    if argv and (argv[0].endswith(("__main__.py", "ggml-patch")) or argv[0] == "-m"):
        argv = ["ggml-patch", *argv[1:]]
    # each word redacted before quoting: quotes around a password would hide it from the URL rule
    return shell_line(argv)[:300]


class Holder(Record):
    """The holder file beside a lock: read back untrusted (anything else names no one)."""

    pid: int = Field(gt=0, lt=2**31)
    command: str = Field(max_length=300)
    since: float = Field(ge=946684800)  # from 2000 on (and at most a day ahead: describe_holder)


def holder_path(lock_path: Path) -> Path:
    return lock_path.with_name(lock_path.name + ".json")


def describe_holder(lock_path: Path) -> str:
    """'pid N (command) since TIME' from a holder file
    that is a valid Holder, else a plain phrase."""
    try:
        h = Holder.model_validate(untrusted.load_json(holder_path(lock_path), "lock"), strict=True)
    except (ConfigError, ValueError):  # pydantic's ValidationError is a ValueError
        h = None
    if h is None or h.since > time.time() + 86400:  # a time this lock could have
        return "another process (it did not say which)"
    line = " ".join(redact(h.command).split())
    return (
        f"pid {h.pid} ({line}) since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(h.since))}"
    )


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def hold(
    lock_path: Path,
    what: str,
    timeout: Optional[float] = None,
    notify: Callable[[str], None] = _stderr,
) -> Iterator[None]:
    """Hold the lock; while another process holds it, say who
    once and wait `timeout` s (None: forever)."""
    # not thread-local: a matrix cell's lock is taken in its first phase and released after its
    # last, each phase possibly on another of the run's threads (--parallel)
    lock = filelock.FileLock(str(lock_path), thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        who = describe_holder(lock_path)
        limit = (
            f"; giving up after {timeout:g} s (--lock-timeout)"
            if timeout is not None
            else "; waiting (--lock-timeout S to give up)"
        )
        notify(f"ggml-patch: waiting for {what}: held by {who}{limit}")
        try:
            lock.acquire(timeout=-1 if timeout is None else timeout)
        except filelock.Timeout:
            raise LockTimedOut(
                f"{what} is still held by {describe_holder(lock_path)} after {timeout:g} s "
                "(--lock-timeout); let that run finish, or stop it"
            ) from None
    info = holder_path(lock_path)
    try:
        info.write_text(
            Holder(pid=os.getpid(), command=this_command(), since=time.time()).model_dump_json()
        )
        yield
    finally:
        with suppress(OSError, ValueError):  # ours alone to remove; another holder's stays
            if Holder.model_validate_json(info.read_text()).pid == os.getpid():
                info.unlink()
        lock.release()
