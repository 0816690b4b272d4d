"""Per-topic controls: the verdict rule (classify.topic_control_verdict) and what a queue's series
knows of each topic (its source hunks, its own cases, a declared crash)."""

import pytest

from orchestrator.config import load_matrix
from orchestrator.errors import ConfigError
from orchestrator.model.results import Verdict
from orchestrator.patchset.files import load_series
from orchestrator.patchset.queue import parse_topic_meta
from orchestrator.verdicts.classify import (
    crash_line,
    crashed_in,
    last_case,
    topic_control_verdict,
)

from ..helpers.patches import queue_topics, real_queue
from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit

CASES = ["test_grad_non_static"]
WHY = "ggml_opt_grad_acc dereferences a NULL gb_opt (SIGSEGV)"
OTHERS_OK = "  test_opt_period_non_static(high_level=no, subtest=weights, optimizer=sgd): OK\n"
OWN_OK = (
    "  test_grad_non_static(high_level=no, schedule=TTTTTT, opt_period=2, subtest=grads, "
    "optimizer=sgd): \x1b[1;32mOK\x1b[0m\n"
)
OWN_OK_2 = OWN_OK.replace("opt_period=2", "opt_period=3")
LAST_OK = "  test_regression(subtest=weights, optimizer=sgd): OK\n"
# the passing run of the same test-opt: each case prints its line once it is done
REFERENCE = "Backend 1/1: CPU\n" + OTHERS_OK + OWN_OK + OWN_OK_2 + LAST_OK + "2/2 passed\n"


def _verdict(outcome, exit_code, output, crash=WHY, build_ok=True, reference=REFERENCE):
    return topic_control_verdict(build_ok, outcome, exit_code, output, CASES, crash, reference)


def test_a_crash_in_its_own_case_is_killed_only_for_the_declaring_topic():
    # it died after the other topic's line: in the case the passing run printed next, its own
    declared = _verdict("crashed", -11, "Backend 1/1: CPU\n" + OTHERS_OK)
    assert declared.verdict == Verdict.KILLED
    assert "SIGSEGV" in declared.reason and "test_grad_non_static" in declared.reason
    undeclared = _verdict("crashed", -11, OTHERS_OK, crash=None)
    assert undeclared.verdict == Verdict.INVALID
    assert "declares no control_crash" in undeclared.reason


def test_a_crash_outside_its_own_cases_is_invalid_even_when_declared():
    v = _verdict("crashed", -11, OTHERS_OK + OWN_OK + OWN_OK_2)  # next: another topic's case
    assert v.verdict == Verdict.INVALID
    assert "outside the topic's cases" in v.reason and "test_regression" in v.reason
    # without a reference the case it died in is unknown: the last one printed stands for it
    v = _verdict("crashed", -11, OTHERS_OK, reference="")
    assert v.verdict == Verdict.INVALID and "test_opt_period_non_static" in v.reason
    assert _verdict("crashed", -11, "", reference="").verdict == Verdict.INVALID


def test_crashed_in_follows_the_passing_run_and_says_the_line():
    assert crashed_in(OTHERS_OK + OWN_OK, REFERENCE) == "test_grad_non_static"  # its 2nd case
    assert crashed_in("", REFERENCE) == "test_opt_period_non_static"  # before any line
    # a run that printed other lines than the reference: the last case it printed
    assert crashed_in(OWN_OK_2, REFERENCE) == "test_grad_non_static"
    assert crashed_in(OWN_OK_2 + LAST_OK, REFERENCE) == "test_regression"
    assert crash_line(-11, OTHERS_OK, REFERENCE) == "test-opt: SIGSEGV in test_grad_non_static"
    assert crash_line(-6, "", "") == "test-opt: SIGABRT"
    # another program's crash is named as that program (never "test-opt")
    ops = "test-backend-ops -o CONCAT"
    assert crash_line(-11, "  CONCAT(type=i64): OK\n", "", ops) == f"{ops}: SIGSEGV"


def test_a_build_failure_or_a_timeout_stays_invalid_whatever_the_topic_declares():
    assert _verdict("crashed", -11, OTHERS_OK, build_ok=False).verdict == Verdict.INVALID
    assert _verdict("timeout", None, OTHERS_OK).verdict == Verdict.INVALID


def test_a_failure_is_killed_only_by_its_own_cases():
    own_fail = "  test_grad_non_static(high_level=no, schedule=TETTET, subtest=grads): FAIL\n"
    other_fail = (
        "  test_opt_period_non_static(high_level=no, subtest=weights): \x1b[1;31mFAIL\x1b[0m\n"
    )
    v = _verdict("failed", 1, OTHERS_OK + own_fail)
    assert v.verdict == Verdict.KILLED and "test_grad_non_static" in v.reason
    v = _verdict("failed", 1, other_fail)
    assert v.verdict == Verdict.INVALID and "outside the topic's cases" in v.reason
    assert _verdict("passed", 0, OTHERS_OK).verdict == Verdict.SURVIVED


def test_last_case_is_the_last_case_line_printed():
    assert last_case(OTHERS_OK + OWN_OK) == "test_grad_non_static"
    assert last_case("Backend CPU sgd: OK\n") is None


def test_control_crash_is_one_line_in_topic_yaml():
    base = (
        "summary: s\norigin: o\nlast_update: 2026-12-02\nstate: local\n"
        "control_crash: a NULL dereference\ntests: [test-opt]\n"
    )
    meta, _ = parse_topic_meta("patches/t/topic.yaml", base)
    assert meta.control_crash == "a NULL dereference"
    with pytest.raises(ConfigError, match="patches/t/topic.yaml:5"):
        parse_topic_meta("patches/t/topic.yaml", base.replace("a NULL", "[1, 2]"))


def test_the_queue_series_knows_each_topics_hunks_cases_and_declared_crash():
    queue = real_queue()  # patches/queue.yaml: every topic it lists, however many
    series = load_series(load_matrix(ROOT / "matrix.yaml"), queue_topics())
    assert series.topics == tuple(queue_topics())
    for topic in series.topics:  # each topic's own source hunks: what its control reverts
        assert [f.path for f in series.topic_fix_diffs(topic)], topic
    # the cases the shipped topics add to test-opt: what kills each one's control
    expected_cases = {
        "accumulator-reset": ["test_opt_period_non_static"],
        "grad-acc-non-static": ["test_grad_non_static"],
        "reset-non-static": ["test_reset_non_static"],
    }
    for topic, cases in expected_cases.items():
        assert [f.path for f in series.topic_fix_diffs(topic)] == ["ggml/src/ggml-opt.cpp"]
        assert series.topic_cases(topic) == cases
    own = {p.topic for p in series.patches}
    assert own == set(series.topics)  # every patch is one topic's
    # a crash is declared in topic.yaml (grad-acc-non-static's: a NULL dereference)
    declared = [t for t in series.topics if queue.topic(t).meta.control_crash]
    assert [t for t, _ in series.control_crash] == declared
    assert "grad-acc-non-static" in declared and "accumulator-reset" not in declared
