"""The drift issue's pure core: the state merge of a partial status, which issue is ours (marker,
open before closed), Link pagination kept on the API server, the retry policy, and the
"only the time changed" check that spares an edit."""

import datetime as dt

import pytest

from orchestrator.ci import drift_issue as D
from orchestrator.upstream import github_api as G

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 1, 4, 17, tzinfo=dt.timezone.utc)


def _row(status: str) -> D.TargetRow:
    return D.TargetRow(status=status, detail="", base="ab")


def test_a_partial_status_merges_and_a_full_one_replaces():
    prev = D.State(
        profile="live",
        targets={"a": _row("conflict"), "b": _row("applies cleanly")},
        failing={"x/cpu": {"status": "failed"}},
    )
    part = D.current_state(
        ("live", {"b": _row("applies with 3-way merge")}), None, prev, "r2", partial=True
    )
    assert part.targets == {"a": _row("conflict"), "b": _row("applies with 3-way merge")}
    assert part.failing == prev.failing and part.profile == "live"
    other = D.current_state(("default", {"ggml": _row("applies cleanly")}), None, prev, "r3")
    # another profile: merged
    assert set(other.targets) == {"a", "b", "ggml"} and other.profile == "live"
    full = D.current_state(("live", {"b": _row("applies cleanly")}), None, prev, "r4")
    assert full.targets == {"b": _row("applies cleanly")}  # a full run of the same profile replaces


def test_ours_is_found_by_the_marker_and_the_open_one_wins():
    items = [
        {"number": 9, "body": D.MARKER, "state": "closed", "state_reason": "completed"},
        {"number": 4, "body": "x " + D.MARKER, "state": "open"},
        {"number": 7, "body": D.MARKER, "state": "open"},
        {"number": 8, "body": "not ours", "state": "open"},
        {"number": 10, "body": D.MARKER, "state": "open", "pull_request": {}},
    ]
    found = D.ours(items)
    assert [f.number for f in found] == [4, 7, 9]
    assert D.the_one(found).number == 4
    closed = D.ours(
        [i for i in items if i["state"] == "closed"]
        + [{"number": 2, "body": D.MARKER, "state": "closed", "state_reason": "not_planned"}]
    )
    one = D.the_one(closed)
    # the latest closed one
    assert one.number == 9 and not one.open and one.state_reason == "completed"
    assert D.the_one([]) is None


def test_next_page_follows_link_only_on_the_api_server():
    api = "https://api.github.com"
    good = {
        "Link": f'<{api}/repos/o/n/issues?page=2>; rel="next", '
        f'<{api}/repos/o/n/issues?page=5>; rel="last"'
    }
    assert D.next_page(good, api) == f"{api}/repos/o/n/issues?page=2"
    # the token stays home
    assert D.next_page({"Link": '<https://evil.example/x?page=2>; rel="next"'}, api) is None
    assert D.next_page({}, api) is None


def test_the_retry_policy():
    r = G.retry_policy()
    assert r.total == G.RETRIES == 3 and r.respect_retry_after_header and r.allowed_methods is None
    assert (
        set(r.status_forcelist) == {429, 500, 502, 503, 504}
        and r.raise_on_status is False
        and r.redirect == 0
    )
    assert r.is_retry("POST", 502) and r.is_retry("GET", 429)
    assert r.is_retry("GET", 403, has_retry_after=True)  # a secondary rate limit that says when
    assert not r.is_retry("GET", 403) and not r.is_retry("GET", 404) and not r.is_retry("GET", 410)


def test_the_backoff_factor_can_be_changed_for_tests(monkeypatch):
    monkeypatch.setenv(G.BACKOFF_ENV, "0")
    assert G.retry_policy().backoff_factor == 0
    monkeypatch.setenv(G.BACKOFF_ENV, "nonsense")
    assert G.retry_policy().backoff_factor == G.BACKOFF


def test_only_the_time_changing_is_no_edit():
    status = ("live", {"a": _row("conflict"), "b": _row("applies cleanly")})
    first, state = D.decide(None, status, None, "https://x/runs/1", NOW)
    found = D.Found(1, first.body)
    later = NOW + dt.timedelta(days=1)
    again, _ = D.decide(
        found, ("live", dict(reversed(list(status[1].items())))), None, "https://x/runs/2", later
    )
    assert again.kind == "none"  # another time, another run, another order: nothing to edit
    changed, _ = D.decide(
        found,
        (
            "live",
            {
                "a": _row("conflict").model_copy(update={"detail": "moved"}),
                "b": _row("applies cleanly"),
            },
        ),
        None,
        "https://x/runs/3",
        later,
    )
    # changed but not worse: an edit, no comment
    assert changed.kind == "update" and changed.comment == ""
    assert D.same_but_for_time(
        state, D.State(profile=state.profile, targets=state.targets, run="other")
    )


def test_not_planned_is_respected_until_worse():
    status = ("live", {"a": _row("conflict")})
    opened, _ = D.decide(None, status, None, "", NOW)
    closed = D.Found(1, opened.body, open=False, state_reason="not_planned")
    assert D.decide(closed, status, None, "", NOW)[0].kind == "none"
    worse = ("live", {"a": _row("conflict"), "b": _row("not applicable")})
    act, _ = D.decide(closed, worse, None, "", NOW)
    assert act.kind == "reopen" and "b: applies cleanly -> not applicable" in act.comment
    assert [r.method for r in D.requests_for(act)] == ["PATCH", "POST"]
    assert D.requests_for(act)[0].payload["state"] == "open"


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {"version": 2, "profile": "p", "targets": {}},
        {"version": 1, "profile": "p", "targets": {"a": {"status": 3}}},
        {"version": 1, "profile": "p", "targets": {}, "extra": 1},
    ],
)
def test_a_state_edited_by_hand_is_no_state(bad):
    # a person may edit the body: untrusted, refused as a whole
    assert D.State.from_json(bad) is None
