"""`ggml-patch topic new`: a change (a fork's commit or range, or a diff file) made into a topic of
the queue: its series split into the source change first, then its test cases (files under
tests/), topic.yaml with state local and its origin, cover.md from the template, and the topic at
the end of patches/queue.yaml. Pure but for `write_topic`; git is read through vcs/ only."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import yaml

from .. import untrusted
from ..errors import ConfigError
from ..model.layout import get_layout
from ..redact import redact
from ..urls import public_remote
from .queue import TOPIC_FILE, TOPIC_NAME, check_series_shape
from .render import render
from .series import FileDiff, Patch, Series, parse_patch

# llama.cpp's pull request template, placeholders only: the contributor writes the words
COVER_TEMPLATE = """\
## Overview

<!-- Describe what this PR does and why. Be concise but complete -->

## Additional information

<!-- You can provide more details and link related discussions here. \
Delete this section if not applicable -->

## Requirements

<!-- IMPORTANT: Please do NOT delete this section, otherwise your PR may be rejected -->

- I have read and agree with the [contributing guidelines]\
(https://github.com/ggml-org/llama.cpp/blob/master/CONTRIBUTING.md)
- AI usage disclosure: <!-- mention: YES / NO - if yes, describe how AI was used -->
"""
NO_SHA = "0" * 40  # format-patch's first line names the commit; a split patch has none of its own


@dataclass(frozen=True)
class ForkCommit:
    sha: str
    author: str  # Name <email>
    date: str  # RFC 2822
    subject: str
    body: str


NAME_MAX = 100  # queue.py's TopicName: a longer one would be written, then refused on load


def check_name(name: str, queue_dir: Path, listed: list[str], what: str = "topic new") -> None:
    """A new topic's name: a slug of at most NAME_MAX characters, not a topic already (listed,
    or a folder or a symlink of that name)."""
    if not re.fullmatch(TOPIC_NAME, name) or len(name) > NAME_MAX:
        raise ConfigError(
            f"{what}: {name[:120]!r} is not a topic name (lowercase letters, digits, '-', at most "
            f"{NAME_MAX} characters; it names a folder under patches/)"
        )
    if name in listed or (queue_dir / name).exists() or (queue_dir / name).is_symlink():
        raise ConfigError(f"{what}: {queue_dir / name} exists: the topic {name!r} is there")


def check_once(flag: str, values: list[str]) -> None:
    """A repeatable option names each value once (`--after x --after x` is a slip)."""
    for i, v in enumerate(values):
        if v in values[:i]:
            raise ConfigError(f"{flag}[{i}]: {v!r} is given twice")


# the modes a change may carry: regular files (a symlink, a submodule or anything else could
# point a build or `git am` outside the tree)
_MODE = re.compile(r"^(?:new file mode|deleted file mode|new mode|old mode|index \S+) (\d+)$", re.M)
REGULAR_MODES = ("100644", "100755")


def check_modes(where: str, diff: str) -> None:
    """Every file of the change a regular file: a symlink (120000), a submodule (160000) or any
    other mode is refused, one line naming the file."""
    for section in re.split(r"^(?=diff --git )", diff, flags=re.M):
        for mode in _MODE.findall(section):
            if mode not in REGULAR_MODES:
                first = section.splitlines()[0] if section else ""
                kind = {"120000": "a symlink", "160000": "a submodule"}.get(mode, f"mode {mode}")
                raise ConfigError(
                    f"{where}: {first[:200]}: {kind}; a topic carries regular files only"
                )


def _is_test(path: str) -> bool:
    return path.startswith("tests/") or "/tests/" in path


def split_diff(where: str, diff: str) -> tuple[list[FileDiff], list[FileDiff]]:
    """A `git diff` as its files: (the source change, the test changes under tests/)."""
    if "diff --git " not in diff:
        raise ConfigError(f"{where}: no 'diff --git' section; not a git diff (nothing to carry)")
    check_modes(where, diff)
    files = parse_patch(where, diff).files
    source = [f for f in files if not _is_test(f.path)]
    tests = [f for f in files if _is_test(f.path)]
    if not source:
        raise ConfigError(
            f"{where}: the change touches only tests/; a topic is a fix and its tests"
        )
    if not tests:
        raise ConfigError(
            f"{where}: the change has no test under tests/; a topic carries its test cases "
            "(add them to upstream's tests, e.g. tests/test-opt.cpp, in the same commit or range)"
        )
    return source, tests


def _slug(subject: str) -> str:
    """format-patch's file name from a subject (its own rule, cut at 52 characters)."""
    s = re.sub(r"[^A-Za-z0-9._]+", "-", subject).strip("-.")
    return re.sub(r"-+", "-", s)[:52].rstrip("-.") or "change"


# a message line `git am` (mailinfo, mailsplit) or parse_patch would read as the patch's start,
# its diff or the next mail: kept as the message's words, indented one space
_DIFF_LIKE = re.compile(r"^(?=diff -|---|\+\+\+ |Index: |From |@@ )", re.M)


