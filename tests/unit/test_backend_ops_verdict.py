"""test-backend-ops's real output (tests/unit/data/backend-ops/, recorded from the pinned ggml
0.15.3) read into a typed run, and each topic judged per backend: proven, cannot be judged
(with why), or failed."""

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.model.results import DeviceRow
from orchestrator.verdicts.backend_ops import backend_args, device_rows, judge, parse

DATA = Path(__file__).parent / "data" / "backend-ops"
SIGABRT, SIGSEGV = -6, -11


def _text(name: str) -> str:
    return (DATA / f"{name}.out").read_text(encoding="utf-8")


def run(name: str, exit_code: int):
    return parse((DATA / f"{name}.out").read_text(encoding="utf-8"), exit_code)


def test_without_b_the_cpu_is_skipped_and_the_run_passes_comparing_nothing():
    r = run("cpu-without-b", 0)
    assert r.complete and (r.backends_passed, r.backends_total) == (1, 1)
    (cpu,) = r.backends
    assert (cpu.name, cpu.state, cpu.skip_reason) == ("CPU", "skipped", "Skipping CPU backend")
    assert cpu.compared == []


def test_a_b_naming_an_absent_device_passes_with_nothing_compared():
    r = run("b-absent-device", 0)
    assert [(b.name, b.state) for b in r.backends] == [("CPU", "skipped")]
    assert r.backend("Vulkan0") is None


def test_the_fixed_tree_passes_every_case_on_the_cpu():
    r = run("cpu-concat-fixed", 0)
    cpu = r.backend("CPU")
    assert cpu is not None and cpu.state == "passed"
    assert (cpu.tests_passed, cpu.tests_total) == (132, 132) == (len(cpu.compared), 132)
    assert {c.op for c in cpu.cases} == {"CONCAT"}
    assert sum("q4_0" in c.params for c in cpu.cases) == 4  # the topic's own cases ran
    assert r.crash is None


@pytest.mark.parametrize(
    "name, code, signal",
    [
        ("cpu-concat-control-sigabrt", SIGABRT, "SIGABRT"),
        ("cpu-concat-control-sigsegv", SIGSEGV, "SIGSEGV"),
        ("cpu-concat-control-unbuffered", SIGSEGV, "SIGSEGV"),
    ],
)
def test_a_control_that_dies_leaves_its_backend_unfinished(name, code, signal):
    r = run(name, code)
    assert not r.complete and r.crash == signal
    cpu = r.backend("CPU")
    assert cpu is not None and cpu.state == "unfinished" and cpu.failed == []
    assert not any("q4_0" in c.params for c in cpu.compared)  # it died before those


def test_a_compare_failure_is_read_with_its_message():
    r = run("cpu-concat-compare-fail", 1)
    cpu = r.backend("CPU")
    assert cpu is not None and cpu.state == "failed" and r.backends_passed == 0
    assert (cpu.tests_passed, len(cpu.failed), len(cpu.cases)) == (109, 23, 132)
    first = cpu.failed[0]
    assert first.params == "type=f32,ne_a=[11,12,13,14],ne_b_d=7,dim=0,v=0"
    assert first.detail.startswith("[CONCAT] ERR = 0.000076169 > 0.000000100")


def test_cases_a_backend_does_not_support_are_not_compared():
    cpu = run("cpu-some-not-supported", 0).backend("CPU")
    assert cpu is not None and cpu.state == "passed"
    unsupported = [c for c in cpu.cases if c.status == "not-supported"]
    assert len(unsupported) == 24 and len(cpu.compared) == cpu.tests_total == 24


def test_each_case_is_a_device_row_for_the_per_device_table():
    """results.json's rows: one per case a backend printed (passed/total per device in
    summary.md), a compare failure with its own line; a case not run is a skipped row."""
    rows = [DeviceRow.model_validate(r) for r in device_rows(_text("cpu-concat-fixed"))]
    assert len(rows) == 132 and {(r.device, r.status) for r in rows} == {("CPU", "OK")}
    assert rows[-1].case == "CONCAT(type=q8_0,ne_a=[128,12,13,14],ne_b_d=7,dim=3,v=0)"
    failed = [r for r in device_rows(_text("cpu-concat-compare-fail")) if r["status"] == "FAIL"]
    assert len(failed) == 23
    assert failed[0]["line"].startswith(
        "CONCAT(type=f32,ne_a=[11,12,13,14],ne_b_d=7,dim=0,v=0): FAIL [CONCAT] ERR = 0.000076169"
    )
    skipped = [r for r in device_rows(_text("cpu-some-not-supported")) if r["status"] == "SKIPPED"]
    assert len(skipped) == 24
    # the case it died in printed no verdict: no row (stopped_on says where)
    died = device_rows(_text("cpu-concat-control-sigsegv"))
    assert not any("q4_0" in r["case"] for r in died)
    assert device_rows(_text("cpu-without-b")) == []  # the CPU skipped: nothing compared


def test_usage_is_no_run():
    r = run("usage", 1)
    assert r.backends == [] and not r.complete


def test_the_concat_fix_is_proven_on_the_cpu_where_its_control_crashes_as_declared():
    j = judge(run("cpu-concat-fixed", 0), run("cpu-concat-control-sigabrt", SIGABRT), "CPU", True)
    assert j.outcome == "proven"
    assert "132 cases pass with the fix" in j.text and "SIGABRT" in j.text


