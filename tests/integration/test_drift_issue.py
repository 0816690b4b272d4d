"""`ggml-patch drift-issue` against a recording stand-in for GitHub's issues API on 127.0.0.1
(pytest-httpserver): it opens one issue, updates that same one on the next runs (never a
second), comments when things get worse, closes it when all is clean; 401/403/422/rate limit and
an unreachable server as `pr` reports them; the token nowhere but the Authorization header."""

import datetime as dt
import itertools
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Response

from orchestrator.ci import drift_issue as D
from orchestrator.model.results import Cell, Results, SeriesInfo, dump_results

from ..helpers.tools import ROOT

# unique: must appear nowhere but the Authorization header
TOKEN = "ghs_driftTEST_5eed9d4e21b7a3c0ffee"
REPO = "owner/proj"
RUN = {"GITHUB_SERVER_URL": "https://github.com", "GITHUB_REPOSITORY": REPO, "GITHUB_RUN_ID": "777"}


class FakeGitHub:
    """Just enough of the issues API, with state: issues (open and closed, state_reason, the
    author: the token's bot), labels, comments; list issues as GitHub does (state, optional labels,
    per_page capped at 100, pages with a Link header, newest first); faults to inject (answered
    once each, in order; `carried_out` ones after the request took effect, as a lost answer);
    every request recorded."""

    def __init__(self, server: HTTPServer, repo: str = REPO, token: str = TOKEN):
        self.server, self.issues, self.labels, self.comments, self.requests = (
            server,
            {},
            set(),
            [],
            [],
        )
        self.repo, self.token = repo, token
        self.faults: list[tuple[str, str, Response]] = []  # (method, path, answer), each used once
        self.carried_out: list[tuple[str, str, Response]] = []  # answered after doing the request
        self.bot = D.BOT  # the account the token writes as
        self.queries: list[str] = []
        server.expect_request(re.compile(rf"^/repos/{re.escape(repo)}/.*")).respond_with_handler(
            self.handle
        )

    def add(self, number: int, body: str, labels=(D.LABEL,), state="open", user="", **more) -> None:
        self.issues[number] = {
            "number": number,
            "title": D.TITLE,
            "body": body,
            "state": state,
            "state_reason": None,
            "labels": [{"name": n} for n in labels],
            "html_url": f"https://github.com/{self.repo}/issues/{number}",
            "user": {"login": user or self.bot},
            **more,
        }

    def handle(self, request):
        path = request.path[len(f"/repos/{self.repo}") :]
        body = json.loads(request.get_data(as_text=True) or "null")
        self.requests.append((request.method, path, body, dict(request.headers)))
        self.queries.append(request.query_string.decode())
        for i, (method, where, answer) in enumerate(self.faults):
            if method == request.method and where == path:
                del self.faults[i]
                return answer
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return _json({"message": "Bad credentials"}, 401)
        answer = self.answer(request, path, body)
        for i, (method, where, lost) in enumerate(self.carried_out):
            if method == request.method and where == path:
                del self.carried_out[i]
                return lost
        return answer

    def answer(self, request, path, body):
        if (request.method, path) == ("GET", "/issues"):
            return self.list_issues(request)
        if (request.method, path) == ("POST", "/labels"):
            if body["name"] in self.labels:
                return _json(
                    {"message": "Validation Failed", "errors": [{"code": "already_exists"}]}, 422
                )
            self.labels.add(body["name"])
            return _json(body, 201)
        if (request.method, path) == ("POST", "/issues"):
            n = max(self.issues, default=0) + 1
            self.add(n, body["body"], labels=body.get("labels", ()))
            return _json(self.issues[n], 201)
        m = re.fullmatch(r"/issues/(\d+)(/comments)?", path)
        if m and int(m[1]) in self.issues:
            issue = self.issues[int(m[1])]
            if m[2] and request.method == "POST":
                self.comments.append((issue["number"], body["body"]))
                return _json({"body": body["body"], "user": {"login": self.bot}}, 201)
            if m[2] and request.method == "GET":
                on_it = [b for n, b in self.comments if n == issue["number"]]
                return _json([{"body": b, "user": {"login": self.bot}} for b in on_it])
            if request.method == "PATCH":
                issue.update(
                    {k: v for k, v in body.items() if k in ("body", "state", "state_reason")}
                )
                if body.get("state") == "open":
                    issue["state_reason"] = "reopened"
                return _json(issue)
        return _json({"message": "Not Found"}, 404)

    def list_issues(self, request):
        q = parse_qs(request.query_string.decode())
        state, label = q.get("state", ["open"])[0], q.get("labels", [""])[0]
        per_page, page = min(int(q.get("per_page", ["30"])[0]), 100), int(q.get("page", ["1"])[0])
        hits = [
            i
            for n, i in sorted(self.issues.items(), reverse=True)
            if state in ("all", i["state"])
            and (not label or label in {x["name"] for x in i["labels"]})
        ]
        chunk = hits[(page - 1) * per_page : page * per_page]
        headers = {}
        if page * per_page < len(hits):
            nxt = dict(q, page=[str(page + 1)])
            query = "&".join(f"{k}={v[0]}" for k, v in nxt.items())
            headers["Link"] = (
                f'<{self.server.url_for("/repos/" + self.repo + "/issues")}?{query}>; rel="next"'
            )
        return _json(chunk, headers=headers)

    def sent(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p, _, _ in self.requests]


