"""JUnit XML from a results dict, for CI systems' test views.

Pure (the log reader is passed in). One testsuite per cell, named "<target>/<backend>"; one
testcase per cell x variant x test: classname "ggml-patch/<target>/<backend>/<variant>" (slashes:
reporters split a classname on dots, and "llama.cpp" must stay whole), name the test, and
`file` the matrix file (so a reporter's annotation points at a file of the repository instead of
guessing one from the classname). The negative control's gate test is expected to fail: its
testcase is named "<gate> (fix reverted: must fail)" and passes when the control was killed; a
survived or invalid control is the failure. A failure carries the attribution label of each of
its devices (pre-existing, regression, unknown) and the last lines of its log.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Callable, Optional

from .layout import GATE_TEST, TESTS

VARIANTS = ("patched", "control")
CONTROL_GATE_NAME = f"{GATE_TEST} (fix reverted: must fail)"
KILLED = "killed"
CLASS_SEP = "/"
LogTail = Callable[[str], Optional[str]]  # a log's path -> its last lines, or None


def no_logs(path: str) -> Optional[str]:
    return None


def classname(target: str, backend: str, variant: str) -> str:
    return CLASS_SEP.join(("ggml-patch", target, backend, variant))


def _target_backend(cell: dict) -> tuple[str, str]:
    """From the cell's own keys, or its id "target/backend" (older or hand-made results)."""
    target, _, backend = cell["cell"].rpartition("/")
    return cell.get("target", target), cell.get("backend", backend)


def _case(suite: ET.Element, cell: dict, variant: str, test: str, duration: Optional[float] = None) -> ET.Element:
    name = CONTROL_GATE_NAME if (variant == "control" and test == GATE_TEST) else test
    target, backend = _target_backend(cell)
    attrs = {"classname": classname(target, backend, variant), "name": name, "time": f"{duration or 0:.3f}"}
    if suite.get("file"):
        attrs["file"] = suite.get("file")
    return ET.SubElement(suite, "testcase", attrs)


def _mark(case: ET.Element, kind: str, message: str, kind_type: str = "", text: str = "") -> None:
    el = ET.SubElement(case, kind, {"message": message, **({"type": kind_type} if kind_type else {})})
    if text:
        el.text = text


def _detail(t: dict, attribution: list[dict] = (), log_tail: LogTail = no_logs) -> str:
    """The failure's body: the outcome, the exit code or signal, the failure line, the attribution
    of each failing device, the log and its last lines."""
    lines = [f"outcome: {t.get('outcome')}", f"exit code: {t.get('exit_code')}"]
    if t.get("signal"):
        lines.append(f"signal: {t['signal']}")
    for key in ("failure_line", "summary_line"):
        if t.get(key):
            lines.append(f"{key.replace('_', ' ')}: {t[key]}")
    lines += [f"attribution: {e['label']}: {e.get('reason', '')}".rstrip(": ") for e in attribution]
    return "\n".join(lines + _log_lines(t.get("log"), log_tail))


def _log_lines(log: Optional[str], log_tail: LogTail) -> list[str]:
    if not log:
        return []
    tail = log_tail(log)
    return [f"log: {log}"] + ([f"last lines of the log:\n{tail.rstrip()}"] if tail else [])


def _labels(entries: list[dict]) -> str:
    """' [regression]', ' [pre-existing, unknown]' or ''."""
    labels = list(dict.fromkeys(e["label"] for e in entries))
    return f" [{', '.join(labels)}]" if labels else ""


def _test_case(suite: ET.Element, cell: dict, rec: dict, test: str, log_tail: LogTail = no_logs) -> None:
    variant = rec["variant"]
    t = rec.get("tests", {}).get(test)
    case = _case(suite, cell, variant, test, (t or {}).get("duration_s"))
    build = rec.get("build") or {}
    if rec.get("status") == "build-failed" or build.get("ok") is False:
        _mark(case, "failure", f"the {variant} variant did not build: {build.get('error', '')}".rstrip(": "),
              "build-failed", "\n".join(_log_lines(build.get("log"), log_tail)) or "log: ")
        return
    if rec.get("status") == "built":  # --build-only: a device-less machine compiled it, ran nothing
        _mark(case, "skipped", f"built only, not run: {cell.get('reason', '')}")
        return
    if variant == "control" and test == GATE_TEST:
        verdict = rec.get("verdict")
        if verdict == KILLED:
            ET.SubElement(case, "system-out").text = f"killed: {rec.get('failure_line') or ''}"
        else:
            _mark(case, "failure", f"negative control {verdict}: {rec.get('verdict_reason', '')}", str(verdict),
                  _detail(t, log_tail=log_tail) if t else "")
        return
    if t is None:
        _mark(case, "error", f"{test} did not run", "not-run")
        return
    if t.get("outcome") != "passed":
        line = t.get("failure_line") or t.get("summary_line") or ""
        what = f"{test} {t.get('outcome')}" + (" without the fix" if variant == "control" else "")
        entries = [e for e in cell.get("attribution") or [] if e.get("test") == test] if variant == "patched" else []
        message = (f"{what}: {line}" if line else what) + _labels(entries)
        _mark(case, "failure", message, str(t.get("outcome")), _detail(t, entries, log_tail))


def _missing_cases(suite: ET.Element, cell: dict, variant: str) -> None:
    """Testcases for a variant that has no record: a skipped cell, or a cell that stopped early."""
    for test in TESTS:
        case = _case(suite, cell, variant, test)
        reason = cell.get("reason") or cell.get("status", "")
        if cell.get("status") == "skipped":
            _mark(case, "skipped", reason)
        elif variant == "control":
            _mark(case, "skipped", f"the negative control did not run: {reason}")
        else:
            kind = "error" if cell.get("status") == "error" else "failure"
            _mark(case, kind, reason, str(cell.get("status")))


def _suite(parent: ET.Element, cell: dict, records: list[dict], timestamp: str, file: str = "",
           log_tail: LogTail = no_logs) -> ET.Element:
    suite = ET.SubElement(parent, "testsuite", {"name": "{}/{}".format(*_target_backend(cell))})
    if timestamp:
        suite.set("timestamp", timestamp)
    if file:
        suite.set("file", file)
    by_variant = {r["variant"]: r for r in records if r["cell"] == cell["cell"]}
    for variant in VARIANTS:
        rec = by_variant.get(variant)
        if rec is None:
            _missing_cases(suite, cell, variant)
        else:
            for test in TESTS:
                _test_case(suite, cell, rec, test, log_tail)
    _count(suite)
    return suite


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


def junit_xml(results: dict, log_tail: LogTail = no_logs) -> str:
    root = ET.Element("testsuites", {"name": "ggml-patch"})
    for cell in results["cells"]:
        _suite(root, cell, results.get("records", []), results.get("started_at", ""), results.get("matrix", ""),
               log_tail)
    _count(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
