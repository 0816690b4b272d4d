"""Source kind local on a checkout of the real llama.cpp snapshot: status,
export and refresh leave it byte-identical."""

import pytest

from orchestrator.config import load_matrix
from orchestrator.drift.check import status_of_targets
from orchestrator.drift.status import APPLIES, THREE_WAY
from orchestrator.vcs.snapshots import SnapshotRepo

from ..helpers.forks import (
    CONTEXT_LINE,
    OPT,
    git,
    real_snapshot_refs,
    repo_from_snapshot,
    seeded_cache,
    tree_state,
    write_matrix,
)
from ..helpers.tools import run_tool


@pytest.fixture(scope="module")
def user_checkout(tool_cache, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("user")
    co = repo_from_snapshot(
        tmp / "llama.cpp", real_snapshot_refs(tool_cache)["llama.cpp"], tool_cache
    )
    (co / OPT).write_text(
        (co / OPT).read_text().replace(CONTEXT_LINE, CONTEXT_LINE.rstrip("\n") + " // mine\n")
    )
    (co / "README.md").write_text((co / "README.md").read_text() + "\nlocal notes\n")
    git(co, "add", "README.md")
    (co / "scratch.txt").write_text("untracked\n")
    m = write_matrix(tmp, {"mine": f"layout: llama.cpp\nsource: {{kind: local, path: {co}}}\n"})
    return tmp, co, m


def test_dirty_checkout_status_export_refresh_leave_it_byte_identical(tool_cache, user_checkout):
    tmp, co, m = user_checkout
    cache = seeded_cache(tmp / "cache", tool_cache)
    before = tree_state(co)
    head, index = (co / ".git" / "HEAD").read_bytes(), (co / ".git" / "index").read_bytes()
    proc = run_tool("status", "--json", "--matrix", str(m), "--cache", str(cache.root))
    assert proc.returncode == 0, proc.stderr
    # the unstaged edit is two lines from the fix
    assert '"status": "applies with 3-way merge"' in proc.stdout
    proc = run_tool(
        "export",
        "--matrix",
        str(m),
        "--cache",
        str(cache.root),
        "--target",
        "mine",
        "--out",
        str(tmp / "export"),
    )
    assert proc.returncode == 0, proc.stderr
    proc = run_tool("refresh", "mine", "--matrix", str(m), "--cache", str(cache.root))
    assert proc.returncode == 0, proc.stderr
    after = tree_state(co)
    assert (co / ".git" / "HEAD").read_bytes() == head and (
        co / ".git" / "index"
    ).read_bytes() == index
    assert after.keys() == before.keys()
    assert [k for k in before if before[k] != after[k]] == []


def test_dirty_checkout_is_the_snapshot(tool_cache, user_checkout):
    tmp, co, m = user_checkout
    cache = seeded_cache(tmp / "cache2", tool_cache)
    matrix = load_matrix(m)
    row = status_of_targets(matrix, cache, ["mine"])[0]
    assert row.status in (THREE_WAY, APPLIES)
    repo = SnapshotRepo(cache.snapshots_git)
    assert "// mine" in repo.read_blob(row.base, OPT)
    assert repo.read_blob(row.base, "scratch.txt") == "untracked\n"
    assert row.source.uncommitted_changes is True
