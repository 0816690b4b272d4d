"""ggml-patch refresh TARGET: regenerate patches/ from the target's resolved worktree."""

from __future__ import annotations

from ..errors import ExitCode
from . import add_topics

HELP = "regenerate the topics' series in patches/ from a target's resolved worktree (stable bytes)"


def add_arguments(p) -> None:
    add_topics(p)
    p.add_argument(
        "target", metavar="TARGET", help="the target whose worktree holds the series to keep"
    )


def run(args, matrix, cache) -> ExitCode:
    from ..drift.refresh import refresh

    r = refresh(matrix, cache, matrix.target(args.target), list(args.topic or []))
    changed = r.written + r.removed
    print(
        f"refreshed {matrix.queue_dir} from {r.worktree} ({r.layout} layout): "
        + (f"{len(r.written)} written, {len(r.removed)} removed" if changed else "no byte changed")
        + (f"; {r.native_test} updated to the series' gate test" if r.native_test else "")
    )
    for name in r.written:
        print(f"  wrote {name}")
    for name in r.removed:
        print(f"  removed {name}")
    for note in r.notes:
        print(f"  note: {note}")
    return ExitCode.OK
