"""What a hostile target's code does, run the way the behaviour check runs it (confined.run):
each function is called in the confined process, with the tool's own spawn helpers, and answers
as behaviour.build_and_run does (a Behaviour, whether it is kept)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from orchestrator.drift.status import PASSED, Behaviour
from orchestrator.run.cmake import cmake_exe
from orchestrator.run.testrun import run_program, spawn


def configure(project: str, build: str) -> tuple[Behaviour, bool]:
    """A CMake configure as cell.tested_tree runs one (the tool's spawn, in its process group)."""
    proc = spawn([cmake_exe(), "-S", project, "-B", build], {}, own_session=False)
    out, _ = proc.communicate()
    return Behaviour(outcome=PASSED, detail=f"configure exit {proc.returncode}"), True


def run_test_program(script: str, log: str) -> tuple[Behaviour, bool]:
    """A test as cell.tested_tree runs one (run_program: a session of its own, its timeout)."""
    run = run_program("t", ["/bin/sh", script], 3600, {}, Path(log))
    return Behaviour(outcome=PASSED, detail=f"exit {run.exit_code}"), True


def environment(out: str) -> tuple[Behaviour, bool]:
    """What a target's code can see: its environment as the tool's spawn gives it, and the
    confined process's own (/proc/PID/environ of its parent)."""
    proc = spawn(["/bin/sh", "-c", 'env; echo "---"; tr "\\0" "\\n" < /proc/$PPID/environ'], {})
    seen, _ = proc.communicate()
    Path(out).write_text(seen + f"\n--- confined pid {os.getpid()}\n")
    return Behaviour(outcome=PASSED), True


def orphan(marker: str) -> tuple[Behaviour, bool]:
    """A program that leaves a daemon behind in a session of its own, then ends."""
    subprocess.run(["/bin/sh", "-c", f"setsid sleep {marker} >/dev/null 2>&1 &"], check=True)
    return Behaviour(outcome=PASSED, detail="left a daemon"), True
