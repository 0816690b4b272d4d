"""The actions the generated workflows use, each pinned by a full commit id with its version in a
comment (`uses: actions/checkout@<sha> # v7.0.1`).

The pins below are where a fresh generation starts. Dependabot (.github/dependabot.yml) bumps the
pins in the committed workflows; the generator reads them back from there (`pins_in`) and keeps
them, so a bump never makes `ggml-patch ci-workflow --check` fail and regenerating never undoes it.
Where the committed files disagree on an action, the highest version wins everywhere.
"""

from __future__ import annotations

import re
from typing import Iterable, NamedTuple


class ActionPin(NamedTuple):
    sha: str
    version: str


Pins = dict[str, ActionPin]  # owner/repo -> pin
# each the newest release tag of the action's repository when written (the commit the tag points
# to, peeled), all on the node24 runtime
DEFAULT_PINS: Pins = {
    "actions/checkout": ActionPin("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ActionPin("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/cache": ActionPin("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "actions/upload-artifact": ActionPin("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": ActionPin("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
}
_USES = re.compile(
    r"^\s*(?:-\s+)?uses:\s*['\"]?(?P<path>[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_./-]+)?)"
    r"@(?P<sha>[0-9a-f]{40})['\"]?\s+#\s*(?P<version>v?\d+(?:\.\d+)*\S*)\s*$",
    re.M,
)


def repo_of(path: str) -> str:
    """actions/cache/restore -> actions/cache: one pin per repository."""
    return "/".join(path.split("/")[:2])


def pins_in(text: str) -> Pins:
    """Every `uses: OWNER/REPO[/PATH]@<40 hex> # vX.Y.Z` of a workflow's text (a pin without its
    version comment is not taken: the generator would have to invent one)."""
    found: Pins = {}
    for m in _USES.finditer(text):
        repo = repo_of(m["path"])
        pin = ActionPin(m["sha"], m["version"])
        if repo not in found or _version_key(pin.version) > _version_key(found[repo].version):
            found[repo] = pin
    return found


def current_pins(texts: Iterable[str]) -> Pins:
    """The defaults, overridden by the committed workflows' pins (the highest version where
    they differ)."""
    found = pins_in("\n".join(texts))
    return {repo: found.get(repo, pin) for repo, pin in DEFAULT_PINS.items()}


def _version_key(version: str) -> tuple:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


def uses(action: str, pins: Pins) -> str:
    """`actions/<action>` (a repository, or a folder of one: cache/restore) at its pinned commit."""
    return f"actions/{action}@{pins[repo_of('actions/' + action)].sha}"


def add_version_comments(text: str, pins: Pins) -> str:
    """`uses: X@<sha>` -> `uses: X@<sha> # vX.Y.Z` (YAML dumpers write no comments)."""
    by_sha = {p.sha: p.version for p in pins.values()}

    def comment(m: re.Match) -> str:
        return f"{m[0]} # {by_sha[m['sha']]}" if m["sha"] in by_sha else m[0]

    return re.sub(r"uses: [^\s@]+@(?P<sha>[0-9a-f]{40})$", comment, text, flags=re.M)