def _json(data, status=200, headers=None):
    return Response(
        json.dumps(data), status=status, headers=headers or {}, content_type="application/json"
    )


@pytest.fixture
def gh(api):
    return FakeGitHub(api)


_n = itertools.count()


def status_json(tmp: Path, **statuses) -> Path:
    rows = [
        {
            "target": t,
            "layout": "llama.cpp",
            "source": {"kind": "git"},
            "status": s.replace("_", " "),
            "detail": f"{t} detail -- with dashes" if s != "applies cleanly" else "",
            "base": "ab" * 20,
        }
        for t, s in statuses.items()
    ]
    p = tmp / f"status-{next(_n)}.json"  # each its own file: a test keeps several
    p.write_text(json.dumps({"profile": "live", "targets": rows}))
    return p


def results_dir(tmp: Path, **cells) -> Path:
    d = tmp / "merged"
    d.mkdir(exist_ok=True)
    results = Results(
        profile="default",
        series=SeriesInfo(layout="llama.cpp", sha256="0" * 64, patches=[]),
        cells=[
            Cell.model_validate({"cell": c, "status": s, "reason": f"{c}: {s} here"})
            for c, s in cells.items()
        ],
    )
    dump_results(results, d / "results.json")
    return d


CLEAN = {"llama.cpp-master": "applies cleanly", "ggml-master": "applies cleanly"}


def drift(tmp: Path, api_url: str, *extra: str, token=TOKEN, env_extra=None):
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GGML_PATCH_HTTP_BACKOFF": "0",
        **RUN,
        **(env_extra or {}),
    }
    env.pop("GITHUB_TOKEN", None)
    if token:
        env["GITHUB_TOKEN"] = token
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "drift-issue",
            "--matrix",
            str(ROOT / "matrix.yaml"),
            "--repo",
            REPO,
            "--api-url",
            api_url,
            "--timeout",
            "5",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp,
    )
    assert TOKEN not in proc.stdout and TOKEN not in proc.stderr
    assert "Traceback" not in proc.stderr
    return proc


def one_line_error(proc, code: int) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ggml-patch: error: "), proc.stderr
    return lines[0]


def _no_token_in_bodies(gh: FakeGitHub) -> None:
    for _, _, body, headers in gh.requests:
        assert TOKEN not in json.dumps(body)
        assert headers.get("Authorization") == f"Bearer {TOKEN}"


# ---------------------------------------------------------------- open, update, close


def test_opens_one_issue_then_updates_the_same_one(tmp_path, api, gh):
    st = status_json(tmp_path, **{**CLEAN, "cambriantech-llama.cpp": "conflict"})
    url = api.url_for("/").rstrip("/")
    first = drift(tmp_path, url, "--status", str(st))
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(
        f"drift-issue: opened https://github.com/{REPO}/issues/1 (cambriantech-llama.cpp: conflict)"
    )
    # looked for among the labelled issues only: ours carries the label
    assert gh.sent() == [
        ("GET", "/issues"),
        ("POST", "/labels"),
        ("POST", "/issues"),
    ]
    assert "labels=ggml-patch-drift" in gh.queries[0]
    issue = gh.issues[1]
    assert issue["title"] == D.TITLE and [x["name"] for x in issue["labels"]] == [D.LABEL]
    body = issue["body"]
    assert (
        "| cambriantech-llama.cpp | conflict | abababababab | "
        "cambriantech-llama.cpp detail -- with dashes |" in body
    )
    assert "| llama.cpp-master | applies cleanly |" in body
    assert f"by https://github.com/{REPO}/actions/runs/777" in body
    assert "ggml-patch refresh cambriantech-llama.cpp" in body  # what to do
    assert body.isascii()
    # the same state again, a later run: only the time and the run's link would change: no edit
    gh.requests.clear()
    second = drift(tmp_path, url, "--status", str(st), env_extra={"GITHUB_RUN_ID": "778"})
    assert second.returncode == 0, second.stderr
    assert second.stdout.startswith(
        "drift-issue: nothing to send: the open issue already says this"
    )
    assert gh.sent() == [("GET", "/issues")]
    assert len(gh.issues) == 1 and gh.comments == [] and gh.issues[1]["body"] == body
    # something besides the time changed (a detail): the
    # same issue is edited, no comment (not worse)
    changed = status_json(
        tmp_path, **{**CLEAN, "cambriantech-llama.cpp": "conflict", "continuum": "applies cleanly"}
    )
    third = drift(tmp_path, url, "--status", str(changed), env_extra={"GITHUB_RUN_ID": "779"})
    assert (
        third.stdout.startswith("drift-issue: updated #1 ")
        and "actions/runs/779" in gh.issues[1]["body"]
    )
    assert len(gh.issues) == 1 and gh.comments == []
    _no_token_in_bodies(gh)


