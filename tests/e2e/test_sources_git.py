"""Source kind git on the real llama.cpp snapshot: a fork
vendored as a submodule of a superproject."""

import pytest

from orchestrator import sources
from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.drift.check import status_of_targets
from orchestrator.drift.status import APPLIES
from orchestrator.errors import ConfigError
from orchestrator.vcs.snapshots import SnapshotRepo

from ..helpers.forks import (
    OPT,
    commit_change,
    git,
    git_snapshot,
    real_snapshot_refs,
    repo_from_snapshot,
    seeded_cache,
    write_matrix,
)
from ..helpers.tools import run_tool


@pytest.fixture(scope="module")
def superproject(tool_cache, tmp_path_factory):
    """continuum-like: the llama.cpp fork (the real
    snapshot) as a submodule at core/vendor/llama.cpp."""
    tmp = tmp_path_factory.mktemp("super")
    fork = repo_from_snapshot(
        tmp / "llama.cpp", real_snapshot_refs(tool_cache)["llama.cpp"], tool_cache
    )
    commit_change(fork, "master", {"FORK.md": "the fork\n"}, "fork: a commit of its own")
    fork_head = git(fork, "rev-parse", "master").strip()
    sup = tmp / "continuum"
    sup.mkdir()
    git(sup, "init", "-q", "-b", "main")
    (sup / "README.md").write_text("superproject\n")
    (sup / ".gitmodules").write_text(
        '[submodule "llama.cpp"]\n\tpath = core/vendor/llama.cpp\n\turl = ../llama.cpp\n'
    )
    git(sup, "add", "README.md", ".gitmodules")
    git(sup, "update-index", "--add", "--cacheinfo", f"160000,{fork_head},core/vendor/llama.cpp")
    git(sup, "commit", "-qm", "vendor the fork")
    return tmp, sup, fork, fork_head


def test_submodule_is_filled_in_and_the_nested_layout_applies(tool_cache, superproject, tmp_path):
    tmp, sup, fork, fork_head = superproject
    target = (
        "layout: llama.cpp\nprefix: core/vendor/llama.cpp\n"
        f"source: {{kind: git, url: '{sup}', ref: main, submodules: [core/vendor/llama.cpp]}}\n"
    )
    m = write_matrix(tmp_path, {"continuum": target})
    cache = seeded_cache(tmp_path / "cache", tool_cache)
    matrix = load_matrix(m)
    snap = sources.snapshot(
        matrix.target("continuum").source, cache, SnapshotRepo(cache.snapshots_git)
    )
    assert snap.provenance["submodules"] == {
        "core/vendor/llama.cpp": {"url": str(fork), "commit": fork_head}
    }
    repo = SnapshotRepo(cache.snapshots_git)
    assert repo.read_blob(snap.commit, "core/vendor/llama.cpp/FORK.md") == "the fork\n"
    assert repo.read_blob(snap.commit, "README.md") == "superproject\n"
    row = status_of_targets(matrix, cache, ["continuum"])[0]
    assert row.status == APPLIES, row
    assert row.layout == "llama.cpp at core/vendor/llama.cpp/"
    out = tmp_path / "export"
    proc = run_tool(
        "export",
        "--matrix",
        str(m),
        "--cache",
        str(cache.root),
        "--target",
        "continuum",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    texts = [p.read_text() for p in sorted(out.glob("*.patch"))]
    assert f"diff --git a/core/vendor/llama.cpp/{OPT} b/core/vendor/llama.cpp/{OPT}\n" in texts[0]
    assert "+++ b/core/vendor/llama.cpp/tests/test-opt.cpp\n" in texts[1]


def test_a_path_that_is_not_a_submodule(superproject, tmp_path):
    _, sup, _, _ = superproject
    with pytest.raises(
        ConfigError, match=r"targets.t.source.submodules: 'README.md' is not a submodule at "
    ):
        git_snapshot(Cache(tmp_path / "cache"), sup, "main", submodules=["README.md"])
