"""What a resolution worktree (status/<target>/resolve/) was made for: the target's base, the
topics and the series' sha256, recorded beside it (resolve.json, outside the worktree so it never
dirties it). A worktree made for another base or another queue is stale: status names it so, with
the one command that discards it, and refresh passes it by (it never blocks another refresh)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable, Optional

from .. import untrusted
from ..patchset.series import Series
from ..vcs.snapshots import SnapshotRepo

MARKER = "resolve.json"


def _marker(resolve: Path) -> Path:
    return resolve.parent / MARKER


def record(resolve: Path, base: str, series: Series) -> None:
    """The worktree at `resolve` is made for `base` and `series` (its topics)."""
    made = {"base": base, "topics": list(series.topics), "series": series.sha256}
    untrusted.write_replacing(_marker(resolve), json.dumps(made, indent=1) + "\n")


def made_for(resolve: Path) -> Optional[dict]:
    """What the worktree was made for; None for one of an earlier version (no record) or an
    unreadable record."""
    text = untrusted.read_lenient(_marker(resolve), "status", root=resolve.parent)
    try:
        made = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(made, dict):
        return None
    ok = all(isinstance(made.get(k), str) for k in ("base", "series"))
    return made if ok and isinstance(made.get("topics"), list) else None


def stale_reason(
    resolve: Path, base: str, series: Series, carried: Optional[Iterable[str]] = None
) -> Optional[str]:
    """Why the worktree at `resolve` is stale for this base and series: made on another base, for
    a topic the target no longer carries (`carried`: the queue's active topics there), or for the
    same topics before patches/ changed. None: it is not (one made for another choice of topics,
    `--topic`, is another run's, not stale), or nothing says what it was made for."""
    made = made_for(resolve)
    if made is None:
        return None
    topics = [str(t) for t in made["topics"]]
    if made["base"] != base:
        return f"made on base {made['base'][:12]}; the target's base is now {base[:12]}"
    gone = [t for t in topics if carried is not None and t not in set(carried)]
    if gone:
        return f"made for {', '.join(topics)}; {', '.join(gone)} no longer applied on this target"
    if topics == list(series.topics) and made["series"] != series.sha256:
        return (
            f"made for an earlier series of {', '.join(topics) or 'the queue'} (patches/ changed)"
        )
    return None


def for_topics(resolve: Path, base: str, topics: list[str]) -> Optional[bool]:
    """Whether the worktree was made for these topics on this base (None: nothing says)."""
    made = made_for(resolve)
    if made is None:
        return None
    return made["base"] == base and [str(t) for t in made["topics"]] == list(topics)


def discard_command(repo: SnapshotRepo, resolve: Path) -> str:
    """The one command that discards the worktree (the tool itself never does)."""
    return repo.remove_worktree_line(resolve)
