"""What counts as a URL, a remote, a ref or a commit where they come from input (matrix.yaml, a
bundle's manifest, .gitmodules, the command line). Pure: each returns why a value is refused,
or None. Validation comes first; git then still gets them after --end-of-options."""

from __future__ import annotations

import re
from typing import Optional
from urllib.parse import urlsplit

FULL_SHA = re.compile(r"^[0-9a-f]{40}\Z")
GIT_SCHEMES = ("http", "https", "ssh", "git", "file", "git+ssh", "ssh+git")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<rest>.*)\Z", re.S)
_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^/:\s]+):(?P<path>.*)\Z")
_UNSAFE = re.compile(r"[\s\x00-\x1f\x7f]")
# git check-ref-format's rules, loosely: no option, no
# space, no "..", none of ~^:?*[\ ; HEAD and ids pass
_REF = re.compile(r"^(?!-)(?!.*\.\.)(?!.*@\{)[^\s~^:?*\[\\\x00-\x1f\x7f]+\Z")
_GITHUB_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})\Z")


def git_url_problem(url: object) -> Optional[str]:
    """Why `url` is not a git remote git should fetch from, or None. Accepted: scheme://... for
    http(s), ssh, git and file; scp-like [user@]host:path; a local path. Refused: anything that
    reads as an option, transport helpers (ext::, fd::),
    other schemes, spaces and control characters."""
    if not isinstance(url, str) or not url:
        return "expected a URL or a path"
    if url.startswith("-"):
        return "starts with '-' (git would read it as an option)"
    if _UNSAFE.search(url):
        return "contains spaces or control characters"
    m = _SCHEME.match(url)
    if m:
        if m.group("scheme").lower() not in GIT_SCHEMES:
            return (
                f"scheme {m.group('scheme')}:// is not one git "
                f"fetches with here ({', '.join(GIT_SCHEMES)})"
            )
        if not m.group("rest") or m.group("rest").startswith("-"):
            return "has no host or path after the scheme"
        return None
    if "::" in url.split("/", 1)[0]:
        return "is a git transport-helper address (like ext:: or fd::), which runs commands"
    scp = _SCP.match(url)
    if scp and scp.group("host").startswith("-"):
        return "names a host starting with '-'"
    return None


def http_url_problem(url: object) -> Optional[str]:
    """Why `url` is not an http(s) URL with a host, or None."""
    if not isinstance(url, str) or not url:
        return "expected an http(s) URL"
    if _UNSAFE.search(url):
        return "contains spaces or control characters"
    try:
        parts = urlsplit(url)
    except ValueError as e:
        return f"is not a URL ({e})"
    if parts.scheme.lower() not in ("http", "https"):
        return "expected an http:// or https:// URL"
    if not parts.hostname:
        return "has no host"
    return None


def ref_problem(ref: object) -> Optional[str]:
    if not isinstance(ref, str) or not _REF.match(ref):
        return (
            "is not a branch, tag or commit name (no leading '-', spaces, '..' or any of ~^:?*[\\)"
        )
    return None


def login_problem(name: object) -> Optional[str]:
    if not isinstance(name, str) or not _GITHUB_LOGIN.match(name):
        return "is not a GitHub user or organisation name (letters, digits and '-')"
    return None


# a query parameter whose name says it holds a secret (redact.py's names, and any *token*,
# *secret*, *pass*, *auth* or *key*)
_SECRET_PARAM = re.compile(
    r"(?i)^(?:.*(?:token|secret|pass|pwd|auth|key|sig|jwt|session|credential).*|code)$"
)


def strip_credentials(url: str) -> str:
    """`url` as a record may keep it: without its userinfo whatever it holds (a '/' or '@' in a
    password included), without secret-looking query parameters and the fragment; anything else
    (an scp-like user@host:path, whose user is ssh's login, a local path) as it is."""
    m = _SCHEME.match(url)
    if m is None:
        return url
    rest = m.group("rest")
    at = rest.rfind("@")
    before = rest[:at].split("/", 1)[0]
    # userinfo: all before the last '@' when no '/' precedes it, or when a ':' comes before the
    # first '/': "user:pa/ss@host" is a password with a '/' ("host:8080/a@b" reads the same way:
    # the doubt is settled for secrecy), "host/a@b" a path
    if at >= 0 and ("/" not in rest[:at] or ":" in before):
        rest = rest[at + 1 :]
    cut = min([i for i in (rest.find("?"), rest.find("#")) if i >= 0], default=len(rest))
    head, query = rest[:cut], rest[cut:].split("#", 1)[0].lstrip("?")
    kept = [p for p in query.split("&") if p and not _SECRET_PARAM.match(p.split("=", 1)[0])]
    return f"{m.group('scheme')}://{head}" + (f"?{'&'.join(kept)}" if kept else "")


def public_remote(url: object) -> Optional[str]:
    """A remote URL as a record may keep it (a topic's origin): strip_credentials's, and None for
    a local path, a file:// URL or what is no URL: a record never names a folder of the machine
    it was made on."""
    if not isinstance(url, str) or not url.strip() or _UNSAFE.search(url.strip()):
        return None
    url = url.strip()
    m = _SCHEME.match(url)
    if m is None:
        scp = _SCP.match(url)
        if scp is None or "::" in url.split("/", 1)[0] or len(scp.group("host")) < 2:
            return None  # a local path (C:\\... included)
        return url
    scheme = m.group("scheme").lower()
    if scheme == "file" or scheme not in GIT_SCHEMES:
        return None
    shown = strip_credentials(url)
    rest = shown.split("://", 1)[1]
    return None if not rest or rest.startswith(("/", "-")) else shown
