"""The one redaction function: every message, progress line, result and provenance record the tool
writes passes through `redact` (errors when made, output when shown, results and bundles
before written). It removes credentials in a URL of any scheme
(`scheme://user:secret@host`), secret query parameters (`?access_token=...`), the tokens of
SECRET_ENV wherever they appear, anything shaped like a GitHub token, and any secret a caller
names."""

from __future__ import annotations

import io
import os
import re
import shlex
from typing import IO, Any, Iterable
from urllib.parse import unquote

REDACTED = "***"
# the tokens a run may hold: GitHub's, GitHub Actions' own, and the tool's
SECRET_ENV = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "ACTIONS_RUNTIME_TOKEN",
    "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
)
_MIN_SECRET = 4  # shorter values are not real tokens; replacing them would garble every message
# a value shorter than this ("pass" in a URL) is replaced only where it stands as a word of its
# own: inside "passed" it is not the secret, and replacing it there would garble every verdict
_WORD_ONLY_BELOW = 12

# scheme://AUTHORITY: the authority ends where RFC 3986 says (/ ? #) or at a character no URL
# holds unescaped (space, quotes, brackets); the userinfo is everything before its last '@', so a
# password with ')' or "'" (both legal there) is removed whole. Linear: one pass, no backtracking.
_AUTHORITY = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)([^/?#\s\"<>{}\[\]\\^`|]*)")
_QUERY = re.compile(
    r"(?i)([?&;](?:access_token|private_token|token|auth|password|passwd|pwd|secret|"
    r"api_key|apikey|key|client_secret|sig|signature|code|jwt|session)=)[^&#\s\"'<>]+"
)
# GitHub's own token shapes (classic, OAuth, user-to-server, server-to-server, refresh, and
# fine-grained): removed even when the token is not this run's own (a commit message quoting one)
_GITHUB_TOKEN = re.compile(
    r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"
)
_SEEN: set[str] = set()  # passwords met in URLs: removed wherever they appear later, decoded too


def _userinfo(m: re.Match) -> str:
    authority = m.group(2)
    at = authority.rfind("@")
    if at < 0:
        return m.group(0)
    password = authority[:at].partition(":")[2]
    for s in (password, unquote(password)):
        if len(s) >= _MIN_SECRET and len(_SEEN) < 64:
            _SEEN.add(s)
    return f"{m.group(1)}{REDACTED}{authority[at:]}"


def known_secrets(secrets: Iterable[str] = ()) -> list[str]:
    """Every value `redact` replaces wherever it appears, longest first."""
    found = {*secrets, *(os.environ.get(k, "") for k in SECRET_ENV), *_SEEN}
    kept = [s for s in found if s and len(s.strip()) >= _MIN_SECRET]
    return sorted(kept, key=len, reverse=True)


def safe_cut(data: bytes, cut: int) -> int:
    """A place at or before `cut` to split `data` so that no known secret is split: the text is
    redacted a piece at a time (a long log line), and half a token matches nothing."""
    for s in (x.encode("utf-8", "surrogateescape") for x in known_secrets()):
        start = data.find(s, max(0, cut - len(s) + 1))
        while 0 <= start < cut:
            if start + len(s) > cut:
                cut = start
                break
            start = data.find(s, start + 1)
    return cut


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without credentials in URLs, secret query
    parameters, GITHUB_TOKEN's value or `secrets`."""
    return _redact(str(text), known_secrets(secrets))


def _redact(text: str, found: list[str]) -> str:
    """redact with the secrets already gathered (`found`: known_secrets' list)."""
    for s in found:
        if len(s) >= _WORD_ONLY_BELOW:
            text = text.replace(s, REDACTED)
        elif s in text:
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(s)}(?![A-Za-z0-9_])", REDACTED, text)
    if _may_hold_token(text):
        text = _GITHUB_TOKEN.sub(REDACTED, text)
    if "://" in text:
        text = _AUTHORITY.sub(_userinfo, text)
    return _QUERY.sub(rf"\g<1>{REDACTED}", text) if _may_hold_query(text) else text


def github_token_in(text: str) -> bool:
    """Whether `text` holds something shaped like a GitHub token."""
    return _may_hold_token(text) and _GITHUB_TOKEN.search(text) is not None


def _may_hold_token(text: str) -> bool:
    """Whether _GITHUB_TOKEN can match (every shape has "gh" and "_")."""
    return "gh" in text and "_" in text


def _may_hold_query(text: str) -> bool:
    """Whether _QUERY can match: a `key=` after ?, & or ; (a results.json's many `-DX=Y` words
    cannot, and skipping them halves the redaction of a results document)."""
    return "=" in text and ("?" in text or "&" in text or ";" in text)


def shell_line(argv: Iterable[str], secrets: Iterable[str] = ()) -> str:
    """A command as a shell line, each word redacted BEFORE quoting (quotes around a password
    with "'" would hide it from the URL rule); a redacted word is shown as is, unquoted: with
    *** in it, it is not the command to paste anyway."""
    secrets = tuple(secrets)
    words = []
    for word in argv:
        shown = redact(word, secrets)
        words.append(shown if shown != word else shlex.quote(word))
    return " ".join(words)


class RedactingStream(io.TextIOBase):
    """A text stream that redacts each line before it reaches `raw` (stdout, stderr): whatever
    route printed it, no secret leaves. Lines end at \\n or \\r; flush() sends a partial line."""

    def __init__(self, raw: IO[str]):
        self.raw = raw
        self._pending = ""

    def write(self, s: str) -> int:
        self._pending += s
        cut = max(self._pending.rfind("\n"), self._pending.rfind("\r"))
        if cut >= 0:
            self.raw.write(redact(self._pending[: cut + 1]))
            self._pending = self._pending[cut + 1 :]
        return len(s)

    def flush(self) -> None:
        if self._pending:
            self.raw.write(redact(self._pending))
            self._pending = ""
        self.raw.flush()

    def isatty(self) -> bool:
        return self.raw.isatty()

    def fileno(self) -> int:
        return self.raw.fileno()

    @property
    def encoding(self):
        return getattr(self.raw, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


def redact_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like data (dicts, lists, strings, numbers) with every string redacted. The
    secrets are gathered once for the whole document (a results.json has thousands of strings),
    and again only after a URL's password joined them (it is removed from later strings too)."""
    return _Redactor(tuple(secrets)).data(data)


class _Redactor:
    def __init__(self, secrets: tuple[str, ...]):
        self.secrets = secrets
        self.found = known_secrets(secrets)
        self.seen = len(_SEEN)

    def text(self, text: str) -> str:
        if len(_SEEN) != self.seen:  # a password met in a URL since: removed wherever it appears
            self.found, self.seen = known_secrets(self.secrets), len(_SEEN)
        return _redact(text, self.found)

    def plain(self) -> bool:
        """No secret known (a URL's password met since included): a string without a URL or a
        query has nothing to remove."""
        return not self.found and len(_SEEN) == self.seen

    def data(self, data: Any) -> Any:
        if isinstance(data, str):
            return self.text(data)
        if isinstance(data, dict):
            # key, value, key, ... in order: a password met in one is removed from the next
            flat = self.members([x for pair in data.items() for x in pair])
            return dict(zip(flat[0::2], flat[1::2], strict=True))
        if isinstance(data, (list, tuple)):
            return type(data)(self.members(list(data)))
        return data

    def members(self, values: list[Any]) -> list[Any]:
        """A container's members redacted, the plain strings (most of a results.json's thousands)
        checked here rather than in a call each."""
        plain = self.plain()
        for i, v in enumerate(values):
            if isinstance(v, str):
                if (
                    plain
                    and "://" not in v
                    and not _may_hold_token(v)
                    and ("=" not in v or not _may_hold_query(v))
                ):
                    continue
                values[i] = self.text(v)
                plain = self.plain()  # a password met in a URL: every later string is checked
            elif isinstance(v, (dict, list, tuple)):
                values[i] = self.data(v)
                plain = self.plain()
        return values
