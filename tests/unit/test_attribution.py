"""Failure attribution: each test failing with the fix
against the same test (and device) without it."""

import pytest

from orchestrator.model.results import AttributionEntry, DeviceRow, TestRecord
from orchestrator.verdicts import attribution, classify
from orchestrator.verdicts.attribution import (
    ANY_DEVICE,
    PRE_EXISTING,
    REGRESSION,
    UNKNOWN,
    attribute,
    crash_device,
    describe,
    failing_devices,
    failure_kind,
    pre_existing_only,
    what_failed,
)
from orchestrator.verdicts.classify import (
    CRASHED,
    FAILED,
    INVALID,
    KILLED,
    PASSED,
    TIMEOUT,
    control_verdict,
)

GATE_FAIL = "device=Vulkan0 opt_period=1: FAIL at step 2: w=0.25 expected 0.5"

# test-opt on Debian 12's Mesa 22.3.6 lavapipe (trimmed from a real run through stdbuf -oL): the
# driver aborts with a double free while Vulkan0 is under test, before its result row
LAVAPIPE_CRASH = (
    "ggml_vulkan: Found 1 Vulkan devices:\n"
    "ggml_vulkan: 0 = llvmpipe (LLVM 15.0.6, 256 bits) (llvmpipe) | uma: 0 | fp16: 1 | bf16: 0\n"
    "Testing 2 devices\n\nBackend 1/2: Vulkan0\n"
    "  Device description: llvmpipe (LLVM 15.0.6, 256 bits)\n"
    "  Device memory: 2048 MB (2048 MB free)\n\n"
    "  test_dataset(shuffle=no, ndata_shard=1, ndata_batch=1): \x1b[1;32mOK\x1b[0m\n"
    "  test_idata_split(high_level=no, epoch=4, "
    "subtest=results_forward, optimizer=adamw): \x1b[1;32mOK\x1b[0m\n"
    "double free or corruption (!prev)\n"
)

TEST_OPT_ALL_OK = (
    "Testing 2 devices\n\n"
    "Backend 1/2: Vulkan0\n  46/46 tests passed\n  Backend Vulkan0 adamw: \x1b[1;32mOK\x1b[0m\n\n"
    "Backend 2/2: CPU\n  46/46 tests passed\n  Backend CPU adamw: \x1b[1;32mOK\x1b[0m\n\n"
    "Backend 1/2: Vulkan0\n  Backend Vulkan0 sgd: \x1b[1;32mOK\x1b[0m\n\n"
    "Backend 2/2: CPU\n  Backend CPU sgd: \x1b[1;32mOK\x1b[0m\n\n"
    "4/4 backend*optimizer passed\n"
)


def _test(outcome, output="", rows=None, signal=None, exit_code=None):
    if rows is None:
        rows = classify.test_opt_rows(output) + classify.gate_rows(output)
    return TestRecord(
        outcome=outcome,
        exit_code=exit_code,
        signal=signal,
        rows=[DeviceRow.model_validate(r) for r in rows],
        output=output,
    )


def _crash(signal="SIGABRT"):
    return _test(CRASHED, LAVAPIPE_CRASH, signal=signal, exit_code=-6)


def _ok_opt():
    return _test(PASSED, TEST_OPT_ALL_OK, exit_code=0)


# ---- where a test stopped ----


def test_crash_device_is_the_device_under_test_without_a_result_row():
    assert crash_device(LAVAPIPE_CRASH) == "Vulkan0"


def test_crash_device_on_the_second_device():
    out = (
        TEST_OPT_ALL_OK.split("Backend 1/2: Vulkan0\n  Backend Vulkan0 sgd")[0]
        + "Backend 1/2: Vulkan0\nSegfault\n"
    )
    assert crash_device(out) == "Vulkan0"
    out = TEST_OPT_ALL_OK.rsplit("  Backend CPU sgd", 1)[0]
    assert crash_device(out) == "CPU"


def test_no_crash_device_when_every_started_device_has_its_row():
    # died in teardown, after the last row: no device to blame
    assert crash_device(TEST_OPT_ALL_OK.replace("4/4 backend*optimizer passed\n", "")) is None
    assert crash_device("no headers at all\n") is None
    assert crash_device("") is None
    assert crash_device("") is None


@pytest.mark.parametrize(
    "test, expected",
    [
        (None, "did not run"),
        (TestRecord(outcome=CRASHED, signal="SIGSEGV"), "crashed (SIGSEGV)"),
        (TestRecord(outcome=FAILED, exit_code=1), "failed (exit 1)"),
        (TestRecord(outcome=TIMEOUT), "timeout"),
    ],
)
def test_what_failed(test, expected):
    assert what_failed(test) == expected


