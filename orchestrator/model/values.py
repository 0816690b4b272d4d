"""The value types every record shares, declared once, each with the words of its error:
names, sha256 digests, commits, cell ids, durations."""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, Any, Callable

from pydantic import AfterValidator, Field, ValidationInfo

from .. import publish

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

# ---------------------------------------------------------------- free text and numbers from files
# A record read back (records.parse: context {"untrusted": True}) is refused when a value breaks
# these rules; a record the tool builds has the value made safe instead (control characters
# shown as \xNN, one line where one line is the rule), so what it writes reads back.


def _untrusted(info: ValidationInfo) -> bool:
    return bool(info.context and info.context.get("untrusted"))


def _text_rule(limit: int, single: bool) -> Callable[[str, ValidationInfo], str]:
    def check(value: str, info: ValidationInfo) -> str:
        if not _untrusted(info):
            return publish.one_line(value, limit) if single else _multi(value, limit)
        allowed = "" if single else "\n\t"
        bad = next((ch for ch in value if publish.is_control(ch) and ch not in allowed), None)
        if bad is not None:
            kind = "a line break" if bad in "\n\r\u2028\u2029" else "a control character"
            raise ValueError(f"{kind} ({bad!r}) where one line of plain text belongs")
        if len(value) > limit:
            raise ValueError(f"{len(value)} characters, more than the {limit} allowed")
        return value

    return check


def _multi(value: str, limit: int) -> str:
    shown = publish.plain(value, newlines=True)
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def _https(value: str, info: ValidationInfo) -> str:
    if not re.fullmatch(r"https://[^\s<>\"'`\\\x00-\x1f\x7f]{1,2000}", value):
        if _untrusted(info) or value:
            raise ValueError("not an https URL (https://HOST/..., one line, no spaces)")
    return value


_DATE = re.compile(r"unknown|\d{4}-\d{2}(?:-\d{2})?")


def parse_datetime(value: str) -> _dt.datetime:
    """An ISO 8601 date and time, with a trailing `Z` for UTC (what the tool writes). Python 3.10's
    `fromisoformat` takes only `+00:00`; 3.11 takes both: the same answer on every admitted one."""
    return _dt.datetime.fromisoformat(re.sub(r"(?<=\d)[Zz]$", "+00:00", value))


def _iso_date(value: str, info: ValidationInfo) -> str:
    """An ISO 8601 date (YYYY-MM, YYYY-MM-DD, a date and time) or "unknown"; empty: not given."""
    if not value or value == "unknown":
        return value
    try:
        if _DATE.fullmatch(value):
            _dt.date.fromisoformat(value if len(value) == 10 else value + "-01")
        elif len(value) <= 40:
            parse_datetime(value)
        else:
            raise ValueError(value)
    except ValueError:
        raise ValueError("not an ISO 8601 date (YYYY-MM-DD, or a date and time)") from None
    return value


TextLine = Annotated[str, AfterValidator(_text_rule(2_000, single=True))]
Text = Annotated[str, AfterValidator(_text_rule(256 * 1024, single=False))]
HttpsUrl = Annotated[str, AfterValidator(_https)]
IsoDate = Annotated[str, AfterValidator(_iso_date)]
# every exit code the tool documents is a byte; a test's own may be negative (-signal)
ExitStatus = Annotated[int, Field(ge=0, le=255)]
ProcessStatus = Annotated[int, Field(ge=-255, le=255)]
Count = Annotated[int, Field(ge=0, le=1_000_000_000)]
