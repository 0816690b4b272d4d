"""The patch queue's model: topic.yaml and queue.yaml validated in one line each (file:line: key:
what is expected), the series' shape (source change first, then its tests), the order `after:`
gives, and the queue read from a patches/ folder."""

import datetime
import shutil

import pytest
import yaml

from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.patchset import queue_edit
from orchestrator.patchset.files import load_queue, load_series
from orchestrator.patchset.queue import (
    build_queue,
    check_series_shape,
    parse_queue_order,
    parse_topic_meta,
)
from orchestrator.patchset.series import Series
from orchestrator.verdicts.mutants import load_mutants

from ..helpers.patches import PATCH_DIR, upstream_series
from ..helpers.tools import ROOT

META = """\
summary: the fix in one line
origin: https://github.com/example/llama.cpp/commit/abc1234
bug: null
forwarded: https://github.com/ggml-org/llama.cpp/pull/1
applied_upstream: null
last_update: 2026-12-02
state: forwarded
after: []
tests: [test-opt]
"""


def load_mutants_names(matrix) -> list[str]:
    return [m.name for m in load_mutants(matrix)]


def meta(**edits: str) -> str:
    """META with the keys given replaced (a value of None removes the key)."""
    lines = []
    for line in META.splitlines():
        key = line.split(":", 1)[0]
        if key not in edits:
            lines.append(line)
        elif edits[key] is not None:
            lines.append(f"{key}: {edits[key]}")
    return "\n".join(lines) + "\n"


def test_the_real_topic_parses():
    m, _ = parse_topic_meta("topic.yaml", (PATCH_DIR / "topic.yaml").read_text())
    assert m.state == "local" and m.after == [] and m.last_update == "2026-12-07"
    assert m.bug is None and m.forwarded is None and m.applied_upstream is None


def test_a_good_topic_and_a_quoted_date():
    m, _ = parse_topic_meta("t.yaml", meta(last_update='"2026-12-01"'))
    assert m.last_update == "2026-12-01" and m.state == "forwarded"
    assert m.to_json()["bug"] is None  # kept as null in JSON: DEP-3's "not yet"


@pytest.mark.parametrize(
    "edits, expected",
    [
        (
            {"state": "merged"},
            "t.yaml:7: state: 'merged' is not a state (expected one of: local, forwarded, "
            "merged-upstream, dropped)",
        ),
        ({"summary": None}, "t.yaml:1: (top level): missing required key 'summary'"),
        ({"bug": "http://x/1"}, "t.yaml:3: bug: 'http://x/1' is not an https:// URL"),
        ({"applied_upstream": "HEAD"}, "t.yaml:5: applied_upstream: 'HEAD' is not an upstream"),
        ({"last_update": "2026-13-01"}, "t.yaml:6: last_update: '2026-13-01' is not a valid "),
        ({"last_update": "yesterday"}, "t.yaml:6: last_update: 'yesterday' is not a date"),
        ({"after": "[Bad_Name]"}, "t.yaml:8: after[0]: 'Bad_Name' is not a topic name"),
        ({"after": "[a, a]"}, "t.yaml:8: after[1]: 'a' twice"),
        (
            {"tests": "[opt]"},
            "t.yaml:9: tests[0]: 'opt' is not a test program and its arguments, e.g. 'test-opt'",
        ),
        ({"tests": "[]"}, "t.yaml:9: tests: "),
        ({"tests": None}, "t.yaml:1: (top level): missing required key 'tests'"),
        (
            {"notes": "x"},
            "t.yaml:10: notes: unknown key (allowed: summary, problem, symptom, api, origin",
        ),
        ({"summary": '"two\\nlines"'}, "t.yaml:1: summary: 'two\\nlines' is not one line"),
    ],
)
def test_topic_errors_are_one_line_naming_file_line_and_key(edits, expected):
    extra = {k: v for k, v in edits.items() if k in ("notes",)}
    text = meta(**edits) + "".join(f"{k}: {v}\n" for k, v in extra.items())
    with pytest.raises(ConfigError) as e:
        parse_topic_meta("t.yaml", text)
    assert str(e.value).startswith(expected), str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("topics: []\n", "q.yaml:1: topics: must not be empty"),
        ("topics: [a, b, a]\n", "q.yaml:1: topics[2]: 'a' is listed twice"),
        ("topics: [a, 'b c']\n", "q.yaml:1: topics[1]: 'b c' is not a topic name"),
        ("topics: [a]\norder: [a]\n", "q.yaml:2: order: unknown key (allowed: topics, default)"),
        ("- a\n", "q.yaml:1: (top level): expected a mapping"),
        ("topics: [a\n", "q.yaml:2: invalid YAML"),
    ],
)
def test_queue_order_errors(text, expected):
    with pytest.raises(ConfigError) as e:
        parse_queue_order("q.yaml", text)
    assert str(e.value).startswith(expected), str(e.value)


