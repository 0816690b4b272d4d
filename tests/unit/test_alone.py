"""A topic hidden behind an earlier topic's conflict is tried on its own (drift/alone.py) unless
it follows the stuck topic (`after:`, at any depth) or touches the lines it touches; status then
shows its own state with why it was tried alone."""

from dataclasses import replace

from orchestrator.drift.alone import overlaps, try_alone
from orchestrator.drift.status import (
    ALONE,
    CLEAN,
    CONFLICTED,
    NOT_TRIED,
    TOPIC_NOT_TRIED,
    PatchResult,
    TargetStatus,
    split_topics,
)
from orchestrator.patchset.series import Patch, Series, parse_patch


def _file(path: str, line: int) -> str:
    return (
        f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
        f"+++ b/{path}\n@@ -{line},3 +{line},4 @@\n a\n+b\n c\n d\n"
    )


def _patch(name: str, topic: str, *files: tuple[str, int]) -> Patch:
    text = "From: A <a@x>\nSubject: [PATCH] x\n\n" + "".join(_file(p, n) for p, n in files)
    return replace(parse_patch(name, text), topic=topic)


SERIES = Series(
    "llama.cpp",
    (
        _patch("0001-a.patch", "a", ("src/x.c", 100)),
        _patch("0002-b.patch", "b", ("src/x.c", 500)),  # far from a's lines
        _patch("0003-c.patch", "c", ("src/x.c", 101)),  # a's lines
        _patch("0004-d.patch", "d", ("src/y.c", 1)),  # follows c (after:)
    ),
)


def test_overlap_is_the_same_file_and_nearby_lines():
    a, b, c = ([f for f in p.files] for p in SERIES.patches[:3])
    assert overlaps(a, c) and not overlaps(a, b)


def test_only_the_independent_topics_are_tried_each_with_what_it_follows():
    stuck = [PatchResult(name="0001-a.patch", result=CONFLICTED, detail="src/x.c, @@")]
    results = stuck + [PatchResult(name=p.name, result=NOT_TRIED) for p in SERIES.patches[1:]]
    tried = []

    def attempt(sub: Series, files):
        tried.append([p.topic for p in sub.patches])
        return [PatchResult(name=p.name, result=CLEAN) for p in sub.patches]

    follows = {"a": set(), "b": set(), "c": set(), "d": {"c"}}
    out = try_alone(SERIES, [None] * 4, results, follows, attempt)
    assert tried == [["b"]]  # c touches a's lines; d follows c
    assert [r.result for r in out] == [CONFLICTED, CLEAN, NOT_TRIED, NOT_TRIED]
    assert out[1].detail == ALONE
    row = TargetStatus(target="t", status="conflict", patches=out)
    topics = split_topics([(p.topic, [p.name]) for p in SERIES.patches], row)
    assert topics["b"].status != TOPIC_NOT_TRIED and topics["b"].detail == ALONE
    assert topics["c"].status == TOPIC_NOT_TRIED and topics["d"].status == TOPIC_NOT_TRIED


def test_nothing_is_tried_without_a_conflict():
    results = [PatchResult(name=p.name, result=CLEAN) for p in SERIES.patches]
    out = try_alone(SERIES, [None] * 4, results, {}, lambda s, f: 1 / 0)
    assert out == results
