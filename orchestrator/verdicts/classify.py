"""Result classification (pure): test outcomes,
per-device rows, the control's verdict, cell status."""

from __future__ import annotations

import re
import signal as _signal
from typing import Mapping, NamedTuple, Optional

from ..model.results import CellStatus, Outcome, Verdict

# The words, as the results model spells them.
PASSED, FAILED, CRASHED = Outcome.PASSED, Outcome.FAILED, Outcome.CRASHED
TIMEOUT, NOT_BUILT = Outcome.TIMEOUT, Outcome.NOT_BUILT
# a test the backend does not run (its module's skip_tests): neither passed nor failed
SKIPPED = Outcome.SKIPPED
KILLED, SURVIVED, INVALID = Verdict.KILLED, Verdict.SURVIVED, Verdict.INVALID

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# The gate's line per device x case (the format shared with native_tests/): CASE is key=value pairs,
# "opt_period=N" for the classic SGD cases, "case=NAME ..." for the others.
GATE_ROW = re.compile(
    r"^device=(?P<device>\S+) (?P<case>[^:\n]+): (?P<status>OK|FAIL|SKIPPED)"
    r"(?: at step (?P<step>\d+): w=(?P<actual>\S+) expected (?P<expected>\S+))?.*$",
    re.M,
)
_OPT_PERIOD = re.compile(r"(?:^| )opt_period=(\d+)(?: |$)")
TEST_OPT_ROW = re.compile(
    r"^\s*Backend (?P<device>\S+) (?P<optimizer>\S+): (?P<status>OK|FAIL|SKIPPED)\s*$", re.M
)


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def outcome(exit_code: Optional[int], timed_out: bool = False) -> Outcome:
    if timed_out or exit_code is None:
        return TIMEOUT
    if exit_code == 0:
        return PASSED
    if exit_code < 0:
        return CRASHED
    if exit_code == 127:
        return NOT_BUILT
    return FAILED


def signal_name(exit_code: Optional[int]) -> Optional[str]:
    if exit_code is None or exit_code >= 0:
        return None
    try:
        return _signal.Signals(-exit_code).name
    except ValueError:
        return f"signal {-exit_code}"


def gate_rows(output: str) -> list[dict]:
    """The gate's rows, one per device x case, with its
    `opt_period` where it has one (older gates: all do)."""
    rows = []
    for m in GATE_ROW.finditer(strip_ansi(output)):
        case = m["case"].strip()
        row: dict = {"device": m["device"], "case": case}
        if period := _OPT_PERIOD.search(case):
            row["opt_period"] = int(period.group(1))
        row["status"] = m["status"]
        if m["status"] == "FAIL":
            row["line"] = m.group(0).strip()
            if m["step"]:  # absent when the device failed before any step ran
                row.update(
                    step=int(m["step"]), actual=float(m["actual"]), expected=float(m["expected"])
                )
        rows.append(row)
    return rows


def gate_failure_line(output: str) -> Optional[str]:
    return next((row["line"] for row in gate_rows(output) if row["status"] == "FAIL"), None)


def test_opt_rows(output: str) -> list[dict]:
    """test-opt's "Backend CPU adamw: OK" lines -> one row per device x optimizer."""
    return [
        {"device": m["device"], "optimizer": m["optimizer"], "status": m["status"]}
        for m in TEST_OPT_ROW.finditer(strip_ansi(output))
    ]


class GateVerdict(NamedTuple):
    """The verdict on the gate run without the fix (the control, or a mutant), and why."""

    verdict: Verdict
    reason: str


def gate_verdict(
    build_ok: bool,
    gate_outcome: Optional[str],
    gate_exit: Optional[int],
    gate_output: str,
    variant: str = "the control variant",
    passed: str = "the gate test passed without the fix: it is not a gate",
) -> GateVerdict:
    """The gate on a tree without the (right) fix: killed only if the tree built and the gate
    failed by its own check (a non-zero exit, not a signal or timeout) printing its failure
    line; survived if it passed; else invalid."""
    if not build_ok:
        return GateVerdict(INVALID, f"{variant} did not build")
    if gate_outcome == PASSED:
        return GateVerdict(SURVIVED, passed)
    if gate_outcome == CRASHED:
        return GateVerdict(
            INVALID,
            f"the gate test crashed ({signal_name(gate_exit)}) instead of failing its check",
        )
    if gate_outcome == TIMEOUT:
        return GateVerdict(INVALID, "the gate test timed out")
    if gate_outcome != FAILED:
        return GateVerdict(INVALID, f"the gate test did not run ({gate_outcome})")
    line = gate_failure_line(gate_output)
    if not line:
        return GateVerdict(
            INVALID, f"the gate test exited {gate_exit} without printing its failure line"
        )
    return GateVerdict(KILLED, f"the gate test failed by its own check: {line}")


