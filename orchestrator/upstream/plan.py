"""The submission plan of a bundle set (SUBMISSION.md beside the topics' folders): which pull
request goes first and why, which follow and after what, who owns the changed files (the target's
CODEOWNERS), and the lines each PR body carries to name the others. Pure: the target's files come
in as text."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Optional

from .pr_body import ascii_text, inert

PLAN_FILE = "SUBMISSION.md"
CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
# the sentences of a CONTRIBUTING.md the order rests on: (what they ask, the pattern)
_ASKS = (
    (
        "new contributors keep one pull request open at a time",
        r"\blimit your open (prs|pull requests)\b",
    ),
    ("one pull request per fix", r"\bseparate (prs|pull requests) for each\b"),
)


@dataclass(frozen=True)
class PlannedPR:
    topic: str
    title: str  # what it fixes, as its issue's title says it
    follows: tuple[str, ...]  # the topics it must come after (topic.yaml `after:`)


def other_prs_lines(planned: list[PlannedPR], topic: str) -> list[str]:
    """The PR body's lines naming the other PRs of the set, in the order they are opened."""
    if len(planned) < 2:
        return []
    at = next(i for i, p in enumerate(planned) if p.topic == topic)
    out = [f"This is pull request {at + 1} of {len(planned)} of one set, opened one at a time:"]
    for i, p in enumerate(planned):
        mark = " (this one)" if i == at else ""
        after = f", after {', '.join(p.follows)}" if p.follows else ""
        out.append(f"{i + 1}. {inert(p.title)}{mark}{inert(after)}")
    return out


def code_owners(text: Optional[str], paths: list[str]) -> list[tuple[str, str, int]]:
    """(path, owners, line) for each of `paths` that a CODEOWNERS text assigns (the last matching
    line wins, as on GitHub)."""
    out = []
    for path in paths:
        found = None
        for n, line in enumerate((text or "").splitlines(), 1):
            fields = line.split("#", 1)[0].split()
            if len(fields) >= 2 and _owns(fields[0], path):
                found = (path, " ".join(fields[1:]), n)
        if found:
            out.append(found)
    return out


def _owns(pattern: str, path: str) -> bool:
    """Whether a CODEOWNERS pattern covers `path`: anchored (a leading /) or with a / inside it
    matches from the root, else any trailing part; a directory covers what is under it."""
    pat = pattern.strip("/")
    if not pat:
        return False
    rooted = pattern.startswith("/") or "/" in pat
    candidates = [path] if rooted else [path, *_suffixes(path)]
    return any(fnmatch.fnmatchcase(c, pat) or c.startswith(pat + "/") for c in candidates)


def _suffixes(path: str) -> list[str]:
    parts = path.split("/")
    return ["/".join(parts[i:]) for i in range(1, len(parts))]


def asks(contributing: Optional[str]) -> list[str]:
    """`CONTRIBUTING.md:N` with what it asks, for each sentence the order rests on."""
    out = []
    for what, pattern in _ASKS:
        for n, line in enumerate((contributing or "").splitlines(), 1):
            if re.search(pattern, line, re.I):
                out.append(f"CONTRIBUTING.md:{n} ({what})")
                break
    return out


def plan_markdown(
    target: str,
    repo: str,
    planned: list[PlannedPR],
    owners: list[tuple[str, str, int]],
    owners_file: Optional[str],
    contributing_asks: list[str],
) -> str:
    """SUBMISSION.md's section for one target that takes pull requests."""
    out = [f"## {inert(target)} ({inert(repo)})", ""]
    why = "; ".join(contributing_asks) or "one pull request per fix"
    out += [f"Open the pull requests one at a time, in this order ({why}):", ""]
    for i, p in enumerate(planned):
        reason = "first: the others follow it" if i == 0 and len(planned) > 1 else ""
        if p.follows:
            reason = f"once {', '.join(p.follows)} is merged (it builds on that pull request)"
        out.append(
            f"{i + 1}. `{p.topic}/{target}/`: {inert(p.title)}" + (f" - {reason}" if reason else "")
        )
    out += [
        "",
        "Each PR_BODY.md names the others in its first lines; each ISSUE.md is the issue to",
    ]
    out += ["open before its pull request (its `Fixes #N` goes into cover.md)."]
    if owners:
        out += [""]
        out += [
            f"Reviewer: {inert(owners_file)}:{n} gives `{ascii_text(path)}` to {inert(who)}."
            for path, who, n in owners
        ]
    elif owners_file is None:
        out += ["", "The target's tree has no CODEOWNERS file: no owner to name."]
    return "\n".join(out) + "\n"