def _series(*kinds: str) -> Series:
    """A series of the real patches: "fix" is the source change, "test" test-opt's cases."""
    fix, test = upstream_series().patches
    return Series("llama.cpp", tuple(fix if k == "fix" else test for k in kinds))


def test_series_shape_source_first_then_tests():
    check_series_shape("patches/a", _series("fix", "test"))
    check_series_shape("patches/a", _series("fix", "fix", "test", "test"))
    with pytest.raises(ConfigError, match=r"^patches/a: the series has no test patch"):
        check_series_shape("patches/a", _series("fix"))
    with pytest.raises(ConfigError, match=r"^patches/a/0002-.*must start with the source change"):
        check_series_shape("patches/a", _series("test", "fix"))
    with pytest.raises(ConfigError, match=r"^patches/a/0001-.*a source change after the test"):
        check_series_shape("patches/a", _series("fix", "test", "fix"))


def _queue(order: list[str], after: dict[str, list[str]], states: dict[str, str] = None):
    files = {}
    for name in order:
        deps = after.get(name, [])
        text = meta(after=f"[{', '.join(deps)}]", state=(states or {}).get(name, "local"))
        files[name] = (f"patches/{name}/topic.yaml", text, _series("fix", "test"))
    return build_queue("patches/queue.yaml", "llama.cpp", f"topics: [{', '.join(order)}]\n", files)


def test_order_is_the_listed_one_each_topic_after_what_it_follows():
    assert _queue(["a", "b", "c"], {}).names() == ["a", "b", "c"]
    assert _queue(["a", "b", "c"], {"a": ["c"]}).names() == ["b", "c", "a"]
    assert _queue(["a", "b", "c"], {"a": ["b"], "b": ["c"]}).names() == ["c", "b", "a"]
    assert _queue(["a", "b", "c"], {"b": ["a"]}).names() == ["a", "b", "c"]  # already after


def test_unknown_after_and_cycles_are_one_line():
    with pytest.raises(ConfigError) as e:
        _queue(["a", "b"], {"b": ["zz"]})
    assert str(e.value) == (
        "patches/b/topic.yaml:8: after[0]: unknown topic 'zz' (expected one listed in "
        "patches/queue.yaml: a, b)"
    )
    with pytest.raises(ConfigError) as e:
        _queue(["a", "b", "c"], {"a": ["c"], "c": ["b"], "b": ["a"]})
    assert str(e.value) == (
        "patches/a/topic.yaml:8: after: a cycle (a -> c -> b -> a); one of them must not wait "
        "for the other"
    )
    with pytest.raises(ConfigError, match=r"^patches/a/topic.yaml:8: after\[0\]: the topic itself"):
        _queue(["a"], {"a": ["a"]})


def test_active_topics_apply_in_order_numbered_as_one_series():
    q = _queue(["a", "b", "c", "d"], {}, {"b": "merged-upstream", "d": "dropped"})
    assert [t.name for t in q.active()] == ["a", "c"]
    series = q.series()
    assert [p.name[:5] for p in series.patches] == ["0001-", "0002-", "0003-", "0004-"]
    assert [p.name[5:] for p in series.patches] == [
        p.name[5:] for p in _series(*["fix", "test"] * 2).patches
    ]
    assert series.patches[2].files == q.topic("c").series.patches[0].files


