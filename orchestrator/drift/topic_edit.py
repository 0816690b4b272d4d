"""`ggml-patch topic edit NAME` / `topic save NAME`: a topic's commits in a git worktree, as
`git rebase -i`'s edit stop gives them, and written back as its series.

edit: a worktree (default <cache>/edit/<topic>/, or --dir DIR, a folder that does not exist yet)
on the base refresh and status use for the series' own layout (a pinned target whose files are
the series' pre-images), the active topics it follows (`after:`, at any depth) applied as commits,
then the topic's own patches (`git am`): the tree refresh writes a topic's series from (each
topic indexed as a series of its own, after only those it follows, what its bundle carries), so
a save with nothing changed changes no byte. Its start (the commit after the topics it follows),
the base and the queue
it was made for are recorded in <cache>/edit/<topic>.json (outside the worktree: it never
dirties it). A worktree already there is never reset: the same one is named again, or, made for
another base or queue, named stale with the one command that discards it.

save: start..HEAD of that worktree by `git format-patch` in patches/' stable bytes (as refresh
writes them), checked to `git am` back onto the start into the same tree, the queue it leaves
valid; then written over patches/<topic>/*.patch (topic.yaml: only last_update). Refused in one
line, nothing written, when there is no edit worktree, it is stale, has uncommitted changes or
an am in progress, or its commits do not apply as a series."""

from __future__ import annotations

import datetime
import hashlib
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .. import sources, untrusted
from ..cache import Cache, slug
from ..config import Matrix
from ..errors import ConfigError, SeriesDoesNotApply, SourceUnavailable
from ..patchset import queue_edit
from ..patchset.files import (
    QueueWrite,
    check_replaceable,
    load_queue,
    write_patches,
    write_queue,
    write_series,
)
from ..patchset.queue import TOPIC_FILE, Queue, Topic
from ..patchset.series import Series, parse_series
from ..vcs.snapshots import SnapshotRepo, Worktree
from .check import _pinned, series_base

EDIT_DIR = "edit"


@dataclass(frozen=True)
class Opened:
    path: Path
    kept: bool  # an edit worktree made earlier for this base and queue, named again
    start: str
    before: tuple[str, ...]  # the topics applied under it


@dataclass(frozen=True)
class Saved:
    path: Path
    written: tuple[str, ...]
    removed: tuple[str, ...]


def _record_path(cache: Cache, topic: str) -> Path:
    return cache.root / EDIT_DIR / f"{slug(topic)}.json"


def _read_record(cache: Cache, topic: str) -> Optional[dict]:
    """What the topic's edit worktree was made for; None when none was (or the record is
    unreadable: the tool then treats it as absent, and never removes a folder it names)."""
    path = _record_path(cache, topic)
    text = untrusted.read_lenient(path, "edit", root=path.parent)
    try:
        made = json.loads(text) if text else None
    except ValueError:
        return None
    keys = ("worktree", "base", "start", "queue", "topic", "target")
    if not isinstance(made, dict) or not all(isinstance(made.get(k), str) for k in keys):
        return None
    return made


def _write_record(cache: Cache, topic: str, made: dict) -> None:
    path = _record_path(cache, topic)
    path.parent.mkdir(parents=True, exist_ok=True)
    untrusted.write_replacing(path, json.dumps(made, indent=1) + "\n")


def _before(queue: Queue, topic: Topic) -> list[Topic]:
    """The active topics it follows (`after:`, at any depth), in queue order: what it is written
    on (refresh's `_alone`); a dropped one is not applied, as nowhere else."""
    return [t for t in queue.chosen([topic.name], any_state=True) if t.name != topic.name]


def _queue_sha(topics: list[Topic]) -> str:
    """One id for the topics under the worktree and their series (a changed one makes it stale)."""
    parts = [f"{t.name}\0{t.series.sha256}\n" for t in topics]
    return hashlib.sha256("".join(parts).encode()).hexdigest()


