"""Fixed upstream by behaviour (issue 31 point 4), the pure part: the verdict table (every topic
status against every behaviour outcome), what the drift issue asks per topic (retire, refresh,
re-derive, resolve), and the drift issue's body and problems from a status with topics."""

import datetime as dt

import pytest

from orchestrator.ci import drift_issue as D
from orchestrator.drift import status as S
from orchestrator.drift.behaviour import is_test_patch
from orchestrator.patchset.series import parse_patch, unified_file_diff

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.timezone.utc)
TEXT = {
    S.APPLIES: "",
    S.THREE_WAY: "",
    S.CONFLICT: "0001: ggml/src/ggml-opt.cpp, @@ -826,6 +826,10 @@",
    S.UPSTREAM: "0001: the patch reverse-applies",
    S.NOT_APPLICABLE: "ggml/src/ggml-opt.cpp is absent",
    S.UNREACHABLE: "targets.x.source.url: unreachable",
    S.UNAVAILABLE: "no such version",
    S.TOPIC_NOT_TRIED: "an earlier topic's patch conflicts there",
}
OUTCOMES = {
    S.PASSED: S.Behaviour(outcome=S.PASSED, log="/c/test-opt.log"),
    S.FAILED: S.Behaviour(outcome=S.FAILED, detail="test_per_step_graphs(...): FAIL"),
    S.NOT_CHECKED: S.Behaviour(
        outcome=S.NOT_CHECKED, detail="its test patch 0002 does not apply there: x"
    ),
    S.SKIPPED: S.Behaviour(outcome=S.SKIPPED, detail="skipped (--no-behaviour)"),
}
PROVEN = "(control:accumulator-reset killed on ggml/cpu)"  # proofs.py's record, as check.py says
UNPROVEN = (
    f"{S.CANNOT_TELL} (they pass on the target as it is, but were never seen failing without the "
    "fix in this layout: `ggml-patch matrix --topic NAME` on a target of this layout shows "
    "whether they can)"
)
# (text status, outcome) -> (status, the detail's text after the patch's own detail), with no
# killed control on record (a passing conflict then cannot be called fixed: issue 46 point 5)
TABLE = {
    (S.CONFLICT, S.PASSED): (S.CONFLICT, f"{TEXT[S.CONFLICT]}; {UNPROVEN}"),
    (S.CONFLICT, S.FAILED): (
        S.CONFLICT,
        f"{TEXT[S.CONFLICT]}; its test cases fail on the target as it is: "
        "test_per_step_graphs(...): FAIL",
    ),
    (S.CONFLICT, S.NOT_CHECKED): (
        S.CONFLICT,
        f"{TEXT[S.CONFLICT]}; behaviour not checked: its test patch 0002 does not apply there: x",
    ),
    (S.CONFLICT, S.SKIPPED): (
        S.CONFLICT,
        f"{TEXT[S.CONFLICT]}; behaviour not checked: skipped (--no-behaviour)",
    ),
    (S.UPSTREAM, S.PASSED): (
        S.UPSTREAM,
        f"{TEXT[S.UPSTREAM]}; its test cases pass on the target as it is",
    ),
    (S.UPSTREAM, S.FAILED): (
        S.UPSTREAM,
        f"{TEXT[S.UPSTREAM]}; its test cases fail on the target as it is: "
        "test_per_step_graphs(...): FAIL",
    ),
    (S.UPSTREAM, S.NOT_CHECKED): (
        S.UPSTREAM,
        f"{TEXT[S.UPSTREAM]}; behaviour not checked: its test patch 0002 does not apply there: x",
    ),
    (S.UPSTREAM, S.SKIPPED): (
        S.UPSTREAM,
        f"{TEXT[S.UPSTREAM]}; behaviour not checked: skipped (--no-behaviour)",
    ),
}


@pytest.mark.parametrize("status", list(TEXT))
@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_the_verdict_table(status, outcome):
    text = S.TopicOnTarget(status=status, detail=TEXT[status])
    found = S.with_behaviour(text, OUTCOMES[outcome])
    if status not in S.NEEDS_BEHAVIOUR:  # applies, 3-way, not applicable...: no behaviour
        assert found == text
        return
    want_status, want_detail = TABLE[(status, outcome)]
    assert (found.status, found.detail) == (want_status, want_detail)
    assert found.behaviour == OUTCOMES[outcome]  # kept for --json: its log, cached or not