def test_a_chosen_topic_brings_the_active_topics_it_follows():
    q = _queue(["a", "b", "c"], {"c": ["a"]})
    assert [t.name for t in q.chosen(["c"])] == ["a", "c"]
    assert [t.name for t in q.chosen(["b"])] == ["b"]
    assert [t.name for t in q.chosen()] == ["a", "b", "c"]
    with pytest.raises(ConfigError, match=r"^--topic: unknown topic 'x' \(the queue: a, b, c\)$"):
        q.chosen(["x"])
    q = _queue(["a", "b"], {}, {"a": "dropped"})
    with pytest.raises(ConfigError, match=r"^--topic: 'a' is dropped; only local and forwarded"):
        q.chosen(["a"])
    # an earlier run's topics (bundle after a retire): named ones whatever their state
    assert [t.name for t in q.chosen(["a", "b"], any_state=True)] == ["a", "b"]
    assert q.series(["a", "b"], any_state=True).topics == ("a", "b")


# ---- the queue on disk ----


def _project(tmp_path):
    shutil.copytree(ROOT / "patches", tmp_path / "patches")
    shutil.copytree(ROOT / "native_tests", tmp_path / "native_tests")
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "matrix.yaml")
    return tmp_path / "matrix.yaml"


def test_the_real_queue_is_queue_yamls_topics_topic_one_with_the_same_series():
    matrix = load_matrix(ROOT / "matrix.yaml")
    queue = load_queue(matrix)
    # the topics as patches/queue.yaml lists them (read here as plain YAML, not by the tool),
    # whatever their number: `ggml-patch topic new` adds one
    listed = yaml.safe_load((ROOT / "patches" / "queue.yaml").read_text(encoding="utf-8"))
    assert queue.names() == listed["topics"]
    assert queue.names()[0] == "accumulator-reset"  # topic 1: the gate's, upstream first
    series = load_series(matrix, ["accumulator-reset"])
    assert series.sha256 == upstream_series().sha256  # the same bytes and names as before
    assert series.topics == ("accumulator-reset",)
    # without --topic a run applies every active topic (or queue.yaml's `default:`), in order
    names = [t.name for t in queue.active() if t.name in listed.get("default", queue.names())]
    assert names and load_series(matrix).topics == tuple(names)
    assert load_series(matrix, names).topics == tuple(names)
    # each topic's tests are its topic.yaml's: the gate test is topic 1's declared test, built
    # and run only where topic 1 is carried
    whole = load_series(matrix)
    for t in queue.topics:
        assert [s.name for s in whole.tests_of(t.name)] == t.meta.tests
    assert "test-opt-dynamic-accum" in [s.name for s in whole.tests()]
    assert whole.training_of("accumulator-reset") == ("train-opt-dynamic",)
    # topics 2 and 3 follow topic 1 (their cases use its test helper): naming one brings it
    with_first = load_series(matrix, ["grad-acc-non-static"])
    assert with_first.topics == ("accumulator-reset", "grad-acc-non-static")
    assert [s.name for s in with_first.tests_of("grad-acc-non-static")] == ["test-opt"]
    # topic 2's bug is a crash: its control may die by a signal in its own cases
    assert queue.topic("grad-acc-non-static").meta.control_crash
    assert queue.topic("accumulator-reset").meta.control_crash is None
    assert load_mutants_names(matrix)[:2] == [
        "02-reset-at-build-when-opt-i-zero",
        "03-reset-gb-opt-zeroes-momenta",
    ]


def test_the_three_topics_in_patches_make_a_valid_queue(tmp_path):
    """grad-acc-non-static and reset-non-static (s6-cxx's): valid topic.yaml, series source first
    then tests, their mutants read per topic, in order after topic 1 (not yet listed)."""
    m = _project(tmp_path)
    names = ["accumulator-reset", "grad-acc-non-static", "reset-non-static"]
    (tmp_path / "patches" / "queue.yaml").write_text(f"topics: [{', '.join(names)}]\n")
    matrix = load_matrix(m)
    queue = load_queue(matrix)
    assert queue.names() == names and [t.meta.state for t in queue.active()] == ["local"] * 3
    whole = load_series(matrix)
    assert [p.name[:4] for p in whole.patches] == ["0001", "0002", "0003", "0004", "0005", "0006"]
    assert whole.topics == tuple(names)
    assert load_series(matrix, ["accumulator-reset"]).sha256 == upstream_series().sha256
    mutants = load_mutants_names(matrix)
    assert len(mutants) == 20 and mutants[-1] == "04-restart-period"