def control_verdict(
    build_ok: bool,
    gate_outcome: Optional[str],
    gate_exit: Optional[int],
    gate_output: str,
    test_opt_outcome: Optional[str],
    test_opt_pre_existing: Optional[str] = None,
    test_opt_skipped: Optional[str] = None,
) -> GateVerdict:
    """The gate's verdict (gate_verdict), and test-opt's: it passes (an older series) or
    fails by its own check (its per-step cases); a crash or timeout there means the control
    changed more than the fix. Where test-opt fails with the fix too
    (`test_opt_pre_existing`: e.g. a driver crash) or is not run (`test_opt_skipped`: why),
    the verdict rests on the gate alone, and the reason says so."""
    v = gate_verdict(build_ok, gate_outcome, gate_exit, gate_output)
    if v.verdict != KILLED or test_opt_outcome == PASSED:
        return v
    if test_opt_outcome == FAILED and not test_opt_pre_existing:
        return GateVerdict(KILLED, f"{v.reason}; test-opt fails too (its per-step cases)")
    if test_opt_outcome == SKIPPED:
        alone = f"test-opt is not run on this backend: {test_opt_skipped or 'no reason recorded'}"
    elif test_opt_pre_existing:
        alone = (
            f"test-opt {test_opt_outcome} with and without the "
            f"fix, pre-existing: {test_opt_pre_existing}"
        )
    else:
        return GateVerdict(
            INVALID,
            f"test-opt {test_opt_outcome} without the fix, so the "
            "control changed more than the fix",
        )
    return GateVerdict(KILLED, f"{v.reason} (verdict on the gate alone: {alone})")


# what a passed cell says kills its control: the gate, or (no gate ran) each topic's own tests
GATE_KILLS = "the gate fails without it"
OWN_TESTS_KILL = "each topic's control is killed by its own tests"


def cell_status(
    patched_build_ok: bool,
    patched: Mapping[str, str],
    verdict: Optional[GateVerdict],
    attribution: str = "",
    skip_reasons: Optional[Mapping[str, str]] = None,
    without: str = GATE_KILLS,
) -> tuple[CellStatus, str]:
    """(status, reason): passed only when every test that ran passes with the fix and the
    control was killed; a skipped test is named, never counted as passed; `attribution`:
    do failing tests fail without the fix too; `skip_reasons`: why a test was not run, where it
    is not the backend (the gate test in a run without its topic); `without`: what kills the
    control (OWN_TESTS_KILL where no gate ran)."""
    if not patched_build_ok:
        return CellStatus.FAILED, "the patched variant did not build"
    skipped = [name for name, o in patched.items() if o == SKIPPED]
    if skipped and len(skipped) == len(patched):
        return (
            CellStatus.FAILED,
            f"no test ran with the fix ({', '.join(skipped)} not run on this backend)",
        )
    bad = [f"{name} {o}" for name, o in patched.items() if o not in (PASSED, SKIPPED)]
    if bad:
        reason = "with the fix: " + ", ".join(bad)
        if attribution:
            reason += f" ({attribution})"
            if verdict is not None:
                reason += f"; negative control {verdict.verdict}: {verdict.reason}"
        return CellStatus.FAILED, reason
    if verdict is None:
        return CellStatus.FAILED, "the negative control did not run"
    if verdict.verdict != KILLED:
        return CellStatus.FAILED, f"negative control {verdict.verdict}: {verdict.reason}"
    why = skip_reasons or {}
    if skipped and any(name in why for name in skipped):
        shown = "; ".join(f"{name} not run: {why.get(name, 'the backend')}" for name in skipped)
        passes = f"every test run passes with the fix ({shown})"
        return CellStatus.PASSED, f"{passes}; the control without it: {verdict.reason}"
    if skipped:
        return CellStatus.PASSED, (
            f"every test run passes with the fix ({', '.join(skipped)} not run on this "
            f"backend); {without}"
        )
    return CellStatus.PASSED, f"all tests pass with the fix; {without}"


_CASE_CALL = re.compile(r"\b(test_\w+)\(")


def _case_of(line: str, ending: str = "") -> Optional[str]:
    """The case function a test-opt line names (one ending with `ending`, if given)."""
    m = _CASE_CALL.search(line)
    if m is None or not line.rstrip().endswith(ending):
        return None
    return m.group(1)


def last_case_line(output: str) -> Optional[str]:
    """The last line test-opt printed that names a case (stripped), or None."""
    found = None
    for line in strip_ansi(output).splitlines():
        if _case_of(line):
            found = line.strip()
    return found


def last_case(output: str) -> Optional[str]:
    """The test-opt case that printed last (its function's name): where a crash stopped it."""
    found = None
    for line in strip_ansi(output).splitlines():
        found = _case_of(line) or found
    return found


def crashed_in(output: str, reference: str = "") -> Optional[str]:
    """The test-opt case a crashed run died in: the case the passing run of the same cases
    (`reference`) printed next after the crashed run's last case line, since a case prints its
    line only once it is done; without a reference that the crashed run followed, the last case
    it printed."""
    done = [ln.strip() for ln in strip_ansi(output).splitlines() if _case_of(ln)]
    ref = [ln.strip() for ln in strip_ansi(reference).splitlines() if _case_of(ln)]
    if len(ref) > len(done) and ref[: len(done)] == done:
        return _case_of(ref[len(done)])
    return _case_of(done[-1]) if done else None


def crash_line(
    exit_code: Optional[int], output: str, reference: str = "", test: str = "test-opt"
) -> str:
    """What a crashed run of `test` (test-opt unless named) shows, in one line: its signal and
    the case it died in."""
    where = crashed_in(output, reference)
    return f"{test}: {signal_name(exit_code) or 'a signal'}" + (f" in {where}" if where else "")


def topic_control_verdict(
    build_ok: bool,
    test_opt_outcome: Optional[str],
    test_opt_exit: Optional[int],
    output: str,
    cases: list[str],
    control_crash: Optional[str],
    reference: str = "",
) -> GateVerdict:
    """The verdict of one topic's control (its hunks reverted, the other topics kept) by test-opt
    and the topic's own `cases`: killed when a case of its own fails by its own check; killed
    (crash) when it dies by a signal inside one of its own cases and the topic declares its bug a
    crash (`control_crash`: why; where, from `reference`: crashed_in); survived when test-opt
    passes; invalid otherwise (did not build, timed out, failed or crashed outside its own cases, a
    crash the topic does not declare)."""
    if not build_ok:
        return GateVerdict(INVALID, "the control did not build")
    if test_opt_outcome == PASSED:
        return GateVerdict(SURVIVED, "test-opt passes with the topic's hunks reverted")
    if test_opt_outcome == CRASHED:
        sig = signal_name(test_opt_exit) or "a signal"
        where = crashed_in(output, reference)
        if where not in cases:
            return GateVerdict(
                INVALID, f"test-opt died by {sig} outside the topic's cases (last case: {where})"
            )
        if not control_crash:
            return GateVerdict(
                INVALID,
                f"test-opt died by {sig} in {where}, and topic.yaml declares no control_crash",
            )
        return GateVerdict(
            KILLED, f"crash: {sig} in its own case {where}, as declared ({control_crash})"
        )
    if test_opt_outcome == FAILED:
        failing = [ln.strip() for ln in strip_ansi(output).splitlines() if _case_of(ln, "FAIL")]
        own = [ln for ln in failing if _case_of(ln, "FAIL") in cases]
        if own:
            return GateVerdict(KILLED, f"test-opt fails by its own check in {own[0]}")
        first = failing[0] if failing else "no case line says FAIL"
        return GateVerdict(INVALID, f"test-opt fails outside the topic's cases: {first}")
    return GateVerdict(INVALID, f"test-opt {test_opt_outcome or 'not run'} without the topic")


def test_verdict(
    build_ok: bool, name: str, outcome: Optional[str], exit_code: Optional[int], output: str
) -> GateVerdict:
    """An upstream test's verdict on a topic's control where its cases do not name themselves
    (test-backend-ops, test-quantize-fns, ...): killed when it fails by its own check (a non-zero
    exit with a FAIL line), survived when it passes, invalid otherwise (did not build, crashed,
    timed out, failed without saying where)."""
    if not build_ok:
        return GateVerdict(INVALID, "the control did not build")
    if outcome == PASSED:
        return GateVerdict(SURVIVED, f"{name} passes with the topic's hunks reverted")
    if outcome == FAILED:
        line = next(
            (ln.strip() for ln in strip_ansi(output).splitlines() if ln.rstrip().endswith("FAIL")),
            None,
        )
        if line:
            return GateVerdict(KILLED, f"{name} fails by its own check: {line}")
        return GateVerdict(INVALID, f"{name} exited {exit_code} without a FAIL line")
    if outcome == CRASHED:
        return GateVerdict(INVALID, f"{name} died by {signal_name(exit_code) or 'a signal'}")
    return GateVerdict(INVALID, f"{name} {outcome or 'not run'} without the topic")
