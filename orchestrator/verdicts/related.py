"""Related upstream work: pull requests and issues touching the code the series changes
(patches/related-upstream.yaml); READINESS.md checks that
cover.md references every open PR among them.

    related:
      - url: https://github.com/OWNER/REPO/pull/N   # or .../issues/N
        kind: pr                                     # pr | issue
        state: open                                  # open | closed | merged | unknown
        what: one line, ASCII

A malformed file is one line naming the file, the line and the key (exit 2).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, StringConstraints

from ..records import Record
from .known_limits import Line, parse_yaml, read_yaml

FILE = "related-upstream.yaml"
_URL = r"^https://github\.com/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+/(pull|issues)/[0-9]+$"


class RelatedWork(Record):
    url: Annotated[str, StringConstraints(pattern=_URL)]
    kind: Literal["pr", "issue"]
    state: Literal["open", "closed", "merged", "unknown"]
    what: Line

    @property
    def number(self) -> int:
        return int(self.url.rsplit("/", 1)[1])

    def referenced_in(self, text: str) -> bool:
        """The URL, or `#N` as a word, appears in `text` (a cover letter)."""
        return self.url in text or re.search(rf"(?<![\w/])#{self.number}\b", text) is not None


class RelatedFile(Record):
    related: list[RelatedWork] = Field(min_length=1)


def _hint(loc: tuple[Any, ...], kind: str, value: Any) -> Optional[str]:
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        fields = RelatedFile.model_fields if len(loc) == 1 else RelatedWork.model_fields
        return f"unknown key (allowed: {', '.join(fields)})"
    if kind == "string_pattern_mismatch" and key == "url":
        return (
            f"{value!r} is not a GitHub pull request or issue "
            "URL (https://github.com/OWNER/REPO/pull/N)"
        )
    if kind == "string_pattern_mismatch":
        return "must be one line of printable ASCII"
    if kind == "literal_error":
        return f"{value!r} is not one of " + (
            "pr, issue" if key == "kind" else "open, closed, merged, unknown"
        )
    if kind == "too_short":
        return "must not be empty (delete the file when nothing is related)"
    return None


def parse_related(where: str, text: str) -> tuple[RelatedWork, ...]:
    return tuple(parse_yaml(RelatedFile, where, text, _hint)[0].related)


def load_related(series_dir: Path) -> tuple[RelatedWork, ...]:
    """patches/related-upstream.yaml beside the series; none when the file is not there."""
    found = read_yaml(series_dir, FILE, "related-upstream")
    return parse_related(*found) if found else ()


def open_prs(related: tuple[RelatedWork, ...]) -> list[RelatedWork]:
    return [r for r in related if r.kind == "pr" and r.state == "open"]
