"""JUnit XML from results, for CI systems' test views. Pure (the log reader is passed in).

One testsuite per cell ("<target>/<backend>"), one testcase per cell x variant x test: classname
"ggml-patch/<target>/<backend>/<variant>" (slashes: reporters split a classname on dots, and
"llama.cpp" must stay whole), `file` the matrix file (so a reporter's annotation points at a file
of the repository instead of guessing one). The negative control's gate test, "<gate> (fix
reverted: must fail)", passes when the control was killed. A failure carries each device's
attribution label and its log's last lines; a test the backend does not run is <skipped>.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Callable, Optional, Sequence

from ..model.results import (
    CONTROL_PREFIX,
    AttributionEntry,
    Cell,
    CellStatus,
    Outcome,
    RecordStatus,
    Results,
    TestRecord,
    VariantRecord,
    Verdict,
    control_name,
)

LogTail = Callable[[str], Optional[str]]  # a log's path -> its last lines, or None


# ANSI escape sequences (colours, cursor moves) and
# what XML 1.0 cannot hold: a log is anyone's bytes
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]{0,4096}(?:\x07|\x1b\\)?|[@-Z\\-_])")
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def xml_text(text: str) -> str:
    """`text` as XML 1.0 can carry it: no ANSI codes, other control
    characters and lone surrogates as U+FFFD."""
    return _NOT_XML.sub("\ufffd", _ANSI.sub("", text))


def control_gate_name(test: str) -> str:
    """A control's gate test's case name."""
    return f"{test} (fix reverted: must fail)"


def mutant_case_name(name: str, test: str) -> str:
    """A known-wrong fix's case, named by the test that judges it first (its gate, if any)."""
    return f"{test} with mutant {name} (must fail)"


def _is_control(variant: str) -> bool:
    return variant.startswith(CONTROL_PREFIX)


def _case(
    suite: ET.Element,
    cell: Cell,
    variant: str,
    test: str,
    duration: Optional[float] = None,
    gate: bool = False,
) -> ET.Element:
    """A testcase of the cell's suite (a control's gate under its own name)."""
    name = control_gate_name(test) if (_is_control(variant) and gate) else test
    classname = "/".join(("ggml-patch", cell.target, cell.backend, variant))
    attrs = {"classname": classname, "name": name, "time": f"{duration or 0:.3f}"}
    file = suite.get("file")
    if file:
        attrs["file"] = file
    return ET.SubElement(suite, "testcase", attrs)


def _mark(case: ET.Element, kind: str, message: str, kind_type: str = "", text: str = "") -> None:
    el = ET.SubElement(
        case, kind, {"message": message, **({"type": kind_type} if kind_type else {})}
    )
    if text:
        el.text = text


def _detail(t: TestRecord, log_tail: LogTail, attribution: Sequence[AttributionEntry] = ()) -> str:
    """A failure's body: what the record says, the
    attribution of each failing device, the log's end."""
    said = (
        ("signal", t.signal),
        ("failure line", t.failure_line),
        ("summary line", t.summary_line),
    )
    lines = [
        f"outcome: {t.outcome}",
        f"exit code: {t.exit_code}",
        *(f"{k}: {v}" for k, v in said if v),
    ]
    lines += [f"attribution: {e.label}: {e.reason}".rstrip(": ") for e in attribution]
    return "\n".join(lines + _log_lines(t.log, log_tail))


def _log_lines(log: Optional[str], log_tail: LogTail) -> list[str]:
    if not log:
        return []
    tail = log_tail(log)
    return [f"log: {log}"] + ([f"last lines of the log:\n{tail.rstrip()}"] if tail else [])


