"""The drift issue: ONE GitHub issue that says when the series stopped applying as it is on a
target (`ggml-patch status`) or a cell of the default profile failed (results.json), kept up to
date while that lasts and closed when all is clean again. It keeps its last state in its own
body, in an HTML comment. Pure core, then `IssuesClient` (REST through upstream/github_api.py).

A target whose status RANKs above 0 is a problem; one that rose since the last record is worse,
which also gets a comment (an edited body notifies nobody). Per topic (the status rows' `topics`)
the issue says what to do (status.topic_action): retire, refresh, re-derive, resolve; a topic to
retire (merged upstream, by its text or its behaviour) is a problem of its own. An unfetchable
source says nothing about the series: its last known status is kept, marked. Without --results
the failing cells are the recorded ones (the daily drift job runs no cells).

One issue per repository for its whole life, found among the open and closed issues carrying its
LABEL (every page): ours only if the tool's bot account wrote it and it holds the MARKER (anyone can
write the marker; an outsider's issue with it is ignored and named once in the log). A closed one
is reopened rather than a new one opened, unless the maintainers closed it as not planned and
nothing got worse since. The body is edited only when something other than the time and the run's
link changed. A POST whose answer was lost (5xx, no answer in time) is not sent again blindly: the
tool looks whether GitHub carried it out, then decides.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Literal, Optional

import requests
from pydantic import ValidationError

from .. import publish
from ..drift.status import (
    APPLIES,
    CONFLICT,
    NOT_APPLICABLE,
    RETIRE,
    THREE_WAY,
    UNAVAILABLE,
    UNREACHABLE,
    UPSTREAM,
    StatusReport,
    topic_action,
)
from ..errors import ConfigError, GitHubError
from ..model.results import Results
from ..records import Record, parse
from ..redact import redact
from ..upstream.github_api import NoAnswer, Wording, github_message, raise_for_answer, send
from .drift_wording import left_out_note, run_ref, target_todo
from .drift_wording import topic_todo as topic_words

TITLE = "ggml-patch: the series drifted or a cell failed"
LABEL = "ggml-patch-drift"
_LABEL = {
    "name": LABEL,
    "color": "d93f0b",
    "description": "Opened, updated and closed by ggml-patch drift-issue",
}
MARKER = "<!-- ggml-patch drift-issue: written by the tool, rewritten on every run -->"
# the account the workflows' GITHUB_TOKEN writes as; another one (a GitHub App's) with --bot
BOT = "github-actions[bot]"
UNPROVEN = "not yet proven on GitHub"
# the state is the body's last non-blank line, the tool's own position: a line anywhere else (a
# table cell, a detail someone edited in) is never taken for it
_STATE = re.compile(r"<!-- ggml-patch-state: (?P<json>\{[^\n]*\}) -->")
RANK = {APPLIES: 0, UPSTREAM: 0, THREE_WAY: 1, NOT_APPLICABLE: 2, CONFLICT: 3}
# the source could not be had: nothing learnt about the series
NOT_KNOWN = (UNREACHABLE, UNAVAILABLE)
STATUSES = (*RANK, *NOT_KNOWN)  # every status `ggml-patch status` writes
STATUS_JSON = "the output of `ggml-patch status --json`"
_DETAIL_MAX = 300
# rows the state keeps (it lives in the body: with the tables it must stay under GitHub's limit)
_ROWS_MAX = 60
# the state's JSON at most (the body's last line); the tables get the rest of BODY_MAX
_STATE_MAX = 30_000
_LIST_MAX = 12_000  # each list of what to do, in characters (then one line says how many more)


class TopicLine(Record):
    """A topic's standing on a target, and what to do with it (retire, refresh, re-derive)."""

    # no detail: the state lives in the body, and `ggml-patch status --json` has it
    status: str
    action: str = ""


class TargetRow(Record):
    """A target's line in the issue."""

    status: str
    detail: str = ""
    base: str = ""
    # the source could not be had now: why the last known status is shown
    kept: Optional[str] = None
    topics: dict[str, TopicLine] = {}


class FailingCell(Record):
    status: str
    reason: str = ""
    # its leg has no recorded green run on github.com (.github/ggml-patch-proven.yaml)
    unproven: bool = False


