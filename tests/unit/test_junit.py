"""junit.xml from results: one testcase per cell x variant x test; the control's expected gate
failure passes when killed; skips, build failures and survived controls as CI systems show them."""

import json
import xml.etree.ElementTree as ET

import pytest

from orchestrator.model.results import results_of
from orchestrator.report.junit import control_gate_name, junit_xml
from orchestrator.report.summary import write_results

LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"
GATE = "test-opt-dynamic-accum"
CONTROL = "control:accumulator-reset"  # the sample's one topic's control


@pytest.fixture
def sample(repo_root) -> dict:
    return json.loads((repo_root / "tests/data/results-cpu-sample.json").read_text())


def _cases(results: dict) -> dict[tuple[str, str], ET.Element]:
    root = ET.fromstring(junit_xml(results_of(results)))
    return {(c.get("classname"), c.get("name")): c for c in root.iter("testcase")}


def _record(results: dict, cell: str, variant: str) -> dict:
    return next(r for r in results["records"] if r["cell"] == cell and r["variant"] == variant)


def test_one_testcase_per_cell_variant_test_and_all_pass(sample):
    root = ET.fromstring(junit_xml(results_of(sample)))
    cases = _cases(sample)
    # per cell: each variant's two tests, and the topic's control as one case of its own
    assert len(cases) == 2 * (2 * 2 + 1)
    for target in ("llama.cpp", "ggml"):
        for variant in ("patched", CONTROL):
            cls = f"ggml-patch/{target}/cpu/{variant}"
            assert (cls, "test-opt") in cases
            assert (cls, control_gate_name(GATE) if variant == CONTROL else GATE) in cases
        assert (f"ggml-patch/{target}/cpu/topic-control", "control of accumulator-reset") in cases
    assert control_gate_name(GATE) == "test-opt-dynamic-accum (fix reverted: must fail)"
    assert (root.get("tests"), root.get("failures"), root.get("errors"), root.get("skipped")) == (
        "10",
        "0",
        "0",
        "0",
    )
    assert [s.get("name") for s in root.iter("testsuite")] == ["llama.cpp/cpu", "ggml/cpu"]
    # the killed control is a pass that still shows its evidence
    killed = cases[("ggml-patch/ggml/cpu/" + CONTROL, control_gate_name("test-opt-dynamic-accum"))]
    assert killed.find("failure") is None and LINE in killed.find("system-out").text
    assert float(cases[("ggml-patch/ggml/cpu/patched", "test-opt")].get("time")) == pytest.approx(
        0.023
    )


def test_a_survived_control_is_a_failure(sample):
    control = _record(sample, "ggml/cpu", CONTROL)
    control.update(
        status="survived",
        verdict="survived",
        failure_line=None,
        verdict_reason="the gate test passed without the fix: it is not a gate",
    )
    control["tests"][GATE].update(outcome="passed", exit_code=0, failure_line=None)
    case = _cases(sample)[
        ("ggml-patch/ggml/cpu/" + CONTROL, control_gate_name("test-opt-dynamic-accum"))
    ]
    failure = case.find("failure")
    assert failure is not None and failure.get("type") == "survived"
    assert "not a gate" in failure.get("message")
    # the gate's case, and the topic's control's own case
    assert ET.fromstring(junit_xml(results_of(sample))).get("failures") == "2"


def test_a_patched_failure_carries_the_failure_line_and_outcome(sample):
    gate = _record(sample, "llama.cpp/cpu", "patched")["tests"][GATE]
    gate.update(outcome="failed", exit_code=1, failure_line=LINE)
    failure = _cases(sample)[("ggml-patch/llama.cpp/cpu/patched", GATE)].find("failure")
    assert failure.get("type") == "failed"
    assert LINE in failure.get("message")
    assert "outcome: failed" in failure.text and f"failure line: {LINE}" in failure.text
    assert "patched-test-opt-dynamic-accum.log" in failure.text