def test_worse_gets_a_comment_and_clean_closes(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    assert (
        drift(
            tmp_path,
            url,
            "--status",
            str(status_json(tmp_path, **{**CLEAN, "ggml-master": "applies with 3-way merge"})),
        ).returncode
        == 0
    )
    worse = status_json(
        tmp_path,
        **{**CLEAN, "ggml-master": "conflict", "llama.cpp-master": "applies with 3-way merge"},
    )
    gh.requests.clear()
    proc = drift(tmp_path, url, "--status", str(worse))
    assert proc.returncode == 0, proc.stderr
    assert gh.sent() == [("GET", "/issues"), ("PATCH", "/issues/1"), ("POST", "/issues/1/comments")]
    ((number, comment),) = gh.comments
    assert number == 1 and "ggml-master: applies with 3-way merge -> conflict" in comment
    assert "llama.cpp-master: applies cleanly -> applies with 3-way merge" in comment
    # all clean again: a comment, then closed; then nothing more to do
    gh.requests.clear()
    proc = drift(
        tmp_path,
        url,
        "--status",
        str(status_json(tmp_path, **CLEAN)),
        "--results",
        str(results_dir(tmp_path, **{"llama.cpp/cpu": "passed", "ggml/metal": "skipped"})),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("drift-issue: closed #1 ")
    # closed first, then the comment: a failed close never leaves a second "Closing." comment
    assert gh.sent() == [("GET", "/issues"), ("PATCH", "/issues/1"), ("POST", "/issues/1/comments")]
    assert gh.issues[1]["state"] == "closed" and gh.issues[1]["state_reason"] == "completed"
    assert "All clean again" in gh.comments[-1][1]
    gh.requests.clear()
    proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CLEAN)))
    assert proc.returncode == 0 and "nothing to send: all clean; #1 stays closed" in proc.stdout
    assert gh.sent() == [("GET", "/issues")]
    # drift again after the close: the same issue reopened, never a second one
    proc = drift(tmp_path, url, "--status", str(worse))
    assert proc.stdout.startswith("drift-issue: reopened #1"), proc.stdout
    assert sorted(gh.issues) == [1] and gh.issues[1]["state"] == "open"
    assert gh.comments[-1][1].startswith(
        "Reopened (https://github.com/owner/proj/actions/runs/777): worse than when "
        "it was closed:\n\n- llama.cpp-master: applies cleanly -> applies with 3-way merge"
    )


