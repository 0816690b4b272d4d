"""ggml-patch topic new NAME: a fork's commit or range (--from REV, read from a local checkout) or a
diff file (--from-diff FILE) made into a new topic of the queue, with state local."""

from __future__ import annotations

from ..errors import ExitCode
from . import repeatable

HELP = "add a topic to the queue from a commit, a range or a diff (topic new NAME --from REV)"


def add_arguments(p) -> None:
    p.add_argument("action", choices=["new"], help="new: add a topic")
    p.add_argument("name", metavar="NAME", help="the topic's name: patches/NAME/")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--from", dest="rev", metavar="REV", help="a commit, or a range A..B")
    src.add_argument("--from-diff", metavar="FILE", help="a git diff (or a format-patch file)")
    p.add_argument(
        "--repo",
        default=".",
        metavar="DIR",
        help="the local checkout REV is read from (default: the current directory)",
    )
    p.add_argument(
        "--layout",
        metavar="NAME",
        help="the layout of the change's paths (default: the queue's); re-targeted to the queue's",
    )
    p.add_argument("--summary", metavar="TEXT", help="what it fixes, one line (default: subject)")
    p.add_argument("--origin", metavar="TEXT", help="where it comes from (default: from --from)")
    repeatable(p, "--after", "a topic this one must follow (it touches the same lines)", "TOPIC")
    repeatable(
        p,
        "--test",
        "a test that judges it, with its arguments (default: those whose sources it touches)",
        "'PROGRAM [ARGS]'",
    )


def run(args, matrix, cache) -> ExitCode:
    import datetime
    from pathlib import Path

    from ..errors import ConfigError
    from ..model.layout import LAYOUTS
    from ..model.testspec import TestSpec
    from ..patchset import topic_new
    from ..patchset.files import load_queue
    from ..patchset.queue import QUEUE_FILE
    from ..untrusted import read_optional
    from ..vcs.runner import GitError
    from ..vcs.user import change_of, is_work_tree, remote_url

    queue = load_queue(matrix)  # a broken queue is refused before anything is written
    queue_file = matrix.queue_dir / QUEUE_FILE
    topic_new.check_name(args.name, matrix.queue_dir, queue.names())
    for i, dep in enumerate(args.after):
        queue.topic(dep, where=f"--after[{i}]")
    layout = args.layout or matrix.series_layout
    if layout not in LAYOUTS:
        raise ConfigError(f"--layout: {layout!r} is not one of {', '.join(sorted(LAYOUTS))}")
    today = datetime.datetime.now(datetime.timezone.utc).date()
    if args.rev:
        root = Path(args.repo).expanduser().absolute()
        if not is_work_tree(root):
            raise ConfigError(f"--repo: {root} is not a git checkout")
        try:
            change = change_of(root, args.rev)
        except GitError as e:
            raise ConfigError(f"--from {args.rev!r}: {e.reason} (in {root})") from None
        commits = [topic_new.ForkCommit(*c) for c in change.commits]
        if not commits:
            raise ConfigError(f"--from {args.rev!r}: no commit in that range")
        where = f"--from {args.rev}"
        diff = change.diff
        url = remote_url(root)
        shown = topic_new.without_credentials(url) if url else str(root)
        origin = f"{shown} {change.head}" if len(commits) == 1 else f"{shown} {args.rev}"
    else:
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
        commits = [topic_new.ForkCommit(topic_new.NO_SHA, author, date, subject, "")]
        where = str(path)
        origin = f"diff file {path.name}"
    series = topic_new.make_series(where, diff, commits, layout, matrix.series_layout)
    summary = topic_new.one_line(args.summary or commits[0].subject)
    tests = list(args.test) or topic_new.tests_of_change(series)
    if not tests:
        raise ConfigError(
            f"{where}: the change touches no test source (tests/test-*.cpp), so nothing would "
            f"judge it; name its test: --test 'test-NAME [ARGS]' (topic.yaml: tests: [test-NAME])"
        )
    for t in tests:
        try:
            TestSpec.parse(t)
        except ConfigError as e:
            raise ConfigError(f"--test: {e}") from None
    meta = topic_new.topic_yaml(
        summary, topic_new.one_line(args.origin or origin), list(args.after), today, tests
    )
    listed = read_optional(queue_file, "queue", root=matrix.queue_dir)
    d = topic_new.write_topic(matrix.queue_dir, args.name, series, meta, listed)
    load_queue(matrix)  # what was written reads back as a valid queue
    print(f"topic {args.name} (local): {d}")
    how = "as asked (--test)" if args.test else "from the test sources it touches"
    print(f"  judged by {', '.join(tests)} ({how}; topic.yaml `tests:`)")
    for p in series.patches:
        print(f"  {p.name}")
    print(
        f"  topic.yaml, cover.md; next: `ggml-patch status --topic {args.name}`, then "
        f"`ggml-patch matrix --topic {args.name}`"
    )
    return ExitCode.OK