def test_a_crash_names_its_signal(sample):
    t = _record(sample, "ggml/cpu", "patched")["tests"]["test-opt"]
    t.update(outcome="crashed", exit_code=-6, signal="SIGABRT")
    failure = _cases(sample)[("ggml-patch/ggml/cpu/patched", "test-opt")].find("failure")
    assert failure.get("type") == "crashed" and "signal: SIGABRT" in failure.text


def test_a_skipped_cell_is_skipped_with_its_reason(sample):
    sample["cells"].append(
        {
            "cell": "ggml/metal",
            "target": "ggml",
            "backend": "metal",
            "status": "skipped",
            "reason": "Metal needs macOS (this is Linux)",
            "exit_code": 0,
            "timings": {},
        }
    )
    root = ET.fromstring(junit_xml(results_of(sample)))
    metal = [
        c for c in root.iter("testcase") if c.get("classname").startswith("ggml-patch/ggml/metal/")
    ]
    assert len(metal) == 4
    assert all(
        c.find("skipped").get("message") == "Metal needs macOS (this is Linux)" for c in metal
    )
    assert (root.get("tests"), root.get("skipped"), root.get("failures")) == ("14", "4", "0")


def test_a_cell_that_did_not_build_fails_and_its_control_is_not_run(sample):
    sample["records"] = [r for r in sample["records"] if r["cell"] != "ggml/cpu"]
    cell = sample["cells"][1]
    cell.update(status="failed", reason="ggml/cpu: build failed: ninja exited 1", exit_code=5)
    cases = _cases(sample)
    patched = cases[("ggml-patch/ggml/cpu/patched", GATE)].find("failure")
    assert patched is not None and "ninja exited 1" in patched.get("message")
    assert "did not run" in cases[("ggml-patch/ggml/cpu/" + CONTROL, "test-opt")].find(
        "skipped"
    ).get("message")


def test_a_control_that_did_not_build_is_a_failure(sample):
    control = _record(sample, "ggml/cpu", CONTROL)
    control.update(
        status="invalid",
        verdict="invalid",
        tests={},
        build={
            "ok": False,
            "error": "ninja exited 1",
            "log": "/x/build-control.log",
            "duration_s": 1.0,
        },
    )
    cases = _cases(sample)
    # no test ran: the cases are the topic's declared tests
    for name in ("test-opt", GATE):
        failure = cases[("ggml-patch/ggml/cpu/" + CONTROL, name)].find("failure")
        assert failure.get("type") == "build-failed" and "ninja exited 1" in failure.get("message")


def test_build_only_cells_are_skipped_not_passed(sample):
    for r in sample["records"]:
        if r["cell"] == "ggml/cpu":
            r.update(status="built", tests={})
            r.pop("verdict", None)
    sample["cells"][1].update(
        status="build-only", reason="built with and without the fix; tests not run: no GPU"
    )
    root = ET.fromstring(junit_xml(results_of(sample)))
    ggml = [c for c in root.iter("testcase") if "/ggml/cpu/" in c.get("classname")]
    # each variant's declared tests, and the control's own case, each skipped with why
    assert len(ggml) == 5 and all(c.find("skipped") is not None for c in ggml)
    assert sum("no GPU" in c.find("skipped").get("message") for c in ggml) == 4


def test_messages_are_escaped(sample):
    sample["cells"].append(
        {
            "cell": "ggml/cuda",
            "target": "ggml",
            "backend": "cuda",
            "status": "skipped",
            "reason": 'no <GPU> & "no driver"',
            "exit_code": 0,
            "timings": {},
        }
    )
    text = junit_xml(results_of(sample))
    assert "&lt;GPU&gt; &amp;" in text
    assert ET.fromstring(text).find(".//skipped").get("message") == 'no <GPU> & "no driver"'


