"""patches/cover.md: the contributor's own words for the pull request, one section per heading
of the target's template. The tool never writes them; it only reads them, and says what is
still missing (then the bundle is a draft). Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .policy import Citation, Section, Template, _disclosure_prefix, sections, visible

COVER_FILE = "cover.md"
_ISSUE = re.compile(
    r"\b(Fixes|Refs|Closes|Resolves)\s+(#\d+|https://github\.com/[\w.-]+/[\w.-]+/issues/\d+)\b",
    re.I,
)
_YES_NO = re.compile(r"^(?P<answer>yes|no)\b[\s,:;.-]*(?P<how>.*)$", re.I)


@dataclass(frozen=True)
class Cover:
    path: str  # as shown in messages, e.g. patches/cover.md
    text: Optional[str]  # None: no such file
    sections: tuple[Section, ...]

    def section(self, heading: str) -> Optional[Section]:
        return next((s for s in self.sections if s.heading.lower() == heading.lower()), None)


def parse_cover(path: str, text: Optional[str]) -> Cover:
    found = sections(text or "")[1]
    return Cover(path, text, tuple(Section(h, n, tuple(lines)) for h, n, lines in found))


# ---------------------------------------------------------------- what the contributor still owes


@dataclass(frozen=True)
class Disclosure:
    # answered | unanswered | undescribed (YES without saying how) | no-line (the template has none)
    status: str
    answer: str  # the contributor's words after the prefix, comments removed
    where: str  # cover.md:LINE, or the cover's path when there is no such line


def disclosure(cover: Cover, template: Optional[Template]) -> Disclosure:
    """The answer to the template's disclosure line, from the cover line with the same prefix."""
    if template is None or template.disclosure is None:
        return Disclosure("no-line", "", "")
    key = _norm(_disclosure_prefix(template.disclosure.text) or "")
    for n, line in enumerate((cover.text or "").splitlines(), 1):
        mine = _disclosure_prefix(line)
        if mine and _norm(mine) == key:
            answer = " ".join(visible(line[len(mine) :]).split())
            m = _YES_NO.match(answer)
            if not m:
                status = "unanswered"
            elif m["answer"].lower() == "yes" and not m["how"].strip():
                status = "undescribed"
            else:
                status = "answered"
            return Disclosure(status, answer, f"{cover.path}:{n}")
    return Disclosure("unanswered", "", cover.path)


def _norm(prefix: str) -> str:
    return " ".join(prefix.strip(" -*").lower().split())


def problems(cover: Cover, template: Optional[Template]) -> list[str]:
    """Why the cover keeps the bundle a draft ('' when the contributor has written it all)."""
    if cover.text is None:
        return [
            f"{cover.path}: missing (write one section per heading of the target's pull "
            "request template)"
        ]
    if not visible(cover.text).strip():
        return [f"{cover.path}: empty (only placeholders)"]
    found = []
    for s in template.sections if template else ():
        mine = cover.section(s.heading)
        if s.fixed or s.optional:
            continue
        if mine is None:
            found.append(
                f"{cover.path}: no section '## {s.heading}' "
                f"({template.file if template else ''}:{s.line})"
            )
        elif not visible(mine.text).strip():
            found.append(
                f"{cover.path}:{mine.line}: '## {s.heading}' not written (placeholders only)"
            )
    found += [
        f"{cover.path}:{n}: placeholder left in '## {w.heading}'"
        for w in cover.sections
        for n in w.placeholders()
    ]
    d = disclosure(cover, template)
    line = template.disclosure if template else None
    if line and d.status == "unanswered":
        prefix = (_disclosure_prefix(line.text) or "").strip()
        found.append(f"{d.where}: '{prefix}' not answered (YES or NO; {line.where})")
    elif line and d.status == "undescribed":
        found.append(f"{d.where}: disclosure YES without how AI was used ({line.where})")
    return found


def issue_reference(cover: Cover) -> Optional[Citation]:
    """The first `Fixes #N` / `Refs #N` (or an issue URL) the contributor wrote."""
    for n, line in enumerate(visible(cover.text or "").splitlines(), 1):
        m = _ISSUE.search(line)
        if m:
            return Citation(file=cover.path, line=n, text=m[0])
    return None


def blank_cover(template: Template) -> str:
    """The cover.md to ship: the template's headings and its placeholders, nothing else."""
    out = [line for s in template.sections for line in (f"## {s.heading}", *s.lines, "")]
    return "\n".join(out).rstrip("\n") + "\n"


# ---------------------------------------------------------------- the contributor's metadata lines
# Lines above the first heading of cover.md (never copied into PR_BODY.md), one `key: value` each:
#   issue: https://github.com/OWNER/REPO/issues/N   the issue opened first (PR_BODY says Fixes #N)
#   messages: own                                   the commit messages are my own words

_META = re.compile(r"^(?P<key>[a-z][a-z-]*)\s*:\s*(?P<value>\S.*?)\s*$", re.I)
_ISSUE_URL = re.compile(r"^https://github\.com/(?P<repo>[\w.-]+/[\w.-]+)/issues/(?P<n>\d+)$")


def metadata(cover: Cover, key: str) -> Optional[Citation]:
    """The first `key: value` line above cover.md's first heading (comments skipped)."""
    for n, line in enumerate(visible(cover.text or "").splitlines(), 1):
        if line.startswith("## "):
            return None
        m = _META.match(line.strip())
        if m and m["key"].lower() == key:
            return Citation(file=cover.path, line=n, text=m["value"])
    return None


def recorded_issue(cover: Cover) -> Optional[tuple[Citation, str, int]]:
    """The `issue: URL` line, its repository and number; None without one or with another URL."""
    found = metadata(cover, "issue")
    m = _ISSUE_URL.match(found.text) if found else None
    return (found, m["repo"], int(m["n"])) if found and m else None


def fixes_line(cover: Cover, repo: Optional[str]) -> Optional[str]:
    """`Fixes #N` for the recorded issue (its URL when it is another repository's)."""
    found = recorded_issue(cover)
    if found is None:
        return None
    ev, issue_repo, number = found
    return f"Fixes #{number}" if repo and issue_repo.lower() == repo.lower() else f"Fixes {ev.text}"


def messages_own(cover: Cover) -> Optional[Citation]:
    """The `messages: own` line: the contributor says the commit messages are their own words."""
    found = metadata(cover, "messages")
    return found if found and found.text.strip().lower() == "own" else None
