"""The value types every record shares, declared once, each with the words of its error:
names, sha256 digests, commits, cell ids, durations."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

WORDS: dict[str, str] = {}  # a pattern -> what a string that does not match it is not


def matching(pattern: str, what: str) -> Any:
    """A string (strictly) matching `pattern` (in the schema too); "'VALUE' `what`" if not."""
    WORDS[f"^{pattern}$"] = what
    return Field(pattern=f"^{pattern}$", strict=True)


_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
# names become folders (a bundle's out/<target>) and commits reach git: never a path or an option
Name = Annotated[str, matching(_NAME, "is not a valid name (letters, digits, '.', '_', '-')")]
CellId = Annotated[str, matching(f"{_NAME}/{_NAME}", "is not a cell (expected TARGET/BACKEND)")]
Commit = Annotated[
    str, matching("[0-9a-f]{40}", "is not a commit (expected 40 lowercase hex digits)")
]
Sha256 = Annotated[
    str, matching("[0-9a-f]{64}", "is not a sha256 (expected 64 lowercase hex digits)")
]
Seconds = Annotated[float, Field(ge=0)]
