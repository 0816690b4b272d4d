"""Issue 16, point 3: never delete what the tool did not create. `export --out` and `bundle --out`
write into a new or empty folder, or one the tool marked as its own; anything else is refused
with exit 2 naming the folder, before any work."""
import json

import pytest

from orchestrator import outdir
from orchestrator.errors import ConfigError

from .security_fixtures import isolated_env, tiny_matrix, tool


def export(tmp_path, out):
    m = tiny_matrix(tmp_path)
    return tool("export", "--matrix", m, "--cache", tmp_path / "cache", "--target", "tiny", "--out", out,
                env=isolated_env(tmp_path))


def test_export_into_a_folder_holding_a_users_patch_is_refused(tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "0001-my-own-work.patch").write_text("my patch\n")
    (out / "notes.txt").write_text("notes\n")
    line = export(tmp_path, out).error_line(2)
    assert str(out) in line
    assert (out / "0001-my-own-work.patch").read_text() == "my patch\n"
    assert sorted(p.name for p in out.iterdir()) == ["0001-my-own-work.patch", "notes.txt"]
    assert not (tmp_path / "cache" / "snapshots.git").exists()  # refused before any work


def test_export_into_a_new_then_its_own_folder(tmp_path):
    out = tmp_path / "new" / "series"
    first = export(tmp_path, out)
    assert first.returncode == 0, first.stderr
    patches = sorted(p.name for p in out.glob("*.patch"))
    assert len(patches) == 2 and (out / outdir.MARKER).is_file()
    (out / "0099-stale.patch").write_text("from an earlier export\n")  # the tool's folder: replaced
    again = export(tmp_path, out)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in out.glob("*.patch")) == patches


def test_export_into_an_empty_folder(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert export(tmp_path, out).returncode == 0
    assert (out / outdir.MARKER).is_file()


def test_export_to_a_file_is_refused(tmp_path):
    out = tmp_path / "a-file"
    out.write_text("x")
    line = export(tmp_path, out).error_line(2)
    assert str(out) in line and "not a folder" in line
    assert out.read_text() == "x"


def test_bundle_out_holding_a_users_files_is_refused_before_any_work(tmp_path):
    out = tmp_path / "mine"
    (out / "tiny").mkdir(parents=True)
    (out / "tiny" / "my-notes.md").write_text("keep me\n")
    results = tmp_path / "results"
    results.mkdir()
    (results / "results.json").write_text("{}")  # never read: the folder is refused first
    m = tiny_matrix(tmp_path)
    line = tool("bundle", "--matrix", m, "--cache", tmp_path / "cache", "--results", results, "--out", out,
                env=isolated_env(tmp_path)).error_line(2)
    assert str(out) in line
    assert (out / "tiny" / "my-notes.md").read_text() == "keep me\n"


# ---- the rule itself (pure file-system checks) ----

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
    """Bundles made before the marker existed: every entry a target folder with a ggml-patch manifest."""
    out = tmp_path / "bundle"
    (out / "ggml").mkdir(parents=True)
    (out / "ggml" / "manifest.json").write_text(json.dumps({"tool": "ggml-patch", "target": "ggml"}))
    outdir.claim(out, "--out", legacy=outdir.made_bundles)
    assert (out / outdir.MARKER).is_file()
    (out / "other").mkdir()
    (out / outdir.MARKER).unlink()
    with pytest.raises(ConfigError):
        outdir.claim(out, "--out", legacy=outdir.made_bundles)
