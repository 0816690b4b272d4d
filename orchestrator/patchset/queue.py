"""The patch queue: several topics, each a git am-able series of its own under patches/<topic>/,
applied in the order patches/queue.yaml gives, each after the topics its `after:` names.

    patches/queue.yaml                  topics: [accumulator-reset, grad-acc-non-static]
                                        default: [accumulator-reset]   (optional)
    patches/<topic>/topic.yaml          what it fixes and where it stands (DEP-3's fields, below)
    patches/<topic>/NNNN-*.patch        the source change first, then its test cases (tests/)
    patches/<topic>/cover.md, known-limits.yaml, related-upstream.yaml
    native_tests/<topic>/mutants/, competing/, upstream-gate/

topic.yaml (DEP-3's Origin, Bug, Forwarded, Applied-Upstream, Last-Update, and a lifecycle):

    summary: one line, what the topic fixes
    origin: where it comes from (a fork's commit URL, "local", ...)
    bug: https://github.com/OWNER/REPO/issues/N or null
    forwarded: https://github.com/OWNER/REPO/pull/N or null
    applied_upstream: an upstream commit (hex) or null
    last_update: 2026-12-02
    state: local | forwarded | merged-upstream | dropped
    after: [topics it must follow: they touch the same lines]
    tests: [the test programs that judge it, with their arguments: test-opt, ...]
    training: a training program of native_tests/ that shows its bug (optional)
    retired: {TARGET: upstream commit or URL}   (optional: upstream on those targets only; the
                                                 topic stays active on every other target)

Pure: texts in, records out (the file system is files.py's). Every error is one line naming the
file, the line and the key.
"""

from __future__ import annotations

import datetime
import functools
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BeforeValidator, Field, StringConstraints, ValidationError

from ..config import _line_for, _load_with_lines
from ..errors import ConfigError
from ..model.testspec import TestSpec
from ..model.values import HttpsUrl
from ..records import Record, dotted, located
from .series import Series

QUEUE_FILE = "queue.yaml"
TOPIC_FILE = "topic.yaml"
STATES = ("local", "forwarded", "merged-upstream", "dropped")
ACTIVE = ("local", "forwarded")  # the states whose series the queue applies
TOPIC_NAME = r"^[a-z0-9][a-z0-9-]*$"

TopicName = Annotated[str, StringConstraints(pattern=TOPIC_NAME, max_length=100)]
# one line of printable ASCII (no control character), bounded
OneLine = Annotated[str, StringConstraints(pattern=r"^[\x20-\x7e]+$", max_length=500)]
# https only, one line, no quote, bracket or backslash (model.values.HttpsUrl's rule), bounded
Url = Annotated[HttpsUrl, StringConstraints(pattern=r"^https://[\x21-\x7e]+$")]
UpstreamCommit = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,64}$")]
ProgramName = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]*$", max_length=100)]


def _test_line(value: Any) -> Any:
    """A declared test: parsed once to refuse a bad one (kept as its text)."""
    if isinstance(value, str):
        try:
            TestSpec.parse(value)
        except ConfigError as e:
            raise ValueError(str(e)) from None
    return value


TestLine = Annotated[str, StringConstraints(max_length=200), BeforeValidator(_test_line)]
# a matrix target's name (config.py's rule), as topic.yaml's `retired:` keys name one
TargetKey = Annotated[
    str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=100)
]


def _iso_date(value: Any) -> Any:
    """YAML reads 2026-12-02 as a date, "2026-12-02" as a string: both are the same day."""
    if isinstance(value, datetime.date) and not isinstance(value, datetime.datetime):
        return value.isoformat()
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        datetime.date.fromisoformat(value)  # a ValueError (2026-13-01) is the key's error
    return value


