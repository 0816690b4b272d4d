"""The GitHub REST API, one request at a time, for `pr` and `drift-issue`. The token travels only in
the Authorization header (`_Bearer`), never in a URL, a file or a message (each goes through
`redact`). Each failure the user can act on has its own error class and exit code (README,
22-26): 401 and 403 without a rate limit (the token), 403/429 rate-limited (when to retry), 422
(refused)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import MaxRetryError, ResponseError
from urllib3.util.retry import Retry

from ..errors import GitHubAuthFailed, GitHubError, GitHubRejected, GitHubUnreachable, RateLimited
from ..redact import redact, redact_data

API_VERSION = "2022-11-28"
RETRIES = 3  # after the first try: 4 answers at most
BACKOFF = 2.0  # urllib3: no wait before the first retry, then 4 s, 8 s (2 * 2**(n-1))
# another factor (seconds; 0: retry at once), e.g. for tests
BACKOFF_ENV = "GGML_PATCH_HTTP_BACKOFF"
RETRY_AFTER_MAX = 60.0  # a longer Retry-After is reported, not slept through
# GitHub asks for at least a minute after a rate limit that does not say how long
RATE_LIMIT_WAIT = 60.0
# retried after a 5xx or a read timeout: sending them twice does what sending them once does.
# A POST is not: it may have opened an issue whose answer was lost (the caller looks, then decides)
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
sleep: Callable[[float], None] = time.sleep  # every wait between tries; tests replace it


class NoAnswer(GitHubUnreachable):
    """The request was sent and no answer came in time: it may have been carried out."""


class _Retry(Retry):
    """urllib3's Retry, also for 403 with Retry-After (a secondary rate limit), and never sleeping
    longer than RETRY_AFTER_MAX (beyond it the answer is returned and reported)."""

    RETRY_AFTER_STATUS_CODES = frozenset({403, 413, 429, 503})
    deadline: Optional["_Deadline"] = None  # each new try gets the whole --timeout again

    def new(self, **kw: Any) -> "_Retry":
        fresh = super().new(**kw)
        fresh.deadline = self.deadline
        return fresh

    def is_retry(self, method: str, status_code: int, has_retry_after: bool = False) -> bool:
        # a rate-limited request was not carried out: any method may be sent again after the wait
        if status_code == 429 or (status_code == 403 and has_retry_after):
            return bool(self.total)
        return super().is_retry(method, status_code, has_retry_after)

    def wait(self, response=None) -> float:
        """Seconds before the next try: Retry-After, else a minute after a rate limit, else the
        backoff."""
        after = self.get_retry_after(response) if response is not None else None
        if after is not None:
            return after
        if response is not None and response.status == 429:
            return RATE_LIMIT_WAIT
        return self.get_backoff_time()

    def sleep(self, response=None) -> None:
        seconds = self.wait(response)
        if self.deadline is not None:  # the wait itself is not the server's time
            self.deadline.restart(seconds)
        sleep(seconds)
        if self.deadline is not None:
            self.deadline.restart()

    def increment(
        self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None
    ):
        after = self.get_retry_after(response) if response is not None else None
        if after is not None and after > RETRY_AFTER_MAX:
            # out of retries as far as urlopen knows: with raise_on_status False it returns this
            # answer
            raise MaxRetryError(
                _pool, url or "", ResponseError(f"Retry-After {after:g} s is too long to wait")
            )
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _backoff() -> float:
    try:
        value = float(os.environ.get(BACKOFF_ENV, BACKOFF))
    except ValueError:
        return BACKOFF
    return value if 0 <= value <= 60 else BACKOFF


class _Deadline:
    """When the caller stops waiting: `timeout` after the start of the current try."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.restart()

    def restart(self, wait: float = 0.0) -> None:
        self.until = time.monotonic() + wait + self.timeout

    def left(self) -> float:
        return self.until - time.monotonic()


def retry_policy(deadline: Optional[_Deadline] = None) -> Retry:
    """What `send` retries, and how long it waits between tries."""
    policy = _Retry(
        total=RETRIES,  # connect errors, read errors and answers alike (Retry-After respected)
        redirect=0,
        backoff_factor=_backoff(),
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=IDEMPOTENT,  # a POST only after a rate limit (is_retry) or no connection
        raise_on_status=False,  # the last answer comes back and is reported as such
        raise_on_redirect=False,
    )
    policy.deadline = deadline
    return policy


