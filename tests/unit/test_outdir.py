"""Issue 16, point 3 (the pure part): which output folders the tool may write into."""

import json

import pytest

from orchestrator import outdir
from orchestrator.errors import ConfigError


def test_claim_rules(tmp_path):
    new = tmp_path / "a" / "b"
    assert outdir.claim(new, "--out") == new and (new / outdir.MARKER).is_file()
    assert outdir.claim(new, "--out") == new  # its own folder again
    empty = tmp_path / "empty"
    empty.mkdir()
    outdir.claim(empty, "--out")
    users = tmp_path / "users"
    users.mkdir()
    (users / "x").write_text("x")
    with pytest.raises(ConfigError, match=f"--out {users}: .*ggml-patch did not create"):
        outdir.claim(users, "--out")
    assert not (users / outdir.MARKER).exists()
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(ConfigError, match="not a folder"):
        outdir.claim(f, "--out")
    with pytest.raises(ConfigError, match="not a folder"):
        outdir.claim(f / "below", "--out")


def test_check_writes_nothing(tmp_path):
    outdir.check(tmp_path / "new", "--out")
    assert not (tmp_path / "new").exists()


def test_a_bundle_folder_an_older_version_made_is_recognised(tmp_path):
    """Bundles made before the marker existed: every entry a
    target folder with a ggml-patch manifest."""
    out = tmp_path / "bundle"
    (out / "ggml").mkdir(parents=True)
    (out / "ggml" / "manifest.json").write_text(
        json.dumps({"tool": "ggml-patch", "target": "ggml"})
    )
    outdir.claim(out, "--out", legacy=outdir.made_bundles)
    assert (out / outdir.MARKER).is_file()
    (out / "other").mkdir()
    (out / outdir.MARKER).unlink()
    with pytest.raises(ConfigError):
        outdir.claim(out, "--out", legacy=outdir.made_bundles)


# ---------------------------------------------------------------- issue 23: ownership


def test_a_cache_holding_a_users_files_is_refused(tmp_path):
    from orchestrator.outdir import cache_problem

    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "tmp").mkdir()
    assert "notes.txt" in cache_problem(tmp_path)
    assert cache_problem(tmp_path / "new") is None


def test_a_cache_the_vulkan_setup_script_made_first_is_the_tool_s(tmp_path):
    from orchestrator.outdir import cache_problem

    (
        tmp_path / "vulkan-sdk"
    ).mkdir()  # the Vulkan setup script writes <cache>/vulkan-sdk before any run
    (tmp_path / "snapshots.git.lock").write_text("")
    assert cache_problem(tmp_path) is None


def test_scratch_is_cleaned_only_in_a_marked_cache(tmp_path):
    import os

    from orchestrator.cache import Cache

    cache = Cache(tmp_path)
    (tmp_path / "tmp").mkdir()
    old = tmp_path / "tmp" / "users-file"
    old.write_text("x")
    os.utime(old, (0, 0))
    assert cache.clean_scratch() == [] and old.exists()
    assert cache.downloads.is_dir()  # the first folder the tool makes marks the cache
    assert cache.marked and cache.clean_scratch() == [old]


def test_an_odd_scratch_entry_is_a_warning(tmp_path):
    from orchestrator.cache import Cache

    cache = Cache(tmp_path)
    cache.scratch()
    (tmp_path / "tmp" / "extract-host-pid99999999999999999999-x").mkdir()
    warned = []
    assert cache.clean_scratch(warned.append) == []