Day = Annotated[  # a calendar day, YYYY-MM-DD (topic.yaml's last_update)
    str, BeforeValidator(_iso_date), StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}$")
]
_EXPECTED = {
    "summary": "one line of printable ASCII (at most 500 characters)",
    "problem": "one line of printable ASCII (at most 500 characters)",
    "symptom": "one line of printable ASCII (at most 500 characters)",
    "api": "one line of printable ASCII (at most 500 characters)",
    "origin": "one line of printable ASCII (at most 500 characters)",
    "bug": "an https:// URL of the upstream issue, or null",
    "forwarded": "an https:// URL of the pull request, or null",
    "applied_upstream": "an upstream commit id (7-64 lowercase hex digits), or null",
    "last_update": "a date, YYYY-MM-DD",
    "after": "a topic name (lowercase letters, digits, '-')",
    "topics": "a topic name (lowercase letters, digits, '-')",
    "tests": "a test program and its arguments, e.g. 'test-opt' or 'test-backend-ops -o ADD'",
    "training": "a program of native_tests/ (e.g. train-opt-dynamic), or absent",
    "retired": "an upstream commit id (7-64 lowercase hex digits) or an https:// URL",
}


class TopicMeta(Record):
    """patches/<topic>/topic.yaml."""

    NULLS = frozenset({"bug", "forwarded", "applied_upstream"})

    summary: OneLine
    # what goes wrong without the fix, in the mode it fixes (ISSUE.md's problem line); optional
    problem: Optional[OneLine] = None
    # what a user sees without the fix, as an issue title says it (ISSUE.md's title); optional
    symptom: Optional[OneLine] = None
    # the public function the bug is in, when it is one function rather than the mode as a whole:
    # ISSUE.md then names upstream's callers of that function, not the mode's
    api: Optional[OneLine] = None
    origin: OneLine
    bug: Optional[Url] = None
    forwarded: Optional[Url] = None
    applied_upstream: Optional[UpstreamCommit] = None
    last_update: Day
    state: Literal["local", "forwarded", "merged-upstream", "dropped"]
    after: list[TopicName] = Field(default_factory=list)
    # the topic's bug is a crash (e.g. a NULL dereference): its control may die by a signal in
    # its own cases, and that counts as killed; one line, why
    control_crash: Optional[OneLine] = None
    # the tests that judge the topic (its control must fail them; its known-wrong fixes too):
    # upstream test programs (tests/test-*.cpp) or the project's own (native_tests/test-*.cpp),
    # with their arguments; built and run only in runs that carry the topic
    tests: list[TestLine] = Field(min_length=1)
    # a training program of native_tests/ run with the fix and in the topic's control
    training: Optional[ProgramName] = None
    # the targets where the fix is upstream (`topic retire NAME --target T`): not applied there,
    # still applied on every other target (an older base that still needs it)
    # (null: upstream there, the commit not named)
    retired: dict[TargetKey, Optional[Union[UpstreamCommit, Url]]] = Field(default_factory=dict)

    def test_specs(self) -> tuple[TestSpec, ...]:
        return tuple(TestSpec.parse(t) for t in self.tests)


class QueueOrder(Record):
    """patches/queue.yaml: the topics, in the order they apply (`after:` may move one later)."""

    topics: list[TopicName] = Field(min_length=1)
    # the topics a run applies without --topic (with those they follow); absent: every active one
    default: Optional[list[TopicName]] = Field(default=None, min_length=1)


def _hint(model: type[Record], loc: tuple[Any, ...], kind: str, value: Any) -> Optional[str]:
    key = next((str(p) for p in reversed(loc) if isinstance(p, str)), "")
    if kind == "extra_forbidden":
        return f"unknown key (allowed: {', '.join(model.model_fields)})"
    if kind == "literal_error" and key == "state":
        return f"{value!r} is not a state (expected one of: {', '.join(STATES)})"
    if kind == "missing":
        return f"missing required key {loc[-1]!r}"
    if kind == "too_short":
        return "must not be empty (list the topics in the order they apply)"
    if key in _EXPECTED and kind != "list_type":
        return f"{_shown(value)} is not {_EXPECTED[key]}"
    return None


