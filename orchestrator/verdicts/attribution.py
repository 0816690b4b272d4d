"""Failure attribution (pure): is a test that fails with the fix failing because of it? Compared
device by device with the same test in the control (the fix's hunks reverted): "pre-existing" when
it fails there too, "regression" when it passes there, "unknown" when the control cannot tell (it
did not build, or never reached that device)."""

from __future__ import annotations

import re
from typing import Mapping, Optional

from ..model.results import AttributionEntry, AttributionLabel, RowStatus, TestRecord
from .classify import CRASHED, FAILED, PASSED, SKIPPED, strip_ansi

PRE_EXISTING, REGRESSION, UNKNOWN = (
    AttributionLabel.PRE_EXISTING,
    AttributionLabel.REGRESSION,
    AttributionLabel.UNKNOWN,
)
# test-opt, before each device
_DEVICE_HEADER = re.compile(r"^Backend \d+/\d+: (?P<device>\S+)\s*$", re.M)
ANY_DEVICE = "(whole test)"  # the failure cannot be pinned to one device


def what_failed(test: Optional[TestRecord]) -> str:
    """'crashed (SIGABRT)', 'failed (exit 1)', 'timeout', ... for one test record."""
    if not test:
        return "did not run"
    if test.outcome == CRASHED and test.signal:
        return f"crashed ({test.signal})"
    if test.outcome == FAILED and test.exit_code is not None:
        return f"failed (exit {test.exit_code})"
    return str(test.outcome)


def crash_device(output: str) -> Optional[str]:
    """The device a test was on when it stopped: the last "Backend i/n: DEV"
    header (test-opt) with no result row after it. None when it finished every
    device it started (died in teardown) or has none."""
    output = strip_ansi(output or "")
    headers = list(_DEVICE_HEADER.finditer(output))
    if not headers:
        return None
    last = headers[-1]
    after = output[last.end() :]
    if re.search(
        rf"^\s*Backend {re.escape(last['device'])} \S+: (OK|FAIL|SKIPPED)\s*$", after, re.M
    ):
        return None
    return last["device"]


def failing_devices(test: Optional[TestRecord]) -> dict[str, str]:
    """device -> what failed there, for one test record (empty when it passed or was not run)."""
    if not test or test.outcome in (PASSED, SKIPPED):
        return {}
    out: dict[str, list[str]] = {}
    for row in test.rows:
        if row.status == RowStatus.FAIL:
            detail = row.key
            if row.step is not None:
                detail += f" at step {row.step}: w={row.actual:g} expected {row.expected:g}"
            out.setdefault(row.device, []).append(f"FAIL {detail}".strip())
    if test.outcome != FAILED or not out:
        # a crash, a timeout, or a non-zero exit no row explains: pin it to the device in progress
        dev = crash_device(test.output or "") or ANY_DEVICE
        out.setdefault(dev, []).append(
            what_failed(test) + (" while testing it" if dev != ANY_DEVICE else "")
        )
    return {d: "; ".join(v) for d, v in out.items()}


def devices_seen(test: Optional[TestRecord]) -> set[str]:
    return {r.device for r in test.rows} if test else set()


def attribute(
    patched_tests: Mapping[str, TestRecord],
    control_tests: Optional[Mapping[str, TestRecord]],
    control_built: bool = True,
) -> list[AttributionEntry]:
    """One entry per (test, device) failing with the fix, labelled against the control."""
    entries = []
    for name, test in patched_tests.items():
        control = (control_tests or {}).get(name) if control_built else None
        c_fail = failing_devices(control)
        for device, detail in failing_devices(test).items():
            label, why = _label(name, device, test, control, c_fail, control_built)
            without, on = (
                _without(device, control, c_fail),
                None if device == ANY_DEVICE else device,
            )
            entries.append(
                AttributionEntry(
                    test=name,
                    device=on,
                    patched=detail,
                    control=without,
                    label=label,
                    reason=why,
                )
            )
    return entries


def _without(device: str, control: Optional[TestRecord], c_fail: dict[str, str]) -> str:
    if control is None:
        return "did not run"
    if device in c_fail:
        return c_fail[device]
    if device == ANY_DEVICE and c_fail:
        return what_failed(control)
    return (
        "passed"
        if control.outcome == PASSED or device in devices_seen(control)
        else what_failed(control)
    )


def _label(
    name: str,
    device: str,
    patched: TestRecord,
    control: Optional[TestRecord],
    c_fail: dict[str, str],
    control_built: bool,
) -> tuple[AttributionLabel, str]:
    where = f"{name} on {device}" if device != ANY_DEVICE else name
    if not control_built:
        return (
            UNKNOWN,
            f"{where}: the control variant did not build, so there is nothing to compare with",
        )
    if control is None:
        return UNKNOWN, f"{where}: the test did not run without the fix"
    if device in c_fail or (device == ANY_DEVICE and control.outcome != PASSED):
        why = f"{where} fails without the fix too ({c_fail.get(device) or what_failed(control)})"
        if control.gate:
            why += (
                "; the gate is meant to fail without the fix, so failing with it "
                "means the fix does not take effect there"
            )
        return PRE_EXISTING, why
    if ANY_DEVICE in c_fail and what_failed(control) == what_failed(patched):
        return PRE_EXISTING, f"{where}: the test {what_failed(control)} without the fix too"
    if control.outcome == PASSED or device in devices_seen(control):
        return REGRESSION, f"{where} passes without the fix: the fix breaks it"
    return (
        UNKNOWN,
        f"{where}: without the fix the test {what_failed(control)} before reaching {device}",
    )


def pre_existing_only(entries: list[AttributionEntry], test: str) -> bool:
    """True when `test` fails with the fix and every one of its failures is pre-existing."""
    mine = [e for e in entries if e.test == test]
    return bool(mine) and all(e.label == PRE_EXISTING for e in mine)


def failure_kind(entries: list[AttributionEntry]) -> Optional[AttributionLabel]:
    """regression if any, else unknown if any, else pre-existing; None when nothing failed."""
    labels = {e.label for e in entries}
    return next((kind for kind in (REGRESSION, UNKNOWN, PRE_EXISTING) if kind in labels), None)


def describe(entries: list[AttributionEntry], labels: bool = True) -> str:
    """'test-opt on Vulkan0 crashed (SIGABRT) while testing it: pre-existing' joined by '; '."""
    return "; ".join(
        f"{e.test}{' on ' + e.device if e.device else ''} {e.patched}"
        + (f": {e.label}" if labels else "")
        for e in entries
    )


_KIND_MEANS = {PRE_EXISTING: "fails without the fix too", REGRESSION: "passes without the fix"}


def summary(entries: list[AttributionEntry]) -> str:
    """For a cell's reason: 'pre-existing, fails without the
    fix too: test-opt on Vulkan0 crashed ...'."""
    kinds = {e.label for e in entries}
    if len(kinds) == 1:
        kind = kinds.pop()
        means = _KIND_MEANS.get(kind, "the control cannot tell")
        return f"{kind}, {means}: {describe(entries, labels=False)}"
    return describe(entries)
