"""`topic edit NAME` / `topic save NAME` with real git, in a project of its own: a small fork
pinned by commit (a local git source, no network) and a queue of two topics made from it by
`git format-patch`, queue.yaml and topic.yaml with hand-written comments. Edit the second topic,
amend its source commit's message and a line, save: its patch shows the change, every other
file keeps its bytes, topic.yaml its keys and comments; bad states are one line, nothing written."""

import json
import shlex
import subprocess
from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_queue

from ..helpers.forks import GIT_ENV, git, write_matrix
from ..helpers.tools import file_bytes, one_line_error, run_tool

OPT = "ggml/src/ggml-opt.cpp"
TEST = "tests/test-opt.cpp"
STABLE = ("--zero-commit", "--full-index", "--no-signature", "--no-stat", "--no-color")
QUEUE = (
    "# the maintainer's queue\ntopics:\n  - first  # the older fix\n  - second\n"
    "default: [first, second]  # both\n# the end\n"
)
TOPIC = (
    "# hand-written\nsummary: {summary}\norigin: https://example.org/fork commit 0123abc\n"
    "state: local  # kept\n{after}last_update: 2026-11-01\n# the tests that judge it\n"
    "tests:\n  - test-opt\n"
)


def _fork(path: Path) -> tuple[Path, str, list[str]]:
    """A fork: a base, then two topics of two commits each (the source change, then its test)."""
    (path / "ggml" / "src").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / OPT).write_text("".join(f"int f{i}(void) {{ return {i}; }}\n" for i in range(40)))
    filler = "".join(f"// line {i}\n" for i in range(10))  # the two topics' hunks stay apart
    (path / TEST).write_text("int main(void) {\n    return 0;\n}\n" + filler)
    git(path, "init", "-q", "-b", "master")
    git(path, "add", ".")
    git(path, "commit", "-qm", "base")
    base = git(path, "rev-parse", "HEAD").strip()
    for i, n in ((3, 33), (30, 3030)):
        opt = (path / OPT).read_text().replace(f"return {i};", f"return {n};")
        (path / OPT).write_text(opt)
        git(path, "commit", "-qam", f"ggml-opt : f{i} returns {n}\n\nWhy f{i} changed.")
        test = (path / TEST).read_text()
        if i == 3:  # in main; the second topic's case at the end (independent of the first)
            test = test.replace("    return 0;", f"    f{i}();\n    return 0;")
        else:
            test += f"void t{i}(void) {{ f{i}(); }}\n"
        (path / TEST).write_text(test)
        git(path, "commit", "-qam", f"tests : call f{i}")
    heads = [git(path, "rev-parse", f"HEAD~{k}").strip() for k in (4, 2, 0)]
    return path, base, heads


@pytest.fixture
def project(tmp_path):
    fork, base, (b0, b1, b2) = _fork(tmp_path / "fork")
    proj = tmp_path / "project"
    series = proj / "series"
    for name, rng, summary in (("first", f"{b0}..{b1}", "f3"), ("second", f"{b1}..{b2}", "f30")):
        (series / name).mkdir(parents=True)
        git(fork, "format-patch", *STABLE, "-q", "-o", str(series / name), rng)
        after = "after: [first]  # its base\n" if name == "second" else ""
        (series / name / "topic.yaml").write_text(TOPIC.format(summary=summary, after=after))
    (series / "queue.yaml").write_text(QUEUE)
    target = f"layout: llama.cpp\nsource: {{kind: git, url: {fork}, ref: {base}}}\n"
    matrix = write_matrix(proj, {"fork": target}, series_dir="series")
    return matrix, tmp_path / "cache"


def _tool(matrix: Path, cache: Path, *args: str):
    return run_tool("topic", *args, "--matrix", str(matrix), "--cache", str(cache))


def _ok(proc) -> str:
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    return proc.stdout


def _wgit(wt: Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=wt, capture_output=True, text=True, env={**GIT_ENV, "PATH": "/usr/bin"}
    )
    assert proc.returncode == 0, (args, proc.stderr)
    return proc.stdout


def _edit(matrix: Path, cache: Path, name: str, *more: str) -> Path:
    out = _ok(_tool(matrix, cache, "edit", name, *more))
    wt = Path(out.splitlines()[0])
    assert wt.is_dir() and f"ggml-patch topic save {name}" in out, out
    return wt


