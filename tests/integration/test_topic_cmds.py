"""The queue's daily jobs as commands, in a copy of the project with real git: a fork's range by
two authors imported as one topic per commit (each its author, its whole message, `after:` where
it touches the earlier one's lines); move, drop, rename and retire per target keep a hand-written
`default:` and every comment of queue.yaml; bad input is one line, exit 2, nothing written."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_queue

from ..helpers.forks import ROOT, git
from ..helpers.tools import file_bytes, one_line_error, run_tool

OPT = "ggml/src/ggml-opt.cpp"
TEST = "tests/test-opt.cpp"
ALICE = "Alice Fork <alice@example.org>"
BOB = "Bob Fork <bob@example.org>"


def _commit(fork: Path, author: str, message: str, date: str) -> None:
    env = {**os.environ, "GIT_AUTHOR_DATE": date}
    name, email = author[:-1].split(" <")
    git(fork, "add", ".")
    identity = ["-c", f"user.name={name}", "-c", f"user.email={email}"]
    subprocess.run(
        ["git", *identity, "commit", "-q", f"--author={author}", "-m", message],
        cwd=fork,
        env=env,
        check=True,
    )


@pytest.fixture
def project(tmp_path):
    """A copy of the project whose queue.yaml has a hand-written `default:` and comments, and a
    fork whose last two commits (Alice's, then Bob's) each fix ggml-opt.cpp with a test; Bob's
    touches the lines Alice's changed."""
    for name in ("patches", "native_tests"):
        shutil.copytree(ROOT / name, tmp_path / "project" / name)
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "project" / "matrix.yaml")
    qfile = tmp_path / "project" / "patches" / "queue.yaml"
    first = load_queue(load_matrix(ROOT / "matrix.yaml")).names()[0]
    qfile.write_text(
        qfile.read_text() + f"# the maintainer's choice\ndefault: [{first}]  # kept\n# the end\n"
    )
    fork = tmp_path / "fork"
    (fork / "ggml" / "src").mkdir(parents=True)
    (fork / "tests").mkdir()
    (fork / OPT).write_text("".join(f"int f{i}(void) {{ return {i}; }}\n" for i in range(40)))
    (fork / TEST).write_text("int main(void) {\n    return 0;\n}\n")
    git(fork, "init", "-q", "-b", "master")
    git(fork, "remote", "add", "origin", "https://u:pa/ss@example.org/fork/llama.cpp.git?token=t0k")
    _commit(fork, ALICE, "base", "2026-11-01T10:00:00+00:00")
    text = (fork / OPT).read_text().replace("return 3;", "return 33;")
    (fork / OPT).write_text(text)
    (fork / TEST).write_text("int main(void) {\n    return f3() != 33;\n}\n")
    message = "ggml-opt : f3 returns 33\n\nAlice's reason.\n\ndiff --git a/evil b/evil\n"
    _commit(fork, ALICE, message, "2026-11-02T10:00:00+00:00")
    (fork / OPT).write_text(text.replace("return 4;", "return 44;"))
    (fork / TEST).write_text("int main(void) {\n    return f4() != 44;\n}\n")
    _commit(fork, BOB, "ggml-opt : f4 returns 44\n\nBob's reason.", "2026-11-03T10:00:00+00:00")
    return tmp_path / "project" / "matrix.yaml", fork


def _tool(matrix: Path, *args: str):
    cache = matrix.parent.parent / "cache"
    return run_tool("topic", *args, "--matrix", str(matrix), "--cache", str(cache))


def _ok(proc):
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return proc.stdout