def test_an_undeclared_crash_of_the_control_is_no_kill():
    j = judge(run("cpu-concat-fixed", 0), run("cpu-concat-control-sigsegv", SIGSEGV), "CPU")
    assert j.outcome == "failed" and "control_crash" in j.reason


def test_a_control_failing_a_compare_is_killed():
    j = judge(run("cpu-concat-fixed", 0), run("cpu-concat-compare-fail", 1), "CPU")
    assert j.outcome == "proven" and "ERR = 0.000076169" in j.reason


@pytest.mark.parametrize(
    "patched, backend, why",
    [
        ("cpu-without-b", "CPU", "skips the CPU unless `-b CPU`"),
        ("b-absent-device", "Vulkan0", "did not list it"),
        ("cpu-no-case-matched", "CPU", "the filter matched no case"),
    ],
)
def test_nothing_compared_cannot_be_judged_never_passed(patched, backend, why):
    j = judge(run(patched, 0), run("cpu-concat-control-sigabrt", SIGABRT), backend, True)
    assert j.outcome == "cannot-judge"
    assert j.text.startswith(f"cannot be judged on {backend}: ") and why in j.text


def test_a_cpu_control_that_passes_cannot_be_judged_on_the_cpu():
    """-b CPU compares the CPU with its own reference path: a wrong CPU kernel is in both."""
    fixed = run("cpu-concat-fixed", 0)
    j = judge(fixed, fixed, "CPU")
    assert j.outcome == "cannot-judge" and "reference path" in j.reason


def test_a_fix_failing_its_own_cases_fails():
    j = judge(run("cpu-concat-compare-fail", 1), run("cpu-concat-fixed", 0), "CPU")
    assert j.outcome == "failed" and j.reason.startswith("with the fix: CONCAT(")
    j = judge(run("cpu-concat-control-sigabrt", SIGABRT), run("cpu-concat-fixed", 0), "CPU")
    assert j.outcome == "failed" and "SIGABRT" in j.reason


def test_on_another_backend_a_surviving_control_fails_unless_cases_went_unsupported():
    fixed = run("cpu-concat-fixed", 0)
    fixed.backends[0].name = "Vulkan0"  # the same lines as a Vulkan cell would print them
    j = judge(fixed, fixed, "Vulkan0")
    assert j.outcome == "failed" and "control survived" in j.reason
    partial = run("cpu-some-not-supported", 0)
    partial.backends[0].name = "Vulkan0"
    j = judge(partial, partial, "Vulkan0")
    assert j.outcome == "cannot-judge" and "24 are not supported" in j.reason


def test_the_concat_topic_cannot_be_judged_on_a_real_vulkan_cell():
    # recorded on lavapipe: ggml 0.15.3's Vulkan does not support quantized CONCAT, so the 20
    # cases that catch the bug are not run there and the rest pass without the fix too
    fixed, control = run("vulkan-concat-fixed", 0), run("vulkan-concat-control", 0)
    vulkan = fixed.backend("Vulkan0")
    assert vulkan is not None and vulkan.state == "passed"
    assert len(vulkan.compared) == 112
    unsupported = [c for c in vulkan.cases if c.status == "not-supported"]
    assert len(unsupported) == 20 and all(c.params.startswith("type=q") for c in unsupported)
    j = judge(fixed, control, "Vulkan0")
    assert j.outcome == "cannot-judge", j
    assert j.text == (
        "cannot be judged on Vulkan0: the control passes the 112 cases compared there; "
        "20 are not supported there"
    )
    # the CPU is the reference there, never a backend of its own: nothing judged on it
    assert judge(fixed, control, "CPU").outcome == "cannot-judge"


def test_a_cell_names_its_backend_unless_the_line_does():
    assert backend_args(("-o", "CONCAT"), "CPU") == ("-o", "CONCAT", "-b", "CPU")
    assert backend_args(("-b", "Vulkan0", "-o", "X"), "CPU") == ("-b", "Vulkan0", "-o", "X")


_LINES = st.sampled_from(
    [
        "Testing 2 devices",
        "Backend 1/2: CPU",
        "Backend 2/2: Vulkan0",
        "  Skipping CPU backend",
        "  CONCAT(type=f32,ne=[1,2,3,4]): \x1b[1;32mOK\x1b[0m",
        "[CONCAT] ERR = 1.0 > 0.1   CONCAT(type=q4_0): FAIL",
        "  SOFT_MAX(type=f32): not supported [Vulkan0] ",
        "  CONCAT(type=f32): ",
        "  3/4 tests passed",
        "Failing tests:",
        "  Backend Vulkan0: FAIL",
        "1/2 backends passed",
        "FAIL",
    ]
)


@settings(max_examples=200)
@given(st.lists(st.one_of(_LINES, st.text(max_size=40)), max_size=30), st.integers(-15, 2))
def test_any_output_reads_and_judges_without_an_error(lines, code):
    """The target's output is untrusted: every text is read, every backend judged."""
    r = parse("\n".join(lines), code)
    for backend in ("CPU", "Vulkan0"):
        assert judge(r, r, backend).outcome in ("proven", "cannot-judge", "failed")
