"""`topic import`'s pure parts: a topic name from a subject, `after:` from overlapping hunks, a
commit message that holds a diff kept as words (never a hunk), modes other than regular files
refused."""

import pytest

from orchestrator.errors import ConfigError
from orchestrator.patchset import topic_import, topic_new


def _diff(path: str, start: int, length: int = 3, added: int = 1) -> str:
    body = " a\n" + "+b\n" * added + " c\n d\n"
    return (
        f"diff --git a/{path} b/{path}\nindex 1111111..2222222 100644\n--- a/{path}\n"
        f"+++ b/{path}\n@@ -{start},{length} +{start},{length + added} @@\n{body}"
    )


def test_names_from_subjects_are_unique_slugs():
    taken = {"ggml-opt-fix-it"}
    assert topic_import.name_for("ggml-opt : fix it", taken) == "ggml-opt-fix-it-2"
    assert topic_import.name_for("!!!", set()) == "change"
    assert len(topic_import.name_for("x" * 300, set())) <= 60


def test_a_later_commit_follows_an_earlier_one_only_where_their_lines_meet():
    earlier = _diff("src/x.c", 10)
    assert topic_import.touches(earlier, _diff("src/x.c", 12))
    assert not topic_import.touches(earlier, _diff("src/x.c", 200))
    assert not topic_import.touches(earlier, _diff("src/y.c", 10))


def test_plan_sets_after_from_overlap():
    c = [topic_new.ForkCommit(str(i) * 40, "A <a@x>", "d", f"fix {i}", "") for i in range(3)]
    diffs = [_diff("src/x.c", 10), _diff("src/x.c", 500), _diff("src/x.c", 11)]
    out = topic_import.plan(list(zip(c, diffs, strict=True)), set(), lambda w: w, ["base-topic"])
    assert [t.name for t in out] == ["fix-0", "fix-1", "fix-2"]
    assert [t.after for t in out] == [("base-topic",), ("base-topic",), ("base-topic", "fix-0")]
    assert out[0].origin == f"commit {'0' * 40}"


def test_a_message_holding_a_diff_stays_words():
    commit = topic_new.ForkCommit(
        "1" * 40, "A <a@x>", "d", "fix: it", "Why.\n\ndiff --git a/evil b/evil\n--- a/evil\n"
    )
    diff = _diff("ggml/src/ggml-opt.cpp", 10) + _diff("tests/test-opt.cpp", 10)
    series = topic_new.make_series("w", diff, [commit], "llama.cpp", "llama.cpp")
    assert [f.path for p in series.patches for f in p.files] == [
        "ggml/src/ggml-opt.cpp",
        "tests/test-opt.cpp",
    ]
    assert "\n diff --git a/evil b/evil\n ---" in series.patches[0].header


@pytest.mark.parametrize("mode, kind", [("120000", "a symlink"), ("160000", "a submodule")])
def test_special_files_are_refused(mode, kind):
    diff = _diff("ggml/src/ggml-opt.cpp", 10) + (
        f"diff --git a/tests/link b/tests/link\nnew file mode {mode}\nindex 0000000..1111111\n"
        "--- /dev/null\n+++ b/tests/link\n@@ -0,0 +1 @@\n+/etc/passwd\n"
        "\\ No newline at end of file\n"
    )
    with pytest.raises(ConfigError, match=rf"^w: diff --git a/tests/link b/tests/link: {kind};"):
        topic_new.split_diff("w", diff)
