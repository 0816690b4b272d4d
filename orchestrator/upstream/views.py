"""Views of a run's results that the PR body and the bundle share: the devices, the tests a backend
skips, the training cell, the toolchain lines, and PR_TITLE. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..model.results import Cell, CellStatus, DeviceInfo, Outcome, Results

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
    parts = [", ".join(device.devices)] if device.devices else []
    return "; ".join(parts + (["driver " + ", ".join(device.drivers)] if device.drivers else []))


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
