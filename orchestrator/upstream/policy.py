"""A target's contribution policy, read from its own tree at the base commit: its AGENTS.md,
CONTRIBUTING.md and pull request template, where present. Every rule comes from one explicit phrase
on one line, and it keeps that line as a citation (file, line number, text). A rule without a
matching line is recorded as absent; nothing is assumed. matrix.yaml's `upstream:` (repo, submit)
may declare or override where the change goes and how it is submitted. Pure."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Callable, Optional, Sequence

from pydantic import PrivateAttr

from ..config import Upstream
from .manifest import (  # declared once, as manifest.json holds them
    PULL_REQUEST,
    VERIFY_ONLY,
    Citation,
    Heading,
    Policy,
    Role,
    Rule,
    TemplateInfo,
)

POLICY_FILES = ("AGENTS.md", "CONTRIBUTING.md")
# where GitHub looks for a single pull request template, in its order
TEMPLATE_FILES = tuple(
    f"{d}{n}"
    for d in (".github/", "", "docs/")
    for n in ("pull_request_template.md", "PULL_REQUEST_TEMPLATE.md")
)

MAX_LINE = 2000  # characters of one line the rules look at: a rule is one short line, not a blob
_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^#{1,6}\s")
_PROHIBITION = re.compile(
    r"\b(prohibit\w*|forbid\w*|not allowed|do not|don't|never|must not|refuse|ban)\b", re.I
)
_GITHUB_REPO = r"https://github\.com/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)"
_OWN_GUIDELINES = re.compile(
    r"\[[^\]]*contributing guidelines\]\(" + _GITHUB_REPO + r"/blob/[^/)]+/CONTRIBUTING\.md\)", re.I
)
_DISCLOSURE = re.compile(r"\bdisclosure\b", re.I)
_PLACEHOLDER = re.compile(r"^\s*(?:[-*]\s+)?(TODO|TBD|FIXME|XXX)\b", re.I)


# ---------------------------------------------------------------- data


@dataclass(frozen=True)
class Section:
    """One `## ` heading of the template (or of cover.md) and the lines under it."""

    heading: str
    line: int
    # every line below the heading (a template's: trailing blank lines dropped)
    lines: tuple[str, ...]

    @property
    def text(self) -> str:
        """The section as the contributor wrote it, blank lines around it dropped."""
        return "\n".join(strip_blank(self.lines))

    def placeholders(self) -> list[int]:
        """Lines (in cover.md) that still hold a TODO/TBD marker."""
        shown = visible("\n".join(self.lines)).splitlines()
        return [self.line + 1 + i for i, ln in enumerate(shown) if _PLACEHOLDER.match(ln)]

    @property
    def fixed(self) -> bool:
        """The template gives its lines (e.g. Requirements): the body copies them as they are."""
        return bool(visible("\n".join(self.lines)).strip())

    @property
    def optional(self) -> bool:
        """Its placeholder says the section may be left out."""
        return bool(re.search(r"\b(if not applicable|optional)\b", "\n".join(self.lines), re.I))


@dataclass(frozen=True)
class Template:
    file: str
    preamble: tuple[str, ...]  # lines before the first heading
    sections: tuple[Section, ...]
    # the line the contributor answers (e.g. "- AI usage disclosure: ...")
    disclosure: Optional[Citation]

    @property
    def headings(self) -> list[str]:
        return [s.heading for s in self.sections]

    def record(self) -> TemplateInfo:
        """What manifest.json keeps of the template."""
        headings = [Heading(text=s.heading, line=s.line) for s in self.sections]
        fixed = [s.heading for s in self.sections if s.fixed]
        return TemplateInfo(
            file=self.file, headings=headings, fixed_sections=fixed, disclosure=self.disclosure
        )


class DerivedPolicy(Policy):
    """The policy derive() found at the base commit: the record manifest.json holds, and the
    template parsed (in memory only, never written; None when the target has none)."""

    _template: Optional[Template] = PrivateAttr(default=None)

    @property
    def template(self) -> Optional[Template]:
        return self._template


# ---------------------------------------------------------------- reading markdown


def visible(text: str) -> str:
    """`text` without HTML comments (what GitHub shows; an unclosed `<!--` stays), each comment
    leaving its newlines so that line numbers still count. One pass, linear in the text."""
    out, pos = [], 0
    while True:
        start = text.find("<!--", pos)
        end = text.find("-->", start + 4) if start >= 0 else -1
        if end < 0:
            out.append(text[pos:])
            return "".join(out)
        out += [text[pos:start], "\n" * text.count("\n", start, end)]
        pos = end + 3


def prose_lines(text: str) -> list[tuple[int, str, str]]:
    """(line number, line, the heading it sits under) for each line outside code fences."""
    out, heading, fenced = [], "", False
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            # a heading's text, its closing #s dropped: str methods, linear on a long run of spaces
            if _HEADING.match(line):
                heading = line.lstrip("#").strip().rstrip("#").rstrip() or heading
            out.append((n, line, heading))
    return out


def sections(text: str) -> tuple[list[str], list[tuple[str, int, list[str]]]]:
    """(lines before the first `## ` heading, [(heading, its line, lines below)]); fenced `## `
    is text."""
    preamble: list[str] = []
    found: list[tuple[str, int, list[str]]] = []
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        fenced ^= bool(_FENCE.match(line))
        if not fenced and line.startswith("## "):
            found.append((line[3:].strip(), n, []))
        else:
            (found[-1][2] if found else preamble).append(line)
    return preamble, found


def parse_template(file: str, text: str) -> Template:
    """Headings from the template's `## ` lines (outside code fences), each with the lines below
    it."""
    preamble, found = sections(text)
    secs = tuple(Section(h, n, tuple(_trim(lines))) for h, n, lines in found)
    # lines[i]: i+1 below the heading
    numbered = [(s.line + 1 + i, ln) for s in secs for i, ln in enumerate(s.lines)]
    disclosure = next(
        (Citation(file=file, line=n, text=ln) for n, ln in numbered if _disclosure_prefix(ln)), None
    )
    return Template(file, tuple(_trim(preamble)), secs, disclosure)


def strip_blank(lines: Sequence[str]) -> list[str]:
    kept = [i for i, line in enumerate(lines) if line.strip()]
    return list(lines[kept[0] : kept[-1] + 1]) if kept else []


def _trim(lines: list[str]) -> list[str]:
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _disclosure_prefix(line: str) -> Optional[str]:
    """'- AI usage disclosure:' for the template's disclosure line (None for any other line):
    the line up to its first ':' (no '<' before it) when that part names a disclosure. Linear."""
    colon, angle = line.find(":"), line.find("<")
    if colon < 0 or 0 <= angle < colon:
        return None
    head = line[: colon + 1]
    return head if _DISCLOSURE.search(head) else None


# ---------------------------------------------------------------- the rules


@dataclass(frozen=True)
class _Phrase:
    """Parts in this order within one sentence (or, `across`, anywhere later on the line), each
    searched once from where the last ended: linear in the line (nested quantifiers took
    minutes)."""

    pattern: str | tuple[str, ...]
    needs_prohibition: bool = False  # the line, or the heading it sits under, must prohibit
    value: Callable[[re.Match], Any] = lambda m: True  # of the last part's match
    across: bool = False

    def search(self, line: str, heading: str) -> Optional[re.Match]:
        """The last part's match on `line` (under `heading`), else None."""
        parts = (self.pattern,) if isinstance(self.pattern, str) else self.pattern
        for chunk in [line] if self.across or len(parts) == 1 else line.split("."):
            pos, m = 0, None
            for part in parts:
                m = _compiled(part).search(chunk, pos)
                if m is None:
                    break
                pos = m.end()
            if m:
                allowed = (
                    not self.needs_prohibition
                    or _PROHIBITION.search(line)
                    or _PROHIBITION.search(heading)
                )
                return m if allowed else None
        return None