def inert_message(body: str) -> str:
    """A commit message as a patch carries it: its lines that would start a diff indented (the
    series holds the commit's tree diff, never a diff written in its message)."""
    return _DIFF_LIKE.sub(" ", body.strip())


def _patch(n: int, total: int, commit: ForkCommit, subject: str, body: str, files: list[FileDiff]):
    body = inert_message(body)
    header = (
        f"From {NO_SHA} Mon Sep 17 00:00:00 2001\n"
        f"From: {one_line(commit.author)}\n"
        f"Date: {one_line(commit.date)}\n"
        f"Subject: [PATCH {n}/{total}] {one_line(subject)}\n\n" + (f"{body}\n\n" if body else "")
    )
    return Patch(f"{n:04d}-{_slug(subject)}.patch", header, tuple(files))


def check_same_files(where: str, series: Series, source: list[FileDiff], tests: list[FileDiff]):
    """Each patch's text, read back, holds the files of the tree diff and no other: a message can
    add no hunk."""
    expected = [f.path for f in source] + [f.path for f in tests]
    got = [f.path for p in series.patches for f in parse_patch(p.name, p.text()).files]
    if got != expected:
        raise ConfigError(
            f"{where}: the series read back names {', '.join(got)}, the change "
            f"{', '.join(expected)}; refused (a commit message must not hold a diff)"
        )


def squashed_body(commits: list[ForkCommit]) -> str:
    """A range's message as one: the first commit's message, then each later commit's whole
    message under its id and author; a Co-authored-by line for each other author."""
    first = commits[0]
    parts = [first.body.strip()] if first.body.strip() else []
    for c in commits[1:]:
        parts.append(f"Squashed {c.sha[:12]} by {c.author} ({c.date}): {c.subject}")
        if c.body.strip():
            parts.append(c.body.strip())
    others = dict.fromkeys(c.author for c in commits[1:] if c.author != first.author)
    if others:
        parts.append("\n".join(f"Co-authored-by: {a}" for a in others))
    return "\n\n".join(parts)


def make_series(
    where: str, diff: str, commits: list[ForkCommit], layout: str, queue_layout: str
) -> Series:
    """The change as a topic's series in the queue's layout: 0001 the source change (the first
    commit's subject and message), 0002 its test cases."""
    source, tests = split_diff(where, diff)
    first = commits[0]
    body = squashed_body(commits)
    fix = _patch(1, 2, first, first.subject, body, source)
    test_subject = f"tests : add the cases of {first.subject}"
    test = _patch(2, 2, first, test_subject, "", tests)
    series = Series(layout, (fix, test))
    check_same_files(where, series, source, tests)
    if layout != queue_layout:
        src, dst = get_layout(layout), get_layout(queue_layout)
        series = render(series, src, dst, lambda p: None)
    check_series_shape(where, series)
    return series


def topic_yaml(
    summary: str, origin: str, after: list[str], today: datetime.date, tests: Sequence[str] = ()
) -> str:
    data = {
        "summary": summary,
        "origin": origin,
        "bug": None,
        "forwarded": None,
        "applied_upstream": None,
        "last_update": today.isoformat(),
        "state": "local",
        "after": after,
        "tests": list(tests),
    }
    head = (
        "# made by `ggml-patch topic new`; state: local | forwarded | merged-upstream | dropped\n"
    )
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=100)


def one_line(text: str) -> str:
    """A summary or an origin: one line of printable ASCII (DEP-3's fields are single lines)."""
    return re.sub(r"[^\x20-\x7e]+", " ", text).strip()[:200] or "-"


def origin_of(url: Optional[str], what: str) -> str:
    """A change's origin as topic.yaml records it: "<remote URL> commit <id>" (`what`: "commit
    <id>" or "commits <base>..<head>"), the URL without credentials (urls.public_remote); `what`
    alone where the checkout has no public remote (never the folder it was read from)."""
    shown = public_remote(url) if url else None
    return redact(one_line(f"{shown} {what}" if shown else what))


def topic_files(queue_dir: Path, name: str, series: Series, meta_text: str) -> list:
    """(path, text) of a new topic's folder: its series, topic.yaml, cover.md."""
    d = queue_dir / name
    out = [(d / p.name, p.text()) for p in series.patches]
    return out + [(d / TOPIC_FILE, meta_text), (d / "cover.md", COVER_TEMPLATE)]


def read_diff_file(path: Path) -> str:
    return untrusted.read_text(path, "patch")


def parse_subject(header: str) -> str:
    """A format-patch header's subject (continuation lines joined, [PATCH n/m] dropped)."""
    m = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n .*)*)", header, re.M)
    return re.sub(r"\n ", " ", m.group(1)).strip() if m else ""


def parse_author(header: str) -> str:
    m = re.search(r"^From: (.*)$", header, re.M)
    return m.group(1).strip() if m else ""
