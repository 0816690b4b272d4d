"""The one redaction function: every message, progress line, result and provenance record the
tool writes passes through `redact` (errors when they are made, progress and printed output when
shown, results and bundles before they are written).

What it removes: credentials in a URL of any scheme (`scheme://user:secret@host`, whatever the
scheme: http, https, ssh, git, git+https...), secret query parameters (`?access_token=...`),
the value of GITHUB_TOKEN (and GH_TOKEN) wherever it appears, and any secret a caller names.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

REDACTED = "***"
SECRET_ENV = ("GITHUB_TOKEN", "GH_TOKEN")
_MIN_SECRET = 4  # shorter values are not real tokens; replacing them would garble every message

# scheme://USERINFO@ : the userinfo may hold a password or be a token itself; it never holds
# '/', '@', whitespace, or the quotes and brackets around a URL in a message or a JSON string
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s\"'<>()\[\]{}]+@")
_QUERY = re.compile(
    r"(?i)([?&](?:access_token|private_token|token|auth|password|passwd|secret|api_key|apikey|"
    r"client_secret|sig|signature)=)[^&#\s\"'<>]+"
)


def env_secrets(environ=None) -> tuple[str, ...]:
    environ = os.environ if environ is None else environ
    return tuple(v for v in (environ.get(k, "") for k in SECRET_ENV) if len(v.strip()) >= _MIN_SECRET)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` without credentials in URLs, secret query parameters, GITHUB_TOKEN's value or `secrets`."""
    if not isinstance(text, str):
        text = str(text)
    for s in sorted({*secrets, *env_secrets()}, key=len, reverse=True):
        if s and len(s.strip()) >= _MIN_SECRET:
            text = text.replace(s, REDACTED)
    text = _USERINFO.sub(rf"\g<1>{REDACTED}@", text)
    return _QUERY.sub(rf"\g<1>{REDACTED}", text)


def redact_data(data: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of JSON-like data (dicts, lists, strings, numbers) with every string redacted."""
    secrets = tuple(secrets)
    if isinstance(data, str):
        return redact(data, secrets)
    if isinstance(data, dict):
        return {redact(k, secrets) if isinstance(k, str) else k: redact_data(v, secrets) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return type(data)(redact_data(v, secrets) for v in data)
    return data