class State(Record):
    """What the issue records in its own body, as JSON: anyone can edit it, so it is validated."""

    version: Literal[1] = 1
    profile: str
    targets: dict[str, TargetRow]
    failing: dict[str, FailingCell] = {}
    cells_profile: str = ""
    cells_run: str = ""  # the run whose results gave `failing`
    run: str = ""  # the run that wrote this state
    # what the bounds left out (status --json and results.json have it all)
    left_out: dict[str, int] = {}

    @classmethod
    def from_json(cls, d: Any) -> Optional["State"]:
        """The state an issue body holds; None when it is not one (edited by hand, another
        version)."""
        try:
            return cls.model_validate(d)
        except ValidationError:
            return None


Targets = tuple[str, dict[str, TargetRow]]  # (profile, target -> row): a status file
# (profile, cell -> why): the failing cells of a results.json
Failing = tuple[str, dict[str, FailingCell]]


def read_status(data: Any, where: str) -> Targets:
    """The rows of `ggml-patch status --json` (its data)."""
    report = parse(StatusReport, data, where, STATUS_JSON)
    for i, row in enumerate(report.targets):
        if row.status not in STATUSES:
            among = ", ".join(STATUSES)
            raise ConfigError(
                f'{where}: targets[{i}]: expected "target" and a "status" among {among}'
            )
    rows = {}
    for r in report.targets:  # current_state bounds them, and says how many it left out
        topics = {
            name: TopicLine(status=on.status, action=topic_action(on) or "")
            for name, on in r.topics.items()
        }
        base = (r.base or "")[:12]
        rows[r.target] = TargetRow(
            status=r.status, detail=_short(r.detail), base=base, topics=topics
        )
    return report.profile or "?", rows


def read_results(results: Results, proven: Optional[set[str]] = None) -> Failing:
    """The failing cells (at most _ROWS_MAX: the state lives in the body); with `proven` (the
    cells with a recorded green run on github.com), each other one is marked not yet proven."""
    cells = [c for c in results.cells if c.status in ("failed", "error")]
    failing = {
        c.cell: FailingCell(
            status=str(c.status),
            reason=_short(c.reason),
            unproven=proven is not None and c.cell not in proven,
        )
        for c in cells  # current_state bounds them, and says how many it left out
    }
    return results.profile or "?", failing


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_MAX else text[: _DETAIL_MAX - 3] + "..."


def current_state(
    status: Targets, results: Optional[Failing], previous: Optional[State], run: str, partial=False
) -> State:
    profile, targets = status
    before = previous.targets if previous else {}
    rows: dict[str, TargetRow] = {}
    # a partial status (some targets, or another profile) adds to what the issue recorded
    if previous and (partial or (previous.profile and profile != previous.profile)):
        profile, rows = previous.profile, dict(previous.targets)
    for name, row in targets.items():
        last = before.get(name)
        if row.status in NOT_KNOWN and last and last.status in RANK:
            # the source could not be had today: the series' standing there is what it last was
            row = last.model_copy(update={"kept": f"{row.status} now: {row.detail}".strip(": ")})
        rows[name] = row
    # the state lives in the body: a bounded number of rows, each detail bounded
    left_out = {"targets": max(0, len(rows) - _ROWS_MAX)}
    rows = {
        name: row.model_copy(
            update={"detail": _short(row.detail), "kept": row.kept and _short(row.kept)}
        )
        for name, row in list(rows.items())[:_ROWS_MAX]
    }
    if results is not None:
        cells_profile, failing, cells_run = *results, run
    elif previous:
        cells_profile, failing, cells_run = (
            previous.cells_profile,
            previous.failing,
            previous.cells_run,
        )
    else:
        cells_profile, failing, cells_run = "", {}, ""
    left_out["failing cells"] = max(0, len(failing) - _ROWS_MAX)
    failing = {
        name: row.model_copy(update={"reason": _short(row.reason)})
        for name, row in list(failing.items())[:_ROWS_MAX]
    }
    state = State(
        profile=profile,
        targets=rows,
        failing=failing,
        cells_profile=cells_profile,
        cells_run=cells_run,
        run=run,
    )
    return _bounded(state, left_out)