def test_a_range_by_two_authors_becomes_two_topics(project):
    matrix, fork = project
    out = _ok(_tool(matrix, "import", "HEAD~2..HEAD", "--repo", str(fork)))
    queue = load_queue(load_matrix(matrix))
    shipped = load_queue(load_matrix(ROOT / "matrix.yaml")).names()
    alice, bob = "ggml-opt-f3-returns-33", "ggml-opt-f4-returns-44"
    assert queue.names() == [*shipped, alice, bob], out
    a, b = queue.topic(alice), queue.topic(bob)
    assert {p.author for p in a.series.patches} == {ALICE}
    assert {p.author for p in b.series.patches} == {BOB}
    assert "Nov 2026 10:00:00" in a.series.patches[0].header
    assert "Bob's reason." in b.series.patches[0].header
    # Bob's change touches the lines Alice's left: it follows hers
    assert b.meta.after == [alice] and a.meta.after == []
    # the origin: the remote without its credentials, and the commit (never the folder)
    sha = git(fork, "rev-parse", "HEAD~1").strip()
    assert a.meta.origin == f"https://example.org/fork/llama.cpp.git commit {sha}"
    folder = matrix.parent / "patches"
    every = b"".join(file_bytes(folder).values())
    assert b"pa/ss" not in every and b"t0k" not in every and str(fork).encode() not in every
    # the diff in Alice's message is her words, not a hunk: her series holds the tree diff only
    assert [f.path for p in a.series.patches for f in p.files] == [OPT, TEST]
    assert "\n diff --git a/evil b/evil" in a.series.patches[0].header
    # queue.yaml's hand-written default and comments are still there
    text = (folder / "queue.yaml").read_text()
    assert "# the maintainer's choice" in text and "# the end" in text and "# kept" in text
    assert list(queue.default) == [shipped[0]]
    # Alice's series, git am'd on its parent, gives her commit's tree
    git(fork, "checkout", "-q", "-b", "replay", "HEAD~2")
    git(fork, "am", "-q", *(str(folder / alice / p.name) for p in a.series.patches))
    assert git(fork, "rev-parse", "HEAD^{tree}") == git(fork, "rev-parse", "master~1^{tree}")


def test_squash_makes_one_topic_with_every_message_and_author(project):
    matrix, fork = project
    _ok(_tool(matrix, "import", "HEAD~2..HEAD", "--repo", str(fork), "--squash", "f3-f4"))
    topic = load_queue(load_matrix(matrix)).topic("f3-f4")
    fix = topic.series.patches[0].header
    assert "Alice's reason." in fix and "Bob's reason." in fix and f"Co-authored-by: {BOB}" in fix


def test_move_drop_rename_retire_keep_default_and_comments(project):
    matrix, _ = project
    folder = matrix.parent / "patches"
    names = load_queue(load_matrix(matrix)).names()
    first, last = names[0], names[-1]
    # the last topic moved before the one it does not follow, then back (after: is respected)
    queue = load_queue(load_matrix(matrix))
    free = next(n for n in reversed(names[:-1]) if n not in queue.topic(last).meta.after)
    at = names.index(free)
    _ok(_tool(matrix, "move", last, "--before", free))
    assert load_queue(load_matrix(matrix)).names() == names[:at] + [last] + names[at:-1]
    _ok(_tool(matrix, "move", last, "--after", names[-2]))
    assert load_queue(load_matrix(matrix)).names() == names
    _ok(_tool(matrix, "retire", first, "--target", "ggml-master", "--upstream", "0123abcd"))
    queue = load_queue(load_matrix(matrix))
    assert queue.topic(first).meta.retired == {"ggml-master": "0123abcd"}
    assert queue.topic(first).active  # still applied on every other target
    assert first not in [t.name for t in queue.chosen(target="ggml-master")]
    assert first in [t.name for t in queue.chosen(target="ggml")]
    _ok(_tool(matrix, "drop", names[1]))
    assert load_queue(load_matrix(matrix)).topic(names[1]).meta.state == "dropped"
    _ok(_tool(matrix, "rename", first, "renamed-first"))
    queue = load_queue(load_matrix(matrix))
    assert "renamed-first" in queue.names() and list(queue.default) == ["renamed-first"]
    assert (matrix.parent / "native_tests" / "renamed-first").is_dir() == (
        ROOT / "native_tests" / first
    ).is_dir()
    text = (folder / "queue.yaml").read_text()
    assert text.startswith((ROOT / "patches" / "queue.yaml").read_text().splitlines()[0])
    assert "# the maintainer's choice" in text and "# the end" in text and "# kept" in text
    meta = (folder / "renamed-first" / "topic.yaml").read_text()
    assert meta.startswith("# DEP-3's fields") and "retired:" in meta


