"""The last look at a bundle before it is written: no file of it (patches, documents, manifest)
may hold a known secret, raw or in a form an escaping made of it (`ghp\\_x` renders as `ghp_x`).
The documents are redacted before they are escaped (publish) and the commit messages before
the patches are made (authorship.reauthor); what is left is a secret in a change itself, which
redaction cannot remove without changing the tested tree: the bundle is refused."""

from __future__ import annotations

import html
import os
from typing import Iterable, Optional

from .. import publish
from ..errors import BundleRefused
from ..redact import SECRET_ENV, github_token_in, known_secrets

_STRONG = 8


def forms(secret: str) -> set[str]:
    """`secret` as it may stand in a written file: raw, Markdown-escaped, HTML-escaped, with `_`
    and `*` escaped one by one (a renderer shows each of these as the secret)."""
    out = {secret, publish._escape_words(secret), html.escape(secret, quote=True)}
    out.add(secret.replace("_", "\\_").replace("*", "\\*"))
    out.add("".join(f"&#{ord(c)};" if c in "_@" else c for c in secret))
    return {f for f in out if f}


def _unescaped(text: str) -> str:
    """`text` with Markdown's backslash escapes and HTML entities undone: a token shape escaped
    in a document is matched as what it renders to."""
    return html.unescape(text.replace("\\_", "_").replace("\\*", "*"))


def _strong(secrets: Iterable[str]) -> list[str]:
    """The secrets a file is refused for: the run's tokens and any of _STRONG characters or more.
    A shorter URL password met somewhere ("pass") is still redacted wherever it appears, but a
    change may hold the word: refusing for it would refuse every bundle."""
    tokens = {os.environ.get(k, "") for k in SECRET_ENV}
    return [s for s in known_secrets(secrets) if s in tokens or len(s) >= _STRONG]


def leak(data: str | bytes, secrets: Iterable[str] = ()) -> Optional[str]:
    """What secret `data` holds ("a token or a credential this run holds", "a GitHub token"), or
    None. Never the secret itself: the answer is printed."""
    text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    for s in _strong(secrets):
        if any(f in text for f in forms(s)):
            return "a token or a credential this run holds"
    if github_token_in(text) or github_token_in(_unescaped(text)):
        return "a GitHub token"
    return None


def refuse_leaks(files: dict[str, str | bytes], where: str) -> None:
    """One line naming the file (never the secret) when any of `files` holds a secret."""
    for name, data in files.items():
        found = leak(data)
        if found is None:
            continue
        what = "its change" if name.endswith(".patch") else "it"
        raise BundleRefused(
            f"{where}/{name}: {what} holds {found}; a published bundle never carries one "
            "(remove it from the series' files and re-run `ggml-patch bundle`)"
        )