def test_a_failing_default_cell_opens_it_and_is_remembered_without_results(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    st = status_json(tmp_path, **CLEAN)
    res = results_dir(
        tmp_path, **{"llama.cpp/cpu": "passed", "ggml/vulkan": "failed", "ggml/cuda": "error"}
    )
    proc = drift(tmp_path, url, "--status", str(st), "--results", str(res))
    assert proc.returncode == 0, proc.stderr
    body = gh.issues[1]["body"]
    assert "### Failing cells (profile `default`)" in body
    assert (
        "| ggml/vulkan | failed | ggml/vulkan: failed here |" in body
        and "| ggml/cuda | error |" in body
    )
    assert "llama.cpp/cpu" not in body.split("### Failing cells")[1].split("<!--")[0]
    # the daily drift job runs no cells: the failing
    # cells the issue recorded stay (and keep it open)
    proc = drift(tmp_path, url, "--status", str(st), env_extra={"GITHUB_RUN_ID": "780"})
    assert proc.stdout.startswith(
        "drift-issue: nothing to send: the open issue already says this"
    ), proc.stdout
    assert "| ggml/vulkan | failed |" in gh.issues[1]["body"] and gh.issues[1]["state"] == "open"
    assert f"From https://github.com/{REPO}/actions/runs/777" in gh.issues[1]["body"]


def test_a_failing_cell_without_a_proven_leg_is_marked_not_yet_proven(tmp_path, api, gh):
    proven = tmp_path / "proven.yaml"
    proven.write_text(
        "proven:\n"
        "  - {profile: default, target: ggml, backend: vulkan, runs_on: ubuntu-24.04,\n"
        "     run: 'https://github.com/o/p/actions/runs/9', date: '2026-12-01'}\n"
    )
    res = results_dir(tmp_path, **{"ggml/vulkan": "failed", "ggml/cuda": "error"})
    st = str(status_json(tmp_path, **CLEAN))
    url = api.url_for("/").rstrip("/")
    proc = drift(tmp_path, url, "--status", st, "--results", str(res), "--proven", str(proven))
    assert proc.returncode == 0, proc.stderr
    body = gh.issues[1]["body"]
    assert "| ggml/vulkan | failed | ggml/vulkan: failed here |" in body  # proven: required
    assert "| ggml/cuda | error (not yet proven on GitHub) |" in body
    proven.write_text("proven:\n  - {profile: default, date: yesterday}\n")
    line = one_line_error(
        drift(tmp_path, url, "--status", st, "--results", str(res), "--proven", str(proven)), 2
    )
    assert f"{proven}: " in line and "proven" in line, line


def test_an_unreachable_source_keeps_its_last_known_status(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    drift(
        tmp_path, url, "--status", str(status_json(tmp_path, **{**CLEAN, "continuum": "conflict"}))
    )
    proc = drift(
        tmp_path,
        url,
        "--status",
        str(status_json(tmp_path, **{**CLEAN, "continuum": "source_unreachable"})),
    )
    assert proc.returncode == 0 and proc.stdout.startswith("drift-issue: updated #1")
    body = gh.issues[1]["body"]
    assert (
        "| continuum | conflict (last known) |" in body
        and "[source unreachable now: continuum detail" in body
    )
    assert gh.issues[1]["state"] == "open"
    # never seen before and unreachable: nothing known, not a problem
    gh.issues.clear()
    proc = drift(
        tmp_path,
        url,
        "--status",
        str(status_json(tmp_path, **{**CLEAN, "new": "source_unreachable"})),
    )
    assert "nothing to send" in proc.stdout and not gh.issues


def test_issues_that_are_not_ours_are_left_alone(tmp_path, api, gh):
    gh.add(5, "a person's issue with our label", labels=(D.LABEL,))
    gh.add(6, D.MARKER + " but a pull request", labels=(D.LABEL,), pull_request={"url": "x"})
    url = api.url_for("/").rstrip("/")
    proc = drift(
        tmp_path,
        url,
        "--status",
        str(status_json(tmp_path, **{**CLEAN, "ggml-master": "conflict"})),
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        sorted(gh.issues) == [5, 6, 7] and gh.issues[5]["body"] == "a person's issue with our label"
    )
    assert ("PATCH", "/issues/5") not in gh.sent()


# ---------------------------------------------------------------- dry run and bad input


def test_dry_run_prints_the_requests_and_sends_nothing(tmp_path, api, gh):
    st = status_json(tmp_path, **{**CLEAN, "ggml-master": "conflict"})
    proc = drift(
        tmp_path, api.url_for("/").rstrip("/"), "--status", str(st), "--dry-run", token=None
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("dry run: nothing sent")
    assert (
        f"GET {api.url_for('/repos/owner/proj/issues')}?state=all&labels={D.LABEL}&per_page=100"
        in out
    )
    assert "found: none" in out
    assert "decision: open: ggml-master: conflict" in out
    assert (
        f"POST {api.url_for('/repos/owner/proj/issues')}\n"
        "Authorization: Bearer (GITHUB_TOKEN is not set)" in out
    )
    assert '"title": "ggml-patch: the series drifted or a cell failed"' in out
    assert gh.requests == []
    gh.add(
        3,
        D.issue_body(D.State(profile="live", targets={"ggml-master": {"status": "conflict"}}), NOW),
    )
    with_token = drift(tmp_path, api.url_for("/").rstrip("/"), "--status", str(st), "--dry-run")
    assert (
        "Authorization: Bearer ***" in with_token.stdout and "found: #3 (open)" in with_token.stdout
    )
    # read, never written
    assert "decision: update" in with_token.stdout and {m for m, _ in gh.sent()} == {"GET"}


def test_needs_the_token_without_dry_run(tmp_path, api):
    st = status_json(tmp_path, **CLEAN)
    assert "drift-issue needs GITHUB_TOKEN" in one_line_error(
        drift(tmp_path, api.url_for("/"), "--status", str(st), token=None), 2
    )


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "status.json: no such file"),
        ("{", "status.json:1: not valid JSON"),
        ('{"targets": []}', "not the output of `ggml-patch status --json`"),
        (
            '{"targets": [{"target": "x", "status": "fine"}]}',
            'targets[0]: expected "target" and a "status" among',
        ),
    ],
)
def test_a_bad_status_file_is_one_line(tmp_path, api, content, expected):
    if content is not None:
        (tmp_path / "status.json").write_text(content)
    line = one_line_error(drift(tmp_path, api.url_for("/"), "--status", "status.json"), 2)
    assert expected in line