@pytest.mark.parametrize("status", list(TEXT))
def test_no_behaviour_leaves_the_text_status(status):
    text = S.TopicOnTarget(status=status, detail=TEXT[status])
    assert S.with_behaviour(text, None) == text


def test_which_statuses_need_the_check():
    assert S.NEEDS_BEHAVIOUR == (S.CONFLICT, S.UPSTREAM)


def test_an_empty_text_detail_gives_the_behaviour_alone():
    found = S.with_behaviour(S.TopicOnTarget(status=S.UPSTREAM), OUTCOMES[S.FAILED])
    assert found.detail == "its test cases fail on the target as it is: " + (
        "test_per_step_graphs(...): FAIL"
    )
    found = S.with_behaviour(S.TopicOnTarget(status=S.CONFLICT), OUTCOMES[S.PASSED], PROVEN)
    assert found.detail == (
        f"its test cases pass on the target as it is, and caught the bug {PROVEN} "
        "(the patch: conflict)"
    )


@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_fixed_upstream_only_where_the_control_was_killed_in_that_layout(outcome):
    """Passing tests say "fixed" only if they were seen failing without the fix (its control
    killed) in the target's layout; a proof changes nothing for the other outcomes."""
    text = S.TopicOnTarget(status=S.CONFLICT, detail=TEXT[S.CONFLICT])
    proven = S.with_behaviour(text, OUTCOMES[outcome], PROVEN, "accumulator-reset")
    unproven = S.with_behaviour(text, OUTCOMES[outcome], None, "accumulator-reset")
    if outcome != S.PASSED:
        assert proven == unproven == S.with_behaviour(text, OUTCOMES[outcome])
        return
    assert proven.status == S.FIXED_BEHAVIOUR and PROVEN in proven.detail
    assert S.topic_action(proven) == S.RETIRE
    assert unproven.status == S.CONFLICT and S.topic_action(unproven) == S.RESOLVE
    assert unproven.detail.endswith(UNPROVEN.replace("NAME", "accumulator-reset"))


@pytest.mark.parametrize(
    "status, outcome, action",
    [
        (S.UPSTREAM, S.PASSED, S.RETIRE),
        (S.UPSTREAM, S.FAILED, S.RETIRE),  # its text is there: upstream has it
        (S.UPSTREAM, S.SKIPPED, S.RETIRE),
        (S.CONFLICT, S.PASSED, S.RESOLVE),  # no killed control on record: cannot tell
        (S.CONFLICT, S.FAILED, S.REDERIVE),
        (S.CONFLICT, S.NOT_CHECKED, S.RESOLVE),
        (S.CONFLICT, S.SKIPPED, S.RESOLVE),
        (S.THREE_WAY, None, S.REFRESH),
        (S.APPLIES, None, None),
        (S.NOT_APPLICABLE, None, None),
        (S.TOPIC_NOT_TRIED, None, None),
        (S.UNREACHABLE, None, None),
    ],
)
def test_what_the_drift_issue_asks_per_topic(status, outcome, action):
    text = S.TopicOnTarget(status=status, detail=TEXT[status])
    on = S.with_behaviour(text, OUTCOMES[outcome] if outcome else None)
    assert S.topic_action(on) == action


def _row(results, status=S.CONFLICT):
    patches = [S.PatchResult(name=f"{i:04d}-x.patch", result=r) for i, r in enumerate(results, 1)]
    return S.TargetStatus(target="t", status=status, patches=patches)


def test_the_row_splits_into_topics_under_their_own_names():
    topics = [("a", ["0001-a.patch", "0002-a.patch"]), ("b", ["0001-b.patch", "0002-b.patch"])]
    split = S.split_topics(topics, _row([S.CONFLICTED, S.NOT_TRIED, S.NOT_TRIED, S.NOT_TRIED]))
    assert split["a"].status == S.CONFLICT and split["a"].detail.startswith("0001:")
    assert split["b"].status == S.NOT_TRIED
    split = S.split_topics(topics, _row([S.PRESENT, S.PRESENT, S.CLEAN, S.MERGED], S.THREE_WAY))
    assert (split["a"].status, split["b"].status) == (S.UPSTREAM, S.THREE_WAY)
    none = S.TargetStatus(target="t", status=S.NOT_APPLICABLE, detail="gone")
    assert {v.status for v in S.split_topics(topics, none).values()} == {S.NOT_APPLICABLE}