def _base(matrix: Matrix, cache: Cache, repo: SnapshotRepo, queue: Queue):
    """(target name, snapshot): the pinned target in the series' layout whose files are the
    series' pre-images, as refresh and status find the base the series was made on."""
    whole = Series(queue.layout, tuple(p for t in queue.topics for p in t.series.patches))
    snap = series_base(matrix, cache, repo, whole)
    if snap is None:
        raise ConfigError(
            f"{matrix.path}: no pinned {queue.layout} target whose files match the series' index "
            "lines; add the base the series was made on to the matrix (a pinned source)"
        )
    for t in matrix.targets.values():  # the target it came from, for the record and messages
        if t.layout != queue.layout or t.prefix or not _pinned(t):
            continue
        try:
            if sources.snapshot(t.source, cache, repo).commit == snap.commit:
                return t.name, snap
        except (SourceUnavailable, ConfigError):
            continue
    return queue.layout, snap


def stale_reason(made: dict, base: str, queue_sha: str, own_sha: str) -> Optional[str]:
    """Why an edit worktree is stale for the queue as it is now (None: it is not)."""
    if made["base"] != base:
        return f"made on base {made['base'][:12]}; the series' base is now {base[:12]}"
    if made["queue"] != queue_sha:
        return "made for other topics under it (one it follows changed, was dropped or added)"
    if made["topic"] != own_sha:
        return (
            f"made for an earlier series of {made.get('name', 'the topic')} (its patches changed)"
        )
    return None


def _discard(repo: SnapshotRepo, path: Path) -> str:
    return repo.remove_worktree_line(path)


def edit(matrix: Matrix, cache: Cache, name: str, folder: Optional[Path] = None) -> Opened:
    """The topic's edit worktree: made, or the one made earlier named again."""
    queue = load_queue(matrix, with_gate=False)
    topic = queue.topic(name, "topic edit")
    before = _before(queue, topic)
    repo = SnapshotRepo(cache.snapshots_git)
    target, snap = _base(matrix, cache, repo, queue)
    queue_sha, own_sha = _queue_sha(before), topic.series.sha256
    made = _read_record(cache, name)
    wanted = (folder or cache.root / EDIT_DIR / slug(name)).absolute()
    if made is not None and Path(made["worktree"]).exists():
        where = Path(made["worktree"])
        why = stale_reason(made, snap.commit, queue_sha, own_sha)
        if why:
            raise ConfigError(
                f"{where}: a stale edit worktree of {name!r} ({why}); discard it: "
                f"{_discard(repo, where)}"
            )
        if folder is not None and where != wanted:
            raise ConfigError(
                f"--dir: {name!r} is being edited in {where} already; save it "
                f"(`ggml-patch topic save {name}`) or discard it: {_discard(repo, where)}"
            )
        return Opened(where, True, made["start"], tuple(t.name for t in before))
    if wanted.exists() or wanted.is_symlink():
        raise ConfigError(
            f"{wanted}: exists and is not an edit worktree the tool made; refused (name a folder "
            "that does not exist with --dir DIR)"
        )
    wt = Worktree(repo, wanted)
    wt.ensure(snap.commit)
    start = snap.commit
    with tempfile.TemporaryDirectory(prefix="edit-", dir=cache.scratch()) as tmp:
        for i, t in enumerate([*before, topic]):
            if t is topic:
                start = wt.head() or snap.commit
            files = write_patches(t.series, Path(tmp) / f"{i:03d}")
            try:
                wt.am(files)
            except SeriesDoesNotApply as e:
                repo.remove_worktree(wanted)  # the tool's own, just made: nothing of anyone's
                raise ConfigError(
                    f"{matrix.topic_dir(t.name)}: does not apply on {target}'s base after the "
                    f"topics it follows ({e})"
                ) from None
    record = {
        "worktree": str(wanted),
        "name": name,
        "target": target,
        "base": snap.commit,
        "start": start,
        "queue": queue_sha,
        "topic": own_sha,
        "before": [t.name for t in before],
    }
    _write_record(cache, name, record)
    return Opened(wanted, False, start, tuple(t.name for t in before))