def test_a_bad_repo_is_one_line(tmp_path, api):
    line = one_line_error(
        drift(tmp_path, api.url_for("/"), "--status", "x", "--repo", "no slash"), 2
    )
    assert "--repo 'no slash': expected OWNER/NAME" in line


# ---------------------------------------------------------------- API errors, as `pr` reports them

ERRORS = {
    "401": (
        401,
        {},
        {"message": "Bad credentials"},
        22,
        "GitHub rejected GITHUB_TOKEN (401 Bad credentials)",
    ),
    "403": (
        403,
        {"X-RateLimit-Remaining": "4999"},
        {"message": "Resource not accessible by integration"},
        22,
        "the token lacks permission to write issues on owner/proj "
        "(the job needs `permissions: issues: write`)",
    ),
    "rate-limit": (
        403,
        {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "4102444800"},
        {"message": "API rate limit exceeded"},
        24,
        "retry after 2100-01-01 00:00:00 UTC",
    ),
    # longer than RETRY_AFTER_MAX: not waited out, reported with when to retry
    "429": (
        429,
        {"Retry-After": "120"},
        {"message": "slow down"},
        24,
        "retry in 120 s (Retry-After)",
    ),
    "secondary": (
        403,
        {},
        {"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
        24,
        "GitHub API secondary rate limit exceeded (403 You have exceeded a secondary rate limit",
    ),
    "410": (
        410,
        {},
        {"message": "Issues are disabled for this repo"},
        26,
        "410 Issues are disabled for this repo: enable Issues on "
        "owner/proj (Settings > General > Features > Issues",
    ),
    "301": (
        301,
        {"Location": "https://api.github.com/repositories/42/labels"},
        {"message": "Moved Permanently"},
        26,
        "301 moved to https://api.github.com/repositories/42/labels: "
        "owner/proj was renamed or transferred",
    ),
    "422": (
        422,
        {},
        {"message": "Validation Failed", "errors": [{"message": "body is too long"}]},
        23,
        "(422 Validation Failed: body is too long)",
    ),
    # after 3 retries
    "502": (502, {}, {"message": "Server Error"}, 26, "unexpected answer 502 Server Error"),
}


@pytest.mark.parametrize("case", ERRORS)
def test_each_api_error_has_its_message_and_exit_code(tmp_path, api, case):
    status, headers, payload, code, expected = ERRORS[case]
    api.expect_request("/repos/owner/proj/issues", method="GET").respond_with_json([])
    api.expect_request("/repos/owner/proj/labels", method="POST").respond_with_json({}, status=201)
    api.expect_request("/repos/owner/proj/issues", method="POST").respond_with_json(
        payload, status=status, headers=headers
    )
    st = status_json(tmp_path, **{**CLEAN, "ggml-master": "conflict"})
    line = one_line_error(drift(tmp_path, api.url_for("/").rstrip("/"), "--status", str(st)), code)
    assert expected in line, line


def test_an_unreachable_server(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    st = status_json(tmp_path, **CLEAN)
    line = one_line_error(drift(tmp_path, f"http://127.0.0.1:{port}", "--status", str(st)), 25)
    assert f"http://127.0.0.1:{port}: connection refused" in line


def test_the_token_never_leaks_into_an_error(tmp_path, api):
    api.expect_request("/repos/owner/proj/issues", method="GET").respond_with_json(
        {"message": f"token {TOKEN} is bad"}, status=401
    )
    line = one_line_error(
        drift(
            tmp_path, api.url_for("/").rstrip("/"), "--status", str(status_json(tmp_path, **CLEAN))
        ),
        22,
    )
    assert "token *** is bad" in line


# ---------------------------------------------------------------- the pure core

NOW = dt.datetime(2026, 11, 30, 4, 17, tzinfo=dt.timezone.utc)


def test_the_state_survives_its_own_body():
    status = D.read_status(
        {
            "profile": "live",
            "targets": [
                {
                    "target": "t",
                    "status": "conflict",
                    "detail": "--> a tricky -- detail | with a pipe",
                    "base": "c" * 40,
                }
            ],
        },
        "s",
    )
    action, state = D.decide(None, status, None, "", NOW)
    assert action.kind == "open"
    found = D.Found(1, action.body)
    assert found.state.to_json() == state.to_json()
    # the table cell, inert (publish.cell): the pipe escaped, ">" an entity
    assert "| --&gt; a tricky -- detail \\| with a pipe |" in action.body
    comment = action.body[action.body.index("<!-- ggml-patch-state: ") :]
    # "--" inside the state is escaped: the comment ends where it should
    assert comment.count("-->") == 1
    again, _ = D.decide(found, status, None, "", NOW)
    assert again.kind == "none"  # the same body: nothing to send


def test_rank_and_worse():
    before = D.State(
        profile="live",
        targets={"a": {"status": "applies with 3-way merge"}, "b": {"status": "conflict"}},
    )
    now = D.State(
        profile="live",
        targets={
            "a": {"status": "conflict"},
            "b": {"status": "applies with 3-way merge"},
            "c": {"status": "not applicable"},
        },
        failing={"x/cpu": {"status": "failed"}},
    )
    assert D.worsened(before, now) == [
        "a: applies with 3-way merge -> conflict",
        "c: applies cleanly -> not applicable",
        "x/cpu: failed",
    ]
    assert (
        D.problems(
            D.State(
                profile="live",
                targets={"u": {"status": "already upstream"}, "v": {"status": "applies cleanly"}},
            )
        )
        == []
    )


# ----------------------------------------------------------------
# one issue for life (issue 21 scenarios)

CONFLICT = {**CLEAN, "ggml-master": "conflict"}


def _opened(tmp_path, gh, url) -> int:
    assert drift(tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT))).returncode == 0
    (number,) = [n for n, i in gh.issues.items() if i["state"] == "open" and D.MARKER in i["body"]]
    return number


