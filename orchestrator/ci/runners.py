"""GitHub-hosted runner labels GitHub has retired, so that `ci-workflow` refuses them before a
scheduled run fails on them.

The table is kept by hand from GitHub's announcements in actions/runner-images (each row names
its issue and the retirement date). Add a row when an announcement says a label goes away.
"""

from __future__ import annotations

from typing import NamedTuple, Optional


class Retired(NamedTuple):
    successor: str
    since: str  # the retirement date, ISO
    source: str  # the announcement


_MACOS_13 = "actions/runner-images#13046"
_MACOS_14 = "actions/runner-images#13518"
RETIRED: dict[str, Retired] = {
    "macos-13": Retired("macos-15", "2025-12-04", _MACOS_13),
    "macos-13-large": Retired("macos-15-intel", "2025-12-04", _MACOS_13),
    "macos-13-xlarge": Retired("macos-15-xlarge", "2025-12-04", _MACOS_13),
    "macos-14": Retired("macos-15", "2026-11-02", _MACOS_14),
    "macos-14-large": Retired("macos-15-large", "2026-11-02", _MACOS_14),
    "macos-14-xlarge": Retired("macos-15-xlarge", "2026-11-02", _MACOS_14),
}


def retired(label: str) -> Optional[Retired]:
    """The retirement of a runner label, None while GitHub still offers it."""
    return RETIRED.get(label.strip().lower())


def retired_message(where: str, label: str) -> Optional[str]:
    """One line naming the label, when it went, its successor and the source; None if current."""
    if (r := retired(label)) is None:
        return None
    return (
        f"{where}: runner {label!r} was retired by GitHub on {r.since} ({r.source}); "
        f"use {r.successor!r} instead"
    )
