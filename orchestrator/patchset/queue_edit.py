"""Edits of the queue files a person writes (patches/queue.yaml, patches/<topic>/topic.yaml) as
round trips: ruamel.yaml keeps every other key, every comment and the order of the keys; only the
edited values change. Pure: texts in, texts out. The caller validates every result with the
records of queue.py (`check_edit`) before anything is written (files.py writes).

A text reaches these functions only after queue.py has read it (caps, no alias bomb, no tag):
`load_queue` runs first in every command that edits."""

from __future__ import annotations

import datetime
import io
from typing import Any, Iterable, Optional

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from ..errors import ConfigError
from .queue import Queue, build_queue
from .series import Series

# the queue's own style: "topics:\n  - name", lines never folded (a summary stays one line)
_WIDTH = 4096


def _yaml() -> YAML:
    y = YAML(typ="rt")
    y.indent(mapping=2, sequence=4, offset=2)
    y.width = _WIDTH
    y.preserve_quotes = True
    # topic.yaml writes `bug: null`, not `bug:` (what a person reads as "not set")
    y.representer.add_representer(
        type(None), lambda r, _: r.represent_scalar("tag:yaml.org,2002:null", "null")
    )
    return y


def load(where: str, text: str) -> CommentedMap:
    data = _yaml().load(text)
    if not isinstance(data, CommentedMap):
        raise ConfigError(f"{where}:1: (top level): expected a mapping of keys")
    return data


def dump(data: CommentedMap) -> str:
    out = io.StringIO()
    _yaml().dump(data, out)
    return out.getvalue()


def set_list(seq: CommentedSeq, values: Iterable[Any]) -> None:
    """`seq` holding `values` in place: a comment stays at its position (after the Nth item), and
    the comment after the last item (a trailing block) stays after the last one."""
    values = list(values)
    comments = dict(seq.ca.items)
    tail = comments.pop(len(seq) - 1, None) if len(seq) else None
    del seq[:]
    seq.ca.items.clear()
    seq.extend(values)
    for k, c in comments.items():
        if k < len(values) - 1:
            seq.ca.items[k] = c
    if tail is not None and values:
        seq.ca.items[len(values) - 1] = tail


def _names(data: CommentedMap, key: str) -> list[str]:
    value = data.get(key)
    return [str(v) for v in value] if isinstance(value, list) else []


# ------------------------------------------------------------------ queue.yaml


def queue_append(where: str, text: Optional[str], name: str) -> str:
    """queue.yaml with `name` last of `topics:` (a new file when there is none)."""
    if text is None:
        return f"topics:\n  - {name}\n"
    data = load(where, text)
    set_list(data["topics"], [*_names(data, "topics"), name])
    return dump(data)


def queue_move(where: str, text: str, name: str, other: str, before: bool) -> str:
    """queue.yaml with `name` just before (or after) `other` in `topics:`."""
    data = load(where, text)
    order = [n for n in _names(data, "topics") if n != name]
    at = order.index(other) + (0 if before else 1)
    order.insert(at, name)
    set_list(data["topics"], order)
    return dump(data)


def queue_remove(where: str, text: str, name: str) -> str:
    """queue.yaml without `name` (in `topics:` and `default:`; a `default:` left empty goes)."""
    data = load(where, text)
    for key in ("topics", "default"):
        if isinstance(data.get(key), list):
            set_list(data[key], [n for n in _names(data, key) if n != name])
    if isinstance(data.get("default"), list) and not data["default"]:
        del data["default"]
    return dump(data)


def queue_rename(where: str, text: str, old: str, new: str) -> str:
    """queue.yaml with `old` renamed `new` in `topics:` and `default:`."""
    data = load(where, text)
    for key in ("topics", "default"):
        if isinstance(data.get(key), list):
            set_list(data[key], [new if n == old else n for n in _names(data, key)])
    return dump(data)


# ------------------------------------------------------------------ topic.yaml


def topic_update(where: str, text: str, today: datetime.date, **values: Any) -> str:
    """topic.yaml with `values` set (a new key goes last) and last_update today."""
    data = load(where, text)
    for key, value in {**values, "last_update": today}.items():
        data[key] = value
    return dump(data)


def topic_retire_on(
    where: str, text: str, target: str, upstream: Optional[str], today: datetime.date
) -> str:
    """topic.yaml with `retired: {target: upstream}` (the topic is upstream on that target only:
    it stays active on every other)."""
    data = load(where, text)
    retired = data.get("retired")
    if not isinstance(retired, dict):
        retired = CommentedMap()
        data["retired"] = retired
    retired[target] = upstream
    data["last_update"] = today
    return dump(data)


def topic_after_renamed(where: str, text: str, old: str, new: str) -> Optional[str]:
    """topic.yaml with `old` renamed `new` in its `after:`; None when it does not name `old`."""
    data = load(where, text)
    after = data.get("after")
    if not isinstance(after, CommentedSeq) or old not in after:
        return None
    set_list(after, [new if n == old else n for n in _names(data, "after")])
    return dump(data)


# ------------------------------------------------------------------ the whole result, checked


def check_edit(
    queue: Queue,
    queue_where: str,
    queue_text: str,
    topic_texts: dict[str, tuple[str, str]],
    series: Optional[dict[str, Series]] = None,
) -> Queue:
    """The queue the edit would leave, built by the records of queue.py (every key, the states,
    `after:` known and without a cycle, `default:` among the topics): a ConfigError naming the
    file, the line and the key when it would be invalid. `topic_texts`: per topic listed in the
    new queue.yaml, (its topic.yaml as messages name it, its text after the edit); `series`: a
    topic's series where it is new or renamed (the others' are `queue`'s)."""
    old = {t.name: t.series for t in queue.topics}
    files = {
        name: (meta_where, text, (series or {}).get(name) or old[name])
        for name, (meta_where, text) in topic_texts.items()
    }
    return build_queue(queue_where, queue.layout, queue_text, files)
