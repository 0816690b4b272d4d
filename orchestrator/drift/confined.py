"""The behaviour check runs a target's own code (its CMake, its build, its tests: for the live
profile, third-party fork HEADs), so it runs confined:

- in a process of its own, started fresh (`python -m orchestrator.drift.confined`, not a fork:
  its /proc/PID/environ is the clean one below), in a session and process group of its own;
- its whole configure, build and test under ONE deadline (`GGML_PATCH_BEHAVIOUR_DEADLINE_S`,
  default DEADLINE_S): past it, the process tree is stopped, then killed (its group and every
  descendant, the tests' own sessions too), and the check says so (not checked, not kept);
- without secrets in its environment (a variable named like a credential, the tokens
  redact.SECRET_ENV lists, ACTIONS_*), with HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME, XDG_DATA_HOME
  and TMPDIR inside its work folder; CCACHE_DIR the caller's ccache folder, named explicitly (the
  compile cache the cells share).

What it cannot do: code that runs as the user can read the environment of the user's other
processes (/proc/PID/environ of the tool that started it, and of the shell). A local run shares
the user's environment that way (README, under the behaviour check): run it without a token in
the environment, and on GitHub in a job that holds no write token."""

from __future__ import annotations

import ctypes
import importlib
import json
import math
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from ..buildenv import is_credential, own_homes
from ..errors import ConfigError
from ..records import Record
from ..redact import SECRET_ENV, redact
from .status import NOT_CHECKED, Behaviour

DEADLINE_ENV = "GGML_PATCH_BEHAVIOUR_DEADLINE_S"
DEADLINE_S = 1800.0  # a cold build of test-opt on a small machine, with room
_RESULT_MAX = 64 * 1024  # the result's JSON: a Behaviour (bounded text lines) and a flag
_GRACE_S = 5.0  # after the deadline: the tree frozen, then killed; this long to be reaped


def deadline(environ: Mapping[str, str] = os.environ) -> float:
    """The check's deadline in seconds: GGML_PATCH_BEHAVIOUR_DEADLINE_S, else DEADLINE_S; one
    line (exit 2) for a value that is not a finite positive number."""
    raw = environ.get(DEADLINE_ENV)
    if raw is None or raw == "":
        return DEADLINE_S
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{DEADLINE_ENV}={raw[:40]!r}: expected a number of seconds above 0")
    return value


def is_secret(name: str) -> bool:
    """A variable the check's environment never holds."""
    return name in SECRET_ENV or name.startswith("ACTIONS_") or is_credential(name)