def test_every_run_writes_junit_xml(sample, tmp_path):
    write_results(results_of(sample), tmp_path)
    assert (tmp_path / "junit.xml").read_text() == junit_xml(results_of(sample))
    assert ET.parse(tmp_path / "junit.xml").getroot().get("tests") == "10"


def test_cells_without_target_keys_are_named_from_their_id(sample):
    for c in sample["cells"]:
        del c["target"], c["backend"]
    assert ("ggml-patch/llama.cpp/cpu/patched", "test-opt") in _cases(sample)


def test_the_classname_keeps_llama_cpp_whole_and_names_the_matrix_file(sample):
    cases = _cases(sample)
    case = cases[("ggml-patch/llama.cpp/cpu/patched", "test-opt")]
    # reporters split a classname on dots (mikepenz/action-junit-report takes the last part as a
    # file name when there is no `file`): slashes keep the target whole, `file` names a real file
    assert case.get("classname").split("/") == ["ggml-patch", "llama.cpp", "cpu", "patched"]
    assert case.get("file") == sample["matrix"] and sample["matrix"].endswith("matrix.yaml")
    del sample["matrix"]
    assert "file" not in _cases(sample)[("ggml-patch/llama.cpp/cpu/patched", "test-opt")].attrib


def test_a_failure_carries_its_attribution_and_the_last_lines_of_its_log(sample, tmp_path):
    gate = _record(sample, "llama.cpp/cpu", "patched")["tests"][GATE]
    log = tmp_path / "patched-gate.log"
    log.write_text("".join(f"line {i}\n" for i in range(100)) + LINE + "\n")
    gate.update(outcome="failed", exit_code=1, failure_line=LINE, log=str(log))
    sample["cells"][0]["attribution"] = [
        {
            "test": GATE,
            "device": "CPU",
            "label": "regression",
            "reason": "the gate on CPU passes without the fix",
        },
        {"test": "test-opt", "device": "CPU", "label": "pre-existing", "reason": "not this test"},
    ]
    from orchestrator.report.summary import log_tail

    root = ET.fromstring(junit_xml(results_of(sample), log_tail))
    case = next(
        c
        for c in root.iter("testcase")
        if (c.get("classname"), c.get("name")) == ("ggml-patch/llama.cpp/cpu/patched", GATE)
    )
    failure = case.find("failure")
    assert failure.get("message") == f"{GATE} failed: {LINE} [regression]"
    text = failure.text
    assert (
        "attribution: regression: the gate on CPU passes without the fix" in text
        and "not this test" not in text
    )
    tail = text.split("last lines of the log:\n", 1)[1].splitlines()
    assert len(tail) == 30 and tail[-1] == LINE and tail[0] == "line 71"
    # without a reader (or with the log gone) the body still names the log
    assert f"log: {log}" in ET.fromstring(junit_xml(results_of(sample))).find(".//failure").text
    log.unlink()
    assert (
        "last lines"
        not in ET.fromstring(junit_xml(results_of(sample), log_tail)).find(".//failure").text
    )


def test_test_opt_failing_in_the_killed_control_is_a_pass_with_its_line(sample):
    """test-opt's per-step cases fail without the fix by their own check: what they are for."""
    opt_line = (
        "test_per_step_graphs(high_level=no, schedule=TTTTTT, "
        "opt_period=1, subtest=weights, optimizer=adamw): FAIL"
    )
    control = _record(sample, "ggml/cpu", CONTROL)
    control["tests"]["test-opt"].update(outcome="failed", exit_code=1, failure_line=opt_line)
    case = _cases(sample)[("ggml-patch/ggml/cpu/" + CONTROL, "test-opt")]
    assert case.find("failure") is None and opt_line in case.find("system-out").text
    assert ET.fromstring(junit_xml(results_of(sample))).get("failures") == "0"
    # not killed: a failure again
    control.update(status="invalid", verdict="invalid", verdict_reason="x")
    assert (
        _cases(sample)[("ggml-patch/ggml/cpu/" + CONTROL, "test-opt")].find("failure") is not None
    )
