"""The patch series and its hunks: parse, validate, write back (the same bytes); one file's diff as
git writes it. Pure: contents in, text out; re-targeting to another layout: render.py."""

from __future__ import annotations

import difflib
import hashlib
import itertools
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Optional

import unidiff

from ..errors import ConfigError
from ..model.layout import GATE_TEST
from ..model.testspec import TestSpec, programs

_DIFF_START = re.compile(r"^diff --git ", re.M)
_SIGNATURE = re.compile(r"\n-- \n[0-9][^\n]*\n\s*\Z")
_GIT_HEADER = re.compile(r"^diff --git a/\S+ b/\S+$")
HEADER_PATH = re.compile(
    r"^(diff --git a/)(\S+)( b/)(\S+)$"
    r"|^(--- a/|\+\+\+ b/|rename from |rename to |copy from |copy to )(.+)$"
)


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a patch: its git header, and the hunks."""

    path: str  # the path after the change (before it, for a deletion)
    text: str

    @property
    def added_content(self) -> Optional[str]:
        """The whole file, when the diff creates it; else None."""
        pf = _parse_one(self.text, self.path)
        if not pf.is_added_file:
            return None
        return "".join(line.value for hunk in pf for line in hunk if line.is_added)


@dataclass(frozen=True)
class Patch:
    name: str  # file name in patches/, e.g. 0001-ggml-opt-....patch
    header: str  # mail header and commit message, up to the first "diff --git"
    files: tuple[FileDiff, ...]
    trailer: str = ""  # a "-- \n2.x" signature, if any
    topic: str = ""  # the queue's topic it belongs to ("": a series outside a queue)

    @property
    def subject(self) -> str:
        m = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n .*)*)", self.header, re.M)
        return re.sub(r"\n ", " ", m.group(1)).strip() if m else self.name

    @property
    def author(self) -> str:
        m = re.search(r"^From: (.*)$", self.header, re.M)
        return m.group(1).strip() if m else ""

    def text(self) -> str:
        return self.header + "".join(f.text for f in self.files) + self.trailer


@dataclass(frozen=True)
class Series:
    layout: str
    patches: tuple[Patch, ...]
    topics: tuple[str, ...] = ()  # the queue's topics it carries, in order (for results.json)
    # (topic, why) of each topic whose control is expected to crash in its own cases
    control_crash: tuple[tuple[str, str], ...] = ()
    # (topic, its declared tests) of each carried topic, in order (topic.yaml `tests:`)
    topic_tests: tuple[tuple[str, tuple[TestSpec, ...]], ...] = ()
    # (topic, its training program) of each carried topic that declares one
    training: tuple[tuple[str, str], ...] = ()

    @property
    def sha256(self) -> str:
        parts = (p.name.encode() + b"\0" + p.text().encode() + b"\0" for p in self.patches)
        return hashlib.sha256(b"".join(parts)).hexdigest()

    def paths(self) -> list[str]:
        return sorted({f.path for p in self.patches for f in p.files})

    def fix_paths(self) -> list[str]:
        """Files of the fix itself: everything outside
        tests/ (what the negative control reverts)."""
        return [p for p in self.paths() if not _is_test_file(p)]

    def topic_fix_diffs(self, topic: str) -> list[FileDiff]:
        """The topic's own source hunks (its patches' files outside tests/), in order: what its
        control reverts."""
        out = []
        for p in self.patches:
            if p.topic != topic:
                continue
            out += [f for f in p.files if not _is_test_file(f.path)]
        return out

    def topic_cases(self, topic: str) -> list[str]:
        """The test functions the topic's patches add (`static ... test_NAME(`): its own cases,
        as test-opt prints them."""
        names: list[str] = []
        for p in self.patches:
            if p.topic != topic:
                continue
            for f in p.files:
                if _is_test_file(f.path):
                    names += [n for n in _ADDED_CASE.findall(f.text) if n not in names]
        return names

    def tests(self) -> tuple[TestSpec, ...]:
        """Every carried topic's declared tests, each once, in queue order: what a cell builds
        and runs with the fix."""
        return tuple(dict.fromkeys(t for _, specs in self.topic_tests for t in specs))

    def tests_of(self, topic: Optional[str]) -> tuple[TestSpec, ...]:
        """The tests that judge `topic` (its control, its known-wrong and competing fixes)."""
        return dict(self.topic_tests).get(topic or "", ())

    def programs(self) -> tuple[str, ...]:
        """The test programs a cell builds: those of the declared tests, each once."""
        return programs(self.tests())

    def training_of(self, topic: Optional[str]) -> tuple[str, ...]:
        """The training program `topic` declares (run with the fix and in its control), if any."""
        found = dict(self.training).get(topic or "")
        return (found,) if found else ()

    def training_programs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(p for _, p in self.training))

    def gate_test_source(self) -> Optional[str]:
        for p in self.patches:
            for f in p.files:
                if PurePosixPath(f.path).name == f"{GATE_TEST}.cpp":
                    return f.added_content
        return None


_ADDED_CASE = re.compile(r"^\+static [^(\n]*\b(test_\w+)\(", re.M)


def _is_test_file(path: str) -> bool:
    return path.startswith("tests/") or "/tests/" in path


_CONVERTED = re.compile(
    r"^(?:diff --git |From |Subject: |index |new file mode |deleted file mode )[^\n]*\r$", re.M
)


def parse_patch(name: str, text: str) -> Patch:
    if _CONVERTED.search(text):
        # git format-patch writes LF; CRs on its own header lines mean the file was converted
        # (core.autocrlf, an editor). Refused rather than normalised: a CR inside a hunk is a
        # CRLF file's content and is kept byte for byte (git am --keep-cr), so no rewrite is safe.
        raise ConfigError(
            f"{name}: CRLF line endings on git's own header lines (the patch was "
            "converted, e.g. by core.autocrlf or an editor); restore the LF "
            "bytes git format-patch wrote (dos2unix)"
        )
    starts = [m.start() for m in _DIFF_START.finditer(text)]
    if not starts:
        raise ConfigError(f"{name}: no 'diff --git' section; not a git patch")
    # format-patch's signature: "-- " and a version line at the very end (a removed "- " line
    # inside a hunk also reads "-- ", so only a final one counts)
    sig = _SIGNATURE.search(text, starts[-1])
    body_end = sig.start() + 1 if sig else len(text)
    chunks = [text[a:b] for a, b in zip(starts, [*starts[1:], body_end], strict=True)]
    files = tuple(FileDiff(_validated_path(name, chunk), chunk) for chunk in chunks)
    return Patch(name, text[: starts[0]], files, text[body_end:])


def _validated_path(name: str, chunk: str) -> str:
    first = chunk.split("\n", 1)[0]
    if not _GIT_HEADER.match(first):
        raise ConfigError(
            f"{name}: '{first}' lacks git's a/ and b/ "
            "prefixes; make the series with git format-patch"
        )
    if "GIT binary patch" in chunk or re.search(r"^Binary files .* differ$", chunk, re.M):
        raise ConfigError(f"{name}: binary diff in '{first}'; the series must be text")
    header = itertools.takewhile(lambda line: not line.startswith("@@"), chunk.split("\n"))
    paths = []
    for line in header:
        m = HEADER_PATH.match(line)
        if m is None:
            continue
        if m.group(1):  # diff --git a/X b/Y
            paths += [m.group(2), m.group(4)]
        else:  # ---, +++, rename or copy
            paths.append(m.group(6))
    for p in paths:
        if p == "/dev/null":
            continue
        pp = PurePosixPath(p)
        if pp.is_absolute() or ".." in pp.parts or p.startswith("/"):
            raise ConfigError(f"{name}: path '{p}' escapes the source tree")
        if any(part.lower() == ".git" for part in pp.parts):
            raise ConfigError(
                f"{name}: path '{p}' writes under .git (git's "
                "own metadata, hooks); a malformed series"
            )
    pf = _parse_one(chunk, name)
    path = pf.path or first.split(" b/", 1)[-1]
    header_only = re.search(
        r"^(new file mode|deleted file mode|rename from|copy from|old mode) ", chunk, re.M
    )
    if len(pf) == 0 and not header_only:
        raise ConfigError(f"{name}: no hunks in '{first}'; corrupt patch")
    if PurePosixPath(path).is_absolute() or ".." in PurePosixPath(path).parts:
        raise ConfigError(f"{name}: path '{path}' escapes the source tree")
    return path


def _parse_one(chunk: str, where: str) -> unidiff.PatchedFile:
    try:
        ps = unidiff.PatchSet(chunk)
    except unidiff.UnidiffParseError as e:
        raise ConfigError(f"{where}: corrupt diff: {str(e).strip().splitlines()[0]}") from None
    if len(ps) != 1:
        raise ConfigError(
            f"{where}: expected one file in '{chunk.splitlines()[0]}', found {len(ps)}"
        )
    return ps[0]


def parse_series(layout: str, patches: list[tuple[str, str]]) -> Series:
    if not patches:
        raise ConfigError("the series is empty: no *.patch files")
    return Series(layout, tuple(parse_patch(n, t) for n, t in patches))


def git_blob_id(text: str) -> str:
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def unified_file_diff(path: str, old: str, new: str) -> str:
    """One modified text file's diff as `git diff --full-index` writes it (index line for
    3-way merges, git's hunk headers), so a registration regenerated here is
    byte-identical to git's in patches/ (an insertion that could slide over equal lines
    may sit elsewhere than git's: it applies the same)."""
    head = (
        f"diff --git a/{path} b/{path}\nindex {git_blob_id(old)}..{git_blob_id(new)} 100644\n"
        f"--- a/{path}\n+++ b/{path}\n"
    )
    a, b = old.splitlines(True), new.splitlines(True)
    body = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(3):
        i1, i2, j1, j2 = group[0][1], group[-1][2], group[0][3], group[-1][4]
        body.append(f"@@ -{_hunk_range(i1, i2)} +{_hunk_range(j1, j2)} @@{_funcname(a, i1)}\n")
        for tag, a1, a2, b1, b2 in group:
            body += [_diff_line(" " if tag == "equal" else "-", line) for line in a[a1:a2]]
            body += [_diff_line("+", line) for line in b[b1:b2] if tag != "equal"]
    return head + "".join(body)


def _hunk_range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


def _diff_line(mark: str, line: str) -> str:
    return mark + line if line.endswith("\n") else f"{mark}{line}\n\\ No newline at end of file\n"


def _funcname(old_lines: list[str], hunk_start: int) -> str:
    """git's default hunk-header context (xdiff's def_ff): the
    nearest line above starting with [A-Za-z_$]."""
    for line in reversed(old_lines[:hunk_start]):
        raw = line.encode()
        if raw[:1].isalpha() or raw[:1] in (b"_", b"$"):
            name = raw[:80].rstrip(b" \t\n\v\f\r").decode("utf-8", "ignore")
            return f" {name}" if name else ""
    return ""
