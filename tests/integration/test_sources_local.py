"""Source kind `local`: a user's checkout, read as it is (uncommitted and untracked files included,
ignored and deleted ones not) and never modified: its files, index and HEAD are byte-identical
(mtimes included) after status, export and refresh. A populated submodule is read too (a fork
vendored in a superproject), and a plain directory works.
"""

import os
from pathlib import Path

import pytest

from orchestrator import sources
from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.sources.local import LocalSource
from orchestrator.vcs.snapshots import SnapshotRepo

from ..helpers.forks import git


def _src(path, **more) -> LocalSource:
    return LocalSource(kind="local", path=str(path), **more).at("targets.t.source")


def _snap(cache: Cache, path, **more):
    return sources.snapshot(_src(path, **more), cache, SnapshotRepo(cache.snapshots_git))


def _small_checkout(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / ".gitignore").write_text("build/\n*.o\n")
    (path / "tracked.txt").write_text("committed\n")
    (path / "gone.txt").write_text("will be deleted\n")
    (path / "run.sh").write_text("#!/bin/sh\n")
    (path / "run.sh").chmod(0o755)
    os.symlink("tracked.txt", path / "link")
    git(path, "add", "-A")
    git(path, "commit", "-qm", "base")
    return path


def _files(repo: SnapshotRepo, commit: str) -> dict[str, str]:
    out = {}
    for line in repo.git("ls-tree", "-r", commit).splitlines():
        meta, path = line.split("\t", 1)
        mode, _, sha = meta.split()
        out[path] = mode
    return out


# ---- what is read ----


def test_clean_checkout_is_its_head_tree(tmp_path):
    co = _small_checkout(tmp_path / "co")
    cache = Cache(tmp_path / "cache")
    snap = _snap(cache, co)
    repo = SnapshotRepo(cache.snapshots_git)
    assert repo.tree_of(snap.commit) == git(co, "rev-parse", "HEAD^{tree}").strip()
    head = git(co, "rev-parse", "HEAD").strip()
    assert snap.provenance == {"path": str(co), "head": head, "uncommitted_changes": False}
    assert snap.description == f"local {co} (HEAD {head[:12]})"
    assert _files(repo, snap.commit) == {
        ".gitignore": "100644",
        "gone.txt": "100644",
        "link": "120000",
        "run.sh": "100755",
        "tracked.txt": "100644",
    }
    assert _snap(cache, co).commit == snap.commit  # deterministic


def test_dirty_checkout_is_read_as_it_is(tmp_path):
    co = _small_checkout(tmp_path / "co")
    (co / "tracked.txt").write_text("edited, not staged\n")
    (co / "staged.txt").write_text("staged\n")
    git(co, "add", "staged.txt")
    (co / "staged.txt").write_text("staged, then edited again\n")
    (co / "untracked.txt").write_text("new\n")
    (co / "gone.txt").unlink()
    (co / "build").mkdir()
    (co / "build" / "x.o").write_text("ignored\n")
    (co / "y.o").write_text("ignored\n")
    cache = Cache(tmp_path / "cache")
    snap = _snap(cache, co)
    repo = SnapshotRepo(cache.snapshots_git)
    assert snap.provenance["uncommitted_changes"] is True
    assert snap.description.endswith(", uncommitted changes)")
    assert sorted(_files(repo, snap.commit)) == [
        ".gitignore",
        "link",
        "run.sh",
        "staged.txt",
        "tracked.txt",
        "untracked.txt",
    ]
    assert repo.read_blob(snap.commit, "tracked.txt") == "edited, not staged\n"
    # the file, not the index
    assert repo.read_blob(snap.commit, "staged.txt") == "staged, then edited again\n"
    assert repo.read_blob(snap.commit, "link") == "tracked.txt"


def test_subdirectory_and_relative_path(tmp_path):
    co = _small_checkout(tmp_path / "co")
    (co / "vendor" / "ggml").mkdir(parents=True)
    (co / "vendor" / "ggml" / "CMakeLists.txt").write_text("project(ggml)\n")
    m = tmp_path / "m"
    m.mkdir()
    (m / "matrix.yaml").write_text(
        "queue: {path: p, layout: llama.cpp}\ntargets:\n"
        "  t: {layout: ggml, source: {kind: local, path: ../co, subdirectory: vendor/ggml}}\n"
        "backends: {cpu: {}}\nprofiles: {default: {targets: [t], backends: [cpu]}}\n"
    )
    source = load_matrix(m / "matrix.yaml").target("t").source
    cache = Cache(tmp_path / "cache")
    snap = sources.snapshot(source, cache, SnapshotRepo(cache.snapshots_git))
    assert _files(SnapshotRepo(cache.snapshots_git), snap.commit) == {"CMakeLists.txt": "100644"}
    assert snap.provenance["path"] == str(m / ".." / "co")
    with pytest.raises(
        ConfigError, match=r"^targets.t.source.subdirectory: 'nope' is not a directory in "
    ):
        _snap(cache, co, subdirectory="nope")


def test_plain_directory(tmp_path):
    d = tmp_path / "plain"
    (d / "ggml" / "src").mkdir(parents=True)
    (d / "ggml" / "src" / "ggml-opt.cpp").write_text("x\n")
    cache = Cache(tmp_path / "cache")
    snap = _snap(cache, d)
    assert _files(SnapshotRepo(cache.snapshots_git), snap.commit) == {
        "ggml/src/ggml-opt.cpp": "100644"
    }
    assert snap.provenance["head"] is None


def test_missing_path_is_a_one_line_error(tmp_path):
    with pytest.raises(ConfigError) as e:
        _snap(Cache(tmp_path / "cache"), tmp_path / "nope")
    assert str(e.value) == f"targets.t.source.path: {tmp_path / 'nope'} is not a directory"


def test_populated_submodule_is_read(tmp_path):
    sub = _small_checkout(tmp_path / "fork")
    sup = tmp_path / "super"
    sup.mkdir()
    git(sup, "init", "-q", "-b", "main")
    (sup / "README.md").write_text("super\n")
    git(sup, "add", "README.md")
    git(
        sup,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(sub),
        "core/vendor/llama.cpp",
    )
    git(sup, "commit", "-qm", "vendor")
    (sup / "core/vendor/llama.cpp/tracked.txt").write_text("edited inside the submodule\n")
    cache = Cache(tmp_path / "cache")
    snap = _snap(cache, sup)
    repo = SnapshotRepo(cache.snapshots_git)
    files = _files(repo, snap.commit)
    assert (
        "core/vendor/llama.cpp/run.sh" in files
        and files["core/vendor/llama.cpp/run.sh"] == "100755"
    )
    assert (
        repo.read_blob(snap.commit, "core/vendor/llama.cpp/tracked.txt")
        == "edited inside the submodule\n"
    )
    # the superproject's own files and gitlink are as committed
    assert snap.provenance["uncommitted_changes"] is False


# ---- a dirty user checkout of the real llama.cpp, through every command ----
