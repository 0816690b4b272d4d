"""The GitHub REST API, one request at a time, for `pr` and `drift-issue`.

The token travels only in the Authorization header (`_Bearer`), never in a URL, a file or a
message; every message that could carry it goes through `redact`. Each failure the user can
act on is its own error class and exit code (README, 22-26): 401 and 403 without a rate limit
(the token), 403/429 with the rate limit exhausted (when to retry), 422 (GitHub refused the
request), an unreachable server, anything else.
"""

from __future__ import annotations

import datetime as _dt
import json
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import requests

from ..errors import GitHubAuthFailed, GitHubError, GitHubRejected, GitHubUnreachable, RateLimited
from ..redact import REDACTED, redact  # noqa: F401 (the one redaction function; re-exported for callers)

API_VERSION = "2022-11-28"
DEFAULT_API_URL = "https://api.github.com"


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
    """The exact bytes sent (and shown by a dry run): redacted, so no token or URL password is sent."""
    from ..redact import redact_data

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
        except ValueError:
            return None


def send(
    method: str, api_url: str, url: str, token: str, timeout: float, payload: Any = None, params: Optional[dict] = None
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
    except requests.Timeout:
        raise GitHubUnreachable(
            redact(
                f"{api_url}: no answer within {timeout:g} s (timed out); check --api-url and the network, then retry",
                (token,),
            )
        ) from None
    except requests.ConnectionError as e:
        why = "connection refused" if "refused" in str(e).lower() else "cannot connect"
        raise GitHubUnreachable(
            redact(f"{api_url}: {why}; check --api-url and the network, then retry", (token,))
        ) from None
    except requests.RequestException as e:
        raise GitHubUnreachable(redact(f"{api_url}: {type(e).__name__}; check --api-url", (token,))) from None
    return Answer(resp.status_code, resp.headers, resp.text)


def _within(timeout: float, call: Callable[[requests.Session], requests.Response]) -> requests.Response:
    """One request with a deadline on the whole exchange. requests' own timeout is per socket read,
    so a server that trickles its answer a byte at a time would never end: the request runs in a
    worker thread and the caller stops waiting at the deadline (the worker is a daemon)."""
    box: dict = {}
    finished = threading.Event()
    session = requests.Session()

    def work() -> None:
        try:
            box["resp"] = call(session)
            _read_capped(box["resp"])  # the whole body, inside the deadline, at most MAX_ANSWER_BYTES
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e
        finally:
            finished.set()

    threading.Thread(target=work, name="github-request", daemon=True).start()
    if not finished.wait(timeout):
        raise requests.Timeout(f"no complete answer within {timeout:g} s")
    session.close()
    if "error" in box:
        raise box["error"]
    return box["resp"]


def _read_capped(resp: requests.Response, cap: int = MAX_ANSWER_BYTES) -> None:
    """Read a streamed answer's body into resp._content, refusing one over `cap` bytes."""
    chunks, total = [], 0
    for block in resp.iter_content(64 * 1024):
        total += len(block)
        if total > cap:
            resp.close()
            raise requests.exceptions.ContentDecodingError(f"the answer is larger than {cap} bytes")
        chunks.append(block)
    resp._content = b"".join(chunks)  # what .text and .json() read
    resp._content_consumed = True


def github_message(text: str) -> str:
    """GitHub's own words: "message", then each errors[].message."""
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:200]
    if not isinstance(data, dict):
        return ""
    parts = [str(data.get("message", ""))]
    errors = data.get("errors") or []
    if isinstance(errors, (str, int, float)):  # some answers give one string, not a list
        errors = [str(errors)]
    elif isinstance(errors, dict):
        errors = [errors]
    elif not isinstance(errors, list):
        errors = []
    for err in errors:
        if isinstance(err, dict) and (err.get("message") or err.get("code")):
            parts.append(str(err.get("message") or f"{err.get('field', '')} {err.get('code')}".strip()))
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
    status, headers = answer.status, answer.headers
    if 200 <= status < 300:
        return
    msg = redact(github_message(answer.text), (token,))
    if status == 401:
        raise GitHubAuthFailed(
            f"GitHub rejected GITHUB_TOKEN (401 {msg or 'Unauthorized'}): use a valid token with {wording.access}"
        )
    if status in (403, 429) and (headers.get("X-RateLimit-Remaining") == "0" or headers.get("Retry-After")):
        raise RateLimited(
            f"GitHub API rate limit exceeded ({status} {msg or 'rate limited'}): {retry_when(headers, now())}"
        )
    if status == 403:
        raise GitHubAuthFailed(
            f"GitHub refused the request (403 {msg or 'Forbidden'}): the token lacks {wording.forbidden}"
        )
    if status == 422:
        raise GitHubRejected(f"{wording.rejected} (422 {msg or 'Unprocessable Entity'})")
    if status == 404:
        raise GitHubError(
            f"{redact(url, (token,))}: 404 {msg or 'Not Found'}: {wording.repo} does not exist "
            "or the token cannot see it"
        )
    raise GitHubError(f"{redact(url, (token,))}: unexpected answer {status} {msg}".rstrip())


def retry_when(headers, now: float) -> str:
    reset = headers.get("X-RateLimit-Reset")
    if reset and reset.strip().isdigit():
        at = int(reset)
        when = _dt.datetime.fromtimestamp(at, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
        return f"retry after {when} (in {max(0, at - int(now))} s; X-RateLimit-Reset {at})"
    after = headers.get("Retry-After")
    if after and after.strip().isdigit():
        return f"retry in {int(after)} s (Retry-After)"
    return "retry later"