@functools.cache
def _compiled(part: str) -> re.Pattern:
    return re.compile(part, re.I)


_RULES: dict[str, tuple[_Phrase, ...]] = {
    "automated_submission_forbidden": (
        _Phrase(
            (r"\bautomated\b", r"\b(pr|pull[- ]requests?)\b", r"\bsubmissions?\b"),
            needs_prohibition=True,
        ),
        _Phrase(r"\bforbids automated submissions\b"),
        _Phrase(
            (
                r"\b(do not|don't|never|must not)\b",
                r"\b(git push|create (a )?(pr|pull[- ]request))\b",
            )
        ),
        _Phrase((r"\brefuse\b", r"\bcreating a pull[- ]request\b")),
    ),
    "private_forks_exempt": (_Phrase(r"\bprivate forks are exempt\b"),),
    "ai_written_text_forbidden": (
        _Phrase(
            (r"\bai[- ]written\b", r"\b(pr|pull request) descriptions?\b"), needs_prohibition=True
        ),
        _Phrase((r"\b(do not|don't|never) write\b", r"\b(pr|pull request) descriptions?\b")),
        _Phrase(r"\bprohibited to use ai to write\b"),
    ),
    "ascii_only": (
        _Phrase(r"\bascii (only|equivalents)\b"),
        _Phrase(r"\b(avoid|do not use|don't use)\s+(?:\S+\s+){0,4}unicode\b"),
        _Phrase(r"\bno (non-ascii|unicode) (characters|chars)\b"),
    ),
    "max_comment_lines": (
        _Phrase(
            (r"\bcomments?\b", r"\b\d+\s*-\s*(\d+)\s+lines?\b"),
            value=lambda m: int(m.group(1)),
            across=True,
        ),
        _Phrase(
            (r"\bcomments?\b", r"\bat most (\d+)\s+lines?\b"),
            value=lambda m: int(m.group(1)),
            across=True,
        ),
    ),
    "no_hard_wrap": (
        _Phrase((r"\b(avoid|do not|don't)\b", r"\bhard-?wrap"), needs_prohibition=False),
        _Phrase((r"\b(do not|don't)\b", r"\bsplit a line into multiple lines mid-sentence\b")),
    ),
    "new_test_files_need_approval": (_Phrase((r"\bnew file\b", r"\btests\b", r"\bapproval\b")),),
    "issue_first": (
        _Phrase(r"\bmust (begin|start) with an issue\b"),
        _Phrase(r"\bmust include a reproducible issue\b"),
        _Phrase((r"\bopen an issue\b", r"\bbefore\b")),
    ),
    "existing_pr_first": (_Phrase((r"\bexisting (pr|pull[- ]request)s?\b", r"\bsame change\b")),),
    "regression_test_required": (_Phrase((r"\bregression test\b", r"\bfails before\b")),),
    "disclosure_required": (  # disclosing AI use, not any disclosure (security reports...)
        _Phrase((r"\bdisclose\b", r"\bAI\b"), across=True),
        _Phrase((r"\bAI\b", r"\bdisclose\b"), across=True),
    ),
    "assisted_by_trailer": (
        _Phrase((r"Assisted-by:", r"\bnot\b", r"Co-authored-by"), value=lambda m: "Assisted-by"),
    ),
    "subject_format": (_Phrase(r"`(<module>\s*:\s*<[^>`]+>)", value=lambda m: m.group(1)),),
    "changes_go_to": (
        _Phrase(
            r"\bopen a (?:pr|pull request) (?:in|at|on|against|to) <?" + _GITHUB_REPO,
            value=lambda m: m.group(1).rstrip("."),
        ),
    ),
    "guidelines_from": (
        _Phrase(
            r"\buse \[[^\]]*contribution guidelines\]\(" + _GITHUB_REPO + r"/",
            value=lambda m: m.group(1).rstrip("."),
        ),
    ),
}


