"""`ggml-patch topic move|drop|rename|retire`: each edit planned whole (queue_edit's round trips of
queue.yaml and the topic.yaml files), the queue it would leave built and checked by queue.py's
records, and only then written (files.write_queue: no symlink written through, queue.yaml last).
Nothing is written when any input or the result is invalid."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import untrusted
from ..config import Matrix
from ..errors import ConfigError
from . import queue_edit
from .files import QueueWrite
from .queue import QUEUE_FILE, TOPIC_FILE, Queue
from .series import Series
from .topic_new import check_name

_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
_URL = re.compile(r"^https://[\x21-\x7e]+$")


@dataclass(frozen=True)
class Edit:
    """What an edit writes, and the lines it prints."""

    plan: QueueWrite
    said: tuple[str, ...]


@dataclass(frozen=True)
class _Texts:
    """The queue files as they are now: queue.yaml and each listed topic's topic.yaml."""

    queue_file: Path
    queue_text: str
    topics: dict[str, tuple[Path, str]]


def _read(matrix: Matrix, queue: Queue) -> _Texts:
    qdir = matrix.queue_dir
    queue_file = qdir / QUEUE_FILE
    text = untrusted.read_text(queue_file, "queue", root=qdir)
    topics = {}
    for name in queue.names():
        meta = matrix.topic_dir(name) / TOPIC_FILE
        topics[name] = (meta, untrusted.read_text(meta, "topic", root=qdir))
    return _Texts(queue_file, text, topics)


def _checked(
    queue: Queue,
    texts: _Texts,
    queue_text: str,
    topic_texts: dict[str, tuple[Path, str]],
    series: Optional[dict[str, Series]] = None,
) -> Queue:
    """The queue the edit leaves, validated (one line naming file, line and key otherwise)."""
    shown = {n: (str(p), t) for n, (p, t) in topic_texts.items()}
    return queue_edit.check_edit(queue, str(texts.queue_file), queue_text, shown, series)


def _changed(texts: _Texts, queue_text: str, topic_texts: dict[str, tuple[Path, str]]):
    """The files whose text the edit changes, queue.yaml last."""
    old = {p: t for p, t in texts.topics.values()}
    files = [(p, t) for p, t in topic_texts.values() if old.get(p) != t]
    if queue_text != texts.queue_text:
        files.append((texts.queue_file, queue_text))
    return tuple(files)


def move(matrix: Matrix, queue: Queue, name: str, other: str, before: bool) -> Edit:
    """`name` just before (or after) `other` in queue.yaml; refused where `after:` keeps it on
    the other side (the order would not change as asked)."""
    topic, peer = queue.topic(name, "topic move"), queue.topic(other, "--before/--after")
    if name == other:
        raise ConfigError(
            f"topic move: {name!r} cannot move {'before' if before else 'after'} itself"
        )
    texts = _read(matrix, queue)
    new_text = queue_edit.queue_move(str(texts.queue_file), texts.queue_text, name, other, before)
    moved = _checked(queue, texts, new_text, texts.topics).names()
    if (moved.index(name) < moved.index(other)) != before:
        # moving before: its own `after:` keeps it later; moving after: the other's keeps it
        then = topic if before else peer
        raise ConfigError(
            f"{then.where}:{then.line('after')}: after: {then.name!r} follows "
            f"{', '.join(then.meta.after)} (at any depth); {name!r} cannot move "
            f"{'before' if before else 'after'} {other!r} (edit after: first)"
        )
    said = (f"topic {name}: now {'before' if before else 'after'} {other}: {', '.join(moved)}",)
    return Edit(QueueWrite(_changed(texts, new_text, texts.topics)), said)


def drop(matrix: Matrix, queue: Queue, name: str, today: datetime.date) -> Edit:
    """`name`'s state dropped: it stays listed (its folder, its history) and applies nowhere."""
    topic = queue.topic(name, "topic drop")
    if topic.meta.state == "dropped":
        raise ConfigError(
            f"{topic.where}:{topic.line('state')}: state: {name!r} is dropped already"
        )
    texts = _read(matrix, queue)
    edited = dict(texts.topics)
    path, text = edited[name]
    edited[name] = (path, queue_edit.topic_update(str(path), text, today, state="dropped"))
    _checked(queue, texts, texts.queue_text, edited)
    said = [f"topic {name}: dropped (state: dropped; patches/{name}/ kept)"]
    for t in queue.topics:
        if name in t.meta.after and t.active:
            said.append(f"  note: {t.name} follows {name} (after:); it now applies without it")
    return Edit(QueueWrite(_changed(texts, texts.queue_text, edited)), tuple(said))


