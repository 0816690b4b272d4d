"""Issue 16, point 3: never delete what the tool did not create. `export --out` and `bundle --out`
write into a new or empty folder, or one the tool marked as its own; anything else is refused
with exit 2 naming the folder, before any work."""

from orchestrator import outdir
from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_series

from ..helpers.security import isolated_env, tiny_matrix, tool


def export(tmp_path, out):
    m = tiny_matrix(tmp_path)
    return tool(
        "export",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--target",
        "tiny",
        "--out",
        out,
        env=isolated_env(tmp_path),
    )


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
    # the whole queue (every active topic of patches/queue.yaml, each its series)
    whole = load_series(load_matrix(tmp_path / "matrix.yaml"))
    assert len(whole.topics) > 1 and len(patches) == len(whole.patches)
    assert (out / outdir.MARKER).is_file()
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
    line = tool(
        "bundle",
        "--matrix",
        m,
        "--cache",
        tmp_path / "cache",
        "--results",
        results,
        "--out",
        out,
        env=isolated_env(tmp_path),
    ).error_line(2)
    assert str(out) in line
    assert (out / "tiny" / "my-notes.md").read_text() == "keep me\n"


# ---- the rule itself (pure file-system checks) ----