def _test_case(
    suite: ET.Element, cell: Cell, rec: VariantRecord, test: str, log_tail: LogTail
) -> None:
    variant = rec.variant
    t = rec.test(test)
    gate = t is not None and bool(t.gate)
    case = _case(suite, cell, variant, test, t.duration_s if t else None, gate)
    build = rec.build
    if rec.status == RecordStatus.BUILD_FAILED or (build is not None and not build.ok):
        message = f"the {variant} variant did not build: {build.error if build else ''}".rstrip(
            ": "
        )
        log = "\n".join(_log_lines(build.log if build else None, log_tail)) or "log: "
        _mark(case, "failure", message, "build-failed", log)
        return
    # --build-only: a device-less machine compiled it, ran nothing
    if rec.status == RecordStatus.BUILT:
        _mark(case, "skipped", f"built only, not run: {cell.reason}")
        return
    killed = _is_control(variant) and rec.verdict == Verdict.KILLED
    if killed and not gate and t and t.outcome == Outcome.FAILED:
        # an upstream test's cases fail without the fix by their own check: what they are for
        ET.SubElement(case, "system-out").text = f"killed: {t.failure_line or t.summary_line or ''}"
        return
    if _is_control(variant) and gate:
        if rec.verdict == Verdict.KILLED:
            ET.SubElement(case, "system-out").text = f"killed: {rec.failure_line or ''}"
        else:
            message = f"negative control {rec.verdict}: {rec.verdict_reason}"
            _mark(case, "failure", message, str(rec.verdict), _detail(t, log_tail) if t else "")
        return
    if t is None:
        _mark(case, "error", f"{test} did not run", "not-run")
        return
    if t.outcome == Outcome.SKIPPED:  # the backend does not run it (its module's skip_tests)
        _mark(
            case,
            "skipped",
            f"{test} not run on {cell.backend}: {t.skipped or 'no reason recorded'}",
        )
        return
    if t.outcome != Outcome.PASSED:
        line = t.failure_line or t.summary_line or ""
        what = f"{test} {t.outcome}" + (" without the fix" if _is_control(variant) else "")
        entries = []
        if variant == "patched":
            entries = [e for e in cell.attribution or [] if e.test == test]
        # " [regression]", " [pre-existing, unknown]"
        labels = ", ".join(dict.fromkeys(str(e.label) for e in entries))
        message = f"{what}: {line}" if line else what
        if labels:
            message += f" [{labels}]"
        _mark(case, "failure", message, str(t.outcome), _detail(t, log_tail, entries))


def _suite(parent: ET.Element, cell: Cell, results: Results, log_tail: LogTail) -> ET.Element:
    attrs = {
        "name": f"{cell.target}/{cell.backend}",
        "timestamp": results.started_at,
        "file": results.matrix,
    }
    suite = ET.SubElement(parent, "testsuite", {k: v for k, v in attrs.items() if v})
    patched = results.records_of(cell.cell).get("patched")
    first = results.control_of(cell.cell)
    for rec in (patched, first):
        if rec is not None:
            for test in _tests_of(results, rec):
                _test_case(suite, cell, rec, test, log_tail)
    if patched is None:
        _not_run_cases(suite, cell, "patched", results.series.tests() or ["tests"])
    if first is None:
        topics = results.series.topics or []
        control = control_name(topics[0]) if topics else f"{CONTROL_PREFIX}?"
        tests = (results.series.topic_tests or {}).get(topics[0] if topics else "", ["tests"])
        _not_run_cases(suite, cell, control, tests)
    for rec in results.controls_of(cell.cell):
        _topic_control_case(suite, cell, rec)
    for rec in results.mutants_of(cell.cell):
        _mutant_case(suite, cell, rec, log_tail)
    for rec in results.competing_of(cell.cell):
        _competing_case(suite, cell, rec)
    _count(suite)
    return suite


def _tests_of(results: Results, rec: VariantRecord) -> list[str]:
    """The tests a record ran, else those its run declared for it (a build-only cell's)."""
    if rec.tests:
        return list(rec.tests)
    if rec.topic is not None:
        return (results.series.topic_tests or {}).get(rec.topic, ["tests"])
    return results.series.tests() or ["tests"]


