"""Views of a run's results that the PR body and the bundle share: the devices, the tests a backend
skips, the training cell, the toolchain lines, and PR_TITLE. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..model.results import (
    COMPETING_PREFIX,
    CONTROL_PREFIX,
    MUTANT_PREFIX,
    Cell,
    CellStatus,
    DeviceInfo,
    MutantTally,
    Outcome,
    RecordStatus,
    Results,
    VariantRecord,
    Verdict,
)

WARNING_TITLE = "Incomplete results: this bundle was made with `--allow-incomplete`"
# cells that prove nothing either way: shown, never counted
NOT_RUN = (CellStatus.SKIPPED, CellStatus.BUILD_ONLY)


def one_line(text: str) -> str:
    return " ".join(str(text).split())


@dataclass(frozen=True)
class SeriesCommit:
    """One commit of the series, as git records it."""

    subject: str
    body: str
    files: tuple[str, ...]

    @property
    def is_test(self) -> bool:
        return bool(self.files) and all(
            f.startswith("tests/") or "/tests/" in f for f in self.files
        )


def pr_title(commits: list[SeriesCommit]) -> str:
    """The fix's own subject line (the first commit that is not only tests)."""
    return ([c for c in commits if not c.is_test] or commits)[0].subject


def topic_results(
    results: Results, topic: str, competing: frozenset[str], tests: frozenset[str], own: bool
) -> Results:
    """A whole-queue run as one topic's bundle reads it: the patched records with the topic's own
    `tests`, the topic's own control (the view's only one), its known-wrong fixes and its
    competing fixes (`competing`: their names); the gate's attribution and the training run only
    where they are the topic's (`own`: it declares a gate or a training program). Each cell's
    status is the topic's: another topic's failed control does not hide this one's result, and
    this one's is never hidden by another's."""
    # a cell that did not carry the topic (retired on its target: upstream has it there) proves
    # nothing of it, and needs nothing of it
    carried = {c.cell for c in results.cells if c.topics is None or topic in c.topics}
    carried = carried or {c.cell for c in results.cells}  # carried nowhere: unproven, as before
    records = []
    for r in results.records:
        kept = _topic_record(r, topic, competing, tests, r.topic)
        if kept is not None and r.cell in carried:
            records.append(kept)
    cells = [_topic_cell(c, records, own, tests) for c in results.cells if c.cell in carried]
    return results.model_copy(update={"cells": cells, "records": records})


def _topic_record(
    r: VariantRecord, topic: str, competing: frozenset[str], own: frozenset[str], of: Optional[str]
) -> Optional[VariantRecord]:
    """`of`: the record's topic (a control or a known-wrong fix's); `own`: the topic's tests."""
    v = r.variant
    if v == "patched":
        tests = {n: t for n, t in r.tests.items() if n in own}
        return r.model_copy(update={"tests": tests})
    if v.startswith(CONTROL_PREFIX):
        return r if of == topic else None
    if v.startswith(MUTANT_PREFIX) and of == topic:
        tests = {n: t for n, t in r.tests.items() if n in own}
        kills = {n: k for n, k in (r.kills or {}).items() if n in own}
        return r.model_copy(update={"tests": tests, "kills": kills if r.kills else r.kills})
    if v.startswith(COMPETING_PREFIX):
        return r if v.removeprefix(COMPETING_PREFIX) in competing else None
    return None


