"""run/testrun.run_program, the evidence's runner for long programs: each line as it comes, the log,
the exit code, a signal, and the whole process group killed at the timeout."""

from __future__ import annotations

import sys
import time

from orchestrator.run.testrun import run_program


def script(tmp_path, body: str):
    path = tmp_path / "prog.py"
    path.write_text(f"import sys, time, os, signal\n{body}\n")
    return [sys.executable, str(path)]


def test_lines_come_as_they_are_printed_and_the_log_has_them(tmp_path):
    seen: list[tuple[str, float]] = []
    t0 = time.monotonic()
    argv = script(
        tmp_path, "print('epoch=1', flush=True)\ntime.sleep(1.0)\nprint('epoch=2', flush=True)"
    )
    run = run_program(
        "prog",
        argv,
        30,
        {},
        tmp_path / "prog.log",
        lambda ln: seen.append((ln, time.monotonic() - t0)),
    )
    assert run.exit_code == 0 and not run.timed_out and run.output == "epoch=1\nepoch=2\n"
    assert [ln for ln, _ in seen] == ["epoch=1", "epoch=2"]
    assert seen[0][1] < seen[1][1] - 0.5  # the first line before the program ended
    log = (tmp_path / "prog.log").read_text()
    assert log.startswith(f"$ {sys.executable}") and "epoch=2\n" in log and "[exit 0 after" in log


def test_exit_codes_and_signals(tmp_path):
    run = run_program(
        "prog",
        script(tmp_path, "print('error: no model', file=sys.stderr)\nsys.exit(2)"),
        30,
        {},
        tmp_path / "a.log",
    )
    assert run.exit_code == 2 and "error: no model" in run.output
    run = run_program(
        "prog", script(tmp_path, "os.kill(os.getpid(), signal.SIGABRT)"), 30, {}, tmp_path / "b.log"
    )
    assert run.exit_code == -6 and run.signal == "SIGABRT"
    run = run_program("prog", [str(tmp_path / "absent")], 30, {}, tmp_path / "c.log")
    assert run.exit_code == 127 and "not built" in run.output


def test_the_timeout_kills_the_program_and_its_children(tmp_path):
    pid_file = tmp_path / "child.pid"
    body = (
        "import subprocess\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\nprint('started', flush=True)\n"
        "time.sleep(60)"
    )
    t0 = time.monotonic()
    run = run_program("prog", script(tmp_path, body), 1.5, {}, tmp_path / "d.log")
    assert run.timed_out and run.exit_code is None and time.monotonic() - t0 < 20
    assert "[timed out after" in (tmp_path / "d.log").read_text()
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{child}/stat") as f:
                if f.read().split()[2] == "Z":
                    break  # a zombie: killed, not yet reaped by init
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"child {child} still runs after the timeout")


def test_each_program_gets_its_own_cpu_seconds_when_two_run_at_once(tmp_path):
    """The evidence runs two programs side by side: each run's CPU is its own child's rusage, not
    the process-wide children's total (which counts whichever other child ended meanwhile)."""
    import threading

    busy = "t0 = time.process_time()\nwhile time.process_time() - t0 < {s}: pass"
    runs = {}

    def go(name, seconds, delay):
        time.sleep(delay)
        argv = script(tmp_path / name, busy.format(s=seconds))
        runs[name] = run_program(name, argv, 60, {}, tmp_path / f"{name}.log")

    (tmp_path / "long").mkdir()
    (tmp_path / "short").mkdir()
    threads = [
        threading.Thread(target=go, args=("long", 1.2, 0.0)),
        threading.Thread(target=go, args=("short", 0.3, 0.2)),  # starts and ends within the long
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 1.1 < runs["long"].cpu_s < 1.45 and 0.25 < runs["short"].cpu_s < 0.5, runs
