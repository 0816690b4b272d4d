"""The snapshot repository: every fetched source as a base commit, and
worktrees on them. Base commits are deterministic (fixed identity and dates):
the same source gives the same commit everywhere."""

from __future__ import annotations

import shlex
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

import filelock

from ..errors import SeriesDoesNotApply, ToolError
from .runner import (
    AM_FLAGS,
    FIXED_IDENTITY,
    GitError,
    error_line,
    git,
    git_bytes,
    init_bare,
    succeeds,
)
from .workrepo import abort_am

__all__ = ["FIXED_IDENTITY", "SnapshotRepo", "Worktree"]


class SnapshotRepo:
    def __init__(self, path: Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one lock for repository-wide changes (init, worktree add/prune): concurrent runs share it
        self.lock = filelock.FileLock(str(self.path) + ".lock")
        with self.lock:
            new = not (self.path / "HEAD").exists()
            init_bare(self.path)
            # gc in the foreground: a CI leg hands this repository on (copied) right after its run
            if new:
                self.git("config", "gc.autoDetach", "false")

    def git(self, *args: str, **options: Any) -> str:
        return git(*args, git_dir=self.path, **options)

    def rev(self, rev: str) -> Optional[str]:
        """The object id `rev` names (REF^{commit}, COMMIT:PATH, ...), or None."""
        try:
            return self.git("rev-parse", "--verify", "--quiet", "--end-of-options", rev)
        except GitError:
            return None

    def ref_commit(self, ref: str) -> Optional[str]:
        """The commit `ref` names (a ref, a commit id, any revision), or None."""
        return self.rev(f"{ref}^{{commit}}")

    def import_tree(self, directory: Path, ref: str, message: str) -> str:
        """Commit the files under `directory` (none of its own git metadata) as `ref`."""
        with tempfile.TemporaryDirectory(prefix="index-", dir=self.path) as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": str(directory)}
            self.git("add", "--all", "--force", "--", ".", env=env, cwd=directory)
            tree = self.git("write-tree", env=env)
        return self.commit_tree(tree, ref, message)

    def commit_tree(self, tree: str, ref: str, message: str) -> str:
        """A deterministic parentless commit of `tree`
        (fixed identity and date), stored as `ref`."""
        commit = self.git(
            "commit-tree", "-m", message, "--end-of-options", tree, env=FIXED_IDENTITY
        )
        self.git("update-ref", "--end-of-options", ref, commit)
        return commit

    def has_object(self, sha: str) -> bool:
        return succeeds("cat-file", "-e", "--end-of-options", sha, git_dir=self.path)

    def object_id(self, rev: str, path: str) -> Optional[str]:
        """The id of the blob or tree at `path` in a commit or tree (None when absent)."""
        return self.rev(f"{rev}:{path}")

    def tree_of(self, rev: str, subdir: str = "") -> Optional[str]:
        """The tree id of a commit, or of one of its
        directories (None when absent or not a tree)."""
        if subdir:
            oid = self.object_id(rev, subdir)
            return oid if oid and self.git("cat-file", "-t", oid) == "tree" else None
        return self.rev(f"{rev}^{{tree}}")

    def names_in(self, rev: str, path: str) -> list[str]:
        """The names in one directory of a commit (none when it is absent)."""
        tree = self.tree_of(rev, path)
        return self.git("ls-tree", "--name-only", tree).splitlines() if tree else []

    def tree_from_entries(self, entries: list[tuple[str, str, str]]) -> str:
        data = "".join(f"{mode} {sha}\t{path}\0" for mode, sha, path in entries).encode(
            "utf-8", "surrogateescape"
        )
        with tempfile.TemporaryDirectory(prefix="index-", dir=self.path) as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.git("update-index", "-z", "--add", "--index-info", input=data, env=env)
            return self.git("write-tree", env=env)

    def tree_with_subtree(self, tree: str, path: str, subtree: str) -> str:
        """`tree` with the entry at `path` (e.g. a submodule's
        gitlink) replaced by directory `subtree`."""
        with tempfile.TemporaryDirectory(prefix="index-", dir=self.path) as tmp:
            # read-tree --prefix insists on a work tree; an empty one, never written (no -u)
            (Path(tmp) / "empty").mkdir()
            env = {
                "GIT_INDEX_FILE": str(Path(tmp) / "index"),
                "GIT_WORK_TREE": str(Path(tmp) / "empty"),
            }
            self.git("read-tree", "--end-of-options", tree, env=env)
            self.git(
                "update-index",
                "-z",
                "--index-info",
                input=f"0 {'0' * 40}\t{path}\0".encode(),
                env=env,
            )
            self.git(
                "read-tree", f"--prefix={path.strip('/')}/", "--end-of-options", subtree, env=env
            )
            return self.git("write-tree", env=env)

    def hash_blobs(self, directory: Path, paths: list[str]) -> list[str]:
        """Blob ids of files under `directory`, written into
        this repository; the files are only read."""
        if not paths:
            return []
        listing = "\n".join(paths).encode("utf-8", "surrogateescape") + b"\n"
        try:
            return self.git(
                "hash-object", "-w", "--no-filters", "--stdin-paths", input=listing, cwd=directory
            ).split()
        except GitError as e:
            raise ToolError(f"git hash-object in {self.path}: {e.line}") from None

    def hash_data(self, data: bytes) -> str:
        return self.git("hash-object", "-w", "--stdin", input=data).strip()

    def fetch(self, source: str, refspec: str, timeout: Optional[float] = None) -> None:
        """Copy a ref and its history from another
        repository (a mirror in the cache) into this one."""
        self.git(
            "fetch", "--quiet", "--no-tags", "--end-of-options", source, refspec, timeout=timeout
        )

    def remove_worktree(self, path: Path) -> None:
        with self.lock:  # like add and prune: never while another run changes the worktree list
            if Path(path).exists():
                self.git("worktree", "remove", "--force", "--force", "--end-of-options", str(path))
            self.git("worktree", "prune")

    def remove_worktree_line(self, path: Path) -> str:
        """The command a person runs to discard a worktree the tool keeps (what remove_worktree
        runs), as one shell line."""
        argv = ["git", f"--git-dir={self.path}", "worktree", "remove", "--force", "--force"]
        return shlex.join([*argv, str(path)])

    def blob_size(self, commit: str, path: str) -> Optional[int]:
        """A file's size in bytes at a commit (None when absent or not a file)."""
        try:
            is_blob = self.git("cat-file", "-t", "--end-of-options", f"{commit}:{path}") == "blob"
            return (
                int(self.git("cat-file", "-s", "--end-of-options", f"{commit}:{path}"))
                if is_blob
                else None
            )
        except (GitError, ValueError):
            return None

    def read_blob(self, commit: str, path: str) -> Optional[str]:
        """A file's exact text at a commit (None when absent)."""
        data = self.read_blob_bytes(commit, path)
        return None if data is None else data.decode("utf-8", "surrogateescape")

    def read_blob_bytes(self, commit: str, path: str) -> Optional[bytes]:
        """A file's exact bytes at a commit (None when absent)."""
        try:
            return git_bytes(
                "cat-file",
                "blob",
                "--end-of-options",
                f"{commit}:{path}",
                git_dir=self.path,
                strip=False,
            )
        except GitError:
            return None

    def message(self, commit: str) -> str:
        return self.git("log", "-1", "--format=%B", "--end-of-options", commit)

    def tree_entry(self, commit: str, path: str) -> Optional[tuple[str, str, str]]:
        """(mode, type, object id) of `path` in a commit's tree, or None."""
        parts = self.git("ls-tree", "--end-of-options", commit, "--", path).split(None, 3)
        return (parts[0], parts[1], parts[2]) if len(parts) == 4 else None

    def gitmodules(self, commit: str) -> dict[str, dict[str, str]]:
        """A commit's .gitmodules: submodule name -> its keys (path, url, ...); empty when none."""
        try:
            lines = self.git(
                "config", "--blob", f"{commit}:.gitmodules", "--get-regexp", r"^submodule\."
            )
        except GitError:
            return {}
        out: dict[str, dict[str, str]] = {}
        for line in lines.splitlines():
            key, _, value = line.partition(" ")
            name, _, field = key[len("submodule.") :].rpartition(".")
            out.setdefault(name, {})[field] = value
        return out

    def descends(self, base: str, head: str) -> bool:
        """Whether `head` is `base` plus at least one commit."""
        n = int(self.git("rev-list", "--count", "--end-of-options", f"{base}..{head}"))
        return n > 0 and self.git("merge-base", "--end-of-options", base, head) == base

    def format_patches(self, base: str, head: str, out_dir: Path) -> list[Path]:
        """base..head as patch files in out_dir, no signature:
        the bytes do not depend on git's version."""
        names = self.git(
            "format-patch",
            "--no-signature",
            "-o",
            str(out_dir),
            "--end-of-options",
            f"{base}..{head}",
        )
        return [Path(p) for p in names.splitlines()]

    def commits(self, base: str, head: str) -> list[tuple[str, str, str, tuple[str, ...]]]:
        """(id, subject, body, files changed) of each commit in base..head, oldest first."""
        out = []
        for sha in self.git("rev-list", "--reverse", "--end-of-options", f"{base}..{head}").split():
            subject, _, body = self.git(
                "show", "-s", "--format=%s%x00%b", "--end-of-options", sha
            ).partition("\0")
            files = self.git(
                "diff-tree", "--no-commit-id", "--name-only", "-r", "--end-of-options", sha
            ).split()
            out.append((sha, subject, body, tuple(files)))
        return out


class Worktree:
    """A worktree of the snapshot repository, owned by one cell."""

    def __init__(self, repo: SnapshotRepo, path: Path):
        self.repo = repo
        self.path = Path(path)

    def git(self, *args: str, env: Optional[dict] = None) -> str:
        return git(*args, cwd=self.path, env=env)

    def head(self) -> Optional[str]:
        try:
            return self.git("rev-parse", "HEAD")
        except GitError:
            return None

    def is_clean(self) -> bool:
        return self.git("status", "--porcelain", "--untracked-files=all") == ""

    def ensure(self, commit: str) -> None:
        """Exist and sit on `commit` exactly, whatever an interrupted run left behind."""
        # a commit id: `git checkout` has no --end-of-options
        commit = self.repo.ref_commit(commit) or commit
        if (self.path / ".git").exists():
            self.am_abort()  # whatever an interrupted run left; none in progress is the normal case
            if self.head() == commit and self.is_clean():
                return  # nothing to do: keeps file times, so nothing is recompiled
            self.git("checkout", "--force", "--detach", commit, "--")
            self.git("clean", "-fdxq")
            return
        if self.path.exists():
            shutil.rmtree(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.repo.lock:  # prune must not race another run's add
            self.repo.git("worktree", "prune")
            self.repo.git(
                "worktree", "add", "--force", "--detach", "--end-of-options", str(self.path), commit
            )

    def am(self, patch_files: list[Path]) -> str:
        """Apply the series as commits; deterministic, so the same inputs give the same HEAD."""
        try:
            self.git("am", *AM_FLAGS, "--", *map(str, patch_files))
        except GitError as e:
            where = error_line(e.output, prefer=("Patch failed at",))
            detail = e.line + (
                f" ({where})" if where.startswith("Patch failed at") and where != e.line else ""
            )
            self.am_abort()  # am may have stopped before creating its state
            raise SeriesDoesNotApply(detail) from None
        return self.head() or ""

    def restore_from(self, commit: str, paths: list[str]) -> None:
        """The files as `commit` has them (one it lacks removed), in the
        work tree only: the index keeps HEAD's."""
        self.git("restore", f"--source={commit}", "--worktree", "--", *paths)

    def apply(self, patch_file: Path) -> None:
        self.git("apply", "--", str(patch_file))

    def apply_3way(self, patch_file: Path) -> None:
        """`git apply --3way`: the hunks placed by their pre-image blobs where the text moved."""
        self.git("apply", "--3way", "--", str(patch_file))

    def unapply(self, patch_file: Path) -> None:
        """The patch's hunks reverted in the work tree (`git apply -R`): a topic's control."""
        self.git("apply", "-R", "--", str(patch_file))

    def try_am(self, *patch_files: Path, three_way: bool = False) -> Optional[str]:
        """For the drift status: None when the patches applied as commits; else git's output, with
        the am left in progress (abort it, or leave it to
        resolve: fix, `git add`, `git am --continue`)."""
        try:
            self.git("am", *AM_FLAGS, *(["-3"] if three_way else []), "--", *map(str, patch_files))
        except GitError as e:
            return f"{e.stdout}\n{e.stderr}"
        return None

    def am_abort(self) -> None:
        abort_am(self.path)

    def am_in_progress(self) -> bool:
        return Path(
            self.git("rev-parse", "--path-format=absolute", "--git-path", "rebase-apply")
        ).exists()

    def applies(self, patch_file: Path, reverse: bool = False) -> bool:
        """Whether the patch applies to the files as they are
        (reverse: whether it is already there)."""
        return succeeds(
            "apply", "--check", *(["-R"] if reverse else []), str(patch_file), cwd=self.path
        )

    def conflicted_files(self) -> list[str]:
        return [
            line for line in self.git("diff", "--name-only", "--diff-filter=U").splitlines() if line
        ]

    def read_file(self, path: str) -> Optional[str]:
        try:
            return (self.path / path).read_bytes().decode("utf-8", "surrogateescape")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def tree(self) -> str:
        return self.git("rev-parse", "HEAD^{tree}")

    def descends_from(self, commit: str) -> bool:
        return succeeds(
            "merge-base", "--is-ancestor", "--end-of-options", commit, "HEAD", cwd=self.path
        )

    def format_patch(self, base: str, out_dir: Path) -> list[Path]:
        """base..HEAD as patch files in patches/' stable bytes (no commit
        ids, dates of the run, diffstat, version)."""
        out_dir.mkdir(parents=True, exist_ok=True)
        stable = ("--zero-commit", "--full-index", "--no-signature", "--no-stat", "--no-color")
        names = self.git(
            "format-patch", *stable, "-o", str(out_dir), "--end-of-options", f"{base}..HEAD"
        )
        return [Path(n) for n in names.splitlines() if n]