def test_edit_amend_save_writes_the_change_and_keeps_every_other_key(project):
    matrix, cache = project
    series = matrix.parent / "series"
    before = file_bytes(series)
    wt = _edit(matrix, cache, "second")
    # the topic it follows (after:) applied under it, then its own two commits
    log = _wgit(wt, "log", "--format=%s", "-5").splitlines()
    assert log[:4] == ["tests : call f30", "ggml-opt : f30 returns 3030", "tests : call f3"] + [
        "ggml-opt : f3 returns 33"
    ]
    # saved at once: the same bytes (the writer is the one the series was written with)
    out = _ok(_tool(matrix, cache, "save", "second"))
    assert "no byte changed" in out and file_bytes(series) == before, out
    # amend the topic's source commit (its message and a line), then replay its test on top
    test_commit = _wgit(wt, "rev-parse", "HEAD").strip()
    _wgit(wt, "checkout", "-q", "--detach", "HEAD~1")
    text = (wt / OPT).read_text().replace("return 3030;", "return 3031;")
    (wt / OPT).write_text(text)
    _wgit(wt, "commit", "-qa", "--amend", "-m", "ggml-opt : f30 returns 3031\n\nAmended why.")
    _wgit(wt, "cherry-pick", test_commit)
    out = _ok(_tool(matrix, cache, "save", "second"))
    assert "wrote 0001-" in out, out
    after = file_bytes(series)
    changed = sorted(k for k in after if after[k] != before.get(k))
    new_fix = "second/0001-ggml-opt-f30-returns-3031.patch"
    assert changed == [new_fix, "second/topic.yaml"], changed
    assert "second/0001-ggml-opt-f30-returns-3030.patch" not in after  # renamed, as format-patch
    fix = after[new_fix].decode()
    assert "Subject: [PATCH 1/2] ggml-opt : f30 returns 3031" in fix and "Amended why." in fix
    assert "-int f30(void) { return 30; }\n+int f30(void) { return 3031; }" in fix
    # every other file keeps its bytes; topic.yaml its keys and comments (last_update is today's)
    for k in before:
        if not k.startswith("second/"):
            assert after[k] == before[k], k
    assert after["second/0002-tests-call-f30.patch"] == before["second/0002-tests-call-f30.patch"]
    meta = after["second/topic.yaml"].decode()
    assert meta.startswith("# hand-written\nsummary: f30\n") and "state: local  # kept" in meta
    assert "# the tests that judge it\ntests:\n  - test-opt\n" in meta
    assert "after: [first]  # its base\n" in meta
    assert "last_update: 2026-11-01" not in meta
    queue = load_queue(load_matrix(matrix))
    assert queue.names() == ["first", "second"] and list(queue.default) == ["first", "second"]
    assert [p.subject for p in queue.topic("second").series.patches][0].endswith("3031")
    # the saved series is what the worktree holds: git am'd on the first topic, the same tree
    made = json.loads((cache / "edit" / "second.json").read_text())
    check = matrix.parent / "replay"
    _wgit(wt, "worktree", "add", "-q", "--detach", str(check), made["start"])
    _wgit(check, "am", "-q", *sorted(str(p) for p in (series / "second").glob("*.patch")))
    assert _wgit(check, "rev-parse", "HEAD^{tree}") == _wgit(wt, "rev-parse", "HEAD^{tree}")


def test_bad_states_are_refused_in_one_line_writing_nothing(project):
    matrix, cache = project
    series = matrix.parent / "series"
    before = file_bytes(series)
    assert "no edit worktree of 'second'" in one_line_error(_tool(matrix, cache, "save", "second"))
    # a folder the tool did not make is never written into
    mine = matrix.parent / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine")
    line = one_line_error(_tool(matrix, cache, "edit", "second", "--dir", str(mine)))
    assert "not an edit worktree the tool made" in line
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt"]
    wt = _edit(matrix, cache, "second", "--dir", str(matrix.parent / "edit-here"))
    assert wt == matrix.parent / "edit-here"
    assert _edit(matrix, cache, "second") == wt  # the same one, named again, never reset
    (wt / OPT).write_text("changed\n")
    line = one_line_error(_tool(matrix, cache, "save", "second"))
    assert "uncommitted changes" in line and "nothing written" in line
    _wgit(wt, "checkout", "--", ".")
    _wgit(wt, "commit", "-q", "--allow-empty", "-m", "empty")
    line = one_line_error(_tool(matrix, cache, "save", "second"))
    assert "do not apply as a series" in line and "nothing written" in line
    _wgit(wt, "reset", "-q", "--hard", "HEAD~1")
    assert file_bytes(series) == before
    # the topic it follows dropped: stale, with the command that discards it
    _ok(_tool(matrix, cache, "drop", "first"))
    dropped = file_bytes(series)
    for action in ("edit", "save"):
        line = one_line_error(_tool(matrix, cache, action, "second"))
        assert "a stale edit worktree of 'second'" in line and "worktree remove" in line, line
    assert file_bytes(series) == dropped
    discard = line.split("discard it: ", 1)[1]
    subprocess.run(shlex.split(discard), check=True, capture_output=True)
    assert not wt.exists()
    fresh = _edit(matrix, cache, "second")
    assert _wgit(fresh, "log", "--format=%s", "-3").splitlines()[2] == "base"
