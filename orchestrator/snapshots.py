"""The snapshot repository: every fetched source as a base commit, and worktrees on them.

Base commits are deterministic (fixed identity and dates), so the same source gives the
same commit on every machine, and so does the series applied on top of it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Optional

import filelock
import git

from .errors import SeriesDoesNotApply, ToolError

FIXED_IDENTITY = {
    "GIT_AUTHOR_NAME": "ggml-patch", "GIT_AUTHOR_EMAIL": "ggml-patch@localhost",
    "GIT_COMMITTER_NAME": "ggml-patch", "GIT_COMMITTER_EMAIL": "ggml-patch@localhost",
    "GIT_AUTHOR_DATE": "@946684800 +0000", "GIT_COMMITTER_DATE": "@946684800 +0000",
}
# No user or system git configuration leaks in (hooks, autocrlf, signing...).
# git am, its --abort and checkout write reflogs, which need a committer identity.
_ISOLATED = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
             "GIT_COMMITTER_NAME": "ggml-patch", "GIT_COMMITTER_EMAIL": "ggml-patch@localhost"}


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(_ISOLATED)
    env.update(extra)
    return env


class SnapshotRepo:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one lock for repository-wide changes (init, worktree add/prune): concurrent runs share it
        self.lock = filelock.FileLock(str(self.path) + ".lock")
        with self.lock:
            if not (self.path / "HEAD").exists():
                self.path.mkdir(parents=True, exist_ok=True)
                git.Repo.init(self.path, bare=True)
        self.repo = git.Repo(self.path)

    def git(self, *args: str, env: Optional[dict] = None, cwd: Optional[Path] = None) -> str:
        where = ["-C", str(cwd)] if cwd else []
        cmd = ["git", *where, f"--git-dir={self.path}", *args]
        return self.repo.git.execute(cmd, env=_env(**(env or {})))

    def ref_commit(self, ref: str) -> Optional[str]:
        try:
            return self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        except git.GitCommandError:
            return None

    def import_tree(self, directory: Path, ref: str, message: str) -> str:
        """Commit the files under `directory` (none of its own git metadata) as `ref`."""
        with tempfile.TemporaryDirectory(prefix="index-", dir=self.path) as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": str(directory)}
            self.git("add", "--all", "--force", "--", ".", env=env, cwd=directory)
            tree = self.git("write-tree", env=env)
        commit = self.git("commit-tree", tree, "-m", message, env=FIXED_IDENTITY)
        self.git("update-ref", ref, commit)
        return commit

    def read_blob(self, commit: str, path: str) -> Optional[str]:
        """A file's exact text at a commit (None when absent)."""
        try:
            data = self.repo.git.execute(["git", f"--git-dir={self.path}", "cat-file", "blob", f"{commit}:{path}"],
                                         env=_env(), strip_newline_in_stdout=False)
        except git.GitCommandError:
            return None
        return data


class Worktree:
    """A worktree of the snapshot repository, owned by one cell."""

    def __init__(self, repo: SnapshotRepo, path: Path):
        self.repo = repo
        self.path = Path(path)

    def git(self, *args: str, env: Optional[dict] = None) -> str:
        return self.repo.repo.git.execute(["git", "-C", str(self.path), *args], env=_env(**(env or {})))

    def head(self) -> Optional[str]:
        try:
            return self.git("rev-parse", "HEAD")
        except git.GitCommandError:
            return None

    def is_clean(self) -> bool:
        return self.git("status", "--porcelain", "--untracked-files=all") == ""

    def ensure(self, commit: str) -> None:
        """Exist and sit on `commit` exactly, whatever an interrupted run left behind."""
        if (self.path / ".git").exists():
            try:
                self.git("am", "--abort")
            except git.GitCommandError:
                pass  # no am in progress: the normal case
            if self.head() == commit and self.is_clean():
                return  # nothing to do: keeps file times, so nothing is recompiled
            self.git("checkout", "--force", "--detach", commit)
            self.git("clean", "-fdxq")
            return
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.repo.lock:  # prune must not race another run's add
            self.repo.git("worktree", "prune")
            self.repo.git("worktree", "add", "--force", "--detach", str(self.path), commit)

    def am(self, patch_files: list[Path]) -> str:
        """Apply the series as commits; deterministic, so the same inputs give the same HEAD."""
        try:
            self.git("am", "--committer-date-is-author-date", "--keep-cr", *map(str, patch_files))
        except git.GitCommandError as e:
            text = (e.stderr or "") + "\n" + (e.stdout or "")
            which = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("Patch failed at")]
            detail = _first_error(e) + (f" ({which[0]})" if which else "")
            try:
                self.git("am", "--abort")
            except git.GitCommandError:
                pass  # am may have stopped before creating its state
            raise SeriesDoesNotApply(detail) from None
        return self.head() or ""

    def diff(self, base: str, paths: list[str]) -> str:
        return self.git("diff", "--full-index", base, "HEAD", "--", *paths) + "\n"

    def apply_reverse(self, diff_text: str) -> None:
        with tempfile.NamedTemporaryFile("w", suffix=".diff", delete=False) as f:
            f.write(diff_text)
        try:
            self.git("apply", "-R", f.name)
        except git.GitCommandError as e:
            raise ToolError(f"reverting the fix in {self.path}: {_first_error(e)}") from None
        finally:
            os.unlink(f.name)

    def restore(self, paths: list[str]) -> None:
        self.git("checkout", "HEAD", "--", *paths)


def _first_error(e: git.GitCommandError) -> str:
    text = (e.stderr or "") + "\n" + (e.stdout or "")
    lines = [ln.strip().strip("'") for ln in text.splitlines() if ln.strip()]
    for prefix in ("error: patch failed:", "error:", "Patch failed at", "fatal:"):
        for ln in lines:
            ln = ln.removeprefix("stderr: ").removeprefix("stdout: ").strip("'").strip()
            if ln.startswith(prefix):
                return ln
    return lines[-1] if lines else str(e)