@pytest.mark.parametrize(
    "args, expected",
    [
        (["new", "x", "--from", "HEAD", "--after", "{0}", "--after", "{0}"], "given twice"),
        (["new", "a" * 150, "--from", "HEAD"], "at most 100 characters"),
        (["move", "{0}", "--before", "{0}"], "cannot move before itself"),
        (["move", "{0}", "--before", "nope"], "unknown topic 'nope'"),
        (["move", "{0}"], "one of --before OTHER or --after OTHER"),
        (["retire", "{0}", "--target", "no-such-target"], "no-such-target"),
        (["retire", "{0}", "--upstream", "not a commit"], "--upstream: 'not a commit'"),
        (["rename", "{0}", "{1}"], "exists: the topic"),
        (["drop", "{0}", "--squash", "x"], "--squash: not an option of `topic drop`"),
        (["import", "HEAD~1"], "is not a range A..B"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(project, args, expected):
    matrix, fork = project
    names = load_queue(load_matrix(matrix)).names()
    before = file_bytes(matrix.parent)
    args = [a.format(*names) for a in args]
    repo = ["--repo", str(fork)] if args[0] in ("new", "import") else []
    line = one_line_error(_tool(matrix, *args, *repo))
    assert expected in line, line
    assert file_bytes(matrix.parent) == before


def test_a_symlink_in_the_change_is_refused(project):
    matrix, fork = project
    (fork / "tests" / "passwd").symlink_to("/etc/passwd")
    (fork / OPT).write_text((fork / OPT).read_text() + "int g(void) { return 0; }\n")
    _commit(fork, ALICE, "ggml-opt : g", "2026-11-04T10:00:00+00:00")
    before = file_bytes(matrix.parent)
    line = one_line_error(_tool(matrix, "import", "HEAD~1..HEAD", "--repo", str(fork)))
    assert "tests/passwd" in line and "a symlink" in line, line
    assert file_bytes(matrix.parent) == before


def test_the_checkouts_textconv_does_not_run(project, tmp_path):
    matrix, fork = project
    marker = tmp_path / "ran"
    (fork / ".gitattributes").write_text("*.cpp diff=evil\n")
    git(fork, "config", "diff.evil.textconv", f"sh -c 'touch {marker}; cat \"$1\"' -")
    git(fork, "config", "diff.external", f"sh -c 'touch {marker}'")
    _ok(_tool(matrix, "import", "HEAD~2..HEAD", "--repo", str(fork)))
    assert not marker.exists()


def test_no_write_goes_through_a_symlink(project, tmp_path):
    """A symlink where the tool used to write its temporary queue.yaml, or in a topic's folder,
    is never written through: the file it names stays as it was."""
    matrix, fork = project
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    folder = matrix.parent / "patches"
    (folder / ".queue.yaml.tmp").symlink_to(outside)
    _ok(_tool(matrix, "import", "HEAD~2..HEAD", "--repo", str(fork)))
    assert outside.read_text() == "mine\n"
    first = load_queue(load_matrix(matrix)).names()[0]
    (folder / first / "cover.md").unlink()
    (folder / first / "cover.md").symlink_to(outside)
    _ok(_tool(matrix, "drop", first))  # cover.md is not one of the files drop writes
    assert outside.read_text() == "mine\n"
    before = file_bytes(matrix.parent)
    (folder / first / "topic.yaml").rename(folder / first / "real.yaml")
    (folder / first / "topic.yaml").symlink_to(folder / first / "real.yaml")
    line = one_line_error(_tool(matrix, "rename", first, "other-name"))
    assert f"patches/{first}/" in line, line
    assert (folder / first / "real.yaml").read_bytes() == before[f"patches/{first}/topic.yaml"]
