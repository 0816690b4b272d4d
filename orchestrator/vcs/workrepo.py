"""The pull request's work repository, borrowing the snapshots' objects (alternates), where the
bundle's series is applied and pushed: every git command line of `ggml-patch pr`."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Optional, Sequence

from .runner import AM_FLAGS, GitError, git, succeeds


def init(path: Path, objects_of: Path) -> None:
    """`path` a repository (made once) whose objects
    include those of the repository `objects_of`."""
    if not (path / ".git").exists():
        path.mkdir(parents=True, exist_ok=True)
        git("init", "-q", cwd=path)
    alternates = path / ".git" / "objects" / "info" / "alternates"
    alternates.parent.mkdir(parents=True, exist_ok=True)
    alternates.write_text(str(Path(objects_of).resolve() / "objects") + "\n")


def has_commit(workdir: Path, commit: str) -> bool:
    return succeeds("cat-file", "-e", "--end-of-options", f"{commit}^{{commit}}", cwd=workdir)


def fetch_commit(
    workdir: Path,
    remote: str,
    commit: str,
    env: dict[str, str],
    timeout: float,
    config: Sequence[str] = (),
) -> None:
    git(
        "fetch",
        "-q",
        "--no-tags",
        "--depth=1",
        "--end-of-options",
        remote,
        commit,
        cwd=workdir,
        env=env,
        timeout=timeout,
        config=config,
    )


def abort_am(workdir: Path) -> None:
    """Whatever an interrupted `git am` left, dropped (none in progress: nothing to do)."""
    with suppress(GitError):
        git("am", "--abort", cwd=workdir)


def checkout_clean(workdir: Path, onto: str) -> str:
    """The work tree on `onto` (a commit id or a ref),
    detached, with nothing else in it; its commit."""
    abort_am(workdir)
    # a commit id first: `git checkout` has no --end-of-options, and `onto` may come from --onto
    commit = git("rev-parse", "--verify", "--end-of-options", f"{onto}^{{commit}}", cwd=workdir)
    git("checkout", "-q", "--force", "--detach", commit, "--", cwd=workdir)
    git("clean", "-fdxq", cwd=workdir)
    return commit


def am(workdir: Path, patches: tuple[Path, ...]) -> str:
    """HEAD after `git am` of the patches; GitError, nothing
    left half-applied, when one does not apply."""
    try:
        git("am", "-q", *AM_FLAGS, "--", *map(str, patches), cwd=workdir)
    except GitError:
        abort_am(workdir)
        raise
    return git("rev-parse", "HEAD", cwd=workdir)


def push_args(remote: str, branch: str) -> list[str]:
    return ["push", "--end-of-options", remote, f"HEAD:refs/heads/{branch}"]


def push_argv(workdir: Path, remote: str, branch: str) -> list[str]:
    """The push as a command line a person can run (what `pr` prints)."""
    return ["git", "-C", str(workdir), *push_args(remote, branch)]


def push(
    workdir: Path,
    remote: str,
    branch: str,
    env: dict[str, str],
    timeout: Optional[float],
    config: Sequence[str] = (),
) -> None:
    git(*push_args(remote, branch), cwd=workdir, env=env, timeout=timeout, config=config)


def is_branch_name(name: str) -> bool:
    return not name.startswith("-") and succeeds("check-ref-format", "--branch", name)


def by_hand(
    workdir: str, remote: str, onto: str, patches: list[str], branch: str, fetch: bool
) -> list[list[str]]:
    """The same steps as command lines a person runs."""
    g = ["git", "-C", workdir]
    steps = [[*g, "fetch", "--no-tags", "--depth=1", remote, onto]] if fetch else []
    return steps + [
        [*g, "checkout", "--force", "--detach", onto],
        [*g, "am", *patches],
        [*g, "push", remote, f"HEAD:refs/heads/{branch}"],
    ]
