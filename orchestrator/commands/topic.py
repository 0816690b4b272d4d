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
        "a test that judges it, e.g. 'test-backend-ops -o SOFT_MAX' (repeatable; "
        "default: inferred from the test files the change touches)",
        "LINE",
    )


def run(args, matrix, cache) -> ExitCode:
    import datetime
    from pathlib import Path

    from ..errors import ConfigError
    from ..model.layout import LAYOUTS
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
    tests = _tests(where, diff, args.test)
    summary = topic_new.one_line(args.summary or commits[0].subject)
    meta = topic_new.topic_yaml(
        summary, topic_new.one_line(args.origin or origin), list(args.after), today, tests.lines
    )
    listed = read_optional(queue_file, "queue", root=matrix.queue_dir)
    d = topic_new.write_topic(matrix.queue_dir, args.name, series, meta, listed)
    load_queue(matrix)  # what was written reads back as a valid queue
    print(f"topic {args.name} (local): {d}")
    for p in series.patches:
        print(f"  {p.name}")
    print(f"  {tests.explanation}")
    print(
        f"  topic.yaml, cover.md; next: `ggml-patch status --topic {args.name}`, then "
        f"`ggml-patch matrix --topic {args.name}`"
    )
    return ExitCode.OK


def _tests(where: str, diff: str, given: list[str]):
    """topic.yaml's `tests:`: the --test lines, else those the diff's test files imply."""
    from ..patchset.infer_tests import InferredTests, infer_tests, parse_test_line

    if not given:
        return infer_tests(where, diff)
    for i, line in enumerate(given):
        parse_test_line(f"--test[{i}]", line)
    shown = ", ".join(f"`{line}`" for line in given)
    return InferredTests(tuple(given), f"tests: {shown} (as --test gives them)")