def test_missing_files_are_one_line(tmp_path):
    m = _project(tmp_path)
    (tmp_path / "patches" / "queue.yaml").rename(tmp_path / "patches" / "order.yaml")
    with pytest.raises(ConfigError, match=r"patches/queue.yaml: missing; expected `topics:"):
        load_queue(load_matrix(m))
    (tmp_path / "patches" / "order.yaml").write_text("topics: [accumulator-reset, other]\n")
    (tmp_path / "patches" / "order.yaml").rename(tmp_path / "patches" / "queue.yaml")
    with pytest.raises(ConfigError, match=r"queue.yaml: topics\[1\]: .*patches/other is not a"):
        load_queue(load_matrix(m))
    (tmp_path / "patches" / "other").mkdir()
    with pytest.raises(ConfigError, match=r"queue.yaml: topics\[1\]: .*other has no topic.yaml"):
        load_queue(load_matrix(m))
    shutil.copy(PATCH_DIR / "topic.yaml", tmp_path / "patches" / "other" / "topic.yaml")
    with pytest.raises(ConfigError, match=r"patches/other: the series is empty"):
        load_queue(load_matrix(m))


def test_a_topic_of_only_a_source_change_is_refused_on_load(tmp_path):
    m = _project(tmp_path)
    for p in (tmp_path / "patches" / "accumulator-reset").glob("0002-*.patch"):
        p.unlink()
    with pytest.raises(ConfigError, match=r"accumulator-reset: the series has no test patch"):
        load_series(load_matrix(m))


def test_two_topics_in_order_and_their_mutants(tmp_path):
    m = _project(tmp_path)
    patches = tmp_path / "patches"
    shutil.copytree(patches / "accumulator-reset", patches / "second")
    (patches / "second" / "topic.yaml").write_text(meta(after="[accumulator-reset]"))
    (patches / "queue.yaml").write_text("topics: [second, accumulator-reset]\n")
    mutants = tmp_path / "native_tests" / "second" / "mutants"
    mutants.mkdir(parents=True)
    one = tmp_path / "native_tests" / "accumulator-reset" / "mutants"
    first = sorted(one.glob("*.patch"))[0]
    shutil.copy(first, mutants / "99-other.patch")
    matrix = load_matrix(m)
    assert load_queue(matrix).names() == ["accumulator-reset", "second"]
    assert [p.name[:4] for p in load_series(matrix).patches] == ["0001", "0002", "0003", "0004"]
    assert load_mutants_names(matrix)[-1] == "99-other"
    assert [p.name[:4] for p in load_series(matrix, ["accumulator-reset"]).patches] == [
        "0001",
        "0002",
    ]
    shutil.copy(first, mutants / first.name)  # the same name in two topics
    with pytest.raises(ConfigError, match=r"second/mutants/02-.*also topic 'accumulator-reset'"):
        load_mutants_names(matrix)


# ---- `ggml-patch queue`: a target's status split back into the topics ----


def test_a_targets_status_splits_into_its_topics():
    from orchestrator.drift import status as S
    from orchestrator.drift.topics import NOT_TRIED, split_by_topic

    q = _queue(["a", "b", "c"], {}, {"b": "dropped"})  # two active topics, two patches each

    def row(*results, status=S.APPLIES, detail=""):
        names = [p.name for p in q.series().patches]
        patches = [S.PatchResult(name=n, result=r) for n, r in zip(names, results, strict=False)]
        return S.TargetStatus(target="t", status=status, detail=detail, patches=patches)

    split = split_by_topic(q, row(S.CLEAN, S.CLEAN, S.PRESENT, S.PRESENT))
    assert {n: s.status for n, s in split.items()} == {"a": S.APPLIES, "c": S.UPSTREAM}
    split = split_by_topic(q, row(S.CLEAN, S.MERGED, S.CLEAN, S.PRESENT))
    assert split["a"].status == S.THREE_WAY
    assert (split["c"].status, split["c"].detail) == (S.APPLIES, "already upstream: 0002")
    split = split_by_topic(q, row(S.CONFLICTED))
    assert (split["a"].status, split["c"].status) == (S.CONFLICT, NOT_TRIED)
    split = split_by_topic(q, row(status=S.NOT_APPLICABLE, detail="no ggml-opt.cpp"))
    assert {s.status for s in split.values()} == {S.NOT_APPLICABLE}
    assert split["c"].detail == "no ggml-opt.cpp"


# ---- `ggml-patch topic new`: the split (pure) ----


def _diff(*paths: str) -> str:
    from orchestrator.patchset.series import unified_file_diff

    return "".join(unified_file_diff(p, "a\n", "b\n") for p in paths)