def save(matrix: Matrix, cache: Cache, name: str, today: datetime.date) -> Saved:
    """The edit worktree's commits since its start written back as the topic's series."""
    queue = load_queue(matrix, with_gate=False)
    topic = queue.topic(name, "topic save")
    repo = SnapshotRepo(cache.snapshots_git)
    made = _read_record(cache, name)
    if made is None or not Path(made["worktree"]).is_dir():
        raise ConfigError(
            f"topic save: no edit worktree of {name!r} (open one: `ggml-patch topic edit {name}`)"
        )
    where = Path(made["worktree"])
    _, snap = _base(matrix, cache, repo, queue)
    why = stale_reason(made, snap.commit, _queue_sha(_before(queue, topic)), topic.series.sha256)
    if why:
        raise ConfigError(
            f"{where}: a stale edit worktree of {name!r} ({why}); nothing written; discard it: "
            f"{_discard(repo, where)}"
        )
    wt = Worktree(repo, where)
    _check_worktree(wt, made["start"])
    series = _series_of(cache, repo, wt, made["start"], queue.layout)
    texts = _checked_files(matrix, queue, topic, series, today)
    for path, _ in texts:
        check_replaceable(path, matrix.queue_dir)
    for p in series.patches:
        check_replaceable(matrix.topic_dir(name) / p.name, matrix.queue_dir)
    written, removed = write_series(matrix.topic_dir(name), series)
    if written or removed:
        write_queue(matrix.queue_dir, QueueWrite(texts))
    load_queue(matrix)  # what was written reads back as a valid queue
    made["topic"] = series.sha256  # the next save from this worktree is not stale
    _write_record(cache, name, made)
    return Saved(where, tuple(written), tuple(removed))


def _check_worktree(wt: Worktree, start: str) -> None:
    if wt.am_in_progress():
        raise ConfigError(
            f"{wt.path}: git am is in progress; finish it (`git am --continue`) or abort it "
            "(`git am --abort`); nothing written"
        )
    if not wt.is_clean():
        raise ConfigError(
            f"{wt.path}: uncommitted changes; commit them (e.g. `git commit --amend`) or "
            "discard them (`git checkout -- .`); nothing written"
        )
    if not wt.descends_from(start) or wt.head() == start:
        raise ConfigError(
            f"{wt.path}: no commits on top of the topics it follows ({start[:12]}); nothing "
            "written (`ggml-patch topic drop` drops a topic)"
        )


def _series_of(cache: Cache, repo: SnapshotRepo, wt: Worktree, start: str, layout: str) -> Series:
    """start..HEAD as the topic's series, proven to `git am` back onto the start into the same
    tree (a merge commit, or a change format-patch cannot carry, is refused)."""
    with tempfile.TemporaryDirectory(prefix="save-", dir=cache.scratch()) as tmp:
        files = wt.format_patch(start, Path(tmp) / "series")
        texts = [(f.name, f.read_bytes().decode("utf-8", "surrogateescape")) for f in files]
        check = Worktree(repo, Path(tmp) / "check")
        check.ensure(start)
        try:
            check.am(files)
            same = check.tree() == wt.tree()
        except SeriesDoesNotApply as e:
            same, why = False, str(e)
        else:
            why = "its patches give another tree than its HEAD (a merge commit?)"
        finally:
            repo.remove_worktree(check.path)
    if not same:
        raise ConfigError(
            f"{wt.path}: its commits since {start[:12]} do not apply as a series ({why}); "
            "nothing written"
        )
    try:
        return parse_series(layout, texts)
    except ConfigError as e:
        raise ConfigError(f"{wt.path}: {e}; nothing written") from None


def _checked_files(
    matrix: Matrix, queue: Queue, topic: Topic, series: Series, today: datetime.date
) -> tuple[tuple[Path, str], ...]:
    """topic.yaml with last_update today (every other key and comment kept), after the queue
    the new series leaves is checked whole (the series' shape: source change, then tests)."""
    qdir = matrix.queue_dir
    meta = matrix.topic_dir(topic.name) / TOPIC_FILE
    text = untrusted.read_text(meta, "topic", root=qdir)
    new_text = queue_edit.topic_update(str(meta), text, today)
    queue_file = qdir / "queue.yaml"
    queue_text = untrusted.read_text(queue_file, "queue", root=qdir)
    topics = {
        t.name: (t.where, new_text if t.name == topic.name else _text(matrix, t))
        for t in queue.topics
    }
    queue_edit.check_edit(queue, str(queue_file), queue_text, topics, {topic.name: series})
    return ((meta, new_text),)


def _text(matrix: Matrix, t: Topic) -> str:
    path = matrix.topic_dir(t.name) / TOPIC_FILE
    return untrusted.read_text(path, "topic", root=matrix.queue_dir)