def _shown(value: Any) -> str:
    """A value in an error line: its repr, at most 80 characters (a line stays a line)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# one parse per text: a run reads the queue for its series, its mutants and its competing fixes
# (PyYAML's pure-Python parser is most of a no-change re-run's own CPU time); nothing mutates
# the records or the lines
@functools.lru_cache(maxsize=64)
def _parse(kind: type[Any], where: str, text: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    data, lines = _load_with_lines(text, where)
    if not isinstance(data, dict):
        raise ConfigError(f"{where}:1: (top level): expected a mapping of keys")
    try:
        return kind.model_validate(data, strict=True), lines
    except ValidationError as e:
        path, what = located(e, lambda loc, k, v: _hint(kind, loc, k, v))
        raise ConfigError(
            f"{where}:{_line_for(lines, path)}: {dotted(path) or '(top level)'}: {what}"
        ) from None


@dataclass(frozen=True)
class Topic:
    name: str
    meta: TopicMeta
    series: Series
    where: str  # patches/<topic>/topic.yaml, as messages name it
    lines: dict[tuple[Any, ...], int]

    @property
    def active(self) -> bool:
        return self.meta.state in ACTIVE

    def active_on(self, target: Optional[str]) -> bool:
        """Active, and not retired on `target` (None: on no target in particular)."""
        return self.active and (target is None or target not in self.meta.retired)

    def line(self, *key: Any) -> int:
        return _line_for(self.lines, key)


def parse_topic_meta(where: str, text: str) -> tuple[TopicMeta, dict[tuple[Any, ...], int]]:
    meta, lines = _parse(TopicMeta, where, text)
    for i, name in enumerate(meta.after):
        if name in meta.after[:i]:
            raise ConfigError(
                f"{where}:{_line_for(lines, ('after', i))}: after[{i}]: {name!r} twice"
            )
    return meta, lines


def parse_queue_order(where: str, text: str) -> QueueOrder:
    order, lines = _parse(QueueOrder, where, text)
    for i, name in enumerate(order.topics):
        if name in order.topics[:i]:
            raise ConfigError(
                f"{where}:{_line_for(lines, ('topics', i))}: topics[{i}]: {name!r} is listed twice"
            )
    return order


def _is_test_path(path: str) -> bool:
    return path.startswith("tests/") or "/tests/" in path


def check_series_shape(where: str, series: Series) -> None:
    """A topic's series: its source change first, then its test cases (patches in tests/ only)."""
    kinds = []
    for p in series.patches:
        tests_only = all(_is_test_path(f.path) for f in p.files)
        kinds.append("test" if tests_only else "source")
    if kinds[0] != "source":
        raise ConfigError(
            f"{where}/{series.patches[0].name}: the series must start with the source change "
            "(a patch outside tests/), then its test cases"
        )
    if "test" not in kinds:
        raise ConfigError(
            f"{where}: the series has no test patch (its cases in upstream's tests/, after the "
            "source change); a fix without its test is not a topic"
        )
    first_test = kinds.index("test")
    if "source" in kinds[first_test:]:
        late = series.patches[first_test + kinds[first_test:].index("source")]
        raise ConfigError(
            f"{where}/{late.name}: a source change after the test patches; the series must be "
            "the source change first, then its test cases"
        )


