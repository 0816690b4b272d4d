"""Issue 35: the cells of a default run share the machine's cores through a jobserver
(run/cores.py) that the real ninja joins: a ninja run by a cell holding one core uses it and takes
the others only while they are free, so two cells never run more compile jobs than cores."""

import sys
import threading
import time

import pytest

from orchestrator.cancel import CancelToken
from orchestrator.run import cmake
from orchestrator.run.cores import CoreTokens, ninja_joins_jobserver

# each job counts the jobs running beside it (a file under a lock) and keeps the most seen
JOB = """
import fcntl, sys, time
from pathlib import Path
count, peak = Path(sys.argv[1]), Path(sys.argv[2])
def add(n):
    with open(count.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        now = int(count.read_text() or 0) + n
        count.write_text(str(now))
        peak.write_text(str(max(now, int(peak.read_text() or 0))))
add(1)
time.sleep(0.4)
add(-1)
"""


@pytest.fixture
def tree(tmp_path):
    """A ninja build of six independent jobs; the most jobs that ran at once, after a build."""
    (tmp_path / "job.py").write_text(JOB)
    count, peak = tmp_path / "count", tmp_path / "peak"
    rule = f"rule job\n  command = {sys.executable} job.py {count} {peak} && touch $out\n"
    builds = "".join(f"build out{i}: job\n" for i in range(6))
    (tmp_path / "build.ninja").write_text(rule + builds)

    def most_at_once():
        return int(peak.read_text())

    count.write_text("0")
    peak.write_text("0")
    return tmp_path, most_at_once


needs_jobserver = pytest.mark.skipif(
    not ninja_joins_jobserver(cmake.ninja_exe()), reason="this ninja predates jobservers (< 1.13)"
)


@needs_jobserver
def test_a_cells_ninja_takes_the_free_core_and_leaves_a_held_one(tree, tmp_path):
    build, most_at_once = tree
    tokens = CoreTokens(2, tmp_path)
    cancel = CancelToken()
    try:
        with tokens.core(cancel):  # the cell running the build holds one core
            step = cmake.build(build, (), tmp_path / "a.log", {}, makeflags=tokens.makeflags)
        assert step.ok, (tmp_path / "a.log").read_text()
        assert most_at_once() == 2  # its own and the free one
        for f in build.glob("out*"):
            f.unlink()
        (build / "peak").write_text("0")
        # another cell holds the second core: this one's ninja runs one job at a time
        with tokens.core(cancel), tokens.core(cancel):
            step = cmake.build(build, (), tmp_path / "b.log", {}, makeflags=tokens.makeflags)
        assert step.ok and most_at_once() == 1
        # the log says how ninja was run: no -j of its own beside the jobserver
        assert " -j" not in (tmp_path / "b.log").read_text().splitlines()[0]
    finally:
        tokens.close()
    assert not tokens.path.exists()  # its fifo removed with its folder
    assert list(tmp_path.glob("cores-*")) == []


def test_without_a_jobserver_ninja_runs_the_jobs_it_is_given(tree, tmp_path):
    build, most_at_once = tree
    step = cmake.build(build, (), tmp_path / "c.log", {}, n_jobs=1)
    assert step.ok and most_at_once() == 1


def test_a_cell_waits_for_a_core_and_an_interrupt_ends_the_wait(tmp_path):
    tokens = CoreTokens(1, tmp_path)
    cancel = CancelToken()
    got = []
    try:
        with tokens.core(cancel):
            waiter = threading.Thread(target=lambda: got.append(_wait_for(tokens, cancel)))
            waiter.start()
            time.sleep(0.5)
            assert waiter.is_alive() and got == []  # no core free: still waiting
        waiter.join(5)
        assert got == ["held"]  # the core given back: taken
        with tokens.core(cancel):
            interrupted = []
            waiter = threading.Thread(target=lambda: interrupted.append(_wait_for(tokens, cancel)))
            waiter.start()
            cancel.cancel()
            waiter.join(5)
            assert interrupted == ["interrupted"]
    finally:
        tokens.close()


def _wait_for(tokens, cancel):
    try:
        with tokens.core(cancel):
            return "held"
    except KeyboardInterrupt:
        return "interrupted"


def test_no_jobserver_where_ninja_or_the_path_cannot_take_one(tmp_path):
    old = tmp_path / "ninja"
    old.write_text("#!/bin/sh\necho 1.11.1\n")
    old.chmod(0o755)
    assert not ninja_joins_jobserver(str(old))
    assert CoreTokens.for_run(2, tmp_path, "cores-", str(old)) is None
    assert CoreTokens.for_run(1, tmp_path, "cores-", cmake.ninja_exe()) is None  # one core
    spaced = tmp_path / "a b"
    spaced.mkdir()
    assert CoreTokens.for_run(2, spaced, "cores-", cmake.ninja_exe()) is None
