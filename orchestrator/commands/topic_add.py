"""`topic new` and `topic import` (commands/topic.py's): new topics planned whole from a
checkout's commits (their tree diffs, read with the checkout's own configuration inert) or a diff
file, validated as the queue they would make, then handed back as one write."""

from __future__ import annotations

import datetime
from pathlib import Path

from ..errors import ConfigError
from ..model.layout import LAYOUTS
from ..patchset import queue_edit, topic_import, topic_new
from ..patchset.files import QueueWrite
from ..patchset.queue import QUEUE_FILE, TOPIC_FILE, Queue
from ..patchset.queue_cmds import Edit
from ..patchset.topic_import import Imported
from ..redact import redact
from ..untrusted import read_optional
from ..vcs.runner import GitError
from ..vcs.user import change_of, is_work_tree, remote_url


def add(args, matrix, queue: Queue, today: datetime.date) -> Edit:
    """The new topics of `topic new` or `topic import`, every input checked first."""
    for i, dep in enumerate(args.after):
        queue.topic(dep, where=f"--after[{i}]")
    topic_new.check_once("--after", args.after)
    layout = args.layout or matrix.series_layout
    if layout not in LAYOUTS:
        raise ConfigError(f"--layout: {layout!r} is not one of {', '.join(sorted(LAYOUTS))}")
    if args.action == "new":
        topic_new.check_name(args.name, matrix.queue_dir, queue.names())
        topics = [_new(args, today)]
    else:
        if args.summary is not None and args.squash is None:
            raise ConfigError("--summary: one topic's; with `topic import`, only with --squash")
        if args.squash is not None:
            topic_new.check_name(args.squash, matrix.queue_dir, queue.names(), "--squash")
        topics = _import(args, matrix, queue)
    return _edit(args, matrix, queue, topics, layout, today)


def _checkout(args) -> Path:
    root = Path(args.repo or ".").expanduser().absolute()
    if not is_work_tree(root):
        raise ConfigError(f"--repo: {root} is not a git checkout")
    return root


def _change(root: Path, rev: str, flag: str):
    try:
        return change_of(root, rev)
    except GitError as e:
        raise ConfigError(f"{flag} {rev!r}: {e.reason} (in {root})") from None


def _new(args, today: datetime.date) -> Imported:
    """`topic new NAME`: --from REV (a commit, or a range squashed) or --from-diff FILE."""
    after = tuple(args.after)
    if args.rev:
        root = _checkout(args)
        change = _change(root, args.rev, "--from")
        commits = tuple(topic_new.ForkCommit(*c) for c in change.commits)
        if not commits:
            raise ConfigError(f"--from {args.rev!r}: no commit in that range")
        what = (
            f"commit {change.head}"
            if len(commits) == 1
            else (f"commits {change.base}..{change.head}")
        )
        origin = redact(args.origin) if args.origin else topic_new.origin_of(remote_url(root), what)
        return Imported(args.name, commits, change.diff, topic_new.one_line(origin), after)
    path = Path(args.from_diff).expanduser()
    if not path.is_file():
        raise ConfigError(f"--from-diff: {path}: no such file")
    diff = topic_new.read_diff_file(path)
    header = diff.split("diff --git ", 1)[0]
    subject = topic_new.parse_subject(header) or f"apply {path.name}"
    author = (
        topic_new.parse_author(header)
        or "ggml-patch topic new <ggml-patch@users.noreply.github.com>"
    )
    date = today.strftime("%a, %d %b %Y 00:00:00 +0000")
    commit = topic_new.ForkCommit(topic_new.NO_SHA, author, date, subject, "")
    origin = topic_new.one_line(redact(args.origin or f"diff file {path.name}"))
    # the diff file's own text up to its first diff is its message: never part of the series
    return Imported(args.name, (commit,), diff[len(header) :], origin, after)


def _import(args, matrix, queue: Queue) -> list[Imported]:
    """`topic import A..B`: each commit of the range with its own tree diff (a linear range)."""
    if ".." not in args.name:
        raise ConfigError(f"topic import: {args.name!r} is not a range A..B")
    root = _checkout(args)
    whole = _change(root, args.name, "topic import")
    if not whole.commits:
        raise ConfigError(f"topic import {args.name!r}: no commit in that range")
    url = remote_url(root)

    def origin(what: str) -> str:
        return topic_new.origin_of(url, what)

    pairs, parent = [], whole.base
    for c in whole.commits:
        one = _change(root, c[0], "topic import")
        if one.base != parent:
            raise ConfigError(
                f"topic import {args.name!r}: commit {c[0][:12]} does not follow {parent[:12]} "
                "(a merge or a side branch); import a linear range"
            )
        pairs.append((topic_new.ForkCommit(*c), one.diff))
        parent = c[0]
    if args.squash is not None:
        span = f"commits {whole.base}..{whole.head}"
        return [topic_import.squashed(args.squash, pairs, whole.diff, span, origin, args.after)]
    taken = set(queue.names()) | {p.name for p in matrix.queue_dir.iterdir()}
    return topic_import.plan(pairs, taken, origin, list(args.after))


def _edit(args, matrix, queue: Queue, topics: list[Imported], layout: str, today) -> Edit:
    """The new topics' files and queue.yaml naming them last, the whole checked first."""
    qdir = matrix.queue_dir
    series, metas, files, judged = topic_import.files_of(
        qdir, topics, layout, matrix.series_layout, today, args.summary, args.test
    )
    queue_file = qdir / QUEUE_FILE
    text = read_optional(queue_file, "queue", root=qdir)
    for t in topics:
        text = queue_edit.queue_append(str(queue_file), text, t.name)
    assert text is not None  # queue_append always returns the whole queue.yaml
    listed = {n: (matrix.topic_dir(n) / TOPIC_FILE, None) for n in queue.names()}
    shown = {
        n: (str(p), read_optional(p, "topic", root=qdir) or "") for n, (p, _) in listed.items()
    }
    shown.update({n: (str(p), t) for n, (p, t) in metas.items()})
    queue_edit.check_edit(queue, str(queue_file), text, shown, series)
    said = []
    for t in topics:
        after = f", after {', '.join(t.after)}" if t.after else ""
        said.append(f"topic {t.name} (local{after}): {qdir / t.name}")
        said += [f"  {p.name}  ({t.commits[0].author})" for p in series[t.name].patches]
    said += [f"  {line}" for line in judged]
    said.append(
        "  topic.yaml, cover.md; next: `ggml-patch status`, then `ggml-patch matrix --topic "
        f"{topics[0].name}`"
    )
    return Edit(QueueWrite((*files, (queue_file, text))), tuple(said))