@dataclass(frozen=True)
class Queue:
    """The topics in the order they apply (queue.yaml's, each moved after its `after:`)."""

    layout: str
    topics: tuple[Topic, ...]
    default: tuple[str, ...] = ()  # queue.yaml's `default:`; empty: every active topic

    def names(self) -> list[str]:
        return [t.name for t in self.topics]

    def active(self, target: Optional[str] = None) -> list[Topic]:
        return [t for t in self.topics if t.active_on(target)]

    def topic(self, name: str, where: str = "--topic") -> Topic:
        for t in self.topics:
            if t.name == name:
                return t
        raise ConfigError(f"{where}: unknown topic {name!r} (the queue: {', '.join(self.names())})")

    def chosen(
        self,
        names: Optional[list[str]] = None,
        target: Optional[str] = None,
        any_state: bool = False,
    ) -> list[Topic]:
        """The topics to apply: the active ones, or those named with the active topics they
        follow (`after:`), in queue order. A named topic that is not active is refused (unless
        `any_state`: an earlier run's topics, some retired since). On a `target`, a topic
        retired there (upstream has it) is left out, named or not."""
        if target is not None:
            return [t for t in self.chosen(names, any_state=any_state) if t.active_on(target)]
        if not names and not self.default:
            return self.active()
        if not names:
            names = [n for n in self.default if self.topic(n, "queue.yaml: default").active]
        wanted: set[str] = set()
        todo = [self.topic(n) for n in names]
        for t in todo:
            if not t.active and not any_state:
                raise ConfigError(
                    f"--topic: {t.name!r} is {t.meta.state}; only local and forwarded topics apply"
                )
        while todo:
            t = todo.pop()
            if t.name in wanted:
                continue
            wanted.add(t.name)
            todo += [d for d in (self.topic(a) for a in t.meta.after) if d.active]
        return [t for t in self.topics if t.name in wanted]

    def series(
        self,
        names: Optional[list[str]] = None,
        target: Optional[str] = None,
        any_state: bool = False,
    ) -> Series:
        """The chosen topics' series as one, in order: each patch numbered by its place in the
        whole (the topic's own names otherwise: two topics may both have a 0001). On a `target`:
        without the topics retired there; `any_state`: the named topics whatever their state."""
        patches = []
        chosen = self.chosen(names, target, any_state)
        for t in chosen:
            patches += [replace(p, topic=t.name) for p in t.series.patches]
        renamed = []
        for i, p in enumerate(patches, 1):
            rest = re.sub(r"^\d{4}-", "", p.name)
            renamed.append(replace(p, name=f"{i:04d}-{rest}"))
        crash = tuple((t.name, t.meta.control_crash) for t in chosen if t.meta.control_crash)
        carried = tuple(t.name for t in chosen)
        tests = tuple((t.name, t.meta.test_specs()) for t in chosen)
        training = tuple((t.name, t.meta.training) for t in chosen if t.meta.training)
        return Series(self.layout, tuple(renamed), carried, crash, tests, training)


def order_topics(where: str, order: QueueOrder, topics: dict[str, Topic]) -> list[Topic]:
    """queue.yaml's order, each topic moved after those its `after:` names (a stable topological
    sort). An unknown `after:` or a cycle is one line naming the topic.yaml and its line."""
    for t in topics.values():
        for i, dep in enumerate(t.meta.after):
            if dep not in topics:
                raise ConfigError(
                    f"{t.where}:{t.line('after', i)}: after[{i}]: unknown topic {dep!r} "
                    f"(expected one listed in {where}: {', '.join(order.topics)})"
                )
            if dep == t.name:
                raise ConfigError(f"{t.where}:{t.line('after', i)}: after[{i}]: the topic itself")
    placed: list[Topic] = []
    left = list(order.topics)
    while left:
        ready = [
            n for n in left if all(d in {p.name for p in placed} for d in topics[n].meta.after)
        ]
        if not ready:
            cycle = _a_cycle(left, topics)
            first = topics[cycle[0]]
            raise ConfigError(
                f"{first.where}:{first.line('after')}: after: a cycle "
                f"({' -> '.join(cycle)}); one of them must not wait for the other"
            )
        placed.append(topics[ready[0]])
        left.remove(ready[0])
    return placed


def _a_cycle(left: list[str], topics: dict[str, Topic]) -> list[str]:
    """A cycle among the topics left (each waits for one of them): followed from the first."""
    path = [left[0]]
    while True:
        waits = [d for d in topics[path[-1]].meta.after if d in left]
        nxt = waits[0]
        if nxt in path:
            return path[path.index(nxt) :] + [nxt]
        path.append(nxt)


def build_queue(
    where: str, layout: str, order_text: str, topic_files: dict[str, tuple[str, str, Series]]
) -> Queue:
    """The queue from queue.yaml's text and, per listed topic, (topic.yaml's name, its text, its
    series). A listed topic with no entry is refused by the caller (it knows the folder)."""
    order = parse_queue_order(where, order_text)
    topics = {}
    for name in order.topics:
        meta_where, text, series = topic_files[name]
        meta, lines = parse_topic_meta(meta_where, text)
        check_series_shape(str(PurePosixPath(meta_where).parent), series)
        topics[name] = Topic(name, meta, series, meta_where, lines)
    for name in order.default or []:
        if name not in topics:
            raise ConfigError(f"{where}: default: {name!r} is not one of the queue's topics")
    default = tuple(order.default or ())
    return Queue(layout, tuple(order_topics(where, order, topics)), default)
