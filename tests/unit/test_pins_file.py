"""The pins file as a record: what resolve-refs writes
it may replace; anything else it refuses to."""

import json

import pytest

from orchestrator.errors import ConfigError
from orchestrator.pins import PinsFile, Unreachable, made_pins, read_pins_file

SHA = "a" * 40
OWN = {
    "version": 1,
    "pins": {"ggml": {"commit": SHA}},
    "unreachable": {"fork": {"url": "u", "ref": "r", "reason": "x"}},
}


def test_the_tools_own_file_with_unreachable_targets_may_be_replaced(tmp_path):
    f = tmp_path / "pins.json"
    f.write_text(json.dumps(OWN))
    assert made_pins(f)


@pytest.mark.parametrize(
    "content",
    [
        "my notes\n",
        '{"pins": {}}',
        '{"version": 1, "pins": {}, "mine": 1}',
        json.dumps({**OWN, "version": 2}),
    ],
)
def test_anything_else_is_not_the_tools_own(tmp_path, content):
    f = tmp_path / "pins.json"
    f.write_text(content)
    assert not made_pins(f)


def test_unreachable_keeps_the_key_order_resolve_refs_always_wrote():
    assert list(json.loads(Unreachable(reason="x", url="u", ref="r").model_dump_json())) == [
        "url",
        "ref",
        "reason",
    ]
    assert PinsFile.model_validate(OWN).unreachable is not None


def test_a_bad_commit_is_one_line_naming_the_file(tmp_path):
    f = tmp_path / "pins.json"
    f.write_text(json.dumps({"version": 1, "pins": {"ggml": {"commit": "abc"}}}))
    with pytest.raises(ConfigError) as e:
        read_pins_file(f)
    assert str(f) in str(e.value) and "\n" not in str(e.value) and "40-hex" in str(e.value)


def test_what_resolve_refs_writes_from_gits_own_words_reads_back(tmp_path):
    """git's message (several lines, a terminal escape from a hostile remote) is written as one
    safe line, so the file reads back; the same text in a file is refused (issue 36)."""
    from orchestrator.pins import Pin, pins_json

    said = "fatal: unable to access\nremote: \x1b[2Jgone"
    gone = Unreachable(url="https://github.com/o/r", ref="main", reason=said)
    data = pins_json({"ggml": Pin(commit=SHA, ref="master")}, {"fork": gone})
    f = tmp_path / "pins.json"
    f.write_text(json.dumps(data))
    back = read_pins_file(f)
    reason = back["fork"].reason
    assert "\n" not in reason and "\x1b" not in reason and "gone" in reason
    data["unreachable"]["fork"]["reason"] = said
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        read_pins_file(f)
    assert "unreachable.fork.reason: a line break" in str(e.value)