def derive_rules(files: dict[str, Optional[str]]) -> dict[str, Rule]:
    """Every rule, from the lines of the files present (code fences skipped)."""
    # value, file, line, text
    found: dict[str, list[tuple[Any, str, int, str]]] = {k: [] for k in _RULES}
    for name, text in files.items():
        if text is None:
            continue
        for n, full, heading in prose_lines(text):
            line = full[:MAX_LINE]  # a longer line is not a rule's sentence: only its start is read
            heading = heading[:MAX_LINE]
            for rule, phrases in _RULES.items():
                for phrase in phrases:
                    m = phrase.search(line, heading)
                    if m:  # the first phrase that matches gives the rule's value
                        found[rule].append((phrase.value(m), name, n, full))
                        break
    rules = {}
    for rule, hits in found.items():
        values = [v for v, *_ in hits]
        value = None
        if hits:
            value = max(values) if rule == "max_comment_lines" else values[0]
        rules[rule] = Rule(
            value, tuple(Citation(file=f, line=n, text=t.strip()[:MAX_LINE]) for _, f, n, t in hits)
        )
    return rules


def _own_repo(template: Optional[Template], text: Optional[str]) -> Rule:
    """The repository whose template this is: its link to its own contributing guidelines."""
    if template is None or text is None:
        return Rule(None)
    for n, line in enumerate(text.splitlines(), 1):
        # the regex only on a line that can match
        if "contributing guidelines](" in line.lower() and (
            m := _OWN_GUIDELINES.search(line[:MAX_LINE])
        ):
            return Rule(m.group(1), (Citation(file=template.file, line=n, text=line.strip()),))
    return Rule(None)