def _bounded(state: State, left_out: dict[str, int]) -> State:
    """`state` with its JSON at most _STATE_MAX characters (it is the body's last line): the
    topics that need nothing done go first, then the largest topic lists are halved, then rows
    from the end; `left_out` says how many of each."""
    left_out = {"topics": 0, **left_out}
    targets, failing = dict(state.targets), dict(state.failing)

    def fits() -> bool:
        now = state.model_copy(update={"targets": targets, "failing": failing})
        return len(state_json(now)) <= _STATE_MAX

    def keep(name: str, kept: dict[str, TopicLine]) -> None:
        left_out["topics"] += len(targets[name].topics) - len(kept)
        targets[name] = targets[name].model_copy(update={"topics": kept})

    if not fits():
        for name, row in list(targets.items()):
            keep(name, {k: on for k, on in row.topics.items() if on.action})
    while not fits() and any(r.topics for r in targets.values()):
        name = max(targets, key=lambda n: len(targets[n].topics))
        topics = list(targets[name].topics.items())
        keep(name, dict(topics[: len(topics) // 2]))
    while not fits() and (targets or failing):
        rows: dict = targets if len(targets) >= len(failing) else failing
        rows.pop(list(rows)[-1])
        left_out["targets" if rows is targets else "failing cells"] += 1
    counts = {k: n for k, n in left_out.items() if n}
    return state.model_copy(update={"targets": targets, "failing": failing, "left_out": counts})


def state_json(state: State) -> str:
    """The state as the body's last line holds it: inside an HTML comment, so no "--" (which
    could end it), no "<" or ">", and no "@" or "#" GitHub could take for a mention or a
    reference (JSON escapes them all; they read back the same)."""
    text = json.dumps(state.to_json(), sort_keys=True, ensure_ascii=True)
    for raw, escaped in (
        ("--", "-\\u002d"),
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("@", "\\u0040"),
        ("#", "\\u0023"),
    ):
        text = text.replace(raw, escaped)
    return text


def rank(row: Optional[TargetRow]) -> int:
    return RANK.get(row.status, 0) if row else 0


def problems(state: State) -> list[str]:
    """One line per problem: a target whose series does not apply as it is, a topic to retire
    (merged upstream by its text or its behaviour), a failing cell."""
    out = [f"{t}: {r.status}" for t, r in state.targets.items() if rank(r) > 0]
    for t, r in state.targets.items():
        out += [f"{t}/{name}: {RETIRE}" for name, on in r.topics.items() if on.action == RETIRE]
    return out + [f"{c}: {r.status}" for c, r in state.failing.items()]


def topic_todo(state: State) -> list[str]:
    """What to do per topic and target: retire, refresh, re-derive, resolve."""
    out = []
    for t, r in state.targets.items():
        if r.kept:  # the source could not be had: the topics' standing is not known today
            continue
        for name, on in r.topics.items():
            line = topic_words(on.action, name, t, on.status, r.base[:40])
            out += [line] if line else []
    return out


def worsened(previous: Optional[State], state: State) -> list[str]:
    """What got worse since `previous` (no previous: everything that is a problem now)."""
    before_t = previous.targets if previous else {}
    before_c = previous.failing if previous else {}
    out = [
        f"{t}: {getattr(before_t.get(t), 'status', APPLIES)} -> {r.status}"
        for t, r in state.targets.items()
        if rank(r) > rank(before_t.get(t))
    ]
    return out + [f"{c}: {r.status}" for c, r in state.failing.items() if c not in before_c]


@dataclass(frozen=True)
class Found:
    """An issue of ours (found by its marker), open or closed."""

    number: int
    body: str
    html_url: str = ""
    open: bool = True
    state_reason: str = ""  # for a closed one: "completed", "not_planned"

    @property
    def state(self) -> Optional[State]:
        m = _STATE.fullmatch(_last_line(self.body or ""))
        try:
            return State.from_json(json.loads(m["json"])) if m else None
        except (ValueError, RecursionError):  # not JSON, or nested past the parser
            return None


def _last_line(body: str) -> str:
    """The body's last non-blank line, where issue_body writes the state (nowhere else counts)."""
    lines = [line for line in body.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


@dataclass(frozen=True)
class Action:
    kind: str  # "open", "update", "close", "reopen", "none"
    why: str
    number: Optional[int] = None
    body: str = ""
    comment: str = ""


def decide(
    found: Optional[Found],
    status: Targets,
    results: Optional[Failing],
    run: str,
    now: _dt.datetime,
    partial=False,
) -> tuple[Action, State]:
    previous = found.state if found else None
    state = current_state(status, results, previous, run, partial)
    now_problems, worse = problems(state), worsened(previous, state)
    why = "; ".join(now_problems)
    if found is None and not now_problems:
        return Action("none", "all clean and no issue open"), state
    if found is None:
        return Action("open", why, None, issue_body(state, now)), state
    n = found.number
    # reopened when there are problems, unless closed as not planned and nothing got worse since
    if not found.open:
        if not now_problems:
            return Action("none", f"all clean; #{n} stays closed", n), state
        if found.state_reason == "not_planned" and not worse:
            return Action(
                "none",
                f"#{n} was closed as not planned and nothing got worse since: left closed",
                n,
            ), state
        said = "worse than when it was closed" if worse else "the problems are back"
        comment = f"Reopened{_at(run)}: {said}:\n\n" + _items(worse or now_problems)
        return Action("reopen", why, n, issue_body(state, now), comment), state
    if not now_problems:
        comment = (
            f"All clean again{_at(run)}: every target's series applies as it is and no default "
            "cell fails. Closing."
        )
        return Action(
            "close", "all clean again", n, issue_body(state, now, clean=True), comment
        ), state
    if previous is not None and not worse and same_but_for_time(previous, state):
        return Action("none", "the open issue already says this", n), state
    comment = f"Worse since the last update{_at(run)}:\n\n" + _items(worse) if worse else ""
    return Action("update", why, n, issue_body(state, now), comment), state


_EPOCH = _dt.datetime(2000, 1, 1, tzinfo=_dt.timezone.utc)


def same_but_for_time(a: State, b: State) -> bool:
    """The two states' bodies differ at most in the time and the runs' links (what every run
    changes)."""

    def plain(
        x: State,
    ) -> str:  # the recorded state comes back with its keys sorted: order is not news
        rows = {
            "targets": dict(sorted(x.targets.items())),
            "failing": dict(sorted(x.failing.items())),
        }
        return issue_body(x.model_copy(update={"run": "", "cells_run": "", **rows}), _EPOCH)

    return plain(a) == plain(b)


def _at(run: str) -> str:
    return f" ({run_ref(run)})" if run else ""


def _item(line: str) -> str:
    """`NAME: STATUS` or `NAME: BEFORE -> AFTER` (problems, worsened) with each part inert."""
    name, _, change = line.partition(": ")
    parts = [publish.text(p, 200) for p in change.split(" -> ")]
    return f"{publish.text(name, 200)}: {' -> '.join(parts)}"


def _items(lines: list[str]) -> str:
    """A comment's list: each item inert, the whole bounded below GitHub's limit."""
    rows = [f"- {_item(w)}" for w in lines]
    kept = publish.bounded_rows(rows, publish.BODY_MAX - 1_000, "lines")
    return "".join(f"{row}\n" for row in kept)


def issue_body(state: State, now: _dt.datetime, clean: bool = False) -> str:
    when = now.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC") + (
        f" by {run_ref(state.run)}" if state.run else ""
    )
    headline = "The series no longer applies as it is on some target, or a default cell fails."
    lines = [
        MARKER,
        "",
        "**All clean again.**" if clean else headline,
        "",
        f"Last checked {when}.",
        "",
        *left_out_note(state.left_out),
    ]
    lines += [f"### Targets (profile {publish.code(state.profile, 100)})", ""]
    lines += ["| target | status | base | detail |", "|---|---|---|---|"]
    for t, r in state.targets.items():
        shown, detail = (
            (f"{r.status} (last known)", f"{r.detail} [{r.kept}]")
            if r.kept
            else (r.status, r.detail)
        )
        lines.append(_row(t, shown, r.base, detail))
    lines += [
        "",
        "### Failing cells"
        + (f" (profile {publish.code(state.cells_profile, 100)})" if state.cells_profile else ""),
        "",
    ]
    if state.failing:
        lines += ["| cell | status | reason |", "|---|---|---|"]
        for c, cell in state.failing.items():
            shown = f"{cell.status} ({UNPROVEN})" if cell.unproven else cell.status
            lines.append(_row(c, shown, cell.reason))
        if state.cells_run:
            lines += [
                "",
                f"From {run_ref(state.cells_run)} (its summary and junit annotations "
                "have the details).",
            ]
    else:
        lines.append(
            f"None in {run_ref(state.cells_run)}."
            if state.cells_run
            else "None known (no matrix results given yet)."
        )
    todo = [target_todo(r.status, state.profile, t) for t, r in state.targets.items()]
    for title, items in (("What to do", [x for x in todo if x]), ("Per topic", topic_todo(state))):
        rows = publish.bounded_rows([f"- {x}" for x in items], _LIST_MAX, "lines")
        lines += ["", f"### {title}", "", *rows] if rows else []
    saved = state_json(state)
    # the state stays the last line: what is cut to keep the body under GitHub's limit is the
    # tables' text (the state itself is bounded: _STATE_MAX)
    room = max(10_000, publish.BODY_MAX - len(saved) - 100)
    shown = publish.bounded("\n".join(lines) + "\n", room)
    return shown + f"\n<!-- ggml-patch-state: {saved} -->\n"


def _row(*cells: str) -> str:
    """A Markdown table row, each cell inert in it (publish.cell: no HTML, mention, pipe, line)."""
    return "| " + " | ".join(publish.cell(c, 400) for c in cells) + " |"


@dataclass(frozen=True)
class Request:
    method: str
    path: str  # after /repos/OWNER/NAME
    payload: Optional[dict] = None
    ok_if: tuple[int, ...] = ()  # answers that are fine though not 2xx (e.g. the label exists: 422)


# of 100 issues each, when the issue lost its label: the newest 2,000 issues are looked at
MAX_PAGES = 20


def find_requests() -> list[Request]:
    """Where our issue is looked for, every page: the issues carrying our label (ours has it)."""
    return [Request("GET", f"/issues?state=all&labels={LABEL}&per_page=100")]


def requests_for(action: Action) -> list[Request]:
    """The requests that carry out `action`, in order."""
    if action.kind == "open":
        issue = {"title": TITLE, "body": action.body, "labels": [LABEL]}
        return [Request("POST", "/labels", _LABEL, ok_if=(422,)), Request("POST", "/issues", issue)]
    # a close is sent before its comment: a failed close never leaves a second "Closing." comment
    states = {
        "update": {},
        "close": {"state": "closed", "state_reason": "completed"},
        "reopen": {"state": "open"},
    }
    if action.kind not in states:
        return []
    path = f"/issues/{action.number}"
    out = [Request("PATCH", path, {"body": action.body, **states[action.kind]})]
    return out + (
        [Request("POST", f"{path}/comments", {"body": action.comment})] if action.comment else []
    )


def _login(item: dict) -> str:
    user = item.get("user")
    return str(user.get("login") or "") if isinstance(user, dict) else ""


def _labelled(item: dict) -> bool:
    labels = item.get("labels")
    # an answer is untrusted: labels that are not a list are no labels
    names = [x.get("name") if isinstance(x, dict) else x for x in labels or []]
    names = names if isinstance(labels, list) else []
    return LABEL in names


def ours(items: Any, bot: str = BOT) -> tuple[list[Found], list[str]]:
    """Our issues among a list-issues answer, oldest first: not a pull request, our marker in the
    body, written by `bot`, carrying our label. And the others with the marker ("#N by LOGIN"):
    anyone can write the marker, so those are ignored, never read or rewritten."""
    if not isinstance(items, list):
        raise GitHubError("the issues list is not a JSON list")
    # an answer is untrusted: a field of the wrong type makes the item not ours
    issues = [
        i
        for i in items
        if isinstance(i, dict)
        and "pull_request" not in i
        and isinstance(i.get("number"), int)
        and isinstance(i.get("body") or "", str)
        and isinstance(i.get("html_url") or "", str)
    ]
    found, ignored = [], []
    for i in issues:
        body = i.get("body") or ""
        if MARKER not in body:
            continue
        if _login(i) != bot or not _labelled(i):
            ignored.append(f"#{i['number']} by {_login(i) or '?'}")
            continue
        is_open = i.get("state") != "closed"
        reason = str(i.get("state_reason") or "")
        found.append(Found(int(i["number"]), body, i.get("html_url") or "", is_open, reason))
    return sorted(found, key=lambda f: f.number), ignored


def the_one(found: list[Found]) -> Optional[Found]:
    """The issue to keep using: the oldest open one, else the most recently opened closed one."""
    return min(found, key=lambda f: (not f.open, f.number if f.open else -f.number), default=None)


def next_page(headers: Any, api_url: str) -> Optional[str]:
    """The Link header's rel="next", only on the API server itself (the token goes with it)."""
    for link in requests.utils.parse_header_links(str(headers.get("Link") or "")):
        url = link.get("url", "")
        if link.get("rel") == "next" and url.startswith(api_url.rstrip("/") + "/"):
            return url
    return None


class IssuesClient:
    """The REST calls for one repository (token in the Authorization header only)."""

    def __init__(self, api_url: str, repo: str, token: str, timeout: float, bot: str = BOT):
        self.api_url = api_url.rstrip("/")
        self.repo = repo
        self.token = token
        self.timeout = timeout
        self.bot = bot
        self.named: set[str] = set()  # the outsiders' marker issues already named in the log

    def url(self, path: str) -> str:
        return f"{self.api_url}/repos/{self.repo}{path}"

    def send(self, req: Request, url: str = ""):
        url = url or self.url(req.path)
        got = send(req.method, self.api_url, url, self.token, self.timeout, req.payload)
        if got.status in req.ok_if:
            return got
        if got.status >= 500 and req.method == "POST":
            said = redact(f"{url}: unexpected answer {got.status} {github_message(got.text)}")
            raise Unclear(f"{said.rstrip()} (GitHub may have carried it out)")
        need = f"{self.repo} (the job needs `permissions: issues: write`)"
        wording = Wording(
            access=f"issues write access to {need}",
            forbidden=f"permission to write issues on {need}",
            rejected=f"GitHub refused {req.method} {url}",
            repo=self.repo,
        )
        raise_for_answer(got, url, self.token, wording)
        return got

    def pages(self, req: Request):
        """Every item of a list answer, following its Link headers (at most MAX_PAGES)."""
        url: Optional[str] = self.url(req.path)
        for _ in range(MAX_PAGES):
            if not url:
                return
            got = self.send(req, url)
            yield got.json()
            url = next_page(got.headers, self.api_url)

    def find(self) -> Optional[Found]:
        """Our issue, open or closed (every page of the labelled issues, Link headers)."""
        for req in find_requests():
            found: list[Found] = []
            for page in self.pages(req):
                mine, ignored = ours(page, self.bot)
                found += mine
                self.name_ignored(ignored)
            if found:
                return the_one(found)
        return None

    def name_ignored(self, ignored: list[str]) -> None:
        for issue in ignored:
            if issue not in self.named:
                self.named.add(issue)
                print(
                    f"drift-issue: ignored {issue}: it carries the marker but was not written "
                    f"by {self.bot} with the label {LABEL}",
                    file=sys.stderr,
                )

    def carry_out(self, action: Action) -> Optional[str]:
        """Send the action's requests; the issue's URL."""
        url = None
        for req in requests_for(action):
            data = self.send_once(req, action)
            if isinstance(data, dict) and req.path in ("/issues", f"/issues/{action.number}"):
                url = data.get("html_url") or url
        return url

    def send_once(self, req: Request, action: Action) -> Any:
        """The request's answer. A POST without a clear answer (5xx, none in time) may have been
        carried out: look, and send it again (once) only if it was not."""
        try:
            return self.send(req).json()
        except (Unclear, NoAnswer) as e:
            if req.method != "POST":
                raise
            print(f"drift-issue: {e}; looking before sending it again")
        done = self.carried_out(req, action)
        if done is not None:
            print(f"drift-issue: it was carried out: {req.method} {req.path} not sent again")
            return done
        return self.send(req).json()

    def carried_out(self, req: Request, action: Action) -> Optional[dict]:
        """What a lost POST created, if GitHub carried it out; None if it did not."""
        if req.path == "/labels":
            return {}  # sent again it answers 422 when the first one made it: fine either way
        if req.path == "/issues":
            found = self.find()  # there was none before (the action is "open")
            return {"html_url": found.html_url, "number": found.number} if found else None
        comments = Request("GET", f"{req.path}?per_page=100")
        body = (req.payload or {}).get("body")
        for page in self.pages(comments):
            for c in page if isinstance(page, list) else []:
                if isinstance(c, dict) and c.get("body") == body and _login(c) == self.bot:
                    return c
        return None


class Unclear(GitHubError):
    """A POST answered with a server error: GitHub may have carried it out."""
