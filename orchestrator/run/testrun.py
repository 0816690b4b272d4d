"""Running one test binary: a timeout, and the whole process group killed when it hangs."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional


@dataclass
class TestRun:
    name: str
    exit_code: Optional[int]  # None when killed for the timeout
    duration_s: float
    output: str
    timed_out: bool = False
    log: str = ""

    @property
    def signal(self) -> Optional[str]:
        if self.exit_code is not None and self.exit_code < 0:
            try:
                return signal.Signals(-self.exit_code).name
            except ValueError:
                return f"signal {-self.exit_code}"
        return None


def run_test(
    name: str, argv: list[str], timeout: float, env: dict[str, str], log: Path, cwd: Optional[Path] = None
) -> TestRun:
    t0 = time.monotonic()
    if not Path(argv[0]).exists():
        return TestRun(name, 127, 0.0, f"{argv[0]}: not built\n", log=str(log))
    proc = _spawn(argv, env, cwd)
    timed_out = False
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, _ = proc.communicate()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    return _logged(name, argv, proc.returncode, timed_out, time.monotonic() - t0, out or "", log)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the test and anything it started
    except ProcessLookupError:
        pass


def run_program(
    name: str,
    argv: list[str],
    timeout: float,
    env: dict[str, str],
    log: Path,
    on_line: Optional[Callable[[str], None]] = None,
) -> TestRun:
    """`run_test` for a long program whose lines are wanted as they come (progress): stdout read
    line by line, each given to `on_line`; the whole process group killed after `timeout` seconds
    or on an interrupt. The log has the command, the output and how it ended, like run_test's."""
    t0 = time.monotonic()
    if not Path(argv[0]).exists():
        return TestRun(name, 127, 0.0, f"{argv[0]}: not built\n", log=str(log))
    proc = _spawn(argv, env)
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
        proc.wait()
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    finally:
        timer.cancel()
    return _logged(name, argv, proc.returncode, expired.is_set(), time.monotonic() - t0, "".join(lines), log)


def _spawn(argv: list[str], env: dict[str, str], cwd: Optional[Path] = None) -> subprocess.Popen:
    """The program in a session of its own (its group is what a timeout kills), output merged."""
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        env={**os.environ, **env},
        cwd=str(cwd) if cwd else None,
        start_new_session=True,
    )


def _logged(name: str, argv: list[str], code: int, timed_out: bool, seconds: float, output: str, log: Path) -> TestRun:
    """The run, its log written: the command, the output and how it ended."""
    run = TestRun(name, None if timed_out else code, seconds, output, timed_out, str(log))
    log.parent.mkdir(parents=True, exist_ok=True)
    status = "timed out" if timed_out else f"exit {code}"
    log.write_text(f"$ {' '.join(argv)}\n{output}\n[{status} after {seconds:.2f} s]\n", encoding="utf-8")
    return run
