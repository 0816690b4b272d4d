"""Snapshot repository and worktrees, with real git in temporary directories."""

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import SeriesDoesNotApply
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree

from ..helpers.tools import git


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


BASE = {
    "src/opt.cpp": "".join(f"line {i}\n" for i in range(1, 21)),
    "tests/CMakeLists.txt": "add(test-opt)\n",
}


def _patch_for(tmp: Path) -> Path:
    """A git format-patch of a change to BASE, made with plain git."""
    work = _tree(tmp / "mk", BASE)
    git(work, "init", "-q")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "base")
    (work / "src/opt.cpp").write_text(BASE["src/opt.cpp"].replace("line 10\n", "line 10\nfixed\n"))
    (work / "tests/new.cpp").write_text("int main() {}\n")
    git(work, "add", "-A")
    git(work, "commit", "-qm", "ggml-opt : fix")
    git(work, "format-patch", "-q", "-1", "-o", str(tmp / "series"))
    return next((tmp / "series").glob("*.patch"))


def test_import_is_deterministic_across_repositories(tmp_path):
    tree = _tree(tmp_path / "snap", BASE)
    (tree / ".git").write_text("gitdir: ../../.git/modules/x\n")  # like a vendored submodule
    a = SnapshotRepo(tmp_path / "a.git").import_tree(tree, "refs/snapshots/x", "snapshot x")
    b = SnapshotRepo(tmp_path / "b.git").import_tree(tree, "refs/snapshots/x", "snapshot x")
    assert a == b
    repo = SnapshotRepo(tmp_path / "a.git")
    assert repo.ref_commit("refs/snapshots/x") == a
    assert repo.ref_commit("refs/snapshots/missing") is None
    assert repo.read_blob(a, "src/opt.cpp") == BASE["src/opt.cpp"]
    assert repo.read_blob(a, ".git") is None
    assert repo.read_blob(a, "nope") is None


def test_worktree_apply_control_restore(tmp_path):
    repo = SnapshotRepo(tmp_path / "s.git")
    base = repo.import_tree(_tree(tmp_path / "snap", BASE), "refs/snapshots/x", "x")
    patch = _patch_for(tmp_path)
    wt = Worktree(repo, tmp_path / "cell" / "src")
    wt.ensure(base)
    head = wt.am([patch])
    assert head != base and wt.is_clean()
    assert "fixed" in (wt.path / "src/opt.cpp").read_text()

    # the same inputs give the same commit in a second worktree (results can be cached by it)
    wt2 = Worktree(repo, tmp_path / "cell2" / "src")
    wt2.ensure(base)
    assert wt2.am([patch]) == head

    wt.restore_from(base, ["src/opt.cpp"])  # the fix's files as the base has them
    assert (wt.path / "src/opt.cpp").read_text() == BASE["src/opt.cpp"]
    assert (wt.path / "tests/new.cpp").exists()  # the test is kept
    wt.restore_from(head, ["src/opt.cpp"])
    assert wt.is_clean() and wt.head() == head


def test_ensure_repairs_a_dirty_or_moved_worktree(tmp_path):
    repo = SnapshotRepo(tmp_path / "s.git")
    base = repo.import_tree(_tree(tmp_path / "snap", BASE), "refs/snapshots/x", "x")
    wt = Worktree(repo, tmp_path / "src")
    wt.ensure(base)
    (wt.path / "src/opt.cpp").write_text("garbage\n")
    (wt.path / "stray.o").write_text("x")
    wt.ensure(base)
    assert wt.is_clean() and wt.head() == base
    assert (wt.path / "src/opt.cpp").read_text() == BASE["src/opt.cpp"]


def test_am_failure_is_reported_and_leaves_no_am_in_progress(tmp_path):
    repo = SnapshotRepo(tmp_path / "s.git")
    other = {"src/opt.cpp": "something else entirely\n", "tests/CMakeLists.txt": "x\n"}
    base = repo.import_tree(_tree(tmp_path / "snap", other), "refs/snapshots/y", "y")
    patch = _patch_for(tmp_path)
    wt = Worktree(repo, tmp_path / "src")
    wt.ensure(base)
    with pytest.raises(SeriesDoesNotApply, match="src/opt.cpp"):
        wt.am([patch])
    assert wt.head() == base
    rebase_apply = Path(
        git(wt.path, "rev-parse", "--path-format=absolute", "--git-path", "rebase-apply").strip()
    )
    assert not rebase_apply.exists(), "git am was left in progress"
    wt.ensure(base)  # usable again
    assert wt.is_clean()


def test_snapshot_repositories_copied_over_one_another_merge(tmp_path):
    """The matrix workflow's hand-over: each pinned target's leg saves its snapshots.git and the
    aggregate restores them all into one path. Objects and refs are named by content and by source,
    so the merged repository has both snapshots, and the legs' stale worktrees are pruned on use.
    gc runs in the foreground there (a detached one could still be packing while a leg saves)."""
    legs = []
    for name, files in (("a", BASE), ("b", {**BASE, "src/opt.cpp": "other\n"})):
        repo = SnapshotRepo(tmp_path / f"{name}.git")
        commit = repo.import_tree(
            _tree(tmp_path / f"src-{name}", files), f"refs/snapshots/{name}", f"snapshot {name}"
        )
        Worktree(repo, tmp_path / f"leg-{name}" / "src").ensure(commit)
        assert (
            subprocess.run(
                ["git", "--git-dir", str(repo.path), "config", "gc.autoDetach"],
                capture_output=True,
                text=True,
            ).stdout.strip()
            == "false"
        )
        legs.append((name, commit, files))
    for name, _, _ in legs:
        shutil.copytree(tmp_path / f"{name}.git", tmp_path / "agg.git", dirs_exist_ok=True)
        shutil.rmtree(tmp_path / f"leg-{name}")  # another machine's worktrees
    merged = SnapshotRepo(tmp_path / "agg.git")
    for name, commit, files in legs:
        assert merged.ref_commit(f"refs/snapshots/{name}") == commit
        wt = Worktree(merged, tmp_path / "bundle" / name)
        wt.ensure(commit)
        assert (wt.path / "src/opt.cpp").read_text() == files["src/opt.cpp"] and wt.is_clean()