def request_headers() -> dict[str, str]:
    """Every header but Authorization, which `_Bearer` adds."""
    return {
        "Accept": "application/vnd.github+json",
        "X-GitHub-Api-Version": API_VERSION,
        "Content-Type": "application/json; charset=utf-8",
        "User-Agent": "ggml-patch",
    }


MAX_ANSWER_BYTES = 8 * 1024 * 1024  # an API answer larger than this is not GitHub's


def body_json(payload: Any) -> str:
    """The exact bytes sent (and shown by a dry run): redacted, so no token or URL password is
    sent."""
    return json.dumps(redact_data(payload), indent=2, ensure_ascii=False) + "\n"


class _Bearer(requests.auth.AuthBase):
    """Explicit auth, so requests never replaces the header with ~/.netrc credentials."""

    def __init__(self, token: str):
        self.token = token

    def __call__(self, r):
        r.headers["Authorization"] = f"Bearer {self.token}"
        return r


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Any  # case-insensitive mapping
    text: str

    def json(self) -> Any:
        try:
            return json.loads(self.text)
        except (ValueError, RecursionError):  # not JSON, or nested past the parser
            return None


def send(
    method: str,
    api_url: str,
    url: str,
    token: str,
    timeout: float,
    payload: Any = None,
    params: Optional[dict] = None,
) -> Answer:
    """One request; a server that cannot be reached is GitHubUnreachable (exit 25)."""
    data = body_json(payload).encode("utf-8") if payload is not None else None
    try:
        resp = _within(
            timeout,
            lambda session: session.request(
                method,
                url,
                data=data,
                params=params,
                headers=request_headers(),
                auth=_Bearer(token),
                timeout=(timeout, timeout),
                allow_redirects=False,
                stream=True,
            ),
        )
    except requests.RequestException as e:
        retry = "check --api-url and the network, then retry"
        if isinstance(e, requests.Timeout) and not isinstance(e, requests.ConnectTimeout):
            why = f"no answer within {timeout:g} s (timed out); {retry}"
            raise NoAnswer(redact(f"{api_url}: {why}", (token,))) from None
        if isinstance(e, requests.Timeout):
            why = f"no connection within {timeout:g} s (timed out); {retry}"
        elif isinstance(e, requests.ConnectionError):
            why = (
                "connection refused" if "refused" in str(e).lower() else "cannot connect"
            ) + f"; {retry}"
        else:
            why = f"{type(e).__name__}; check --api-url"
        raise GitHubUnreachable(redact(f"{api_url}: {why}", (token,))) from None
    return Answer(resp.status_code, resp.headers, resp.text)


def _within(
    timeout: float, call: Callable[[requests.Session], requests.Response]
) -> requests.Response:
    """One request with a deadline on each try's whole exchange. requests' own timeout is per socket
    read, so a server that trickles its answer a byte at a time would never end: the request runs in
    a worker thread and the caller stops waiting at the deadline (the worker is a daemon). A retry
    (urllib3's, after its wait) starts the deadline again."""
    box: dict = {}
    finished = threading.Event()
    deadline = _Deadline(timeout)
    session, adapter = requests.Session(), HTTPAdapter(max_retries=retry_policy(deadline))
    session.mount("https://", adapter)
    session.mount("http://", adapter)

    def work() -> None:
        try:
            resp = box["resp"] = call(session)
            # the whole body into resp._content (what .text reads), inside the deadline, at most
            # MAX_ANSWER_BYTES
            chunks, total = [], 0
            for block in resp.iter_content(64 * 1024):
                total += len(block)
                if total > MAX_ANSWER_BYTES:
                    resp.close()
                    raise requests.exceptions.ContentDecodingError(
                        f"the answer is larger than {MAX_ANSWER_BYTES} bytes"
                    )
                chunks.append(block)
            resp._content, resp._content_consumed = b"".join(chunks), True
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e
        finally:
            finished.set()

    threading.Thread(target=work, name="github-request", daemon=True).start()
    while not finished.wait(max(0.0, deadline.left())):
        if deadline.left() <= 0:  # not restarted by a retry meanwhile
            raise requests.Timeout(f"no complete answer within {timeout:g} s")
    session.close()
    if "error" in box:
        raise box["error"]
    return box["resp"]


