"""Running one test binary or program: a timeout, and the whole process group killed when it
hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from ..buildenv import clean_env
from ..verdicts.classify import signal_name


@dataclass
class TestRun:
    name: str
    exit_code: Optional[int]  # None when killed for the timeout
    duration_s: float
    output: str
    timed_out: bool = False
    log: str = ""
    cpu_s: Optional[float] = None  # the program's own user + system CPU, where it was reaped here

    @property
    def signal(self) -> Optional[str]:
        return signal_name(self.exit_code)


def run_program(
    name: str,
    argv: list[str],
    timeout: float,
    env: dict[str, str],
    log: Path,
    on_line: Optional[Callable[[str], None]] = None,
    cwd: Optional[Path] = None,
) -> TestRun:
    """The program run, its output read line by line (each to `on_line`: a long program's progress),
    its whole process group killed after `timeout` seconds or on an interrupt; the log: command,
    output, how it ended."""
    t0 = time.monotonic()
    if not Path(argv[0]).exists():
        return TestRun(name, 127, 0.0, f"{argv[0]}: not built\n", log=str(log))
    proc = spawn(argv, env, cwd=cwd)
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        _kill_group(proc)

    timer = threading.Timer(timeout, expire)
    timer.daemon = True
    timer.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if on_line:
                on_line(line.rstrip("\n"))
        cpu_s = _reaped(proc)
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        timer.cancel()
    seconds, output, timed_out = time.monotonic() - t0, "".join(lines), expired.is_set()
    log.parent.mkdir(parents=True, exist_ok=True)
    status = "timed out" if timed_out else f"exit {proc.returncode}"
    log.write_text(
        f"$ {' '.join(argv)}\n{output}\n[{status} after {seconds:.2f} s]\n", encoding="utf-8"
    )
    return TestRun(
        name, None if timed_out else proc.returncode, seconds, output, timed_out, str(log), cpu_s
    )


def _reaped(proc: subprocess.Popen) -> Optional[float]:
    """Wait for the program; its own CPU seconds (the kernel's rusage of that child: with two
    programs at once, the process-wide children's total would count the other's too)."""
    if not hasattr(os, "wait4"):
        proc.wait()
        return None
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the test and anything it started
    except ProcessLookupError:
        pass


def spawn(
    argv: list[str], env: dict[str, str], own_session: bool = True, cwd: Optional[Path] = None
) -> subprocess.Popen:
    """The program, output merged; in a session of its own unless told (its group is what a timeout
    kills); in `cwd` where given (a contributor's command runs in the worktree)."""
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env=clean_env(env),  # listed variables only: no token reaches a build or a test
        start_new_session=own_session,
        cwd=cwd,
    )
