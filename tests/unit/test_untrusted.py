"""The one reader of untrusted files (orchestrator/untrusted.py): regular files only, a cap per
kind, UTF-8 or one line, nothing outside the root; names from documents stay under their root."""

import os

import pytest

from orchestrator import untrusted
from orchestrator.errors import ConfigError
from orchestrator.report.junit import xml_text


def test_a_regular_file_is_read(tmp_path):
    (tmp_path / "a.json").write_text('{"x": 1}')
    assert untrusted.load_json(tmp_path / "a.json", "pins") == {"x": 1}


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda p: os.mkfifo(p), "a FIFO"),
        (lambda p: os.mkdir(p), "a folder"),
        (lambda p: os.symlink("/dev/zero", p), "a device"),
        (lambda p: p.write_bytes(b"\xff\xfe"), "not UTF-8"),
        (lambda p: p.write_bytes(b"x" * (1024 * 1024 + 1)), "more than the"),
    ],
    ids=["fifo", "folder", "device", "latin1", "too-big"],
)
def test_what_is_not_a_small_regular_utf8_file_is_one_line(tmp_path, make, expected):
    p = tmp_path / "f"
    make(p)
    with pytest.raises(ConfigError) as e:
        untrusted.read_text(p, "pins")
    assert expected in str(e.value) and str(p) in str(e.value) and "\n" not in str(e.value)


def test_a_symlink_out_of_the_root_is_refused(tmp_path):
    (tmp_path / "secret").write_text("token")
    root = tmp_path / "root"
    root.mkdir()
    (root / "log").symlink_to(tmp_path / "secret")
    with pytest.raises(ConfigError, match="outside"):
        untrusted.read_text(root / "log", "log", root=root)
    assert untrusted.tail_text(root / "log", root) is None


@pytest.mark.parametrize("name", ["/etc/passwd", "../x", "a/../../x", "", "a\0b", 3])
def test_names_from_documents_stay_under_the_root(tmp_path, name):
    with pytest.raises(ConfigError):
        untrusted.name_under(tmp_path, name, "doc")


def test_deep_json_is_one_line(tmp_path):
    (tmp_path / "d.json").write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(ConfigError, match="nested too deeply|not valid JSON"):
        untrusted.load_json(tmp_path / "d.json", "results")


def test_xml_text_strips_ansi_and_control_characters():
    assert xml_text("\x1b[31mFAIL\x1b[0m\x00\x07 ok\ud800") == "FAIL\ufffd\ufffd ok\ufffd"


class _Blobs:
    """A stand-in for the snapshot repository: blobs by path."""

    def __init__(self, blobs):
        self.blobs = blobs

    def blob_size(self, commit, path):
        b = self.blobs.get(path)
        return None if b is None else len(b)

    def read_blob(self, commit, path):
        b = self.blobs.get(path)
        return None if b is None else b.decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    "blob, expected",
    [
        (b"## Why\n\xe9t\xe9\n", "not UTF-8"),
        (b"x" * (1024 * 1024 + 1), "more than the"),
    ],
)
def test_the_targets_policy_files_are_checked_before_the_build(blob, expected):
    from orchestrator.upstream.bundle import _policy_reader

    read = _policy_reader(_Blobs({".github/pull_request_template.md": blob}))
    assert read("0" * 40, "AGENTS.md") is None
    with pytest.raises(ConfigError, match=expected):
        read("0" * 40, ".github/pull_request_template.md")


def test_a_latin1_cover_is_one_line(tmp_path):
    (tmp_path / "cover.md").write_bytes("## Why\n\xe9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"cover.md:2: not UTF-8"):
        untrusted.read_optional(tmp_path / "cover.md", "cover", root=tmp_path)


def test_a_bundle_never_replaces_a_folder_of_a_users_files(tmp_path):
    from orchestrator.upstream.bundle import _write_dir

    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "mine.txt").write_text("mine")
    with pytest.raises(ConfigError, match="did not write"):
        _write_dir(tmp_path / "tiny", {"manifest.json": "{}"})
    assert (tmp_path / "tiny" / "mine.txt").read_text() == "mine"