def test_failing_devices():
    assert failing_devices(_ok_opt()) == {}
    assert failing_devices(None) == {}
    assert failing_devices(_crash()) == {"Vulkan0": "crashed (SIGABRT) while testing it"}
    gate = _test(FAILED, GATE_FAIL + "\ndevice=CPU opt_period=1: OK (3 micro-steps)\n", exit_code=1)
    assert failing_devices(gate) == {"Vulkan0": "FAIL opt_period=1 at step 2: w=0.25 expected 0.5"}
    # a non-zero exit no row explains is the whole test's
    assert failing_devices(_test(FAILED, "", exit_code=3)) == {ANY_DEVICE: "failed (exit 3)"}


# ---- labels ----


def test_the_lavapipe_crash_in_both_variants_is_pre_existing():
    entries = attribute(
        {"test-opt": _crash("SIGABRT"), "test-opt-dynamic-accum": _test(PASSED, exit_code=0)},
        {
            "test-opt": _crash("SIGSEGV"),
            "test-opt-dynamic-accum": _test(FAILED, GATE_FAIL, exit_code=1),
        },
    )
    assert len(entries) == 1  # the gate passed with the fix: nothing to attribute
    e = entries[0]
    assert (e.test, e.device, e.label) == ("test-opt", "Vulkan0", PRE_EXISTING)
    assert e.patched == "crashed (SIGABRT) while testing it"
    assert e.control == "crashed (SIGSEGV) while testing it"
    assert "fails without the fix too" in e.reason
    assert pre_existing_only(entries, "test-opt") and failure_kind(entries) == PRE_EXISTING


def test_a_failure_that_passes_without_the_fix_is_a_regression():
    failing = _test(
        FAILED,
        TEST_OPT_ALL_OK.replace(
            "Backend Vulkan0 sgd: \x1b[1;32mOK", "Backend Vulkan0 sgd: \x1b[1;31mFAIL"
        ),
        exit_code=1,
    )
    entries = attribute({"test-opt": failing}, {"test-opt": _ok_opt()})
    assert [(e.device, e.label, e.patched, e.control) for e in entries] == [
        ("Vulkan0", REGRESSION, "FAIL sgd", "passed")
    ]
    assert "the fix breaks it" in entries[0].reason
    assert failure_kind(entries) == REGRESSION and not pre_existing_only(entries, "test-opt")


def test_a_crash_on_another_device_without_the_fix_is_not_pre_existing_here():
    # with the fix: crash on CPU (after Vulkan0 passed); without it: Vulkan0 passes, CPU passes
    out = TEST_OPT_ALL_OK.rsplit("  Backend CPU sgd", 1)[0]
    entries = attribute(
        {"test-opt": _test(CRASHED, out, signal="SIGSEGV", exit_code=-11)}, {"test-opt": _ok_opt()}
    )
    assert [(e.device, e.label) for e in entries] == [("CPU", REGRESSION)]


def test_a_device_the_control_never_reached_is_unknown():
    out = TEST_OPT_ALL_OK.rsplit("  Backend CPU sgd", 1)[0]
    patched = _test(CRASHED, out, signal="SIGSEGV", exit_code=-11)
    # control died on Vulkan0, first
    entries = attribute({"test-opt": patched}, {"test-opt": _crash()})
    assert [(e.device, e.label) for e in entries] == [("CPU", UNKNOWN)]
    assert "before reaching CPU" in entries[0].reason


def test_no_control_build_is_unknown():
    entries = attribute({"test-opt": _crash()}, {}, control_built=False)
    assert [e.label for e in entries] == [UNKNOWN]
    assert "did not build" in entries[0].reason and entries[0].control == "did not run"


def test_the_same_device_less_failure_in_both_is_pre_existing():
    entries = attribute(
        {"test-opt": _test(CRASHED, "", signal="SIGSEGV", exit_code=-11)},
        {"test-opt": _test(CRASHED, "", signal="SIGSEGV", exit_code=-11)},
    )
    assert [(e.device, e.label) for e in entries] == [(None, PRE_EXISTING)]


def test_a_gate_failing_with_and_without_the_fix_is_pre_existing():
    gate = _test(FAILED, GATE_FAIL + "\n", exit_code=1).model_copy(update={"gate": True})
    entries = attribute({"test-opt-dynamic-accum": gate}, {"test-opt-dynamic-accum": gate})
    assert [(e.test, e.device, e.label) for e in entries] == [
        ("test-opt-dynamic-accum", "Vulkan0", PRE_EXISTING)
    ]
    assert "the fix does not take effect there" in entries[0].reason


