"""Competing fixes (pure): fixes for the same bug proposed elsewhere
(native_tests/<topic>/competing/NAME.patch): a header of one-line fields, a blank line, then a git
diff in the series' layout against the UNFIXED tree:

    Competing fix: <one-line title>
    URL: https://... (the PR, commit or repository it comes from)
    Date: YYYY-MM or YYYY-MM-DD, or "unknown"
    Author's summary: <one line>
    Provenance: <one line, optional: how sure the attribution is, what was ported>
    Discussed at: <optional: the URL of the PR or issue where that work is discussed, only when a
        stored thread or the commit proves it>
    To pass: <one line, optional: what it would take to pass the tests it fails>

The bundle writes a draft comment for the place that work is discussed (COMMENT-NAME.md), never a
judgment in the pull request.

Judged against what the fix passes: equivalent (passes all of it), wrong (a test the fix passes
fails: its first failing line), invalid (does not apply or build).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Optional

from ..config import Matrix
from ..errors import ConfigError
from ..model.results import CompetingJudged, CompetingVerdict, Outcome, TestRecord
from ..patchset.files import read_topic_diff_files
from ..patchset.queue import Queue
from ..patchset.render import DiffInLayout
from ..patchset.series import FileDiff, parse_patch
from .classify import gate_failure_line, strip_ansi

REQUIRED = ("Competing fix", "URL", "Date", "Author's summary")
OPTIONAL = ("Provenance", "Discussed at", "To pass")
_FIELD = re.compile(r"^(?P<key>[A-Z][A-Za-z' ]*): (?P<value>\S.*)$")
# what results.json takes as a URL (model.values.HttpsUrl): no quote, bracket or backslash
_URL = re.compile(r"^https://[A-Za-z0-9.-]+(/[^\s<>\"'`\\]*)?$")
_DATE = re.compile(r"^(unknown|\d{4}-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)$")


@dataclass(frozen=True)
class CompetingFix(DiffInLayout):
    name: str  # the file name without .patch
    title: str
    url: str
    date: str
    summary: str
    provenance: str
    files: tuple[FileDiff, ...]  # the diff against the unfixed tree, in the series' layout
    discussed_at: str = ""  # where a comment on it goes; "" when no stored evidence names one
    to_pass: str = ""
    topic: str = ""  # the queue's topic whose native_tests/<topic>/competing/ holds it


def parse_competing(name: str, text: str) -> CompetingFix:
    """A competing fix's file; one ConfigError line naming the file (and line) when it is
    malformed."""
    if not text.isascii():
        raise ConfigError(
            f"{name}: non-ASCII text; a competing fix is data that may go upstream (ASCII only)"
        )
    if "\ndiff --git " not in "\n" + text:
        raise ConfigError(
            f"{name}: no 'diff --git' section; expected a header, a blank line and a git diff"
        )
    header = ("\n" + text).split("\ndiff --git ", 1)[0].lstrip("\n")
    fields: dict[str, str] = {}
    for n, line in enumerate(header.split("\n"), 1):
        if not line.strip():
            continue
        m = _FIELD.match(line)
        if not m or m["key"] not in REQUIRED + OPTIONAL:
            raise ConfigError(
                f"{name}:{n}: '{line[:60]}' is not a header field; expected one of "
                f"{', '.join(k + ':' for k in REQUIRED + OPTIONAL)}"
            )
        if m["key"] in fields:
            raise ConfigError(f"{name}:{n}: '{m['key']}:' given twice")
        fields[m["key"]] = m["value"].strip()
    for key in REQUIRED:
        if key not in fields:
            raise ConfigError(f"{name}: no '{key}: ...' line before the diff")
    if not _URL.match(fields["URL"]):
        raise ConfigError(
            f"{name}: URL: {fields['URL']!r} is not an https:// URL of the PR, commit or repository"
        )
    discussed = fields.get("Discussed at", "")
    if discussed and not _URL.match(discussed):
        raise ConfigError(
            f"{name}: Discussed at: {discussed!r} is not an https:// URL of a PR or issue"
        )
    if not _DATE.match(fields["Date"]):
        raise ConfigError(
            f"{name}: Date: {fields['Date']!r}; expected YYYY-MM, YYYY-MM-DD or 'unknown'"
        )
    # paths checked: a/ b/ prefixes, nothing escaping the tree, no binary
    patch = parse_patch(name, text)
    title, url, date, summary = (fields[k] for k in REQUIRED)
    return CompetingFix(
        name.removesuffix(".patch"),
        title,
        url,
        date,
        summary,
        fields.get("Provenance", ""),
        patch.files,
        discussed,
        fields.get("To pass", ""),
    )


def first_failing_line(test: str, output: str, gate: bool = False) -> Optional[str]:
    """The first line a test prints for a failing case (the gate's row, `gate`: a native test of
    the project's; else a FAIL line, as test-opt and test-backend-ops print them)."""
    if gate:
        return gate_failure_line(output)
    for line in strip_ansi(output).splitlines():
        # a backend's or the total
        summary = line.lstrip().startswith("Backend ") or "backend*optimizer" in line
        if line.rstrip().endswith("FAIL") and not summary:
            return line.strip()
    return None


def judge(
    apply_error: Optional[str],
    build_ok: bool,
    tests: Mapping[str, TestRecord],
    patched: Mapping[str, Optional[Outcome]],
) -> CompetingJudged:
    """equivalent / wrong (its first failing test and case line) / invalid, against the tests
    the fix passes."""
    invalid = CompetingVerdict.INVALID
    if apply_error is not None:
        return CompetingJudged(
            verdict=invalid, reason=f"does not apply to the unfixed tree: {apply_error}"
        )
    if not build_ok:
        return CompetingJudged(verdict=invalid, reason="does not build")
    judged = [t for t, o in patched.items() if o == Outcome.PASSED]
    if not judged:
        return CompetingJudged(
            verdict=invalid, reason="no test passes with the fix here, so nothing to judge against"
        )
    for t in judged:
        rec = tests.get(t)
        if rec is None or rec.outcome == Outcome.PASSED:
            continue
        line = (
            first_failing_line(t, rec.output or "", bool(rec.gate))
            or f"{t} {rec.outcome} (exit code {rec.exit_code})"
        )
        return CompetingJudged(
            verdict=CompetingVerdict.WRONG,
            reason=f"{t} fails: {line}",
            failure_line=line,
            failing_test=t,
        )
    missing = [t for t in judged if t not in tests]
    if missing:
        return CompetingJudged(verdict=invalid, reason=f"{', '.join(missing)} not run")
    return CompetingJudged(
        verdict=CompetingVerdict.EQUIVALENT,
        reason=f"passes everything the fix passes ({', '.join(judged)})",
    )


def load_competing(
    matrix: Matrix, topics: Optional[list[str]] = None, queue: Optional[Queue] = None
) -> list[CompetingFix]:
    """native_tests/<topic>/competing/*.patch of each chosen topic (the active ones by default),
    in queue order, each folder in name order; a malformed one a ConfigError. `queue`: the
    matrix's, already loaded."""
    return read_topic_diff_files(
        matrix, topics, "competing", "competing fix", parse_competing, queue
    )