def _patch(path: str):
    return parse_patch(
        "0002-x.patch",
        "From: A <a@b>\nSubject: [PATCH] x\n\n" + unified_file_diff(path, "a\n", "b\n"),
    )


def test_a_test_patch_touches_only_tests():
    assert is_test_patch(_patch("tests/test-opt.cpp"))
    assert is_test_patch(_patch("core/vendor/llama.cpp/tests/test-opt.cpp"))
    assert not is_test_patch(_patch("ggml/src/ggml-opt.cpp"))


# ---- the drift issue ----


def _status(topics: dict[str, S.TopicOnTarget], status=S.CONFLICT):
    row = S.TargetStatus(target="ggml-x", status=status, base="abc123def4567890", topics=topics)
    return S.StatusReport(profile="live", targets=[row]).to_json()


def test_the_drift_issue_says_per_topic_what_to_do():
    fixed = S.with_behaviour(
        S.TopicOnTarget(status=S.CONFLICT, detail="0001: x"), OUTCOMES[S.PASSED], PROVEN
    )
    failing = S.with_behaviour(
        S.TopicOnTarget(status=S.CONFLICT, detail="0003: y"), OUTCOMES[S.FAILED]
    )
    topics = {
        "accumulator-reset": fixed,
        "grad-acc-non-static": S.TopicOnTarget(status=S.THREE_WAY),
        "reset-non-static": failing,
    }
    status = D.read_status(_status(topics), "status.json")
    lines = status[1]["ggml-x"].topics
    assert {n: (v.status, v.action) for n, v in lines.items()} == {
        "accumulator-reset": (S.FIXED_BEHAVIOUR, S.RETIRE),
        "grad-acc-non-static": (S.THREE_WAY, S.REFRESH),
        "reset-non-static": (S.CONFLICT, S.REDERIVE),
    }
    action, state = D.decide(None, status, None, "", NOW)
    assert action.kind == "open"
    assert "ggml-x/accumulator-reset: retire" in D.problems(state)
    body = action.body
    assert "### Per topic" in body
    assert (
        "`accumulator-reset` is merged upstream on ggml-x (fixed upstream (behaviour)): retire "
        "it, `state: merged-upstream` and `applied_upstream: abc123def456`" in body
    )
    assert "`ggml-patch refresh ggml-x --topic grad-acc-non-static`" in body
    assert "`reset-non-static` conflicts on ggml-x and its own test cases fail there" in body
    # the state round-trips through the body: the next run reads the topics back
    again = D.Found(number=1, body=body).state
    assert again is not None and again.targets["ggml-x"].topics == lines


def test_a_topic_to_retire_on_an_upstream_target_is_a_problem_of_its_own():
    merged = S.with_behaviour(
        S.TopicOnTarget(status=S.UPSTREAM, detail="0001: the patch reverse-applies"),
        OUTCOMES[S.PASSED],
    )
    status = D.read_status(_status({"accumulator-reset": merged}, S.UPSTREAM), "status.json")
    state = D.current_state(status, None, None, "")
    assert D.problems(state) == ["ggml-x/accumulator-reset: retire"]
    without_topics = D.read_status(_status({}, S.UPSTREAM), "status.json")
    assert D.problems(D.current_state(without_topics, None, None, "")) == []


def test_the_drift_issue_never_says_retire_on_an_unproven_check():
    """Passing cases with no killed control on record: the issue asks to resolve, not retire."""
    unproven = S.with_behaviour(
        S.TopicOnTarget(status=S.CONFLICT, detail="0001: x"), OUTCOMES[S.PASSED], None, "t1"
    )
    status = D.read_status(_status({"accumulator-reset": unproven}), "status.json")
    action, state = D.decide(None, status, None, "", NOW)
    assert not any(p.endswith(": retire") for p in D.problems(state))
    assert "retire it" not in action.body and "merged upstream" not in action.body
    assert (
        "`accumulator-reset` conflicts on ggml-x and its own test cases cannot tell whether "
        "upstream fixed it there: resolve the conflict" in action.body
    )
