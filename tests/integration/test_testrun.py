"""Running test binaries: exit codes, signals, timeouts (the process group is killed)."""

import sys
import time

from orchestrator.run.testrun import run_program
from orchestrator.verdicts import classify


def _py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_pass_fail_and_output(tmp_path):
    ok = run_program("t", _py("print('all good')"), 30, {}, tmp_path / "ok.log")
    assert (
        ok.exit_code == 0 and "all good" in ok.output and classify.outcome(ok.exit_code) == "passed"
    )
    bad = run_program(
        "t",
        _py(
            "import sys; print('device=CPU opt_period=1: FAIL at "
            "step 2: w=0.25 expected 0.5'); sys.exit(1)"
        ),
        30,
        {},
        tmp_path / "bad.log",
    )
    assert classify.outcome(bad.exit_code, bad.timed_out) == "failed"
    assert classify.gate_failure_line(bad.output).startswith("device=CPU opt_period=1")
    assert "exit 1" in (tmp_path / "bad.log").read_text()


def test_abort_is_a_crash_not_a_failure(tmp_path):
    r = run_program(
        "t",
        _py(
            "import os; print('device=CPU opt_period=1: FAIL at step 2: "
            "w=0.25 expected 0.5', flush=True); os.abort()"
        ),
        30,
        {},
        tmp_path / "a.log",
    )
    assert r.signal == "SIGABRT"
    assert classify.outcome(r.exit_code, r.timed_out) == "crashed"
    v = classify.control_verdict(
        True, classify.outcome(r.exit_code), r.exit_code, r.output, "passed"
    )
    assert v.verdict == "invalid"


def test_hang_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child-alive"
    code = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', "
        f"\"import time; time.sleep(3); open(r'{marker}', 'w').write('x')\"]); time.sleep(60)"
    )
    t0 = time.monotonic()
    r = run_program("t", _py(code), 1.0, {}, tmp_path / "h.log")
    assert r.timed_out and r.exit_code is None
    assert time.monotonic() - t0 < 10
    assert classify.outcome(r.exit_code, r.timed_out) == "timeout"
    time.sleep(3.5)
    assert not marker.exists(), "the hung test's child survived the timeout"


def test_missing_binary_is_not_built(tmp_path):
    r = run_program("t", [str(tmp_path / "nope")], 5, {}, tmp_path / "n.log")
    assert classify.outcome(r.exit_code) == "not-built"