def _topic_cell(cell: Cell, records: list[VariantRecord], own: bool, tests: frozenset[str]) -> Cell:
    mine = [r for r in records if r.cell == cell.cell]
    control = next((r for r in mine if r.variant.startswith(CONTROL_PREFIX)), None)
    mutants = [r for r in mine if r.variant.startswith(MUTANT_PREFIX)]
    update: dict = {"mutants": _topic_tally(cell.mutants, mutants, tests)}
    if not own:
        # the gate's attribution and the training program belong to the gate's topic
        update.update(attribution=None, failure_kind=None, training=None)
    patched = next((r for r in mine if r.variant == "patched"), None)
    if control is not None and control.status == RecordStatus.SKIPPED:
        # the backend runs none of the topic's cases: the cell proves nothing for it, either way
        update.update(status=CellStatus.SKIPPED, reason=control.verdict_reason)
        return cell.model_copy(update=update)
    passed = (
        cell.status in (CellStatus.PASSED, CellStatus.FAILED)
        and patched is not None
        and bool(patched.build and patched.build.ok)
        and all(t.outcome in (Outcome.PASSED, Outcome.SKIPPED) for t in patched.tests.values())
        and any(t.outcome == Outcome.PASSED for t in patched.tests.values())
        and control is not None
        and control.verdict == Verdict.KILLED
        and not (update["mutants"] and update["mutants"].survived)
    )
    if passed and control is not None and cell.status != CellStatus.PASSED:
        reason = f"every test run passes with the queue; its control: {control.verdict_reason}"
        update.update(status=CellStatus.PASSED, reason=reason, exit_code=0)
    elif not passed and cell.status == CellStatus.PASSED and control is None:
        update.update(status=CellStatus.FAILED, reason="this topic's control did not run")
    return cell.model_copy(update=update)


def _topic_tally(
    whole: Optional[MutantTally], mine: list[VariantRecord], tests: frozenset[str]
) -> Optional[MutantTally]:
    """The cell's tally counted again over the topic's own known-wrong fixes (by the tests the
    topic's bundle shows)."""
    if whole is None:
        return None
    if whole.skipped is not None:
        return whole.model_copy(update={"total": len(mine)}) if mine else whole
    killed_by = {
        t: sum(1 for r in mine if (r.kills or {}).get(t) == Verdict.KILLED)
        for t in whole.killed_by or {}
        if t in tests
    }
    return MutantTally(
        total=len(mine),
        killed=sum(1 for r in mine if r.verdict == Verdict.KILLED),
        survived=[r.mutant.name for r in mine if r.verdict == Verdict.SURVIVED and r.mutant],
        invalid=[r.mutant.name for r in mine if r.verdict == Verdict.INVALID and r.mutant],
        killed_by=killed_by if whole.killed_by is not None else None,
    )


def skipped_tests(results: Results, target: str) -> list[tuple[str, str, str]]:
    """(cell, test, why) for every test a cell's backend does not run (its patched variant's
    record)."""
    out = []
    for c in results.cells_of(target):
        patched = results.records_of(c.cell).get("patched")
        for name, t in patched.tests.items() if patched else ():
            if t.outcome == Outcome.SKIPPED:
                out.append((c.cell, name, t.skipped or ""))
    return out


def device_text(device: Optional[DeviceInfo]) -> str:
    """What a cell ran on, as its backend module recorded it (e.g. Vulkan's device and driver)."""
    if device is None:
        return ""
    devices, drivers = device.strings("devices"), device.strings("drivers")
    parts = [", ".join(devices)] if devices else []
    return "; ".join(parts + (["driver " + ", ".join(drivers)] if drivers else []))


TRAINING_PLOT = "training-loss.png"


def training_cell(results: Results, target: str) -> Optional[Cell]:
    """The cell whose training run the PR body shows: the CPU cell where there is one."""
    cells = [c for c in results.cells_of(target) if c.training and c.training.patched]
    cells.sort(key=lambda c: c.backend != "cpu")
    return cells[0] if cells else None


# the order and names the PR body gives the tools it knows; any other follows under its own key
_TOOL_NAMES = dict(
    cmake="CMake",
    ninja="Ninja",
    c_compiler="C compiler",
    cxx_compiler="C++ compiler",
    git="git",
    ccache="ccache",
)


def toolchain_lines(toolchain: dict) -> list[tuple[str, str]]:
    known = [(label, toolchain[key]) for key, label in _TOOL_NAMES.items() if toolchain.get(key)]
    return known + [
        (key, value) for key, value in toolchain.items() if key not in _TOOL_NAMES and value
    ]