def confined_env(root: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The check's environment: the caller's without secrets, its homes and caches in `root`."""
    env = {k: v for k, v in environ.items() if not is_secret(k)}
    env.update(own_homes(root, environ))
    # the child imports this very tool (first), and what the caller's path adds
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    return env


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[2])


def run(call: str, inputs: dict[str, Any], root: Path, seconds: float) -> tuple[Behaviour, bool]:
    """`call` ("module:function", e.g. behaviour.build_and_run) with `inputs` in the confined
    process; its result (a Behaviour) and whether it is the tree's (kept). Past `seconds`: not
    checked, not kept, nothing of it left running."""
    # the result comes back on a pipe of its own: never a file the target's code could write
    # (and the programs the check starts do not inherit it: subprocess closes other fds)
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.drift.confined", call, str(write_end)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=confined_env(root),
            cwd=root,
            start_new_session=True,
            pass_fds=(write_end,),
        )
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        return _wait(proc, answer, inputs, seconds)


def _wait(
    proc: subprocess.Popen, answer, inputs: dict[str, Any], seconds: float
) -> tuple[Behaviour, bool]:
    relay = threading.Thread(target=_relay, args=(proc,), daemon=True)
    relay.start()
    try:
        assert proc.stdin is not None
        try:
            proc.stdin.write(pickle.dumps(inputs))
            proc.stdin.close()
        except BrokenPipeError:  # it ended before reading them: its exit code says so below
            pass
        proc.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        kill_tree(proc)
        detail = (
            f"the check (configure, build, test) ran past its {seconds:g} s deadline "
            f"({DEADLINE_ENV}): stopped, every process it started killed"
        )
        return Behaviour(outcome=NOT_CHECKED, detail=detail), False
    except BaseException:  # an interrupt: nothing of the target's code is left running
        kill_tree(proc)
        raise
    kill_tree(proc)  # ended by itself: what it left running in its session goes too
    relay.join(timeout=_GRACE_S)
    return _result(answer.read(_RESULT_MAX), proc.returncode)


def _relay(proc: subprocess.Popen) -> None:
    """The check's output, line by line, to this process's stderr (redacted there)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stderr.write(redact(line.decode("utf-8", "replace")))
    sys.stderr.flush()


def _result(data: bytes, code: Optional[int]) -> tuple[Behaviour, bool]:
    """The check's answer, validated (JSON, never unpickled: this side holds the secrets)."""
    try:
        found = _Answer.model_validate_json(data) if code == 0 else None
    except ValueError:
        found = None
    if found is None:
        detail = f"the check's process ended with exit code {code} and no result"
        return Behaviour(outcome=NOT_CHECKED, detail=detail), False
    return found.behaviour, found.lasting


class _Answer(Record):
    behaviour: Behaviour
    lasting: bool


# ---------------------------------------------------------------- the process tree


def _processes() -> dict[int, tuple[int, int, int]]:
    """pid -> (parent pid, process group, session) of every process (Linux /proc; elsewhere
    empty)."""
    out: dict[int, tuple[int, int, int]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state ppid pgrp sid
        if len(fields) > 3:
            out[int(name)] = (int(fields[1]), int(fields[2]), int(fields[3]))
    return out


def tree_of(pid: int, alive: bool, known: frozenset[int] = frozenset()) -> set[int]:
    """The processes of the check whose process is `pid`: the ones left in its session or group
    (an orphan whose parent is gone), every process below those, `known` ones and (`alive`: not
    yet reaped, so the pid is still its own) `pid`, in any session (a test runs in its own)."""
    children: dict[int, list[int]] = {}
    found = {p for p in known}
    for child, (parent, group, session) in _processes().items():
        children.setdefault(parent, []).append(child)
        if pid in (group, session):  # a pid stays unused while it names a group or a session
            found.add(child)
    if alive:
        found.add(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(proc: subprocess.Popen) -> None:
    """The check's process, its group, its session and every descendant: frozen first
    (SIGSTOP: nothing forks or is orphaned while the tree is gathered), then killed, then
    reaped. After the check ended by itself, what it left running."""
    alive = proc.poll() is None
    tree: set[int] = set()
    for _ in range(10):  # until no new process appears under the frozen ones
        found = tree_of(proc.pid, alive, frozenset(tree)) - {os.getpid()}
        _signal(found - tree, signal.SIGSTOP)
        if found <= tree:
            break
        tree |= found
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _signal(tree, signal.SIGKILL)
    _signal(tree, signal.SIGCONT)  # a stopped process dies of SIGKILL anyway; this is cheap
    t0 = time.monotonic()
    while proc.poll() is None and time.monotonic() - t0 < _GRACE_S:
        time.sleep(0.05)


# ---------------------------------------------------------------- the confined process


def _become_subreaper() -> None:
    """A process the check's programs orphan (a daemon, `setsid sleep &`) becomes this one's
    child, not init's: it stays in the tree kill_tree gathers (Linux; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _kill_orphans() -> None:
    """Every process still below this one (what the check left running): killed, reaped."""
    me = os.getpid()
    left = tree_of(me, True) - {me}
    _signal(left, signal.SIGKILL)
    for _ in left:
        try:
            os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break


def main(argv: list[str]) -> int:
    """In the confined process: argv = [module:function, the answer pipe's fd]; the inputs
    pickled on stdin by `run` (this tool's own data, from the process that started it); the
    result as JSON on the pipe. What the call left running is killed before it answers."""
    module, _, name = argv[0].partition(":")
    call = getattr(importlib.import_module(module), name)
    inputs = pickle.loads(sys.stdin.buffer.read())
    sys.stdout = sys.stderr  # its own prints join the relayed output
    _become_subreaper()
    try:
        behaviour, lasting = call(**inputs)
    finally:
        _kill_orphans()
    with os.fdopen(int(argv[1]), "wb") as answer:
        answer.write(json.dumps(_Answer(behaviour=behaviour, lasting=lasting).to_json()).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
