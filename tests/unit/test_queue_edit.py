"""The round-trip edits of queue.yaml and topic.yaml: only the edited values change, every other
key, every comment and the keys' order stay (a hand-written `default:` and trailing comments)."""

import datetime

import pytest

from orchestrator.errors import ConfigError
from orchestrator.patchset import queue_edit
from orchestrator.patchset.queue import parse_queue_order, parse_topic_meta

QUEUE = """\
# the queue: a comment on top
topics:
  - one
  # two follows one
  - two
  - three  # the last one
# a hand-written default
default: [one, three]
# a trailing comment
"""

TOPIC = """\
# DEP-3's fields
summary: the fix
origin: https://github.com/example/llama.cpp/commit/abc1234
bug: null
forwarded: null
applied_upstream: null
last_update: 2026-12-02
state: local
# it follows nothing
after: []
# the tests that judge it (a key the writer keeps as it is)
tests: [test-opt]
"""
DAY = datetime.date(2026, 12, 7)


def test_move_keeps_default_and_every_comment():
    out = queue_edit.queue_move("q", QUEUE, "three", "one", before=True)
    assert parse_queue_order("q", out).topics == ["three", "one", "two"]
    assert parse_queue_order("q", out).default == ["one", "three"]
    for comment in (
        "# the queue: a comment on top",
        "# a hand-written default",
        "# a trailing comment",
        "# two follows one",
    ):
        assert comment in out


def test_move_after_the_last_and_rename_in_default():
    out = queue_edit.queue_move("q", QUEUE, "one", "three", before=False)
    assert parse_queue_order("q", out).topics == ["two", "three", "one"]
    out = queue_edit.queue_rename("q", out, "three", "drei")
    order = parse_queue_order("q", out)
    assert order.topics == ["two", "drei", "one"] and order.default == ["one", "drei"]
    assert out.rstrip().endswith("# a trailing comment")


def test_append_and_remove_keep_comments():
    out = queue_edit.queue_append("q", QUEUE, "four")
    assert parse_queue_order("q", out).topics == ["one", "two", "three", "four"]
    assert "# a trailing comment" in out and "default: [one, three]" in out
    out = queue_edit.queue_remove("q", out, "three")
    order = parse_queue_order("q", out)
    assert order.topics == ["one", "two", "four"] and order.default == ["one"]
    assert "# a trailing comment" in out


def test_retire_on_one_target_keeps_unknown_keys_and_comments():
    out = queue_edit.topic_retire_on("t", TOPIC, "ggml-0.16", "0123abcd", DAY)
    meta, _ = parse_topic_meta("t", out)
    assert meta.retired == {"ggml-0.16": "0123abcd"} and meta.state == "local"
    assert meta.last_update == "2026-12-07"
    assert "tests: [test-opt]" in out and "# it follows nothing" in out
    assert out.startswith("# DEP-3's fields\n")


def test_update_sets_values_and_keeps_the_rest():
    out = queue_edit.topic_update("t", TOPIC, DAY, state="dropped")
    assert "state: dropped" in out and "last_update: 2026-12-07" in out
    assert "# the tests that judge it" in out


def test_after_renamed_only_where_named():
    assert queue_edit.topic_after_renamed("t", TOPIC, "x", "y") is None
    text = TOPIC.replace("after: []", "after: [one, two]")
    out = queue_edit.topic_after_renamed("t", text, "one", "uno")
    assert "after: [uno, two]" in out


def test_a_text_that_is_no_mapping_is_one_line():
    with pytest.raises(ConfigError, match=r"^q:1: \(top level\)"):
        queue_edit.queue_move("q", "- a\n", "a", "b", before=True)