def test_topic_new_splits_source_first_then_tests():
    from orchestrator.patchset import topic_new

    commit = topic_new.ForkCommit(
        "1" * 40, "A <a@x>", "Mon, 1 Dec 2026 00:00:00 +0000", "fix: it", "Why."
    )
    diff = _diff("tests/test-opt.cpp", "ggml/src/ggml-opt.cpp", "ggml/include/ggml-opt.h")
    series = topic_new.make_series("d", diff, [commit], "llama.cpp", "llama.cpp")
    fix, test = series.patches
    assert [f.path for f in fix.files] == ["ggml/src/ggml-opt.cpp", "ggml/include/ggml-opt.h"]
    assert [f.path for f in test.files] == ["tests/test-opt.cpp"]
    assert (fix.name, fix.subject, fix.author) == ("0001-fix-it.patch", "fix: it", "A <a@x>")
    assert "\n\nWhy.\n\n" in fix.header and test.subject == "tests : add the cases of fix: it"
    # the ggml layout's paths re-targeted to the queue's (llama.cpp)
    ggml = topic_new.make_series(
        "d", _diff("src/ggml-opt.cpp", "tests/t.cpp"), [commit], "ggml", "llama.cpp"
    )
    assert [f.path for p in ggml.patches for f in p.files] == [
        "ggml/src/ggml-opt.cpp",
        "tests/t.cpp",
    ]
    with pytest.raises(ConfigError, match=r"^d: the change has no test under tests/"):
        topic_new.make_series(
            "d", _diff("ggml/src/ggml-opt.cpp"), [commit], "llama.cpp", "llama.cpp"
        )
    with pytest.raises(ConfigError, match=r"^d: the change touches only tests/"):
        topic_new.make_series("d", _diff("tests/t.cpp"), [commit], "llama.cpp", "llama.cpp")
    with pytest.raises(ConfigError, match=r"^d: no 'diff --git' section"):
        topic_new.make_series("d", "", [commit], "llama.cpp", "llama.cpp")


def test_topic_new_names_queue_and_origin(tmp_path):
    from orchestrator.patchset import topic_new

    with pytest.raises(ConfigError, match=r"'Bad' is not a topic name"):
        topic_new.check_name("Bad", tmp_path, [])
    with pytest.raises(ConfigError, match=r"exists: the topic 'a' is there"):
        topic_new.check_name("a", tmp_path, ["a"])
    with pytest.raises(ConfigError, match=r"is not a topic name .*at most 100 characters"):
        topic_new.check_name("a" * 150, tmp_path, [])
    text = "# the order\ntopics: [a]\ndefault: [a]\n# trailing\n"
    out = queue_edit.queue_append("q", text, "b")
    assert out == "# the order\ntopics: [a, b]\ndefault: [a]\n# trailing\n"
    url = "https://user:tok3n@example.org/o/r.git"
    assert topic_new.origin_of(url, "commit 0abc") == "https://example.org/o/r.git commit 0abc"
    assert topic_new.origin_of(None, "commit 0abc") == "commit 0abc"
    assert topic_new.origin_of("/home/me/fork", "commit 0abc") == "commit 0abc"
    meta_text = topic_new.topic_yaml("s", "o", ["a"], datetime.date(2026, 12, 2), ["test-opt"])
    meta, _ = parse_topic_meta("t.yaml", meta_text)
    assert (meta.state, meta.after, meta.last_update, meta.bug) == (
        "local",
        ["a"],
        "2026-12-02",
        None,
    )


def test_the_default_topics_are_what_a_run_without_topic_applies():
    """queue.yaml's `default:` picks what a run applies without --topic (with what they
    follow); a name outside the queue is one line."""
    text = "topics: [a, b]\ndefault: [b]\n"
    files = {n: (f"{n}/topic.yaml", meta(), _series("fix", "test")) for n in ("a", "b")}
    queue = build_queue("q.yaml", "llama.cpp", text, files)
    assert [t.name for t in queue.chosen()] == ["b"]
    assert [t.name for t in queue.chosen(["a"])] == ["a"]
    with pytest.raises(ConfigError, match=r"^q.yaml: default: 'c' is not one of the queue"):
        build_queue("q.yaml", "llama.cpp", "topics: [a, b]\ndefault: [c]\n", files)
