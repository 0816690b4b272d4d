"""Issue 51, point 2: the drift issue is inert and bounded. Every value from a status file,
results or the state an earlier body holds (anyone may edit it) is code or escaped text: rendered
by a CommonMark renderer (markdown-it-py), the body has no link, no HTML of its own and no
@mention outside code; 2,000 topics give a body of at most 65,000 characters with one line
saying what was left out, and the state still reads back."""

import datetime as dt
import json
import re

import pytest
from markdown_it import MarkdownIt

from orchestrator import publish
from orchestrator.ci import drift_issue as D
from orchestrator.drift import status as S

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 12, 6, 4, 17, tzinfo=dt.timezone.utc)
MENTION = "@ggml-org/maintainers"
# a base holding backticks: one tried to close the tool's own code span around the command
EVIL_BASE = "a`b`` @octocat ``` [x](https://evil.example/) <b>x</b>"
EVIL = f"</details> {MENTION} <img src=x onerror=alert(1)> [l](https://evil.example) #12 <!--"
# tags the tool's own Markdown makes (tables, headings, lists, code spans, bold)
TOOL_TAGS = {"p", "h3", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "code", "strong"}


def _render(body: str) -> str:
    md = MarkdownIt("commonmark", {"html": True}).enable("table")
    return md.render(body)


def assert_inert(body: str) -> None:
    html = _render(body)
    # the only raw HTML the tool writes: its own two comments (the marker and the state)
    comments = re.findall(r"<!--.*?-->", html, flags=re.S)
    assert comments == [D.MARKER, body.rstrip("\n").splitlines()[-1]], comments
    rest = re.sub(r"<!--.*?-->", "", html, flags=re.S)
    tags = {t.lstrip("/") for t in re.findall(r"<(/?[a-zA-Z][a-zA-Z0-9]*)", rest)}
    assert tags <= TOOL_TAGS, tags - TOOL_TAGS
    assert "<a" not in rest and "href" not in rest
    outside_code = re.sub(r"<code>.*?</code>", "", rest, flags=re.S)
    # an @ GitHub would make a mention of, anywhere but in a code span (entities count too)
    assert "@" not in outside_code and "&#64;" not in outside_code, outside_code
    assert "@" not in comments[-1] and "#" not in comments[-1]


def _status(topics: dict, profile: str = MENTION, base: str = EVIL_BASE, n: int = 1) -> dict:
    rows = []
    for i, status in enumerate([S.CONFLICT, S.THREE_WAY, S.NOT_APPLICABLE][:n]):
        rows.append(
            {
                "target": f"ggml-{i}",
                "status": status,
                "detail": EVIL,
                "base": base,
                "topics": topics,
            }
        )
    return {"profile": profile, "targets": rows}


def _topics(count: int) -> dict:
    kinds = [S.UPSTREAM, S.THREE_WAY, S.CONFLICT, S.CLEAN]
    return {
        f"topic-{i:04d}": {"status": kinds[i % len(kinds)], "detail": EVIL} for i in range(count)
    }


def test_a_mention_in_the_profile_and_backticks_in_the_base_stay_inside_code():
    status = D.read_status(_status(_topics(8), n=3), "status.json")
    action, state = D.decide(None, status, None, "https://evil.example/run", NOW)
    assert action.kind == "open"
    body = action.body
    assert_inert(body)
    assert "### What to do" in body and "### Per topic" in body
    # the whole command is one code span, its fence longer than the data's backtick runs
    assert f"`ggml-patch status --profile {MENTION} --target ggml-0`" in body
    assert "https://evil.example/run" not in _render(body).replace("<code>", "\0").split("\0")[0]
    assert D.Found(1, body).state == state


def test_a_hostile_state_read_back_from_an_edited_body_is_inert_too():
    """The previous state is data anyone could edit: targets, topic names, runs, failing cells
    with mentions, links and HTML render inert in the next body and its comment."""
    evil_state = D.State(
        profile=MENTION,
        targets={
            f"t {MENTION}": D.TargetRow(
                status=S.CONFLICT,
                detail=EVIL,
                base=EVIL_BASE,
                topics={f"x`` {MENTION} <b>": D.TopicLine(status=EVIL, action=S.RETIRE)},
            )
        },
        failing={f"c {MENTION}/cpu": D.FailingCell(status="failed", reason=EVIL)},
        cells_run=f"https://github.com/o/p/actions/runs/1 {MENTION}",
        run="[x](https://evil.example)",
        left_out={EVIL: 3},
    )
    body = D.issue_body(evil_state, NOW)
    assert_inert(body)
    found = D.Found(1, body)
    assert found.state == evil_state
    worse = ("live", {"x": D.TargetRow(status=S.CONFLICT, detail=EVIL, base=EVIL_BASE)})
    action, _ = D.decide(found, worse, None, "https://github.com/o/p/actions/runs/2", NOW)
    assert action.kind == "update"
    assert_inert(action.body)
    # the comment (a list of what got worse) is inert as well; no marker or state in it
    html = _render(action.comment)
    assert "<a" not in html and "@" not in re.sub(r"<code>.*?</code>", "", html, flags=re.S)


def test_a_run_is_a_link_only_when_it_is_a_github_actions_run():
    from orchestrator.ci.drift_wording import run_ref

    assert run_ref("https://github.com/o/p/actions/runs/77") == (
        "https://github.com/o/p/actions/runs/77"
    )
    for other in ("https://github.com/o/p/issues/1", "https://evil.example/o/p/actions/runs/1"):
        assert run_ref(other) == publish.code(other, 300)


def test_2000_topics_make_a_body_of_at_most_65000_characters_saying_what_was_cut():
    status = D.read_status(_status(_topics(2000), n=3), "status.json")
    action, state = D.decide(None, status, None, "https://github.com/o/p/actions/runs/5", NOW)
    body = action.body
    assert len(body) <= publish.BODY_MAX < publish.GITHUB_BODY_MAX
    notes = [line for line in body.splitlines() if "left out of this issue" in line]
    assert len(notes) == 1, notes
    cut = state.left_out["topics"]
    assert cut > 0 and f"{cut:,} topics" in notes[0]
    kept = sum(len(r.topics) for r in state.targets.values())
    assert kept + cut == 3 * 2000
    # the topics kept are those with something to do (retire, refresh, re-derive/resolve)
    assert all(on.action for r in state.targets.values() for on in r.topics.values())
    assert_inert(body)
    again = D.Found(1, body).state
    assert again == state
    # the next run with the same status edits nothing: the bounded state is stable
    same, _ = D.decide(D.Found(1, body), status, None, "https://github.com/o/p/actions/runs/6", NOW)
    assert same.kind == "none", same.why


def test_many_targets_and_failing_cells_are_bounded_and_counted():
    many = {
        f"t{i}": D.TargetRow(status=S.CONFLICT, detail="x" * 400, base="ab") for i in range(900)
    }
    failing = ("default", {f"t{i}/cpu": D.FailingCell(status="failed") for i in range(500)})
    action, state = D.decide(None, ("live", many), failing, "", NOW)
    assert len(action.body) <= publish.BODY_MAX
    assert state.left_out["targets"] >= 900 - 60 and state.left_out["failing cells"] >= 440
    assert len(json.dumps(state.to_json())) <= 30_000
