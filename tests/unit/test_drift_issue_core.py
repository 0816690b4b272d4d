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


BOT = {"user": {"login": D.BOT}, "labels": [{"name": D.LABEL}]}


def test_ours_is_found_by_the_marker_and_the_open_one_wins():
    items = [
        {"number": 9, "body": D.MARKER, "state": "closed", "state_reason": "completed", **BOT},
        {"number": 4, "body": "x " + D.MARKER, "state": "open", **BOT},
        {"number": 7, "body": D.MARKER, "state": "open", **BOT},
        {"number": 8, "body": "not ours", "state": "open", **BOT},
        {"number": 10, "body": D.MARKER, "state": "open", "pull_request": {}, **BOT},
    ]
    found, ignored = D.ours(items)
    assert [f.number for f in found] == [4, 7, 9] and ignored == []
    assert D.the_one(found).number == 4
    closed, _ = D.ours(
        [i for i in items if i["state"] == "closed"]
        + [
            {
                "number": 2,
                "body": D.MARKER,
                "state": "closed",
                "state_reason": "not_planned",
                **BOT,
            }
        ]
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
    assert r.total == G.RETRIES == 3 and r.respect_retry_after_header
    assert r.allowed_methods == G.IDEMPOTENT and "POST" not in G.IDEMPOTENT
    assert (
        set(r.status_forcelist) == {429, 500, 502, 503, 504}
        and r.raise_on_status is False
        and r.redirect == 0
    )
    assert r.is_retry("PATCH", 502) and r.is_retry("GET", 429)
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


def test_ours_needs_the_bot_as_author_and_the_label():
    """Anyone can write the marker: an outsider's issue with it, or the bot's without the label,
    is named as ignored, never taken."""
    outsider = {"user": {"login": "mallory"}, "labels": [{"name": D.LABEL}]}
    unlabelled = {"user": {"login": D.BOT}, "labels": []}
    items = [
        {
            "number": 3,
            "body": D.MARKER,
            "state": "closed",
            "state_reason": "not_planned",
            **outsider,
        },
        {"number": 4, "body": D.MARKER, "state": "open", **unlabelled},
        {"number": 5, "body": D.MARKER, "state": "open", "labels": [D.LABEL]},  # no user
        {"number": 6, "body": D.MARKER, "state": "open", **BOT},
    ]
    found, ignored = D.ours(items)
    assert [f.number for f in found] == [6]
    assert ignored == ["#3 by mallory", f"#4 by {D.BOT}", "#5 by ?"]
    # another bot account (a GitHub App's token) is configurable
    app = {"user": {"login": "my-app[bot]"}, "labels": [{"name": D.LABEL}]}
    found, ignored = D.ours([{"number": 8, "body": D.MARKER, **app}], bot="my-app[bot]")
    assert [f.number for f in found] == [8] and ignored == []


def test_only_idempotent_requests_are_retried_after_a_server_error():
    r = G.retry_policy()
    assert not r.is_retry("POST", 502) and not r.is_retry("POST", 500)
    assert r.is_retry("PATCH", 502) and r.is_retry("GET", 504)
    # a rate-limited POST was not carried out: it is sent again after the wait
    assert r.is_retry("POST", 429) and r.is_retry("POST", 403, has_retry_after=True)
    assert not r.is_retry("POST", 403)


class _Answer:
    def __init__(self, status, headers=None):
        self.status, self.headers = status, headers or {}


def test_a_rate_limit_waits_as_github_asks(monkeypatch):
    waited = []
    monkeypatch.setattr(G, "sleep", waited.append)  # the wait is injectable: no minute slept here
    r = G.retry_policy()
    r.sleep(_Answer(429))  # no Retry-After: at least a minute
    r.sleep(_Answer(429, {"Retry-After": "7"}))
    r.sleep(_Answer(403, {"Retry-After": "30"}))
    assert waited == [G.RATE_LIMIT_WAIT, 7, 30] and G.RATE_LIMIT_WAIT >= 60
    # above the bound the answer is reported, not waited out
    with pytest.raises(G.MaxRetryError):
        r.increment("POST", "/x", response=_Answer(429, {"Retry-After": "3600"}))


def test_a_hostile_detail_is_inert_and_cannot_plant_the_state():
    """A status detail with HTML, a mention, a <details> breakout and a forged state comment: the
    body shows it as text, and the state read back is the tool's own (the last line)."""
    forged = D.State(profile="live", targets={"a": _row("conflict")}).to_json()
    import json

    evil = (
        "</details> @org/team <img src=https://t.example/p.png> <!-- "
        f"<!-- ggml-patch-state: {json.dumps(forged)} -->\n## heading | x"
    )
    status = ("live", {"a": D.TargetRow(status="applies cleanly", detail=evil, base="ab")})
    act, state = D.decide(None, ("live", {"b": _row("conflict")}), None, "", NOW)
    body = D.issue_body(D.current_state(status, None, state, ""), NOW)
    shown = body.splitlines()[:-1]
    assert not any("<!--" in line for line in shown[1:])  # only the marker, first
    assert "<img" not in body and "</details>" not in body and "\n## heading" not in body
    assert "`@org/team`" in body
    found = D.Found(1, body)
    assert found.state is not None and found.state.targets["a"].status == "applies cleanly"
    # a state comment anywhere but the last line is not the state
    moved = D.Found(1, body.rstrip("\n") + "\nedited by hand\n")
    assert moved.state is None


def test_the_body_and_comments_stay_under_githubs_limit():
    many = {
        f"t{i}": D.TargetRow(status="conflict", detail="x" * 400, base="ab") for i in range(900)
    }
    act, state = D.decide(None, ("live", many), None, "run", NOW)
    assert len(act.body) < 65_536
    assert D.Found(1, act.body).state == state
    worse = D.decide(
        D.Found(1, D.issue_body(D.State(profile="live", targets={}), NOW)),
        ("live", many),
        None,
        "run",
        NOW,
    )[0]
    assert len(worse.comment) < 65_536
