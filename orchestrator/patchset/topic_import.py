"""`ggml-patch topic import A..B`: a fork's range made into topics, one per commit (each with its
author, date and whole message; its test cases split off as `topic new` splits them), each
following (`after:`) the earlier ones whose lines it touches; `--squash NAME`: one topic of the
whole range. Pure: the commits and their tree diffs in, the files to write out (git is read
through vcs/ only, by the command)."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import unidiff

from ..errors import ConfigError
from .infer_tests import given_tests, infer_tests
from .queue import QUEUE_FILE, TOPIC_FILE
from .series import Series
from .topic_new import NAME_MAX, ForkCommit, make_series, one_line, topic_files, topic_yaml

# lines this close count as touched by both: a hunk's context must still match where it applies
_MARGIN = 1


@dataclass(frozen=True)
class Imported:
    """One commit of the range (or the whole range, squashed) as a new topic."""

    name: str
    commits: tuple[ForkCommit, ...]
    diff: str  # its tree diff: the commit's against its parent (the range's, squashed)
    origin: str
    after: tuple[str, ...] = ()


def name_for(subject: str, taken: set[str]) -> str:
    """A topic name from a commit's subject: lowercase slug, not one already taken (-2, -3...)."""
    base = re.sub(r"[^a-z0-9]+", "-", subject.lower()).strip("-")[:60].rstrip("-") or "change"
    name, n = base, 2
    while name in taken:
        name = f"{base[: NAME_MAX - 4]}-{n}"
        n += 1
    return name


def _ranges(diff: str, after_change: bool) -> dict[str, list[tuple[int, int]]]:
    """Per file, the line ranges the diff's hunks cover (context included): after the change
    (`after_change`) or before it."""
    out: dict[str, list[tuple[int, int]]] = {}
    for f in unidiff.PatchSet(diff):
        path = (f.target_file if after_change else f.source_file).split("/", 1)[-1]
        if path == "dev/null":
            path = f.path
        for h in f:
            start = h.target_start if after_change else h.source_start
            length = h.target_length if after_change else h.source_length
            out.setdefault(path, []).append((start, start + max(length, 1)))
    return out


def touches(earlier: str, later: str) -> bool:
    """Whether `later`'s hunks touch lines `earlier`'s hunks left (the same file, overlapping or
    adjacent ranges): `later` may then not apply without `earlier`. Line numbers are compared as
    they stand after `earlier`; commits between them that move lines shift them a little, which
    the margin and the hunks' context absorb in the common case."""
    left = _ranges(earlier, after_change=True)
    for path, spans in _ranges(later, after_change=False).items():
        for a, b in spans:
            if any(a <= d + _MARGIN and c <= b + _MARGIN for c, d in left.get(path, [])):
                return True
    return False


def plan(
    range_commits: list[tuple[ForkCommit, str]],
    taken: set[str],
    origin: Callable[[str], str],
    after: list[str],
) -> list[Imported]:
    """One topic per commit ((commit, its tree diff), oldest first): named from its subject,
    following `after` and every earlier commit of the range whose lines it touches."""
    out: list[Imported] = []
    names = set(taken)
    for commit, diff in range_commits:
        name = name_for(commit.subject, names)
        names.add(name)
        follows = [t.name for t in out if touches(t.diff, diff)]
        out.append(
            Imported(name, (commit,), diff, origin(f"commit {commit.sha}"), (*after, *follows))
        )
    return out


def squashed(
    name: str,
    range_commits: list[tuple[ForkCommit, str]],
    whole: str,
    span: str,
    origin: Callable[[str], str],
    after: list[str],
) -> Imported:
    """The whole range as one topic `name` (`whole`: the range's tree diff)."""
    return Imported(name, tuple(c for c, _ in range_commits), whole, origin(span), tuple(after))


def files_of(
    queue_dir: Path,
    topics: list[Imported],
    layout: str,
    queue_layout: str,
    today: datetime.date,
    summary: Optional[str] = None,
    tests: Sequence[str] = (),
) -> tuple[dict[str, Series], dict[str, tuple[Path, str]], list[tuple[Path, str]], list[str]]:
    """Each topic's series (built from its tree diff only), its topic.yaml (path, text), every
    file of its folder, and what was said of its tests (`tests`: --test's lines, else each
    topic's inferred from the test files its diff touches): nothing is written here."""
    series: dict[str, Series] = {}
    metas: dict[str, tuple[Path, str]] = {}
    files: list[tuple[Path, str]] = []
    said: list[str] = []
    for t in topics:
        first = t.commits[0]
        where = f"topic import: commit {first.sha[:12]} ({one_line(first.subject)[:60]})"
        try:
            s = make_series(where, t.diff, list(t.commits), layout, queue_layout)
        except ConfigError as e:
            hint = "" if len(t.commits) > 1 else " (or import the range as one: --squash NAME)"
            raise ConfigError(f"{e}{hint}") from None
        judged = given_tests(tests) if tests else infer_tests(where, t.diff)
        said.append(f"{t.name}: {judged.explanation}")
        meta = topic_yaml(
            one_line(summary or first.subject), t.origin, list(t.after), today, judged.lines
        )
        meta = meta.replace("topic new`", "topic import`", 1)
        series[t.name] = s
        metas[t.name] = (queue_dir / t.name / TOPIC_FILE, meta)
        files += topic_files(queue_dir, t.name, s, meta)
    return series, metas, files, said


def queue_file(queue_dir: Path) -> Path:
    return queue_dir / QUEUE_FILE
