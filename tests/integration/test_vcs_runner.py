"""The one git layer (vcs/runner.py): git's own error line, timeouts, the isolated environment,
refs from input after --end-of-options, and one `git am` flag set (CRs kept) at every call site."""

import os
import subprocess
import time
from pathlib import Path

import pytest

from orchestrator.errors import SeriesDoesNotApply, ToolError
from orchestrator.upstream import github
from orchestrator.vcs.runner import AM_FLAGS, GitError, error_line, git, isolated_env, succeeds
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree

from ..helpers.tools import git as plain_git


@pytest.mark.parametrize(
    "text, prefer, expected",
    [
        ("hint: x\nfatal: not a git repository\n", (), "fatal: not a git repository"),
        (
            "error: patch failed: a.c:3\nerror: a.c: patch does "
            "not apply\nPatch failed at 0001 x\n",
            (),
            "error: patch failed: a.c:3",
        ),
        (
            "To x\n ! [rejected]  HEAD -> b (non-fast-forward)\n"
            "error: failed to push some refs to 'x'\n",
            (),
            "error: failed to push some refs to 'x'",
        ),
        (
            "Applying: x\nerror: sha1 information is lacking\n"
            "CONFLICT (content): Merge conflict in a.c\n",
            ("CONFLICT (",),
            "CONFLICT (content): Merge conflict in a.c",
        ),
        ("just a line\nthe last line\n", (), "the last line"),
        ("", (), ""),
    ],
)
def test_error_line_is_gits_own_line(text, prefer, expected):
    assert error_line(text, prefer) == expected


def test_a_failure_is_a_git_error_with_gits_line_and_no_command_line(tmp_path):
    secret_url = "https://user:hunter2@example.invalid/x.git"
    with pytest.raises(GitError) as e:
        git("rev-parse", "--verify", "--end-of-options", secret_url, cwd=tmp_path)
    assert isinstance(e.value, ToolError)
    assert e.value.line.startswith("fatal: not a git repository")
    assert str(e.value) == f"git rev-parse: {e.value.line}"
    assert e.value.reason.startswith("not a git repository")
    assert "hunter2" not in str(e.value)
    assert not succeeds("rev-parse", "HEAD", cwd=tmp_path)


def test_a_git_that_hangs_is_killed_at_its_timeout(tmp_path):
    plain_git(tmp_path, "init", "-q")
    t0 = time.monotonic()
    with pytest.raises(GitError) as e:  # ssh "connects" and then never answers
        git(
            "fetch",
            "--end-of-options",
            "ssh://example.invalid/x.git",
            cwd=tmp_path,
            timeout=1,
            env={"GIT_SSH_COMMAND": "sh -c 'sleep 30' --"},
        )
    assert time.monotonic() - t0 < 15
    assert e.value.timed_out and str(e.value) == "git fetch: timed out after 1 s"


def test_user_and_system_configuration_do_not_leak_in(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text("[user]\n\tname = Someone Else\n[alias]\n\tst = status\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    seen = subprocess.run(
        ["git", "config", "--get", "user.name"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
    )
    assert seen.stdout.strip() == "Someone Else"  # what a plain git would use
    assert not succeeds("config", "--get", "user.name", cwd=tmp_path)
    env = isolated_env()
    assert env["GIT_CONFIG_GLOBAL"] == os.devnull and env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_TERMINAL_PROMPT"] == "0"


def test_refs_from_input_are_never_options(tmp_path):
    repo = SnapshotRepo(tmp_path / "s.git")
    out = tmp_path / "written-by-an-option"
    assert repo.ref_commit(f"--output={out}") is None
    assert repo.read_blob(f"--output={out}", "x") is None
    assert not repo.has_object(f"--output={out}")
    assert not out.exists()


# ---- one git am flag set: CRs in a patch are kept at every call site ----


def _crlf_series(tmp_path: Path) -> tuple[SnapshotRepo, str, Path]:
    """A snapshot whose file has CRLF line ends, and a format-patch that changes one of them."""
    work = tmp_path / "mk"
    work.mkdir()
    plain_git(work, "init", "-q")
    (work / "a.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    plain_git(work, "add", "-A")
    plain_git(work, "commit", "-qm", "base")
    (work / "a.txt").write_bytes(b"one\r\nTWO\r\nthree\r\n")
    plain_git(work, "commit", "-qam", "change two")
    plain_git(work, "format-patch", "-q", "-1", "-o", str(tmp_path / "series"))
    repo = SnapshotRepo(tmp_path / "s.git")
    snap = tmp_path / "snap"
    snap.mkdir()
    (snap / "a.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    base = repo.import_tree(snap, "refs/snapshots/crlf", "crlf")
    return repo, base, next((tmp_path / "series").glob("*.patch"))


def test_am_keeps_crs_in_the_matrix_and_bundle_worktrees(tmp_path):
    assert "--keep-cr" in AM_FLAGS
    repo, base, patch = _crlf_series(tmp_path)
    wt = Worktree(repo, tmp_path / "wt")
    wt.ensure(base)
    wt.am([patch])
    assert (wt.path / "a.txt").read_bytes() == b"one\r\nTWO\r\nthree\r\n"


def test_am_keeps_crs_in_the_pull_request_branch(tmp_path):
    repo, base, patch = _crlf_series(tmp_path)
    work = github.work_repo(tmp_path / "pr", repo.path)
    branch = github.series_branch(work, base, (patch,))
    assert git("show", f"{branch.head}:a.txt", cwd=work, strip=False) == "one\r\nTWO\r\nthree\r\n"


def test_am_failure_names_the_file_and_the_patch(tmp_path):
    repo, _, patch = _crlf_series(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.txt").write_text("unrelated\n")
    wt = Worktree(repo, tmp_path / "wt")
    wt.ensure(repo.import_tree(other, "refs/snapshots/other", "other"))
    with pytest.raises(SeriesDoesNotApply) as e:
        wt.am([patch])
    assert "a.txt" in str(e.value) and "Patch failed at 0001 change two" in str(e.value)
