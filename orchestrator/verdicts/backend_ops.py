"""test-backend-ops's console output read into a typed run, and what it can judge (pure).

Upstream's tool (`test-backend-ops [-o OP,..] [-b NAME]`, mode `test`) evaluates each case on a
backend and on the CPU backend in its reference mode (`ggml_backend_cpu_set_use_ref`), and
compares them. What it prints (ggml 0.15.3, measured; README of issue 46's notes):

    Testing 1 devices                              (then per device:)
    Backend 1/1: CPU
      Skipping CPU backend                         <- without -b: the CPU is the reference only
      Device description: ...                      <- a tested backend: its cases follow
      CONCAT(type=f32,...): OK | FAIL | not supported [CPU] | skipping large tensors for speed
      112/112 tests passed
      Backend CPU: OK | FAIL
    1/1 backends passed
    OK | FAIL

A device skipped (the CPU without `-b`, or one `-b` does not name, even a `-b` naming no device
present) counts as passed: exit 0 with no case compared. Only `-b CPU` compares the CPU backend,
with its own reference path: both share every CPU kernel but the few the reference mode turns
off (flash-attention tiling, fusion), so a wrong value in a CPU kernel is invisible there; a crash
(the process killed by a signal mid-case) is seen. A case a backend does not support is not run.
"""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field

from ..records import Record
from .classify import signal_name, strip_ansi

CPU = "CPU"  # test-backend-ops's name of the CPU device (ggml_backend_dev_name)
_BACKEND = re.compile(r"^Backend (?P<i>\d+)/(?P<n>\d+): (?P<name>\S+)\s*$")
_SKIP = re.compile(r"^  (?P<reason>Skipping.*?)\s*$")
# a compare failure's message is printed before the case's name, on its line
_CASE = re.compile(
    r"^(?P<pre>.*?)\s*(?<!\S)(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*)\): (?P<rest>.*?)\s*$"
)
_DEVICE = re.compile(r"^  Device (description|memory): ")
_TESTS = re.compile(r"^  (?P<ok>\d+)/(?P<total>\d+) tests passed\s*$")
_STATUS = re.compile(r"^  Backend (?P<name>\S+): (?P<status>OK|FAIL)\s*$")
_BACKENDS = re.compile(r"^(?P<ok>\d+)/(?P<total>\d+) backends passed\s*$")
_FAILING = re.compile(r"^Failing tests:\s*$")

CaseStatus = Literal["ok", "fail", "not-supported", "skipped", "unfinished"]
BackendState = Literal["skipped", "passed", "failed", "unfinished"]


class OpsCase(Record):
    op: str  # its op_desc(), what -o matches
    params: str
    status: CaseStatus
    detail: str = ""  # what the line says before OK/FAIL (ERR = ..., NaN at ...), or why


class BackendRun(Record):
    name: str  # CPU, Vulkan0, CUDA0, MTL0 ...
    state: BackendState
    skip_reason: Optional[str] = None
    cases: list[OpsCase] = Field(default_factory=list)
    tests_passed: Optional[int] = None  # its "N/M tests passed" line
    tests_total: Optional[int] = None

    @property
    def compared(self) -> list[OpsCase]:
        """The cases that ran on this backend and were compared with the CPU reference."""
        return [c for c in self.cases if c.status in ("ok", "fail")]

    @property
    def failed(self) -> list[OpsCase]:
        return [c for c in self.cases if c.status == "fail"]


class BackendOpsRun(Record):
    backends: list[BackendRun] = Field(default_factory=list)
    backends_passed: Optional[int] = None
    backends_total: Optional[int] = None
    exit_code: Optional[int] = None  # None: timed out; negative: killed by that signal
    complete: bool = False  # its closing "N/M backends passed" was printed

    def backend(self, name: str) -> Optional[BackendRun]:
        return next((b for b in self.backends if b.name == name), None)

    @property
    def crash(self) -> Optional[str]:
        """How the process ended, when not by its own exit (a signal, a timeout)."""
        if self.exit_code is None:
            return "timed out"
        return signal_name(self.exit_code)


def _case(m: re.Match[str]) -> OpsCase:
    rest, pre = m["rest"], m["pre"].strip()
    if rest.startswith("not supported"):
        return OpsCase(op=m["op"], params=m["params"], status="not-supported", detail=rest)
    if rest.startswith("skipping"):
        return OpsCase(op=m["op"], params=m["params"], status="skipped", detail=rest)
    for word, status in (("OK", "ok"), ("FAIL", "fail")):
        if rest == word or rest.endswith(" " + word):
            detail = " ".join(t for t in (pre, rest[: -len(word)].strip()) if t)
            return OpsCase(op=m["op"], params=m["params"], status=status, detail=detail)
    # the line was cut: the process died in this case (its name is flushed before it runs)
    return OpsCase(op=m["op"], params=m["params"], status="unfinished", detail=rest)


def parse(output: str, exit_code: Optional[int]) -> BackendOpsRun:
    """The console output of `test-backend-ops` (mode test) and how it ended."""
    run = BackendOpsRun(exit_code=exit_code)
    current: Optional[BackendRun] = None
    listing = False  # in "Failing tests:", which repeats the failed cases' names
    for line in strip_ansi(output).splitlines():
        if m := _BACKEND.match(line):
            current, listing = BackendRun(name=m["name"], state="unfinished"), False
            run.backends.append(current)
        elif m := _BACKENDS.match(line):
            run.backends_passed, run.backends_total = int(m["ok"]), int(m["total"])
            run.complete = True
        elif current is None or _DEVICE.match(line):
            continue
        elif _FAILING.match(line):
            listing = True
        elif m := _STATUS.match(line):
            current.state, listing = ("passed" if m["status"] == "OK" else "failed"), False
        elif m := _TESTS.match(line):
            current.tests_passed, current.tests_total = int(m["ok"]), int(m["total"])
        elif (m := _SKIP.match(line)) and not current.cases:
            current.state, current.skip_reason = "skipped", m["reason"]
        elif not listing and (m := _CASE.match(line)):
            current.cases.append(_case(m))
    return run