def test_closed_by_a_person_it_is_reopened_not_duplicated(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)
    # closed by hand, still conflicting
    gh.issues[n].update(state="closed", state_reason="completed")
    proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT)))
    assert proc.stdout.startswith(f"drift-issue: reopened #{n}"), proc.stdout
    assert list(gh.issues) == [n] and gh.issues[n]["state"] == "open"
    assert "the problems are back" in gh.comments[-1][1]


def test_closed_as_not_planned_is_left_alone_until_it_gets_worse(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)
    gh.issues[n].update(state="closed", state_reason="not_planned")
    gh.requests.clear()
    for _ in range(2):  # daily runs with the same status: nothing sent
        proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT)))
        assert (
            "was closed as not planned and nothing got worse since: left closed" in proc.stdout
        ), proc.stdout
    assert (
        {m for m, _ in gh.sent()} == {"GET"}
        and gh.issues[n]["state"] == "closed"
        and len(gh.issues) == 1
    )
    worse = status_json(tmp_path, **{**CONFLICT, "llama.cpp-master": "not applicable"})
    proc = drift(tmp_path, url, "--status", str(worse))
    assert proc.stdout.startswith(f"drift-issue: reopened #{n}") and gh.issues[n]["state"] == "open"
    assert (
        "llama.cpp-master: applies cleanly -> not applicable" in gh.comments[-1][1]
        and len(gh.issues) == 1
    )


def test_with_its_label_removed_it_is_no_longer_ours(tmp_path, api, gh):
    """The label is half of what makes the issue ours (the other half: the bot wrote it): an
    unlabelled one is never rewritten; a new one is opened, and the old one named in the log."""
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)
    gh.issues[n]["labels"] = []
    before = gh.issues[n]["body"]
    proc = drift(
        tmp_path,
        url,
        "--status",
        str(status_json(tmp_path, **{**CONFLICT, "continuum": "conflict"})),
    )
    assert proc.stdout.startswith(f"drift-issue: opened https://github.com/{REPO}/issues/{n + 1}")
    assert len(gh.issues) == 2 and gh.issues[n]["body"] == before
    assert ("PATCH", f"/issues/{n}") not in gh.sent()


