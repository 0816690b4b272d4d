"""The contributor's build and test lines (contributor.py) run exactly as PR_BODY.md shows them,
in the bundle's worktree: each line split with shlex into argv (never a shell), `./build/bin/X`
run from the worktree, the program of `cmake` as PATH finds it. Bounded: all the lines under one
deadline (GGML_PATCH_VERIFY_DEADLINE_S), each in a process group of its own that the deadline
kills whole (run/testrun.py). Confined as the behaviour check is (drift/confined.py): a HOME,
XDG folders and TMPDIR of its own, and only buildenv's listed variables (no GITHUB_TOKEN,
GH_TOKEN or other credential); CCACHE_DIR the caller's, so ccache serves it as it serves the
matrix. The build folder is kept beside the worktree between runs (the worktree is cleaned
before each `git am`): a repeat rebuilds only what changed."""

from __future__ import annotations

import math
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from ..buildenv import is_credential, own_homes
from ..errors import ConfigError
from ..run.cmake import cmake_exe, jobs
from ..run.testrun import TestRun, run_program
from ..run.variants import test_argv
from ..verdicts import classify
from ..verdicts.competing import first_failing_line
from .contributor import BIN_PREFIX, BUILD_DIR, argv, program_of

DEADLINE_ENV = "GGML_PATCH_VERIFY_DEADLINE_S"
DEADLINE_S = 3600.0  # a cold build of the project's own CMake on a small machine, with room
_SHOWN_MAX = 400  # a quoted output line, at most


@dataclass(frozen=True)
class LineRun:
    """One shown line and how it ran."""

    line: str
    run: TestRun

    @property
    def is_test(self) -> bool:
        return self.line.startswith(BIN_PREFIX)

    @property
    def outcome(self) -> str:
        return classify.outcome(self.run.exit_code, self.run.timed_out)

    def how(self) -> str:
        """How it ended, in words: "exit 1", "SIGSEGV", "stopped at the deadline"."""
        if self.run.timed_out or self.run.exit_code is None:
            return "stopped at the verification's deadline"
        return self.run.signal or f"exit {self.run.exit_code}"


def deadline(environ: Mapping[str, str] = os.environ) -> float:
    """The verification's deadline in seconds: GGML_PATCH_VERIFY_DEADLINE_S, else DEADLINE_S;
    one line (exit 2) for a value that is not a finite positive number."""
    raw = environ.get(DEADLINE_ENV) or ""
    try:
        value = float(raw) if raw else DEADLINE_S
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{DEADLINE_ENV}={raw[:40]!r}: expected a number of seconds above 0")
    return value


def environment(root: Path) -> dict[str, str]:
    """What the lines run with on top of buildenv's listed variables (testrun.spawn adds those):
    their own homes in `root`, the caller's ccache, CMake's parallel build level."""
    env = own_homes(root)
    # `cmake --build` is serial by default with Makefiles: the matrix's -j, through CMake's own
    # variable, so the line stays as a contributor types it
    env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(jobs())
    return {k: v for k, v in env.items() if not is_credential(k)}


def _program(words: list[str], worktree: Path, env: dict[str, str]) -> list[str]:
    """The argv to start: a test from the worktree's build folder (line-buffered, as the matrix
    runs it: a crash keeps the lines before it), `cmake` as PATH finds it, else the tool's."""
    first, rest = words[0], words[1:]
    if first.startswith(BIN_PREFIX):
        return test_argv(worktree / first) + rest
    found = shutil.which(first, path=env.get("PATH") or os.environ.get("PATH"))
    if found is None and first == "cmake":
        found = cmake_exe()
    return [found or first, *rest]


def run_lines(
    lines: list[str], worktree: Path, keep: Path, root: Path, logs: Path, seconds: float
) -> list[LineRun]:
    """`lines` in `worktree`, in order, until one that is not a test fails; the build folder is
    `keep` at rest and `worktree`/build while they run."""
    env = environment(root)
    build = worktree / BUILD_DIR
    if build.exists():  # an interrupted run's: cleaned away by the next checkout anyway
        shutil.rmtree(build)
    if keep.exists():
        keep.rename(build)
    out: list[LineRun] = []
    t0 = time.monotonic()
    try:
        for n, line in enumerate(lines, 1):
            left = seconds - (time.monotonic() - t0)
            words = argv(line)
            log = logs / f"{n:02d}-{Path(program_of(line)).name}.log"
            if left <= 0:
                out.append(LineRun(line, TestRun(words[0], None, 0.0, "", True, str(log))))
                break
            command = _program(words, worktree, {**os.environ, **env})
            run = run_program(words[0], command, left, env, log, cwd=worktree)
            out.append(LineRun(line, run))
            if out[-1].outcome != classify.PASSED and not out[-1].is_test:
                break
    finally:
        if build.exists():
            if keep.exists():
                shutil.rmtree(keep)
            build.rename(keep)
    return out


def passing_line(run: LineRun) -> Optional[str]:
    """The line a passing test ends on (its last line saying "passed", as the matrix reads it)."""
    lines = classify.strip_ansi(run.run.output).splitlines()
    found = next((ln.strip() for ln in reversed(lines) if "passed" in ln), None)
    return found[:_SHOWN_MAX] if found else None


def failing_line(run: LineRun, natives: tuple[str, ...], reference: str = "") -> Optional[str]:
    """The line a failing test shows: its first failing case line; a crash: its signal and the
    case it died in (`reference`: the passing run's output, classify.crash_line)."""
    program = program_of(run.line)
    output = run.run.output
    if run.outcome == classify.CRASHED:
        if program == "test-opt":
            return classify.crash_line(run.run.exit_code, output, reference)
        return f"{program}: {run.run.signal or 'a signal'}"
    found = first_failing_line(program, output, gate=program in natives)
    return found[:_SHOWN_MAX] if found else None