# a case's status as a per-device row (results.json, summary.md's per-device table)
_ROW = {"ok": "OK", "fail": "FAIL", "not-supported": "SKIPPED", "skipped": "SKIPPED"}


def device_rows(output: str) -> list[dict]:
    """One row per case each compared backend printed (an unfinished case, where the process
    died, has none: the record's stopped_on says where): the results model's DeviceRow fields."""
    rows = []
    for b in parse(output, None).backends:
        for c in b.cases:
            if c.status in _ROW:
                line = f"{c.op}({c.params}): FAIL" + (f" {c.detail}" if c.detail else "")
                rows.append(
                    {
                        "device": b.name,
                        "case": f"{c.op}({c.params})",
                        "status": _ROW[c.status],
                        "line": line if c.status == "fail" else None,
                    }
                )
    return rows


Outcome = Literal["proven", "cannot-judge", "failed"]


class Judgement(Record):
    """A topic's test-backend-ops line on one backend: its fix and its control judged."""

    outcome: Outcome
    backend: str
    reason: str

    @property
    def text(self) -> str:
        if self.outcome == "cannot-judge":
            return f"cannot be judged on {self.backend}: {self.reason}"
        return f"{self.outcome}: {self.reason}"


def _failure(b: Optional[BackendRun]) -> Optional[str]:
    """The first case that failed by its own check (a compare) on this backend."""
    if b is None or not b.failed:
        return None
    c = b.failed[0]
    return f"{c.op}({c.params}): FAIL" + (f" {c.detail}" if c.detail else "")


def _death(run: BackendOpsRun, b: Optional[BackendRun]) -> Optional[str]:
    """How the process died in this backend's cases (a signal or a timeout), or None."""
    if b is None or b.state != "unfinished" or not (run.crash or not run.complete):
        return None
    done = b.compared  # a case's name is flushed before it runs: the one after these died
    after = f" after {done[-1].op}({done[-1].params})" if done else ""
    how = run.crash or f"exit {run.exit_code} before its summary"
    return f"the process died ({how}) in {b.name}'s cases{after}"


def _not_compared(b: Optional[BackendRun], backend: str) -> Optional[str]:
    """Why test-backend-ops compared nothing on this backend; None when it compared cases."""
    if b is None:
        return "test-backend-ops did not list it (no such device in this build)"
    if b.state == "skipped":
        if backend == CPU:
            return (
                "test-backend-ops skips the CPU unless `-b CPU` names it: the CPU is the "
                "reference the other backends are compared with"
            )
        return f"test-backend-ops skipped it ({b.skip_reason})"
    if not b.compared and b.state != "unfinished":
        unsupported = [c for c in b.cases if c.status == "not-supported"]
        if unsupported:
            return f"none of its {len(unsupported)} cases is supported there (not supported)"
        return "the filter matched no case"
    return None


def judge(
    patched: BackendOpsRun, control: BackendOpsRun, backend: str, crash_kills: bool = False
) -> Judgement:
    """proven: the fix passes its cases on `backend` and its control (the fix reverted) fails
    one by its own check, or dies in them where the topic declares its bug a crash
    (`crash_kills`, topic.yaml's control_crash); cannot-judge: the tool compared nothing there,
    or (on the CPU, compared with its own reference path) the control passes too; else failed."""
    pb = patched.backend(backend)
    if why := _not_compared(pb, backend):
        return Judgement(outcome="cannot-judge", backend=backend, reason=why)
    assert pb is not None
    if pb.failed or pb.state != "passed" or patched.crash:
        how = _failure(pb) or _death(patched, pb) or f"test-backend-ops exited {patched.exit_code}"
        return Judgement(outcome="failed", backend=backend, reason=f"with the fix: {how}")
    cb = control.backend(backend)
    passing = f"{len(pb.compared)} cases pass with the fix; without it: "
    if why := _failure(cb):
        return Judgement(outcome="proven", backend=backend, reason=passing + why)
    if why := _death(control, cb):
        if crash_kills:
            return Judgement(outcome="proven", backend=backend, reason=passing + why)
        return Judgement(
            outcome="failed",
            backend=backend,
            reason=f"the control: {why}, not a failure by its own check (a crash bug is "
            "declared in topic.yaml: control_crash: why)",
        )
    if why := _not_compared(cb, backend):
        return Judgement(outcome="cannot-judge", backend=backend, reason=f"the control: {why}")
    if backend == CPU:
        return Judgement(
            outcome="cannot-judge",
            backend=backend,
            reason="its cases pass with the fix reverted too: `-b CPU` compares the CPU with its "
            "own reference path, which runs the same kernels",
        )
    n = len(cb.compared) if cb else 0
    unsupported = sum(c.status == "not-supported" for c in cb.cases) if cb else 0
    if unsupported:  # the cases that would catch it may be the ones not run there
        return Judgement(
            outcome="cannot-judge",
            backend=backend,
            reason=f"the control passes the {n} cases compared there; {unsupported} are not "
            "supported there",
        )
    return Judgement(
        outcome="failed",
        backend=backend,
        reason=f"the control survived: its {n} cases pass with the fix reverted",
    )


def backend_args(args: tuple[str, ...], backend: str) -> tuple[str, ...]:
    """A test line's arguments for one backend's cell: `-b NAME` added unless the line names
    one (without it the CPU is never compared, and a named device absent passes untested)."""
    return args if "-b" in args else (*args, "-b", backend)
