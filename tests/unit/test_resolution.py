"""What a resolution worktree was made for decides whether status calls it stale: another base, a
topic the target no longer carries, or the same topics before patches/ changed; a worktree made
for another choice of topics (`--topic`) is another run's, not stale."""

from dataclasses import replace

from orchestrator.drift import resolution
from orchestrator.patchset.series import Patch, Series

A, B = "a" * 40, "b" * 40


def _series(topics, text="x"):
    return Series("llama.cpp", (Patch("0001-x.patch", text, ()),), tuple(topics))


def test_stale_only_for_another_base_a_topic_gone_or_a_changed_series(tmp_path):
    resolve = tmp_path / "resolve"
    assert resolution.stale_reason(resolve, A, _series(["t"])) is None  # nothing recorded
    resolution.record(resolve, A, _series(["t", "u"]))
    assert resolution.made_for(resolve)["topics"] == ["t", "u"]
    assert resolution.stale_reason(resolve, A, _series(["t", "u"])) is None
    assert "the target's base is now bbbbbbbbbbbb" in resolution.stale_reason(
        resolve, B, _series(["t", "u"])
    )
    assert "u no longer applied" in resolution.stale_reason(resolve, A, _series(["t"]), {"t"})
    assert resolution.stale_reason(resolve, A, _series(["t"]), {"t", "u"}) is None
    changed = replace(_series(["t", "u"]), patches=(Patch("0001-x.patch", "y", ()),))
    assert "patches/ changed" in resolution.stale_reason(resolve, A, changed)
    assert resolution.for_topics(resolve, A, ["t", "u"]) is True
    assert resolution.for_topics(resolve, A, ["t"]) is False


def test_an_unreadable_record_says_nothing(tmp_path):
    resolve = tmp_path / "resolve"
    (tmp_path / resolution.MARKER).write_text("[1, 2]")
    assert resolution.made_for(resolve) is None
    (tmp_path / resolution.MARKER).write_text("{not json")
    assert resolution.made_for(resolve) is None