def _outsiders_issue(gh: FakeGitHub, number: int) -> None:
    """Someone else's issue with the marker and a fake state, closed as not planned: taken as
    ours, it would silence the drift issue for good."""
    fake = D.State(profile="live", targets={"ggml-master": {"status": "conflict"}})
    body = D.issue_body(fake, dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc))
    gh.add(number, body, state="closed", user="mallory", state_reason="not_planned")


def test_an_outsiders_marker_issue_is_ignored_and_named_once(tmp_path, api, gh):
    _outsiders_issue(gh, 3)
    gh.add(4, D.MARKER + " open, by someone else", user="mallory")
    url = api.url_for("/").rstrip("/")
    proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"drift-issue: opened https://github.com/{REPO}/issues/5")
    assert gh.issues[5]["user"]["login"] == D.BOT and gh.issues[5]["state"] == "open"
    assert gh.issues[3]["state"] == "closed" and gh.issues[4]["body"].endswith("someone else")
    assert not [p for m, p in gh.sent() if m == "PATCH"]
    named = [ln for ln in proc.stderr.splitlines() if "ignored #" in ln]
    assert len(named) == 2 and "ignored #3 by mallory" in named[0] + named[1], proc.stderr
    assert f"not written by {D.BOT} with the label {D.LABEL}" in named[0]


def test_another_bot_login_is_configurable(tmp_path, api, gh):
    gh.bot = "my-app[bot]"
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)  # written as my-app[bot]: not github-actions[bot]'s
    st = str(status_json(tmp_path, **{**CONFLICT, "continuum": "conflict"}))
    proc = drift(tmp_path, url, "--status", st, "--bot", "my-app[bot]")
    assert proc.stdout.startswith(f"drift-issue: updated #{n}"), proc.stdout + proc.stderr
    assert len(gh.issues) == 1


def test_a_502_on_the_issue_post_leaves_exactly_one_issue(tmp_path, api, gh):
    """GitHub opened the issue but the answer was lost (502): the tool looks again, finds it, and
    never sends the POST a second time."""
    gh.carried_out.append(("POST", "/issues", _json({"message": "Server Error"}, 502)))
    url = api.url_for("/").rstrip("/")
    proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT)))
    assert proc.returncode == 0, proc.stderr
    assert (
        "unexpected answer 502" in proc.stdout and "looking before sending it again" in proc.stdout
    )
    assert "it was carried out: POST /issues not sent again" in proc.stdout
    assert gh.sent().count(("POST", "/issues")) == 1 and list(gh.issues) == [1]


def test_a_502_on_a_post_not_carried_out_is_sent_again_once(tmp_path, api, gh):
    gh.faults.append(("POST", "/issues", _json({"message": "Server Error"}, 502)))
    url = api.url_for("/").rstrip("/")
    proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT)))
    assert proc.returncode == 0, proc.stderr
    assert gh.sent().count(("POST", "/issues")) == 2 and list(gh.issues) == [1]


def test_a_lost_comment_is_not_posted_twice(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)
    path = f"/issues/{n}/comments"
    gh.carried_out.append(("POST", path, _json({"message": "Server Error"}, 502)))
    worse = status_json(tmp_path, **{**CONFLICT, "llama.cpp-master": "not applicable"})
    proc = drift(tmp_path, url, "--status", str(worse))
    assert proc.returncode == 0, proc.stderr
    assert gh.sent().count(("POST", path)) == 1 and ("GET", path) in gh.sent()
    assert len(gh.comments) == 1 and "Worse since the last update" in gh.comments[0][1]


def test_no_answer_in_time_to_the_issue_post_leaves_exactly_one_issue(tmp_path, api):
    """The POST took effect, its answer came too late (a read timeout): looked for, found."""
    import time

    def slow(request):
        answer = gh.handle(request)
        time.sleep(1.5)  # past --timeout 1; the server answers nothing else meanwhile
        return answer

    # registered first, so matched before the fake's own handler
    api.expect_request("/repos/owner/proj/issues", method="POST").respond_with_handler(slow)
    gh = FakeGitHub(api)
    url = api.url_for("/").rstrip("/")
    proc = drift(
        tmp_path, url, "--status", str(status_json(tmp_path, **CONFLICT)), "--timeout", "1"
    )
    assert proc.returncode == 0, proc.stderr
    assert "timed out" in proc.stdout and "not sent again" in proc.stdout
    assert list(gh.issues) == [1]