def rename(matrix: Matrix, queue: Queue, old: str, new: str) -> Edit:
    """`old` renamed `new`: its folders (patches/, native_tests/) moved, queue.yaml's `topics:`
    and `default:` and every topic.yaml's `after:` naming the new name."""
    topic = queue.topic(old, "topic rename")
    check_name(new, matrix.queue_dir, queue.names(), "topic rename")
    texts = _read(matrix, queue)
    new_text = queue_edit.queue_rename(str(texts.queue_file), texts.queue_text, old, new)
    edited: dict[str, tuple[Path, str]] = {}
    for name, (path, text) in texts.topics.items():
        after = queue_edit.topic_after_renamed(str(path), text, old, new)
        if name == old:
            edited[new] = (matrix.topic_dir(new) / TOPIC_FILE, text)
        else:
            edited[name] = (path, after if after is not None else text)
    _checked(queue, texts, new_text, edited, {new: topic.series})
    moves = [(matrix.topic_dir(old), matrix.topic_dir(new))]
    native = matrix.topic_native_dir(old)
    if native.exists() or native.is_symlink():
        moves.append((native, matrix.topic_native_dir(new)))
    for folder, _ in moves:  # a moved link would name another file, or none
        link = next((p for p in sorted(folder.rglob("*")) if p.is_symlink()), None)
        if link is not None:
            raise ConfigError(f"{link}: a symlink; a topic's folder is moved only with plain files")
    files = tuple((p, t) for p, t in _changed(texts, new_text, edited) if p != edited[new][0])
    said = (f"topic {old}: renamed {new} ({', '.join(str(d) for _, d in moves)})",)
    return Edit(QueueWrite(files, tuple(moves)), said)


def _upstream(value: Optional[str]) -> Optional[str]:
    if value is None or _COMMIT.match(value) or _URL.match(value):
        return value
    raise ConfigError(
        f"--upstream: {value[:80]!r} is not an upstream commit id (7-64 lowercase hex digits) "
        "or an https:// URL"
    )


def retire(
    matrix: Matrix,
    queue: Queue,
    name: str,
    targets: list[str],
    upstream: Optional[str],
    today: datetime.date,
) -> Edit:
    """`name` upstream: on the targets named (`retired: {T: upstream}`: it stays active on every
    other target, an older base that still needs it), or everywhere (state merged-upstream,
    applied_upstream the commit)."""
    queue.topic(name, "topic retire")
    upstream = _upstream(upstream)
    for i, t in enumerate(targets):
        matrix.target(t)  # an unknown target: one line naming matrix.yaml's
        if t in targets[:i]:
            raise ConfigError(f"--target[{i}]: {t!r} is given twice")
    texts = _read(matrix, queue)
    edited = dict(texts.topics)
    path, text = edited[name]
    for t in targets:
        text = queue_edit.topic_retire_on(str(path), text, t, upstream, today)
    if not targets:
        if upstream is not None and not _COMMIT.match(upstream):
            raise ConfigError(
                "--upstream: without --target, the upstream commit id (topic.yaml's "
                "applied_upstream); a URL is recorded per target (--target T --upstream URL)"
            )
        text = queue_edit.topic_update(
            str(path), text, today, state="merged-upstream", applied_upstream=upstream
        )
    edited[name] = (path, text)
    _checked(queue, texts, texts.queue_text, edited)
    where = (
        f"on {', '.join(targets)} (still applied on every other target)"
        if targets
        else ("everywhere (state: merged-upstream)")
    )
    said = [f"topic {name}: retired {where}"]
    if not targets:
        for other in queue.topics:
            if name in other.meta.after and other.active:
                said.append(
                    f"  note: {other.name} follows {name} (after:); it now applies without it"
                )
    return Edit(QueueWrite(_changed(texts, texts.queue_text, edited)), tuple(said))
