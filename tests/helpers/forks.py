"""Shared by the patch-management tests: the real pinned snapshots, and forks of them with git
history the tests write (commits next to the fix, over it, the fix merged upstream...).

The real snapshots are made once per session in the e2e tier's cache (`tool_cache`, from the
pinned sdists); each test borrows their objects into a cache of its own (git alternates), so no
test writes into another's worktrees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import yaml

from orchestrator import sources
from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.sources.git import GitSource
from orchestrator.vcs.snapshots import SnapshotRepo

from .tools import ROOT

OPT = "ggml/src/ggml-opt.cpp"
OPT_HEADER = "ggml/include/ggml-opt.h"
# A context line of the fix's hunk, two lines above where the fix inserts its reset (a fork editing
# it needs a 3-way merge), and the lines after which the
# fix inserts (a fork inserting there conflicts).
CONTEXT_LINE = "    opt_ctx->opt_i = (opt_ctx->opt_i + 1) % opt_ctx->opt_period;\n"
INSERT_AFTER = CONTEXT_LINE + "\n    if (!opt_ctx->static_graphs) {\n"
# what a fork puts where the fix inserts (the conflict of the status and refresh tests)
FORK_LINE = "        GGML_ASSERT(opt_ctx->gf != nullptr);\n"

GIT_ENV = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_AUTHOR_DATE": "@1700000000 +0000",
    "GIT_COMMITTER_DATE": "@1700000000 +0000",
}


def git(cwd: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(
        ["git", *args], cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV}
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"git {' '.join(args)} in {cwd} failed ({proc.returncode}): {proc.stderr}"
        )
    return proc.stdout


def real_snapshot_refs(pinned: Path) -> dict[str, str]:
    """target name -> snapshot ref in the cache `pinned` (the e2e tier's), for the default profile's
    pinned targets (made there first if needed, from the pinned sdists)."""
    cache = Cache(pinned)
    repo = SnapshotRepo(cache.snapshots_git)
    matrix = load_matrix(ROOT / "matrix.yaml")
    out = {}
    for name in ("llama.cpp", "ggml"):
        snap = sources.snapshot(matrix.target(name).source, cache, repo)
        ref = repo.git(
            "for-each-ref",
            "--format=%(refname)",
            "--points-at",
            snap.commit,
            "refs/snapshots/pypi/",
        ).splitlines()[0]
        out[name] = ref
    return out


def seeded_cache(path: Path, pinned: Path) -> Cache:
    """A fresh cache whose snapshot repository already
    holds the real pinned snapshots of `pinned` (and its Vulkan SDK, linked)."""
    cache = Cache(path)
    repo = SnapshotRepo(cache.snapshots_git)
    _borrow_objects(cache.snapshots_git, pinned)
    default = SnapshotRepo(pinned / "snapshots.git")
    for line in default.git(
        "for-each-ref", "--format=%(objectname) %(refname)", "refs/snapshots/pypi/"
    ).splitlines():
        sha, ref = line.split()
        repo.git("update-ref", ref, sha)
    if (pinned / "vulkan-sdk").is_dir():  # the private Vulkan SDK, where set up: only read
        os.symlink(pinned / "vulkan-sdk", path / "vulkan-sdk")
    return cache


def _borrow_objects(git_dir: Path, pinned: Path) -> None:
    """Read the pinned cache's objects in place (git
    alternates) instead of copying 60 MB per test."""
    info = git_dir / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(str(pinned / "snapshots.git" / "objects") + "\n")


def repo_from_snapshot(path: Path, snapshot_ref: str, pinned: Path) -> Path:
    """A plain git repository whose master is the real
    snapshot commit (history the tests add on top)."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "master")
    _borrow_objects(path / ".git", pinned)
    sha = SnapshotRepo(pinned / "snapshots.git").ref_commit(snapshot_ref)
    git(path, "update-ref", "refs/heads/master", sha)
    git(path, "reset", "-q", "--hard", "master")
    return path