def github_message(text: str) -> str:
    """GitHub's own words: "message", then each errors[].message."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return " ".join(text[:4000].split())[:200]
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message", ""))]
    errors = data.get("errors") or []
    if not isinstance(errors, list):  # some answers give one string (or object), not a list
        errors = [errors if isinstance(errors, dict) else str(errors)]
    for err in errors:
        if isinstance(err, dict) and (err.get("message") or err.get("code")):
            parts.append(
                str(err.get("message") or f"{err.get('field', '')} {err.get('code')}".strip())
            )
        elif isinstance(err, str):
            parts.append(err)
    return ": ".join(" ".join(p.split()) for p in parts if p)[:400]


@dataclass(frozen=True)
class Wording:
    """What a failed request was for, in the words of the command that made it."""

    access: str  # 401: "pull-request write access to OWNER/NAME"
    forbidden: str  # 403: "permission to open pull requests on OWNER/NAME"
    rejected: str  # 422: "GitHub refused the pull request me:x -> OWNER/NAME:master"
    repo: str


def raise_for_answer(
    answer: Answer, url: str, token: str, wording: Wording, now: Callable[[], float] = time.time
) -> None:
    """Nothing for a 2xx answer; else the error the user can act on."""
    status, headers, where = answer.status, answer.headers, redact(url, (token,))
    if 200 <= status < 300:
        return
    msg = redact(github_message(answer.text), (token,))
    secondary = _SECONDARY.search(msg)
    if status == 401:
        raise GitHubAuthFailed(
            f"GitHub rejected GITHUB_TOKEN (401 {msg or 'Unauthorized'}): "
            f"use a valid token with {wording.access}"
        )
    if status == 429 or (
        status == 403
        and (headers.get("X-RateLimit-Remaining") == "0" or headers.get("Retry-After") or secondary)
    ):
        kind = "secondary rate limit" if secondary else "rate limit"
        raise RateLimited(
            f"GitHub API {kind} exceeded ({status} {msg or 'rate limited'}): "
            f"{retry_when(headers, now())}"
        )
    if status == 403:
        raise GitHubAuthFailed(
            f"GitHub refused the request (403 {msg or 'Forbidden'}): "
            f"the token lacks {wording.forbidden}"
        )
    if status == 422:
        raise GitHubRejected(f"{wording.rejected} (422 {msg or 'Unprocessable Entity'})")
    if status == 410:
        raise GitHubError(
            f"{where}: 410 {msg or 'Gone'}: enable Issues on {wording.repo} "
            "(Settings > General > Features > Issues; forks have them off)"
        )
    if status in (301, 302, 307, 308):
        moved = redact(str(headers.get("Location") or "?"), (token,))
        raise GitHubError(
            f"{where}: {status} moved to {moved}: {wording.repo} was renamed or transferred; "
            "use its new OWNER/NAME (--repo)"
        )
    if status == 404:
        raise GitHubError(
            f"{where}: 404 {msg or 'Not Found'}: {wording.repo} does not exist or the token "
            "cannot see it"
        )
    raise GitHubError(f"{where}: unexpected answer {status} {msg}".rstrip())


# GitHub's words for a secondary rate limit, which it may send as a bare 403 without headers
_SECONDARY = re.compile(r"secondary rate limit|abuse detection", re.I)


def retry_when(headers, now: float) -> str:
    reset = str(headers.get("X-RateLimit-Reset") or "").strip()
    # a time this century or the next: a huge number is no time (and would overflow a date)
    if reset.isdigit() and len(reset) <= 11:
        at = int(reset)
        try:
            stamp = _dt.datetime.fromtimestamp(at, _dt.timezone.utc)
        except (OverflowError, OSError, ValueError):
            stamp = None
        if stamp is not None:
            when = stamp.strftime("%Y-%m-%d %H:%M:%S UTC")
            return f"retry after {when} (in {max(0, at - int(now))} s; X-RateLimit-Reset {at})"
    after = str(headers.get("Retry-After") or "").strip()
    if after.isdigit() and len(after) <= 9:
        return f"retry in {int(after)} s (Retry-After)"
    return "retry later"
