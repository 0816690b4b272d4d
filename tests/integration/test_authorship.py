"""The bundle's commits carry the contributor: --author, else git's user.name/user.email (from a
HOME of the test's own), refused in one line when neither; --assisted-by adds an Assisted-by
trailer, never Co-authored-by; the messages stay byte for byte; the result is am-able."""

import os
import subprocess
import sys

import pytest

from orchestrator.errors import ConfigError
from orchestrator.upstream import authorship as A
from orchestrator.upstream import bundle as B
from orchestrator.vcs.snapshots import FIXED_IDENTITY, SnapshotRepo, Worktree

from ..helpers.tools import git, run_tool

MESSAGES = [
    "ggml-opt : zero gradient accumulators each period\n\nThe accumulators are never zeroed.\n"
    "Second line.\n",
    # a body ending in a line that looks like "key: value" but is data, kept as it is
    "tests : add test-x\n\nWithout the fix it fails:\n\n"
    "  device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5\n",
]


def series_repo(tmp_path):
    repo = SnapshotRepo(tmp_path / "snapshots.git")
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "a.cpp").write_text("int a = 0;\n")
    base = repo.import_tree(tree, "refs/snapshots/t", "snapshot")
    wt = Worktree(repo, tmp_path / "wt")
    wt.ensure(base)
    for i, msg in enumerate(MESSAGES):
        (wt.path / "src" / "a.cpp").write_text(f"int a = {i + 1};\n")
        wt.git("commit", "-qa", "--cleanup=verbatim", "-m", msg, env=FIXED_IDENTITY)
    return repo, base, wt.head()


def raw_message(repo, sha) -> bytes:
    raw = subprocess.run(
        ["git", f"--git-dir={repo.path}", "cat-file", "commit", sha],
        capture_output=True,
        check=True,
    ).stdout
    return raw.partition(b"\n\n")[2]


def test_identity_and_trailer_land_in_the_am_able_series(tmp_path):
    repo, base, patched = series_repo(tmp_path)
    who = A.parse_author("Ada Lovelace <ada@example.org>")
    head = A.reauthor(str(repo.path), base, patched, who, "Claude Sonnet")
    assert repo.git("rev-parse", f"{head}^{{tree}}") == repo.git("rev-parse", f"{patched}^{{tree}}")
    patches = B.format_patch(repo, base, head)
    assert all(
        text.splitlines()[1] == "From: Ada Lovelace <ada@example.org>" for _, text in patches
    )
    assert all("Co-authored-by" not in text for _, text in patches)
    # a maintainer's plain `git am` on a fresh clone of the base
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--shared", "--no-checkout", str(repo.path), str(clone))
    git(clone, "checkout", "-q", "--detach", base)
    for name, text in patches:
        (tmp_path / name).write_text(text)
    git(clone, "am", "-q", *[str(tmp_path / n) for n, _ in patches])
    log = git(clone, "log", "--reverse", "--format=%an <%ae>%x00%B%x01", f"{base}..HEAD")
    entries = [e.strip("\n") for e in log.split("\x01") if e.strip()]
    for entry, original in zip(entries, MESSAGES, strict=True):
        author, message = entry.split("\x00")
        assert author == "Ada Lovelace <ada@example.org>"
        # the rest byte for byte
        assert message == original.rstrip("\n") + "\n\nAssisted-by: Claude Sonnet"
    assert git(clone, "rev-parse", "HEAD^{tree}").strip() == repo.git(
        "rev-parse", f"{patched}^{{tree}}"
    )


def test_without_an_assistant_the_messages_are_the_series_own_bytes(tmp_path):
    repo, base, patched = series_repo(tmp_path)
    head = A.reauthor(str(repo.path), base, patched, A.parse_author("A B <a@b.org>"), None)
    olds = repo.git("rev-list", "--reverse", f"{base}..{patched}").split()
    news = repo.git("rev-list", "--reverse", f"{base}..{head}").split()
    assert [raw_message(repo, s) for s in news] == [raw_message(repo, s) for s in olds]
    # deterministic: the same inputs give the same commits (the bundle is reproducible)
    assert A.reauthor(str(repo.path), base, patched, A.parse_author("A B <a@b.org>"), None) == head


def test_author_and_assistant_are_checked():
    assert (
        str(A.parse_author("  Ada Lovelace  <ada@example.org> "))
        == "Ada Lovelace <ada@example.org>"
    )
    for bad in ("Ada", "<ada@example.org>", "Ada <ada>", "Ada <a@b> <c@d>"):
        with pytest.raises(ConfigError, match='expected "Name <email>"'):
            A.parse_author(bad)
    assert A.check_assistant("Claude Sonnet") == "Claude Sonnet"
    for bad in ("two\nlines", "Co-authored-by: X", "", "caf\u00e9"):
        with pytest.raises(ConfigError, match="--assisted-by"):
            A.check_assistant(bad)


def test_git_config_is_the_fallback_and_neither_is_refused():
    assert A.resolve(None, ("Ada", "ada@example.org")) == A.Identity(
        "Ada", "ada@example.org", "git config"
    )
    assert A.resolve("B C <b@c.org>", ("Ada", "ada@example.org")).source == "--author"
    with pytest.raises(ConfigError, match="set git config user.name and user.email"):
        A.resolve(None, (None, None))
    with pytest.raises(ConfigError, match="set git config user.email"):
        A.resolve(None, ("Ada", None))


def _isolated_env(home) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITHUB_"))}
    return {
        **env,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GGML_PATCH_CACHE": str(home / "cache"),
    }


def test_from_git_config_reads_the_user_s_own_configuration(tmp_path, monkeypatch):
    for k, v in _isolated_env(tmp_path).items():
        monkeypatch.setenv(k, v)
    assert A.from_git_config(str(tmp_path)) == (None, None)
    (tmp_path / ".gitconfig").write_text(
        "[user]\n\tname = Grace Hopper\n\temail = grace@example.org\n"
    )
    assert A.from_git_config(str(tmp_path)) == ("Grace Hopper", "grace@example.org")


def test_bundle_without_any_identity_is_refused_in_one_line(tmp_path, repo_root):
    env = _isolated_env(tmp_path)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "bundle",
            "--matrix",
            str(repo_root / "matrix.yaml"),
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(repo_root)},
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "ggml-patch: error: no author for the bundle's commits: pass "
        '--author "Name <email>" or set git config user.name and user.email'
    )
    # before anything
    assert not (tmp_path / "cache").exists() and not (tmp_path / "results").exists()


def test_bundle_rejects_a_malformed_author(tmp_path, repo_root):
    proc = run_tool(
        "bundle",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--results",
        str(tmp_path / "r"),
        "--cache",
        str(tmp_path / "cache"),
        "--author",
        "nobody",
        cwd=tmp_path,
    )
    assert proc.returncode == 2 and "--author 'nobody': expected \"Name <email>\"" in proc.stderr