def test_nothing_failing_means_nothing_to_attribute():
    assert attribute({"test-opt": _ok_opt()}, {"test-opt": _crash()}) == []
    assert failure_kind([]) is None
    assert describe([]) == ""


def test_describe():
    entries = attribute({"test-opt": _crash()}, {"test-opt": _crash()})
    assert (
        describe(entries) == "test-opt on Vulkan0 crashed (SIGABRT) while testing it: pre-existing"
    )


# ---- the control's verdict and the cell's status with a pre-existing test-opt failure ----


def test_control_verdict_rests_on_the_gate_when_test_opt_fails_in_both():
    note = "test-opt on Vulkan0 crashed (SIGABRT) while testing it: pre-existing"
    v = control_verdict(True, FAILED, 1, GATE_FAIL + "\n", CRASHED, note)
    assert v.verdict == KILLED
    assert GATE_FAIL in v.reason and "verdict on the gate alone" in v.reason and note in v.reason


def test_control_verdict_without_the_pre_existing_note_is_still_invalid():
    v = control_verdict(True, FAILED, 1, GATE_FAIL + "\n", CRASHED)
    assert v.verdict == INVALID and "changed more than the fix" in v.reason


def test_a_pre_existing_note_does_not_rescue_a_gate_that_passed_or_crashed():
    note = "test-opt on Vulkan0 crashed: pre-existing"
    assert control_verdict(True, PASSED, 0, "", CRASHED, note).verdict == "survived"
    assert control_verdict(True, CRASHED, -11, "", CRASHED, note).verdict == INVALID


def test_cell_status_shows_the_pre_existing_failure():
    entries = attribute({"test-opt": _crash()}, {"test-opt": _crash()})
    v = control_verdict(True, FAILED, 1, GATE_FAIL + "\n", CRASHED, describe(entries))
    status, reason = classify.cell_status(
        True,
        {"test-opt": CRASHED, "test-opt-dynamic-accum": PASSED},
        v,
        attribution.summary(entries),
    )
    assert status == classify.FAILED  # never a pass
    assert reason.startswith(
        "with the fix: test-opt crashed (pre-existing, fails without the fix too: "
        "test-opt on Vulkan0 crashed (SIGABRT) while testing it)"
    )
    assert "negative control killed" in reason


def test_module_constants():
    assert {attribution.PRE_EXISTING, attribution.REGRESSION, attribution.UNKNOWN} == {
        "pre-existing",
        "regression",
        "unknown",
    }


def test_summary_of_mixed_and_uniform_labels():
    pre = AttributionEntry(
        test="test-opt", device="Vulkan0", patched="crashed (SIGABRT)", label=PRE_EXISTING
    )
    reg = AttributionEntry(
        test="test-opt-dynamic-accum", device="CPU", patched="FAIL opt_period=1", label=REGRESSION
    )
    assert (
        attribution.summary([reg])
        == "regression, passes without the fix: test-opt-dynamic-accum on CPU FAIL opt_period=1"
    )
    assert attribution.summary([pre, reg]) == (
        "test-opt on Vulkan0 crashed (SIGABRT): pre-existing; "
        "test-opt-dynamic-accum on CPU FAIL opt_period=1: regression"
    )
    assert attribution.summary([]) == ""


def test_real_mesa22_results_render_the_pre_existing_crash():
    """tests/data/results-vulkan-mesa22-sample.json: a real run of both vulkan cells on Debian 12's
    own Mesa 22.3.6 lavapipe (GGML_PATCH_VULKAN_ICD=system)."""
    from orchestrator.report.summary import summary_markdown

    from ..helpers.samples import VULKAN_SAMPLE, sample

    data = sample(VULKAN_SAMPLE)
    for cell in data.cells:
        assert cell.status == "failed" and cell.failure_kind == PRE_EXISTING
        assert "Mesa 22.3.6" in cell.device.drivers[0]
    md = summary_markdown(data)
    assert "0/2 cells passed (2 failed)" in md
    assert (
        md.count(
            "| test-opt | Vulkan0 | crashed (SIGABRT) while testing it | crashed "
            "(SIGABRT) while testing it | **pre-existing** |"
        )
        == 2
    )
    vk_rows = [ln for ln in md.splitlines() if "/vulkan | Vulkan0 | with fix |" in ln]
    assert len(vk_rows) == 2 and all(
        "| **crashed (SIGABRT) here** | 3/3 | — |" in ln for ln in vk_rows
    )