def _not_run_cases(suite: ET.Element, cell: Cell, variant: str, tests: list[str]) -> None:
    """No record: a skipped cell, or a cell that stopped early."""
    reason = cell.reason or str(cell.status)
    for test in tests:
        case = _case(suite, cell, variant, test)
        if cell.status == CellStatus.SKIPPED:
            _mark(case, "skipped", reason)
        elif _is_control(variant):
            _mark(case, "skipped", f"the negative control did not run: {reason}")
        else:
            kind = "error" if cell.status == CellStatus.ERROR else "failure"
            _mark(case, kind, reason, str(cell.status))


def _topic_control_case(suite: ET.Element, cell: Cell, rec: VariantRecord) -> None:
    """A topic's control (its hunks reverted on the whole queue): passes when it was killed."""
    case = _case(suite, cell, "topic-control", f"control of {rec.topic}")
    if rec.verdict == Verdict.KILLED:
        ET.SubElement(case, "system-out").text = f"killed: {rec.verdict_reason}"
    elif rec.verdict is None:
        why = rec.verdict_reason or str(rec.status)
        _mark(case, "skipped", f"the control of {rec.topic} was not judged: {why}")
    else:
        message = f"the control of {rec.topic} {rec.verdict}: {rec.verdict_reason}"
        _mark(case, "failure", message, str(rec.verdict))


def _mutant_case(suite: ET.Element, cell: Cell, rec: VariantRecord, log_tail: LogTail) -> None:
    """A known-wrong fix: passes when the gate killed it; survived or invalid is the failure."""
    info = rec.mutant
    name = info.name if info else rec.variant
    # the tests that judged it (those it ran, else its verdicts'), its gate first
    judged = list(rec.tests) or list(rec.kills or {})
    judged.sort(key=lambda n: not (n in rec.tests and rec.tests[n].gate))
    test = judged[0] if judged else "tests"
    t = rec.test(test)
    case = _case(suite, cell, "mutant", mutant_case_name(name, test), t.duration_s if t else None)
    if rec.status == RecordStatus.SKIPPED:
        _mark(case, "skipped", f"mutant not run: {info.skipped if info and info.skipped else ''}")
    elif rec.verdict == Verdict.KILLED:
        ET.SubElement(case, "system-out").text = f"killed: {rec.failure_line or ''}"
    else:
        text = f"{info.title if info else ''}\nwhy it is wrong: {info.why_wrong if info else ''}"
        text += f"\n{_detail(t, log_tail)}" if t else ""
        _mark(
            case,
            "failure",
            f"mutant {name} {rec.verdict}: {rec.verdict_reason}",
            str(rec.verdict),
            text,
        )


def _competing_case(suite: ET.Element, cell: Cell, rec: VariantRecord) -> None:
    """A competing fix's verdict is data, never a failure of this run."""
    info, j = rec.competing, rec.judged
    name = info.name if info else rec.variant
    duration = sum(t.duration_s for t in rec.tests.values())
    case = _case(
        suite, cell, "competing", f"competing fix {name} (judged against the fix)", duration
    )
    if rec.status == RecordStatus.SKIPPED or j is None:
        _mark(
            case,
            "skipped",
            f"competing fix not run: {info.skipped if info and info.skipped else ''}",
        )
        return
    where = f"{info.url} ({info.date})" if info else ""
    ET.SubElement(case, "system-out").text = f"{j.verdict}: {j.reason}\nsource: {where}"


def _count(el: ET.Element) -> None:
    cases = list(el.iter("testcase"))
    el.set("tests", str(len(cases)))
    for kind, key in (("failure", "failures"), ("error", "errors"), ("skipped", "skipped")):
        el.set(key, str(sum(1 for c in cases if c.find(kind) is not None)))
    el.set("time", f"{sum((float(c.get('time', 0)) for c in cases), 0.0):.3f}")


def junit_xml(results: Results, log_tail: Optional[LogTail] = None) -> str:
    root = ET.Element("testsuites", {"name": "ggml-patch"})
    for cell in results.cells:
        _suite(root, cell, results, log_tail or (lambda path: None))
    _count(root)
    for el in root.iter():
        el.text = xml_text(el.text) if el.text else el.text
        for k, v in el.attrib.items():
            el.set(k, xml_text(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
