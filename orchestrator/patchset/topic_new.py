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
from .queue import QUEUE_FILE, TOPIC_FILE, TOPIC_NAME, check_series_shape, parse_queue_order
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


def check_name(name: str, queue_dir: Path, listed: list[str]) -> None:
    """A new topic's name: a slug, not a topic already (listed or a folder)."""
    if not re.fullmatch(TOPIC_NAME, name):
        raise ConfigError(
            f"topic new: {name!r} is not a topic name (lowercase letters, digits, '-'; "
            "it names a folder under patches/)"
        )
    if name in listed or (queue_dir / name).exists():
        raise ConfigError(f"topic new: {queue_dir / name} exists: the topic {name!r} is there")


def _is_test(path: str) -> bool:
    return path.startswith("tests/") or "/tests/" in path


def split_diff(where: str, diff: str) -> tuple[list[FileDiff], list[FileDiff]]:
    """A `git diff` as its files: (the source change, the test changes under tests/)."""
    if "diff --git " not in diff:
        raise ConfigError(f"{where}: no 'diff --git' section; not a git diff (nothing to carry)")
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


def _patch(n: int, total: int, commit: ForkCommit, subject: str, body: str, files: list[FileDiff]):
    header = (
        f"From {NO_SHA} Mon Sep 17 00:00:00 2001\n"
        f"From: {commit.author}\n"
        f"Date: {commit.date}\n"
        f"Subject: [PATCH {n}/{total}] {subject}\n\n"
        + (f"{body.strip()}\n\n" if body.strip() else "")
    )
    return Patch(f"{n:04d}-{_slug(subject)}.patch", header, tuple(files))


def make_series(
    where: str, diff: str, commits: list[ForkCommit], layout: str, queue_layout: str
) -> Series:
    """The change as a topic's series in the queue's layout: 0001 the source change (the first
    commit's subject and message), 0002 its test cases."""
    source, tests = split_diff(where, diff)
    first = commits[0]
    body = first.body
    if len(commits) > 1:  # a range: every commit named, the first one's words kept
        body = (body + "\n\n" if body else "") + "\n".join(
            f"Squashed from {c.sha[:12]} {c.subject}" for c in commits
        )
    fix = _patch(1, 2, first, first.subject, body, source)
    test_subject = f"tests : add the cases of {first.subject}"
    test = _patch(2, 2, first, test_subject, "", tests)
    series = Series(layout, (fix, test))
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


def without_credentials(url: str) -> str:
    """A remote URL as a topic may record it: no user or token before the host."""
    return re.sub(r"^([A-Za-z][A-Za-z0-9+.-]*://)[^/@]*@", r"\1", url)


def queue_with(queue_file: Path, text: Optional[str], name: str) -> str:
    """queue.yaml with `name` last (its comments at the top kept)."""
    if text is None:
        return f"topics:\n  - {name}\n"
    order = parse_queue_order(str(queue_file), text)
    comments = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comments.append(line + "\n")
    listed = "".join(f"  - {t}\n" for t in [*order.topics, name])
    return "".join(comments) + "topics:\n" + listed


def write_topic(
    queue_dir: Path, name: str, series: Series, meta_text: str, listed: Optional[str]
) -> Path:
    """The topic's folder (series, topic.yaml, cover.md) and queue.yaml naming it, written last."""
    d = queue_dir / name
    d.mkdir(parents=True)
    for p in series.patches:
        (d / p.name).write_bytes(p.text().encode("utf-8", "surrogateescape"))
    (d / TOPIC_FILE).write_text(meta_text, encoding="utf-8")
    (d / "cover.md").write_text(COVER_TEMPLATE, encoding="utf-8")
    queue_file = queue_dir / QUEUE_FILE
    tmp = queue_file.with_name(f".{QUEUE_FILE}.tmp")
    tmp.write_text(queue_with(queue_file, listed, name), encoding="utf-8")
    tmp.replace(queue_file)
    return d


def read_diff_file(path: Path) -> str:
    return untrusted.read_text(path, "patch")


def parse_subject(header: str) -> str:
    """A format-patch header's subject (continuation lines joined, [PATCH n/m] dropped)."""
    m = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n .*)*)", header, re.M)
    return re.sub(r"\n ", " ", m.group(1)).strip() if m else ""


def parse_author(header: str) -> str:
    m = re.search(r"^From: (.*)$", header, re.M)
    return m.group(1).strip() if m else ""