def derive(
    target: str, base: str, files: dict[str, Optional[str]], declared: Optional[Upstream] = None
) -> DerivedPolicy:
    """The policy from the files read at the base commit (None: absent) and matrix.yaml's
    `upstream:`."""
    template_file = next((f for f in TEMPLATE_FILES if files.get(f) is not None), None)
    template_text = files.get(template_file) if template_file else None
    template = (
        parse_template(template_file, template_text)
        if template_file and template_text is not None
        else None
    )
    rules = derive_rules(
        {f: files.get(f) for f in (*POLICY_FILES, *([template_file] if template_file else []))}
    )
    rules["own_repo"] = _own_repo(template, template_text)
    repo = _declared(declared, "repo") if declared and declared.repo else rules["own_repo"]
    goes_to = rules["changes_go_to"]
    if declared and declared.submit:
        submit = _declared(declared, "submit")
    elif goes_to.value and goes_to.value != repo.value:
        submit = Rule("none", goes_to.citations)
    else:  # never api by default: that is only for a fork the user declares
        submit = Rule("manual", rules["automated_submission_forbidden"].citations)
    if submit.value == "none":
        kind, citations = VERIFY_ONLY, goes_to.citations + submit.citations
        text = (
            f"verified through {goes_to.value}'s sync"
            if goes_to.value
            else "verify only (submit: none)"
        )
    else:
        kind, citations = PULL_REQUEST, repo.citations + submit.citations
        how = (
            "by hand"
            if submit.value == "manual"
            else "through the GitHub API (the user's own fork)"
        )
        text = (
            f"pull request to {repo.value or 'the repository given to `pr --repo`'}, "
            f"submitted {how}"
            f" (submit: {submit.value})"
        )
    role = Rule(
        Role(kind=kind, text=text, changes_go_to=goes_to.value), tuple(dict.fromkeys(citations))
    )
    present = {
        f: files.get(f) is not None for f in (*POLICY_FILES, template_file or TEMPLATE_FILES[0])
    }
    info = template.record() if template else None
    policy = DerivedPolicy(
        target=target,
        base_commit=base,
        files=present,
        template=info,
        rules=rules,
        repo=repo,
        submit=submit,
        role=role,
    )
    policy._template = template
    return policy


def _declared(declared: Upstream, key: str) -> Rule:
    """matrix.yaml's `upstream.KEY`, cited at the `upstream:` line (line 0 where that is
    unknown)."""
    value = getattr(declared, key)
    file, _, line = declared.where.rpartition(":")
    # the file's name only: the checkout's absolute path is this machine's, not the bundle's
    cited = (
        (PurePath(file).name, int(line)) if line.isdigit() else (PurePath(declared.where).name, 0)
    )
    return Rule(value, (Citation(file=cited[0], line=cited[1], text=f"upstream.{key}: {value}"),))
