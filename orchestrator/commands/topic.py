"""ggml-patch topic new|import|move|drop|rename|retire|edit|save: the queue's daily jobs.

new NAME --from REV|--from-diff FILE    a commit, a range (squashed) or a diff as one new topic
import A..B [--squash NAME]             a fork's range, one topic per commit (author, date, message)
move NAME --before|--after OTHER        its place in queue.yaml
drop NAME                               state: dropped (its folder kept)
rename NAME NEW                         its folders, queue.yaml and every `after:` naming it
retire NAME [--target T] [--upstream X] upstream on those targets (or everywhere)
edit NAME [--dir DIR]                   a worktree with its commits on its base (drift/topic_edit)
save NAME                               that worktree's commits written back as its series

Each rewrites queue.yaml and topic.yaml as round trips (every other key and comment kept) and
writes nothing when an input or the result is invalid."""

from __future__ import annotations

from ..errors import ExitCode
from . import repeatable

HELP = (
    "the queue's topics: new, import A..B (one per commit), move, drop, rename, retire (per "
    "target), edit (a worktree of its commits) and save (them back as its series)"
)
ACTIONS = ("new", "import", "move", "drop", "rename", "retire", "edit", "save")
# the options each action takes (any other given is refused in one line)
_TAKES = {
    "new": {"rev", "from_diff", "repo", "layout", "summary", "origin", "after", "test"},
    "import": {"repo", "layout", "after", "squash", "summary", "test"},
    "move": {"before", "after"},
    "drop": set(),
    "rename": set(),
    "retire": {"target", "upstream"},
    "edit": {"dir"},
    "save": set(),
}
_FLAGS = {
    "rev": "--from",
    "from_diff": "--from-diff",
    "repo": "--repo",
    "layout": "--layout",
    "summary": "--summary",
    "origin": "--origin",
    "after": "--after",
    "squash": "--squash",
    "before": "--before",
    "target": "--target",
    "upstream": "--upstream",
    "test": "--test",
    "dir": "--dir",
}


def add_arguments(p) -> None:
    p.add_argument("action", choices=ACTIONS, help="what to do (see the description)")
    p.add_argument("name", metavar="NAME", help="the topic (patches/NAME/); import: the range A..B")
    p.add_argument("new_name", nargs="?", metavar="NEW", help="rename: the new name")
    p.add_argument("--from", dest="rev", metavar="REV", help="new: a commit, or a range A..B")
    p.add_argument("--from-diff", metavar="FILE", help="new: a git diff (or a format-patch file)")
    p.add_argument(
        "--repo",
        metavar="DIR",
        help="new, import: the local checkout REV is read from (default: the current directory)",
    )
    p.add_argument(
        "--layout",
        metavar="NAME",
        help="the layout of the change's paths (default: the queue's); re-targeted to the queue's",
    )
    p.add_argument("--summary", metavar="TEXT", help="what it fixes, one line (default: subject)")
    p.add_argument("--origin", metavar="TEXT", help="new: where it comes from (default: --from's)")
    p.add_argument("--squash", metavar="NAME", help="import: the whole range as one topic NAME")
    p.add_argument("--before", metavar="OTHER", help="move: just before OTHER")
    repeatable(
        p,
        "--after",
        "new, import: a topic this one must follow (repeatable); move: just after OTHER",
        "TOPIC",
    )
    repeatable(p, "--target", "retire: only on this target (repeatable; default: everywhere)", "T")
    p.add_argument("--upstream", metavar="X", help="retire: the upstream commit id or its URL")
    p.add_argument(
        "--dir",
        metavar="DIR",
        help="edit: the worktree's folder, one that does not exist yet (default: in the cache)",
    )
    repeatable(
        p,
        "--test",
        "new, import: a test that judges it, e.g. 'test-backend-ops -o SOFT_MAX' (repeatable; "
        "default: inferred from the test files the change touches)",
        "LINE",
    )


def _check_options(args) -> None:
    """The options the action takes, each once; NEW only for rename."""
    from ..errors import ConfigError

    takes = _TAKES[args.action]
    for dest, flag in _FLAGS.items():
        value = getattr(args, dest)
        if value not in (None, []) and dest not in takes:
            raise ConfigError(f"{flag}: not an option of `topic {args.action}`")
    if (args.new_name is None) == (args.action == "rename"):
        why = "rename takes NAME NEW" if args.action == "rename" else "takes one NAME"
        raise ConfigError(f"topic {args.action}: {why}")
    if args.action == "new" and (args.rev is None) == (args.from_diff is None):
        raise ConfigError("topic new: one of --from REV or --from-diff FILE")
    if args.action == "move" and (args.before is None) == (len(args.after) != 1):
        raise ConfigError("topic move: one of --before OTHER or --after OTHER (once)")


def run(args, matrix, cache) -> ExitCode:
    import datetime

    from ..patchset import queue_cmds
    from ..patchset.files import load_queue, write_queue

    _check_options(args)
    if args.action in ("edit", "save"):
        return _edit_or_save(args, matrix, cache)
    queue = load_queue(matrix)  # a broken queue is refused before anything is written
    today = datetime.datetime.now(datetime.timezone.utc).date()
    if args.action in ("new", "import"):
        from .topic_add import add

        edit = add(args, matrix, queue, today)
    elif args.action == "move":
        other = args.before or args.after[0]
        edit = queue_cmds.move(matrix, queue, args.name, other, args.before is not None)
    elif args.action == "drop":
        edit = queue_cmds.drop(matrix, queue, args.name, today)
    elif args.action == "rename":
        edit = queue_cmds.rename(matrix, queue, args.name, args.new_name)
    else:
        edit = queue_cmds.retire(matrix, queue, args.name, args.target, args.upstream, today)
    write_queue(matrix.queue_dir, edit.plan)
    load_queue(matrix)  # what was written reads back as a valid queue
    for line in edit.said:
        print(line)
    return ExitCode.OK


def _edit_or_save(args, matrix, cache) -> ExitCode:
    import datetime
    from pathlib import Path

    from ..drift import topic_edit

    if args.action == "save":
        today = datetime.datetime.now(datetime.timezone.utc).date()
        saved = topic_edit.save(matrix, cache, args.name, today)
        changed = [*saved.written, *saved.removed]
        print(
            f"topic {args.name}: saved from {saved.path}: "
            + (f"{len(saved.written)} written, {len(saved.removed)} removed" if changed else "")
            + ("" if changed else "no byte changed")
        )
        for name in saved.written:
            print(f"  wrote {name}")
        for name in saved.removed:
            print(f"  removed {name}")
        return ExitCode.OK
    folder = Path(args.dir).expanduser() if args.dir else None
    opened = topic_edit.edit(matrix, cache, args.name, folder)
    under = f" on {', '.join(opened.before)}" if opened.before else " on its base"
    print(opened.path)
    print(
        f"topic {args.name}: {'the edit worktree made earlier' if opened.kept else 'its commits'}"
        f"{under} ({opened.start[:12]}..HEAD); edit there (`git commit --amend`, "
        f"`git rebase -i {opened.start[:12]}`), commit everything, then "
        f"`ggml-patch topic save {args.name}`"
    )
    return ExitCode.OK
