"""JUnit XML from a results dict, for CI systems' test views.

Pure. One testcase per cell x variant x test: classname "ggml-patch.<target>.<backend>.<variant>",
name the test. The negative control's gate test is expected to fail: its testcase is named
"<gate> (fix reverted: must fail)" and passes when the control was killed; a survived or
invalid control is the failure.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Optional, Union

from ..patchset.layout import GATE_TEST, TESTS
from .model import Cell, CellStatus, Outcome, RecordStatus, Results, TestRecord, VariantRecord, Verdict, as_results

VARIANTS = ("patched", "control")
CONTROL_GATE_NAME = f"{GATE_TEST} (fix reverted: must fail)"


def mutant_case_name(name: str) -> str:
    return f"{GATE_TEST} with mutant {name} (must fail)"


def _case(suite: ET.Element, cell: Cell, variant: str, test: str, duration: Optional[float] = None) -> ET.Element:
    name = CONTROL_GATE_NAME if (variant == "control" and test == GATE_TEST) else test
    attrs = {"classname": f"ggml-patch.{cell.target}.{cell.backend}.{variant}", "name": name,
             "time": f"{duration or 0:.3f}"}
    return ET.SubElement(suite, "testcase", attrs)


def _mark(case: ET.Element, kind: str, message: str, kind_type: str = "", text: str = "") -> None:
    el = ET.SubElement(case, kind, {"message": message, **({"type": kind_type} if kind_type else {})})
    if text:
        el.text = text


def _detail(t: TestRecord) -> str:
    """The failure's body: the outcome, the exit code or signal, the failure line and the log."""
    lines = [f"outcome: {t.outcome}", f"exit code: {t.exit_code}"]
    if t.signal:
        lines.append(f"signal: {t.signal}")
    for key, value in (("failure line", t.failure_line), ("summary line", t.summary_line), ("log", t.log)):
        if value:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def _test_case(suite: ET.Element, cell: Cell, rec: VariantRecord, test: str) -> None:
    variant = rec.variant
    t = rec.test(test)
    case = _case(suite, cell, variant, test, t.duration_s if t else None)
    build = rec.build
    if rec.status == RecordStatus.BUILD_FAILED or (build is not None and not build.ok):
        error = build.error if build else ""
        _mark(case, "failure", f"the {variant} variant did not build: {error}".rstrip(": "),
              "build-failed", f"log: {build.log if build else ''}")
        return
    if rec.status == RecordStatus.BUILT:  # --build-only: a device-less machine compiled it, ran nothing
        _mark(case, "skipped", f"built only, not run: {cell.reason}")
        return
    if variant == "control" and test == GATE_TEST:
        if rec.verdict == Verdict.KILLED:
            ET.SubElement(case, "system-out").text = f"killed: {rec.failure_line or ''}"
        else:
            _mark(case, "failure", f"negative control {rec.verdict}: {rec.verdict_reason}", str(rec.verdict),
                  _detail(t) if t else "")
        return
    if t is None:
        _mark(case, "error", f"{test} did not run", "not-run")
        return
    if t.outcome != Outcome.PASSED:
        line = t.failure_line or t.summary_line or ""
        what = f"{test} {t.outcome}" + (" without the fix" if variant == "control" else "")
        _mark(case, "failure", f"{what}: {line}" if line else what, str(t.outcome), _detail(t))


def _missing_cases(suite: ET.Element, cell: Cell, variant: str) -> None:
    """Testcases for a variant that has no record: a skipped cell, or a cell that stopped early."""
    for test in TESTS:
        case = _case(suite, cell, variant, test)
        reason = cell.reason or str(cell.status)
        if cell.status == CellStatus.SKIPPED:
            _mark(case, "skipped", reason)
        elif variant == "control":
            _mark(case, "skipped", f"the negative control did not run: {reason}")
        else:
            kind = "error" if cell.status == CellStatus.ERROR else "failure"
            _mark(case, kind, reason, str(cell.status))


def _suite(parent: ET.Element, cell: Cell, results: Results) -> ET.Element:
    suite = ET.SubElement(parent, "testsuite", {"name": f"ggml-patch.{cell.target}.{cell.backend}"})
    if results.started_at:
        suite.set("timestamp", results.started_at)
    by_variant = results.records_of(cell.cell)
    for variant in VARIANTS:
        rec = by_variant.get(variant)
        if rec is None:
            _missing_cases(suite, cell, variant)
        else:
            for test in TESTS:
                _test_case(suite, cell, rec, test)
    for rec in results.mutants_of(cell.cell):
        _mutant_case(suite, cell, rec)
    _count(suite)
    return suite


def _mutant_case(suite: ET.Element, cell: Cell, rec: VariantRecord) -> None:
    """A known-wrong fix: passes when the gate killed it; survived or invalid is the failure."""
    info = rec.mutant or {}
    name = str(info.get("name") or rec.variant)
    t = rec.test(GATE_TEST)
    case = ET.SubElement(suite, "testcase", {"classname": f"ggml-patch.{cell.target}.{cell.backend}.mutant",
                                             "name": mutant_case_name(name),
                                             "time": f"{t.duration_s if t else 0:.3f}"})
    if rec.status == RecordStatus.SKIPPED:
        _mark(case, "skipped", f"mutant not run: {info.get('skipped', '')}")
    elif rec.verdict == Verdict.KILLED:
        ET.SubElement(case, "system-out").text = f"killed: {rec.failure_line or ''}"
    else:
        _mark(case, "failure", f"mutant {name} {rec.verdict}: {rec.verdict_reason}", str(rec.verdict),
              f"{info.get('title', '')}\nwhy it is wrong: {info.get('why_wrong', '')}" + (f"\n{_detail(t)}" if t else ""))


def _count(el: ET.Element) -> None:
    cases = el.iter("testcase")
    n = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    time = 0.0
    for c in cases:
        n["tests"] += 1
        time += float(c.get("time", 0))
        for kind, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
            if c.find(kind) is not None:
                n[key] += 1
    for k, v in n.items():
        el.set(k, str(v))
    el.set("time", f"{time:.3f}")


def junit_xml(results: Union[Results, dict]) -> str:
    results = as_results(results)
    root = ET.Element("testsuites", {"name": "ggml-patch"})
    for cell in results.cells:
        _suite(root, cell, results)
    _count(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