def test_150_newer_labelled_issues_over_two_pages(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)
    for i in range(150):  # newer, labelled, not ours: ours is on the second page (newest first)
        gh.add(n + 1 + i, f"someone else's report {i}")
    gh.requests.clear()
    gh.queries.clear()
    proc = drift(
        tmp_path,
        url,
        "--status",
        str(status_json(tmp_path, **{**CONFLICT, "continuum": "conflict"})),
    )
    assert proc.stdout.startswith(f"drift-issue: updated #{n}"), proc.stdout
    assert gh.sent()[:3] == [("GET", "/issues"), ("GET", "/issues"), ("PATCH", f"/issues/{n}")]
    # the Link header's next page
    assert "page=2" in gh.queries[1] and "labels=ggml-patch-drift" in gh.queries[1]
    assert len(gh.issues) == 151


def test_a_partial_dispatch_merges_into_the_state(tmp_path, api, gh):
    url = api.url_for("/").rstrip("/")
    n = _opened(tmp_path, gh, url)  # ggml-master conflicts
    # a dispatch for one target that is clean: the issue keeps the other's conflict, stays open
    only = status_json(tmp_path, **{"llama.cpp-master": "applies cleanly"})
    proc = drift(tmp_path, url, "--status", str(only), "--partial")
    assert "closed" not in proc.stdout and gh.issues[n]["state"] == "open", proc.stdout
    assert "| ggml-master | conflict |" in gh.issues[n]["body"]
    # another profile's status merges too, even without --partial
    other = tmp_path / "default-status.json"
    other.write_text(
        json.dumps(
            {
                "profile": "default",
                "targets": [
                    {"target": "ggml", "status": "applies cleanly", "detail": "", "base": "cd" * 20}
                ],
            }
        )
    )
    proc = drift(tmp_path, url, "--status", str(other))
    assert "closed" not in proc.stdout and gh.issues[n]["state"] == "open"
    body = gh.issues[n]["body"]
    assert "| ggml-master | conflict |" in body and "| ggml | applies cleanly |" in body
    # the full scheduled run: all clean, closed
    proc = drift(tmp_path, url, "--status", str(status_json(tmp_path, **CLEAN)))
    assert proc.stdout.startswith(f"drift-issue: closed #{n}"), proc.stdout


def test_a_502_then_200_is_retried(tmp_path, api, gh):
    gh.faults.append(("GET", "/issues", _json({"message": "Server Error"}, 502)))
    proc = drift(
        tmp_path, api.url_for("/").rstrip("/"), "--status", str(status_json(tmp_path, **CONFLICT))
    )
    assert proc.returncode == 0, proc.stderr
    assert gh.sent()[:2] == [("GET", "/issues"), ("GET", "/issues")] and len(gh.issues) == 1


def test_a_429_with_retry_after_is_waited_out(tmp_path, api, gh):
    import time

    gh.faults.append(
        ("POST", "/issues", _json({"message": "slow down"}, 429, {"Retry-After": "1"}))
    )
    started = time.monotonic()
    proc = drift(
        tmp_path, api.url_for("/").rstrip("/"), "--status", str(status_json(tmp_path, **CONFLICT))
    )
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started >= 1.0  # it waited as told
    assert gh.sent().count(("POST", "/issues")) == 2 and len(gh.issues) == 1


def test_a_secondary_limit_with_retry_after_on_403_is_retried(tmp_path, api, gh):
    gh.faults.append(
        (
            "GET",
            "/issues",
            _json(
                {"message": "You have exceeded a secondary rate limit"}, 403, {"Retry-After": "1"}
            ),
        )
    )
    proc = drift(
        tmp_path, api.url_for("/").rstrip("/"), "--status", str(status_json(tmp_path, **CONFLICT))
    )
    assert proc.returncode == 0, proc.stderr
    assert len(gh.issues) == 1


def test_the_api_base_comes_from_github_api_url(tmp_path, api, gh):
    """What every runner sets (GitHub Enterprise Server included); --api-url overrides it. No
    matrix.yaml is needed: drift-issue never reads one."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "GGML_PATCH_HTTP_BACKOFF": "0",
        **RUN,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_API_URL": api.url_for("/").rstrip("/"),
    }
    st = status_json(tmp_path, **CONFLICT)
    assert not (tmp_path / "matrix.yaml").exists()
    proc = subprocess.run(
        [sys.executable, "-m", "orchestrator", "drift-issue", "--repo", REPO, "--status", str(st)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("drift-issue: opened") and len(gh.issues) == 1
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "drift-issue",
            "--repo",
            REPO,
            "--status",
            str(st),
            "--api-url",
            f"http://127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert proc.returncode == 25 and f"127.0.0.1:{port}" in proc.stderr
