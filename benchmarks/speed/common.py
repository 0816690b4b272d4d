"""The bench's shared parts: its constants, its own load (busy loops), running a command or
the tool timed."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.cache import default_cache_dir

ROOT = Path(__file__).resolve().parents[2]  # the checkout

NO_CCACHE = {"CCACHE_DISABLE": "1"}
BUSY_LOOPS = 2  # the load of the loaded measures: one busy loop per core of a 2-core machine
# the line a cell prints once its control is judged (progress.Reporter.verdict)
VERDICT = ": verdict: "
# the README's first command installs nox with uv: the sessions' installs then take seconds
NEWCOMER_NOX = "nox[uv]"
# outside results/: the tool's commands refuse a results folder holding files they did not make,
# so `nox -s matrix`, `evidence` and `bundle` run before or after the bench in any order
DEFAULT_OUT = ROOT / "bench-results"
# the topic a one-topic run applies (m): the queue's first, the one that goes upstream first
ONE_TOPIC = "accumulator-reset"
# (j): the untrusted-input checks
CHECK_MODULES = ("orchestrator/untrusted.py", "orchestrator/outdir.py", "orchestrator/redact.py")


class BusyLoops:
    """`n` processes spinning on a core each, for as long
    as the `with` lasts (the bench's own load)."""

    def __init__(self, n: int):
        self.n, self.procs = n, []

    def __enter__(self):
        self.procs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(self.n)
        ]
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
            p.wait()


def load_note(n_loops: int) -> dict:
    return {"busy_loops": n_loops, "loadavg": [round(x, 2) for x in os.getloadavg()]}


def timed_lines(argv, cwd, env) -> tuple[float, int, list[tuple[float, str]]]:
    """Run `argv` with stdout and stderr merged; every line with the seconds since the start."""
    t0 = time.monotonic()
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
    )
    lines = []
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append((round(time.monotonic() - t0, 2), line.rstrip("\n")))
    rc = proc.wait()
    return time.monotonic() - t0, rc, lines


def sh(argv, cwd=None, env=None, log=None) -> float:
    t0 = time.monotonic()
    out = subprocess.run(
        argv, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    if log:
        Path(log).write_text(out.stdout + out.stderr)
    if out.returncode != 0:
        raise SystemExit(
            f"bench: {' '.join(map(str, argv[:4]))}... exited {out.returncode}: "
            f"{(out.stderr or out.stdout).strip().splitlines()[-1:]}"
        )
    return time.monotonic() - t0


# the tool as users run it: with its modules' bytecode cached, as `pip install` and `nox -s bench`
# (noxfile's TOOL_ENV) give it; a shell's PYTHONDONTWRITEBYTECODE=1 would otherwise make every
# start compile ~1,500 modules (0.5 s of a 0.6 s re-run, measured 2026-12-07)
BYTECODE = {"PYTHONDONTWRITEBYTECODE": ""}


def tool(*args, env=None) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {}), "PYTHONPATH": str(ROOT), **BYTECODE},
    )
    return time.monotonic() - t0, p


def linked_downloads(cache: Path) -> Path:
    """A new tool cache holding only the user's downloads (the pinned sdists), linked: only read."""
    shared = default_cache_dir() / "downloads"
    for folder in shared.iterdir() if shared.is_dir() else []:
        (cache / "downloads" / folder.name).mkdir(parents=True)
        for f in folder.iterdir():
            os.symlink(f, cache / "downloads" / folder.name / f.name)
    return cache


def _children_cpu() -> float:
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime
