"""Result classification: outcomes, gate/test-opt rows, the control's verdict, the cell's status."""

import math

import pytest

from orchestrator.verdicts import classify
from orchestrator.verdicts.classify import (
    CRASHED,
    FAILED,
    INVALID,
    KILLED,
    NOT_BUILT,
    OWN_TESTS_KILL,
    PASSED,
    SKIPPED,
    SURVIVED,
    TIMEOUT,
    GateVerdict,
    cell_status,
    control_verdict,
    gate_failure_line,
    gate_rows,
    outcome,
    signal_name,
)

FAIL_LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"

# what test-opt-dynamic-accum prints without the fix (CPU
# fails, a Vulkan device without SGD is skipped)
GATE_OUTPUT_UNFIXED = (
    "test-opt-dynamic-accum: per-step graphs, SGD lr=0.5, x=0.5, "
    f"loss SUM, 3 optimizer steps per opt_period\n{FAIL_LINE}\n"
    "device=CPU opt_period=2: OK (6 micro-steps)\n"
    "device=CPU opt_period=3: FAIL at step 6: w=-0.5 expected 0.25\n"
    "device=Vulkan0 opt_period=1: SKIPPED (OPT_STEP_SGD not supported)\n"
    "device=Vulkan0 opt_period=2: SKIPPED (OPT_STEP_SGD not supported)\n"
    "device=Vulkan0 opt_period=3: SKIPPED (OPT_STEP_SGD not supported)\n"
    "1/6 device*opt_period passed, 3 skipped\n"
)

GATE_OUTPUT_FIXED = (
    "test-opt-dynamic-accum: per-step graphs, SGD lr=0.5, x=0.5, "
    "loss SUM, 3 optimizer steps per opt_period\ndevice=CPU opt_period=1: OK (3 micro-steps)\n"
    "device=CPU opt_period=2: OK (6 micro-steps)\ndevice=CPU opt_period=3: OK (9 micro-steps)\n"
    "3/3 device*opt_period passed, 0 skipped\n"
)

# what test-opt prints (ANSI colours included, as it writes them)
TEST_OPT_OUTPUT = (
    "Testing 2 devices\n\n"
    "Backend 1/2: CPU\n"
    "  Device description: AMD EPYC 9654\n"
    "  Device memory: 128000 MB (120000 MB free)\n\n"
    "  test_dataset(shuffle=0, ndata_shard=1, ndata_batch=1): \x1b[1;32mOK\x1b[0m\n"
    "  19/19 tests passed\n"
    "  Backend CPU adamw: \x1b[1;32mOK\x1b[0m\n\n"
    "  Backend CPU sgd: \x1b[1;31mFAIL\x1b[0m\n\n"
    "Backend 2/2: Vulkan0\n"
    "  Backend Vulkan0 sgd: \x1b[0;33mSKIPPED\x1b[0m\n\n"
    "3/4 backend*optimizer passed\n"
)


# ---- outcome / signal_name ----


@pytest.mark.parametrize(
    "code, timed_out, expected",
    [
        (0, False, PASSED),
        (1, False, FAILED),
        (2, False, FAILED),
        (255, False, FAILED),
        (-11, False, CRASHED),
        (-6, False, CRASHED),
        (-9, False, CRASHED),
        (None, False, TIMEOUT),
        (None, True, TIMEOUT),
        (0, True, TIMEOUT),  # a timeout wins over whatever code was recorded
        (1, True, TIMEOUT),
        (127, False, NOT_BUILT),
    ],
)
def test_outcome(code, timed_out, expected):
    assert outcome(code, timed_out) == expected


def test_outcome_default_is_not_timed_out():
    assert outcome(0) == PASSED
    assert outcome(None) == TIMEOUT


@pytest.mark.parametrize(
    "code, expected",
    [
        (-11, "SIGSEGV"),
        (-6, "SIGABRT"),
        (-9, "SIGKILL"),
        (-8, "SIGFPE"),
        (0, None),
        (1, None),
        (127, None),
        (None, None),
        (-200, "signal 200"),
    ],
)
def test_signal_name(code, expected):
    assert signal_name(code) == expected


# ---- gate rows ----


def test_gate_rows_real_output():
    rows = gate_rows(GATE_OUTPUT_UNFIXED)
    assert rows == [
        {
            "device": "CPU",
            "case": "opt_period=1",
            "opt_period": 1,
            "status": "FAIL",
            "step": 2,
            "actual": 0.25,
            "expected": 0.5,
            "line": FAIL_LINE,
        },
        {"device": "CPU", "case": "opt_period=2", "opt_period": 2, "status": "OK"},
        {
            "device": "CPU",
            "case": "opt_period=3",
            "opt_period": 3,
            "status": "FAIL",
            "step": 6,
            "actual": -0.5,
            "expected": 0.25,
            "line": "device=CPU opt_period=3: FAIL at step 6: w=-0.5 expected 0.25",
        },
        {"device": "Vulkan0", "case": "opt_period=1", "opt_period": 1, "status": "SKIPPED"},
        {"device": "Vulkan0", "case": "opt_period=2", "opt_period": 2, "status": "SKIPPED"},
        {"device": "Vulkan0", "case": "opt_period=3", "opt_period": 3, "status": "SKIPPED"},
    ]


def test_gate_rows_named_cases():
    """The shared gate format: CASE is key=value pairs; opt_period is kept when the case has it."""
    out = (
        "device=CPU case=schedule-TTETT opt_period=2 "
        "optimizer=adamw: FAIL at step 3: w=1.5 expected 2 (x)\ndevice=CPU case=eval-only: OK\n"
        "device=Vulkan0 case=schedule-TTETT opt_period=2 optimizer=adamw: SKIPPED (no adamw here)\n"
        "device=CUDA0 opt_period=1: FAIL could not initialise the device\n"
    )
    rows = gate_rows(out)
    assert rows[0] == {
        "device": "CPU",
        "case": "case=schedule-TTETT opt_period=2 optimizer=adamw",
        "opt_period": 2,
        "status": "FAIL",
        "line": out.splitlines()[0],
        "step": 3,
        "actual": 1.5,
        "expected": 2.0,
    }
    assert rows[1] == {"device": "CPU", "case": "case=eval-only", "status": "OK"}
    assert rows[2]["status"] == "SKIPPED" and rows[2]["opt_period"] == 2
    assert rows[3] == {
        "device": "CUDA0",
        "case": "opt_period=1",
        "opt_period": 1,
        "status": "FAIL",
        "line": "device=CUDA0 opt_period=1: FAIL could not initialise the device",
    }
    assert gate_failure_line(out) == out.splitlines()[0]


def test_gate_rows_all_ok():
    rows = gate_rows(GATE_OUTPUT_FIXED)
    assert [(r["device"], r["opt_period"], r["status"]) for r in rows] == [
        ("CPU", 1, "OK"),
        ("CPU", 2, "OK"),
        ("CPU", 3, "OK"),
    ]
    assert gate_failure_line(GATE_OUTPUT_FIXED) is None


def test_gate_rows_ignores_other_lines():
    out = (
        "test-opt-dynamic-accum: no device named 'X'; devices: CPU\n"
        "device=CUDA0: FAIL could not initialise the device\n"
        "3/3 device*opt_period passed, 0 skipped\n"
    )
    assert gate_rows(out) == []
    assert gate_rows("") == []


def test_gate_rows_strip_ansi_and_trailing_cr():
    out = f"\x1b[1;31m{FAIL_LINE}\x1b[0m\r\ndevice=CPU opt_period=2: OK (6 micro-steps)\r\n"
    rows = gate_rows(out)
    assert len(rows) == 2 and rows[0]["line"] == FAIL_LINE and rows[0]["expected"] == 0.5
    assert rows[1]["status"] == "OK"
    assert classify.test_opt_rows("  Backend CPU adamw: \x1b[1;32mOK\x1b[0m\r\n") == [
        {"device": "CPU", "optimizer": "adamw", "status": "OK"}
    ]


def test_gate_rows_nan_and_exponent_values():
    rows = gate_rows("device=CUDA0 opt_period=3: FAIL at step 4: w=-nan expected 1e-05\n")
    assert rows[0]["device"] == "CUDA0" and rows[0]["step"] == 4
    assert math.isnan(rows[0]["actual"]) and rows[0]["expected"] == 1e-05


def test_gate_failure_line_is_the_first_failure():
    assert gate_failure_line(GATE_OUTPUT_UNFIXED) == FAIL_LINE
    assert gate_failure_line("noise\n  " + FAIL_LINE + "\n") is None  # a row starts its line
    assert gate_failure_line("") is None


# cut short
@pytest.mark.parametrize(
    "line", ["device=CPU opt_period=1: FAIL", "device=CPU opt_period=1: FAIL at step 2: w=0.25"]
)
def test_gate_rows_fail_without_detail(line):
    """A FAIL row without ' at step N: w=X expected Y' is still a failure row (no step values)."""
    rows = gate_rows(line + "\n")
    assert len(rows) == 1
    assert rows[0]["status"] == "FAIL" and rows[0]["line"] == line
    assert "step" not in rows[0]
    assert gate_failure_line(line + "\n") == line


# ---- test-opt rows ----


def test_test_opt_rows_real_output():
    assert classify.test_opt_rows(TEST_OPT_OUTPUT) == [
        {"device": "CPU", "optimizer": "adamw", "status": "OK"},
        {"device": "CPU", "optimizer": "sgd", "status": "FAIL"},
        {"device": "Vulkan0", "optimizer": "sgd", "status": "SKIPPED"},
    ]


def test_test_opt_rows_ignore_headers():
    # "Backend 1/2: CPU" is the per-device header, not a result row
    assert classify.test_opt_rows("Backend 1/2: CPU\n  19/19 tests passed\n") == []
    assert classify.test_opt_rows("  Backend CPU adamw: \x1b[1;32mOK\x1b[0m") == [
        {"device": "CPU", "optimizer": "adamw", "status": "OK"}
    ]


# ---- the control's verdict ----


def _verdict(
    build_ok=True,
    gate_outcome=FAILED,
    gate_exit=1,
    gate_output=GATE_OUTPUT_UNFIXED,
    test_opt_outcome=PASSED,
) -> GateVerdict:
    return control_verdict(build_ok, gate_outcome, gate_exit, gate_output, test_opt_outcome)


def test_control_killed():
    v = _verdict()
    assert v.verdict == KILLED
    assert FAIL_LINE in v.reason


def test_control_survived():
    v = _verdict(gate_outcome=PASSED, gate_exit=0, gate_output=GATE_OUTPUT_FIXED)
    assert v == GateVerdict(SURVIVED, "the gate test passed without the fix: it is not a gate")


def test_control_build_failed_is_invalid():
    v = _verdict(
        build_ok=False, gate_outcome=None, gate_exit=None, gate_output="", test_opt_outcome=None
    )
    assert v.verdict == INVALID and "did not build" in v.reason


def test_control_build_failed_wins_over_a_passing_gate():
    assert _verdict(build_ok=False, gate_outcome=PASSED).verdict == INVALID


@pytest.mark.parametrize("code, name", [(-11, "SIGSEGV"), (-6, "SIGABRT")])
def test_control_crash_is_invalid(code, name):
    # a crash is not the gate's own check failing, even if a failure line was printed first
    v = _verdict(gate_outcome=outcome(code), gate_exit=code)
    assert v.verdict == INVALID
    assert name in v.reason and "crashed" in v.reason


def test_control_timeout_is_invalid():
    v = _verdict(gate_outcome=outcome(None, timed_out=True), gate_exit=None)
    assert v == GateVerdict(INVALID, "the gate test timed out")


def test_control_not_built_is_invalid():
    v = _verdict(gate_outcome=outcome(127), gate_exit=127, gate_output="x: not built\n")
    assert v.verdict == INVALID and "did not run (not-built)" in v.reason


def test_control_gate_missing_is_invalid():
    v = _verdict(gate_outcome=None, gate_exit=None, gate_output="")
    assert v.verdict == INVALID and "did not run" in v.reason


def test_control_failed_without_failure_line_is_invalid():
    v = _verdict(gate_exit=2, gate_output="test-opt-dynamic-accum: no CPU backend\n")
    assert v.verdict == INVALID
    assert "exited 2 without printing its failure line" in v.reason


def test_control_failed_with_only_ok_rows_is_invalid():
    v = _verdict(gate_output=GATE_OUTPUT_FIXED)
    assert v.verdict == INVALID and "without printing its failure line" in v.reason


def test_control_test_opt_failing_by_its_own_check_is_the_regression_test_killing_it():
    v = _verdict(test_opt_outcome=FAILED)
    assert v.verdict == KILLED and v.reason.endswith("test-opt fails too (its per-step cases)")


@pytest.mark.parametrize("test_opt", [CRASHED, TIMEOUT, NOT_BUILT, None])
def test_control_test_opt_not_passing_is_invalid(test_opt):
    v = _verdict(test_opt_outcome=test_opt)
    assert v.verdict == INVALID
    assert v.reason.startswith(f"test-opt {test_opt} without the fix")


def test_control_verdict_reasons_are_one_line():
    for v in (
        _verdict(),
        _verdict(build_ok=False),
        _verdict(gate_outcome=CRASHED, gate_exit=-11),
        _verdict(gate_outcome=TIMEOUT, gate_exit=None),
        _verdict(gate_output=""),
        _verdict(test_opt_outcome=FAILED),
        _verdict(gate_outcome=PASSED),
    ):
        assert "\n" not in v.reason


# ---- the cell's status ----

KILLED_V = GateVerdict(KILLED, "the gate test failed by its own check: " + FAIL_LINE)
ALL_PASS = {"test-opt": PASSED, "test-opt-dynamic-accum": PASSED}


def test_cell_passed():
    assert cell_status(True, ALL_PASS, KILLED_V) == (
        PASSED,
        "all tests pass with the fix; the gate fails without it",
    )
    # no gate ran (a topic judged by test-backend-ops alone): the gate is not named
    ops = {"test-backend-ops -o CONCAT": PASSED}
    assert cell_status(True, ops, KILLED_V, without=OWN_TESTS_KILL) == (
        PASSED,
        "all tests pass with the fix; each topic's control is killed by its own tests",
    )


def test_cell_patched_build_failed():
    assert cell_status(False, {}, KILLED_V) == (FAILED, "the patched variant did not build")
    assert cell_status(False, ALL_PASS, None)[1] == "the patched variant did not build"


def test_cell_patched_test_not_passing():
    status, reason = cell_status(
        True, {"test-opt": PASSED, "test-opt-dynamic-accum": FAILED}, KILLED_V
    )
    assert status == FAILED and reason == "with the fix: test-opt-dynamic-accum failed"
    status, reason = cell_status(
        True, {"test-opt": CRASHED, "test-opt-dynamic-accum": TIMEOUT}, KILLED_V
    )
    assert reason == "with the fix: test-opt crashed, test-opt-dynamic-accum timeout"


def test_cell_control_did_not_run():
    assert cell_status(True, ALL_PASS, None) == (FAILED, "the negative control did not run")


@pytest.mark.parametrize(
    "verdict",
    [
        GateVerdict(SURVIVED, "the gate test passed without the fix: it is not a gate"),
        GateVerdict(INVALID, "the gate test timed out"),
    ],
)
def test_cell_control_not_killed(verdict):
    status, reason = cell_status(True, ALL_PASS, verdict)
    assert status == FAILED
    assert reason == f"negative control {verdict.verdict}: {verdict.reason}"


def test_cell_no_patched_tests_but_killed_passes():
    # cell_status trusts the caller's test list; an empty one has nothing failing
    assert cell_status(True, {}, KILLED_V)[0] == PASSED


def test_constants_are_distinct():
    names = [
        classify.PASSED,
        classify.FAILED,
        classify.CRASHED,
        classify.TIMEOUT,
        classify.NOT_BUILT,
    ]
    assert len(set(names)) == len(names)
    assert len({KILLED, SURVIVED, INVALID}) == 3


def test_cell_passed_names_why_a_test_was_not_run():
    # the gate test in a run without its topic: the reason is the run's, not the backend's
    outcomes = {"test-opt": PASSED, "test-opt-dynamic-accum": SKIPPED}
    why = {"test-opt-dynamic-accum": "it tests a topic this run does not carry"}
    status, reason = cell_status(True, outcomes, KILLED_V, "", why)
    assert status == PASSED
    assert "test-opt-dynamic-accum not run: it tests a topic this run does not carry" in reason
    assert "on this backend" not in reason
    assert reason.endswith(KILLED_V.reason)
