"""`topic edit` / `topic save` on the real queue and its real pinned base (the llama.cpp sdist's
snapshot, no network): each topic opened on the topics it follows and saved back at once changes
no byte of patches/ (the worktree is the tree refresh writes each topic from, the writer is
refresh's)."""

import shutil

from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_queue

from ..helpers.forks import ROOT, seeded_cache
from ..helpers.tools import run_tool


def _files(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_each_real_topic_opened_and_saved_at_once_changes_no_byte(tool_cache, tmp_path):
    for name in ("patches", "native_tests"):
        shutil.copytree(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    seeded_cache(tmp_path / "cache", tool_cache)
    common = ("--matrix", str(tmp_path / "matrix.yaml"), "--cache", str(tmp_path / "cache"))
    before = _files(tmp_path / "patches")
    queue = load_queue(load_matrix(tmp_path / "matrix.yaml"))
    for topic in queue.topics:
        opened = run_tool("topic", "edit", topic.name, *common)
        assert opened.returncode == 0, opened.stderr
        follows = [t.name for t in queue.chosen([topic.name]) if t.name != topic.name]
        assert (", ".join(follows) if follows else "its base") in opened.stdout, opened.stdout
        saved = run_tool("topic", "save", topic.name, *common)
        assert saved.returncode == 0, saved.stderr
        assert "no byte changed" in saved.stdout, saved.stdout
    assert _files(tmp_path / "patches") == before