def commit_change(
    repo: Path, branch: str, edits: dict[str, object], message: str, start: str = "master"
) -> str:
    """A branch off `start` with one commit: path -> new text,
    a callable old -> new, or None to delete."""
    git(repo, "checkout", "-q", "-B", branch, start)
    for path, edit in edits.items():
        f = repo / path
        if edit is None:
            git(repo, "rm", "-q", path)
            continue
        text = edit(f.read_text()) if callable(edit) else edit
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        git(repo, "add", path)
    git(repo, "commit", "-q", "-m", message)
    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "master")
    return sha


def apply_series(
    repo: Path,
    branch: str,
    start: str = "master",
    patches: Path = ROOT / "patches" / "accumulator-reset",
) -> str:
    """`branch`: the series applied with git am on `start` (upstream merging the fix)."""
    git(repo, "checkout", "-q", "-B", branch, start)
    git(repo, "am", "-q", "--keep-cr", *map(str, sorted(patches.glob("*.patch"))))
    sha = git(repo, "rev-parse", "HEAD").strip()
    git(repo, "checkout", "-q", "master")
    return sha


def replace_once(old: str, new: str):
    def edit(text: str) -> str:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
        return text.replace(old, new)

    return edit


def write_matrix(
    directory: Path,
    targets: dict[str, str],
    profile_targets=None,
    series_dir: str = "patches",
    backends: tuple[str, ...] = ("cpu",),
) -> Path:
    """A matrix.yaml in `directory` with the given target blocks, a copy of the series (unless
    series_dir names another folder) and the native tests; `backends`: cpu, and others as the
    project's matrix.yaml declares them."""
    if series_dir == "patches" and not (directory / "patches").exists():
        shutil.copytree(ROOT / "patches", directory / "patches")
    if not (directory / "native_tests").exists():
        shutil.copytree(ROOT / "native_tests", directory / "native_tests")
    blocks = "".join(
        f"  {name}:\n{textwrap.indent(textwrap.dedent(body).strip(), '    ')}\n"
        for name, body in targets.items()
    )
    names = ", ".join(profile_targets or targets)
    declared = yaml.safe_load((ROOT / "matrix.yaml").read_text())["backends"]
    others = "".join(f"  {b}: {json.dumps(declared[b])}\n" for b in backends if b != "cpu")
    m = directory / "matrix.yaml"
    m.write_text(
        f"queue: {{path: {series_dir}, layout: llama.cpp}}\nnative_tests: native_tests\n"
        f'targets:\n{blocks}backends:\n  cpu: {{cmake_flags: ["-DGGML_CPU=ON"]}}\n{others}'
        f"profiles:\n  default: {{targets: [{names}], backends: [{', '.join(backends)}]}}\n"
    )
    return m


def pinned_targets(refs: dict[str, str]) -> dict[str, str]:
    """matrix.yaml blocks for the real pinned targets
    (resolved from the seeded snapshot repository)."""
    matrix = load_matrix(ROOT / "matrix.yaml")
    out = {}
    for name in refs:
        s = matrix.target(name).source
        out[name] = (
            f"layout: {matrix.target(name).layout}\n"
            f"source: {{kind: pypi-sdist, package: {s['package']}, "
            f'version: "{s["version"]}", sha256: {s["sha256"]}, '
            f"subdirectory: {s['subdirectory']}}}\n"
        )
    return out


def tree_state(path: Path) -> dict[str, tuple]:
    """Every file and link under `path`, .git included: bytes,
    mode and mtime (a checkout's whole state)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            st = os.lstat(full)
            data = os.readlink(full).encode() if full.is_symlink() else full.read_bytes()
            out[str(full.relative_to(path))] = (data, st.st_mode, st.st_mtime_ns)
        for d in dirnames:
            full = Path(dirpath) / d
            out[str(full.relative_to(path)) + "/"] = (b"", os.lstat(full).st_mode, None)
    return out


def git_source(url, ref, **more) -> GitSource:
    return GitSource(kind="git", url=str(url), ref=ref, **more).at("targets.t.source")


def git_snapshot(cache: Cache, url, ref, **more):
    return sources.snapshot(git_source(url, ref, **more), cache, SnapshotRepo(cache.snapshots_git))
