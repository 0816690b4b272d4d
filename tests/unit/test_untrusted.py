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


@pytest.mark.parametrize("make, expected", [
    (lambda p: os.mkfifo(p), "a FIFO"),
    (lambda p: os.mkdir(p), "a folder"),
    (lambda p: os.symlink("/dev/zero", p), "a device"),
    (lambda p: p.write_bytes(b"\xff\xfe"), "not UTF-8"),
    (lambda p: p.write_bytes(b"x" * (1024 * 1024 + 1)), "more than the"),
], ids=["fifo", "folder", "device", "latin1", "too-big"])
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
