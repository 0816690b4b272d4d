"""Readiness checks: is the bundle ready by the target's own rules? Each check is pass, warn or
fail, with file:line where it applies and the policy lines it enforces. A fail makes the bundle
a draft. Pure: patch texts, the tool's own texts, the cover and the policy in; checks out."""

from __future__ import annotations

import email.header
import re
from dataclasses import dataclass
from typing import Iterable, Optional

import unidiff

from .. import publish
from . import cover
from .manifest import FAIL, PASS, WARN, Check, Readiness
from .policy import Citation, DerivedPolicy, Policy, sections
from .pr_body import shorten
from .sync import SyncMap, SyncReport

MAX_LOCATIONS = 12  # listed per check; the count says how many more
WRAP_COLUMNS = 60  # a comment line this long that stops mid-sentence reads as filled to a column
SUBJECT = re.compile(
    r"^(?P<module>[A-Za-z0-9_][A-Za-z0-9_.+/-]*(?:\s*,\s*[A-Za-z0-9_][A-Za-z0-9_.+/-]*)*)"
    r" : (?P<title>\S.*)$"
)
_C_FAMILY = tuple(
    ".c .cc .cpp .cxx .h .hh .hpp .cu .cuh .m .mm .metal .comp .glsl .wgsl .cl .swift".split()
)
_HASH_FAMILY = (".cmake", ".py", ".sh", "cmakelists.txt")
_SENTENCE_END = (".", ":", ";", "!", "?", ")", ",")


# ------------------------------------------------------- the series, read from its patch files


@dataclass(frozen=True)
class Message:
    patch: str  # the patch file's name
    subject: str
    subject_line: int  # of the Subject: header in the patch file
    body: tuple[tuple[int, str], ...]  # (line in the patch file, text)


@dataclass(frozen=True)
class Added:
    patch: str
    patch_line: int
    path: str  # in the target's tree
    line: int  # in the target's file after the change
    text: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line} ({self.patch}:{self.patch_line})"


def message_of(name: str, text: str) -> Message:
    """The commit message of one `git format-patch` file: the decoded subject, then the body up
    to `---`."""
    lines = text.splitlines()
    subject, subject_line, i = "", 0, 0
    while i < len(lines) and lines[i].strip():
        if lines[i].startswith("Subject:"):
            subject_line, subject = i + 1, lines[i][len("Subject:") :].strip()
            while i + 1 < len(lines) and lines[i + 1][:1] in (" ", "\t"):
                i += 1
                subject += " " + lines[i].strip()
        i += 1
    subject = str(email.header.make_header(email.header.decode_header(subject)))
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", subject)
    ends = (
        n
        for n in range(i + 1, len(lines))
        if lines[n] == "---" or lines[n].startswith("diff --git ")
    )
    body = [(n + 1, lines[n]) for n in range(i + 1, next(ends, len(lines)))]
    while body and not body[-1][1].strip():
        body.pop()
    return Message(name, subject, subject_line, tuple(body))


def added_lines(name: str, text: str) -> tuple[list[Added], list[str]]:
    """Every added line of one patch file, and the files it creates."""
    added, new_files = [], []
    for f in unidiff.PatchSet(text):
        if f.is_added_file:
            new_files.append(f.path)
        for hunk in f:
            for ln in hunk:
                if not ln.is_added:
                    continue
                # an added line has both numbers
                diff_line = ln.diff_line_no or 0
                file_line = ln.target_line_no or 0
                added.append(Added(name, diff_line, f.path, file_line, ln.value.rstrip("\n")))
    return added, new_files


# ---------------------------------------------------------------- one function per check


def _non_ascii(where_texts: Iterable[tuple[str, str]]) -> list[str]:
    """'WHERE: CHAR U+XXXX ...' for each text with a character outside ASCII."""
    out = []
    for where, text in where_texts:
        bad = sorted({c for c in text if ord(c) > 127})
        if bad:
            out.append(f"{where}: " + " ".join(f"{c!r} U+{ord(c):04X}" for c in bad))
    return out


def _listed(where: list[str]) -> tuple[str, ...]:
    more = len(where) - MAX_LOCATIONS
    return tuple(where[:MAX_LOCATIONS]) + ((f"... and {more} more",) if more > 0 else ())


def _verdict(
    policy: Policy, name: str, rule: str, where: list[str], ok: str, bad: str, why: str = ""
) -> Check:
    """Pass when nothing is `where`; else fail, citing the policy line of `rule` (or
    ggml-patch's own standard)."""
    citations = policy.rule(rule).citations
    if not where:
        return Check(name, PASS, ok, rule=citations)
    source = (
        citations[0].where
        if citations
        else "ggml-patch's standard (the target's files state no such rule)"
    )
    return Check(
        name, FAIL, f"{bad} ({why or len(where)}; rule: {source})", _listed(where), citations
    )


def check_ascii_messages(policy: Policy, messages: list[Message]) -> Check:
    where = _non_ascii(
        (f"{m.patch}:{n}", t)
        for m in messages
        for n, t in ((f"{m.subject_line}: subject", m.subject), *m.body)
    )
    ok = f"{len(messages)} commit message(s), ASCII only"
    return _verdict(
        policy,
        "ascii-commit-messages",
        "ascii_only",
        where,
        ok,
        "non-ASCII characters in commit messages",
    )


def check_ascii_added(policy: Policy, added: list[Added]) -> Check:
    where = _non_ascii((a.where, a.text) for a in added)
    ok = f"{len(added)} added line(s), ASCII only"
    return _verdict(
        policy, "ascii-added-lines", "ascii_only", where, ok, "non-ASCII characters in added lines"
    )


def check_ascii_texts(policy: Policy, texts: dict[str, str]) -> Check:
    where = _non_ascii(
        (f"{name}:{n}", line)
        for name, text in texts.items()
        for n, line in enumerate(text.splitlines(), 1)
    )
    ok, bad = f"{', '.join(texts)}: ASCII only", "non-ASCII characters in the pull request's text"
    return _verdict(policy, "ascii-pr-text", "ascii_only", where, ok, bad)


def _comment_style(path: str) -> Optional[str]:
    low = path.lower()
    if low.endswith(_C_FAMILY):
        return "//"
    if low.endswith(_HASH_FAMILY):
        return "#"
    return None


def _comment_text(line: str) -> str:
    s = line.strip()
    for mark in ("///", "//", "/**", "/*", "*/", "*", "#"):
        if s.startswith(mark):
            return s[len(mark) :].strip().removesuffix("*/").strip()
    return s


def comment_blocks(added: list[Added]) -> list[list[Added]]:
    """Runs of added full-line comments on consecutive lines of one file (a `/* */` block is one
    run)."""
    blocks: list[list[Added]] = []
    prev: Optional[Added] = None
    in_block_comment = False
    for a in added:
        style, s = _comment_style(a.path), a.text.strip()
        is_comment = False
        if style == "//":
            is_comment = in_block_comment or s.startswith(("//", "/*"))
            if s.startswith("/*") and "*/" not in s:
                in_block_comment = True
            elif in_block_comment and "*/" in s:
                in_block_comment = False
        elif style == "#":
            is_comment = s.startswith("#") and not s.startswith("#!")
        if not is_comment:
            prev = None
            continue
        if (
            prev is not None
            and prev.path == a.path
            and prev.patch == a.patch
            and prev.line + 1 == a.line
        ):
            blocks[-1].append(a)
        else:
            blocks.append([a])
        prev = a
    return blocks


def check_comment_length(policy: Policy, added: list[Added]) -> Check:
    limit = policy.max_comment_lines
    where = [
        f"{b[0].where}: {len(b)}-line comment" for b in comment_blocks(added) if len(b) > limit
    ]
    ok, bad = (
        f"every added comment at most {limit} line(s)",
        f"added comments longer than {limit} lines",
    )
    return _verdict(policy, "comment-length", "max_comment_lines", where, ok, bad)


def hard_wrapped(block: list[Added]) -> list[Added]:
    """Lines that stop mid-sentence at a fixed column while the next comment line goes on with
    it."""
    texts = [_comment_text(a.text) for a in block]
    return [
        block[i]
        for i in range(len(texts) - 1)
        if texts[i]
        and texts[i + 1]
        and len(block[i].text.rstrip()) >= WRAP_COLUMNS
        and not texts[i].endswith(_SENTENCE_END)
        and not re.match(r"^([-*+]|\d+[.)])\s", texts[i + 1])
    ]


def check_comment_wrap(policy: Policy, added: list[Added]) -> Check:
    where = [
        f"{a.where}: continues on the next line"
        for b in comment_blocks(added)
        for a in hard_wrapped(b)
    ]
    ok, bad = (
        "no added comment is hard-wrapped mid-sentence",
        "added comments hard-wrapped mid-sentence",
    )
    return _verdict(policy, "comment-wrap", "no_hard_wrap", where, ok, bad)


def check_subjects(policy: Policy, messages: list[Message]) -> Check:
    where = [
        f"{m.patch}:{m.subject_line}: {m.subject!r}"
        for m in messages
        if not SUBJECT.match(m.subject)
    ]
    fmt = policy.rule("subject_format").value or "<module> : <title>"
    return _verdict(
        policy,
        "subject",
        "subject_format",
        where,
        f"every subject is `{fmt}`",
        f"subjects not `{fmt}`",
    )


def check_trailers(policy: Policy, messages: list[Message]) -> Check:
    where = [
        f"{m.patch}:{n}: {t.strip()}"
        for m in messages
        for n, t in m.body
        if t.lower().startswith("co-authored-by:")
    ]
    assisted = [m for m in messages if any(t.lower().startswith("assisted-by:") for _, t in m.body)]
    if assisted:
        ok = f"no Co-authored-by; Assisted-by in {len(assisted)} of {len(messages)} commit(s)"
    else:
        ok = "no Co-authored-by and no Assisted-by trailer"
    return _verdict(
        policy,
        "trailers",
        "assisted_by_trailer",
        where,
        ok,
        "Co-authored-by trailer",
        "use Assisted-by",
    )


def check_messages(policy: Policy, cov: cover.Cover, messages: list[Message]) -> Check:
    """The series' commit messages are ggml-patch's draft until the contributor says they are
    their own words (`messages: own` in cover.md), after rewriting them or not."""
    rule = policy.rule("ai_written_text_forbidden").citations
    own = cover.messages_own(cov)
    if own:
        why = f"{len(messages)} commit message(s) confirmed as the contributor's own words"
        return Check("commit-messages", PASS, why, (own.where,), rule)
    why = (
        f"the {len(messages)} commit message(s) are ggml-patch's draft: write them in your own "
        f"words (in patches/*.patch), then add a line `messages: own` above the first heading "
        f"of {cov.path}"
    )
    where = tuple(f"{m.patch}:{m.subject_line}: {m.subject}" for m in messages)
    return Check("commit-messages", FAIL, why, _listed(list(where)), rule)


# the tool's own terms: a reader upstream does not know them (the visible part of PR_BODY.md)
FORBIDDEN_WORDS = ("cell", "gate", "killed", "mutant", "control", "verdict", "competing")
_FORBIDDEN = re.compile(r"\b(cells?|gates?|killed|mutants?|controls?|verdicts?|competing)\b", re.I)
# a word cut short: letters glued to an ellipsis ("buil...", "...ding"); shorten() leaves " ..."
_CUT = re.compile(r"[A-Za-z](?:\.\.\.|\u2026)(?![.\w])|(?<![.\w])(?:\.\.\.|\u2026)[A-Za-z]")
MAX_VISIBLE_WORDS = 200


def visible_numbered(text: str) -> list[tuple[int, str]]:
    """(line number, line) of what GitHub shows before anything is opened: comments dropped,
    a <details> block's summary line only."""
    out, depth = [], 0
    for n, line in enumerate(cover.visible(text).split("\n"), 1):
        opens, closes = line.count("<details"), line.count("</details>")
        if depth == 0 and line.strip():
            out.append((n, line))
        depth = max(0, depth + opens - closes)
    return out


def check_pr_words(body: str) -> Check:
    where = [
        f"PR_BODY.md:{n}: '{m[0]}'"
        for n, line in visible_numbered(body)
        for m in _FORBIDDEN.finditer(line)
    ]
    if not where:
        return Check("pr-body-words", PASS, "the visible part uses none of the tool's terms")
    terms = ", ".join(FORBIDDEN_WORDS)
    why = (
        f"the visible part of PR_BODY.md uses the tool's terms ({terms}): "
        "say it in upstream's words"
    )
    return Check("pr-body-words", FAIL, why, _listed(where))


def check_pr_length(body: str) -> Check:
    words = sum(len(line.split()) for _, line in visible_numbered(body) if "```" not in line)
    if words <= MAX_VISIBLE_WORDS:
        return Check("pr-body-length", PASS, f"{words} words visible (at most {MAX_VISIBLE_WORDS})")
    why = f"{words} words visible, more than {MAX_VISIBLE_WORDS}: fold the rest into <details>"
    return Check("pr-body-length", WARN, why, ("PR_BODY.md",))


def check_cut_words(texts: dict[str, str]) -> Check:
    where = [
        f"{name}:{n}: '{m[0]}'"
        for name, text in texts.items()
        for n, line in enumerate(text.splitlines(), 1)
        for m in _CUT.finditer(line)
    ]
    if not where:
        return Check("cut-words", PASS, f"{', '.join(texts)}: no word cut short")
    why = "words cut short: shorten whole words or wrap the line"
    return Check("cut-words", FAIL, why, _listed(where))


def check_issue_form(form_problems: list[str]) -> Check:
    if not form_problems:
        return Check("issue-form", PASS, "ISSUE.md has every field the bug form requires")
    why = "ISSUE.md: fill in what the run has no data for before opening the issue"
    return Check("issue-form", WARN, why, _listed(form_problems))


def check_new_tests(policy: Policy, new_files: list[tuple[str, str]]) -> Check:
    """new_files: (patch, path) of every file the series creates."""
    tests = [
        f"{path} (new in {patch})"
        for patch, path in new_files
        if path.startswith("tests/") or "/tests/" in path
    ]
    rule = policy.rule("new_test_files_need_approval")
    if not tests:
        return Check("new-test-files", PASS, "no new file under tests/", rule=rule.citations)
    if not rule.value:
        why = "new files under tests/; the target's files state no approval rule"
        return Check("new-test-files", PASS, why, tuple(tests))
    why = f"new files under tests/ need the maintainers' approval ({rule.citations[0].where})"
    return Check("new-test-files", WARN, why, tuple(tests), rule.citations)


def check_issue(policy: Policy, cov: cover.Cover) -> Check:
    rule = policy.rule("issue_first").citations
    recorded = cover.recorded_issue(cov)
    if recorded:
        ev, _, number = recorded
        why = f"issue #{number} recorded ({ev.text}): PR_BODY.md says Fixes"
        return Check("issue-referenced", PASS, why, (ev.where,), rule)
    ref = cover.issue_reference(cov)
    if ref:
        return Check("issue-referenced", PASS, f"{ref.text}", (ref.where,), rule)
    cite = next((e for e in rule if "bug" in e.text.lower()), rule[0]) if rule else None
    why = (
        "no issue recorded: open the issue first with ISSUE.md (the target's bug form), then add "
        f"a line `issue: URL` above the first heading of {cov.path} (PR_BODY.md then says Fixes #N)"
    )
    return Check(
        "issue-referenced", WARN, why + (f" ({cite.where})" if cite else ""), (cov.path,), rule
    )


def check_disclosure(policy: DerivedPolicy, cov: cover.Cover) -> Check:
    d = cover.disclosure(cov, policy.template)
    rule = policy.rule("disclosure_required").citations
    if d.status == "answered":
        return Check("disclosure", PASS, f"answered: {shorten(d.answer, 80)}", (d.where,), rule)
    if d.status == "no-line" and not rule:
        return Check(
            "disclosure", PASS, "the template has no disclosure line and the files ask for none"
        )
    if d.status == "no-line":
        why = (
            f"the policy asks for disclosure ({rule[0].where}) but the template has no "
            "disclosure line: "
            "say it in the cover"
        )
        return Check("disclosure", WARN, why, (cov.path,), rule)
    what = (
        "YES without how AI was used" if d.status == "undescribed" else "not answered (YES or NO)"
    )
    # not None: disclosure() says "no-line" then
    tline = policy.template.disclosure if policy.template else None
    cited = f": {shorten(tline.text.strip(), 60)} ({tline.where})" if tline else ""
    return Check("disclosure", WARN, what + cited, (d.where,), rule + ((tline,) if tline else ()))


def check_cover(cov: cover.Cover, problems: list[str]) -> Check:
    if not problems:
        return Check("cover-written", PASS, f"{cov.path}: every section written")
    why = f"{cov.path} not written yet: the bundle stays a draft (the words are the contributor's)"
    return Check("cover-written", WARN, why, _listed(problems))


def check_headings(policy: DerivedPolicy, body: str) -> Check:
    t = policy.template
    want, got = t.headings if t else [], [heading for heading, _, _ in sections(body)[1]]
    if got != want:
        return Check(
            "pr-body-headings",
            FAIL,
            f"PR_BODY.md's headings {got} are not the template's {want}",
            ("PR_BODY.md",),
        )
    cited = (
        tuple(Citation(file=t.file, line=s.line, text=f"## {s.heading}") for s in t.sections)
        if t
        else ()
    )
    why = "the template's headings in order: " + (", ".join(want) or "none")
    return Check("pr-body-headings", PASS, why, rule=cited)


def check_role(policy: Policy) -> Check:
    role, submit, repo = policy.role_value, policy.submit.value, policy.repo.value
    forbidden, own = policy.rule("automated_submission_forbidden"), policy.rule("own_repo").value
    submitted_at = tuple(e.where for e in policy.submit.citations)
    if submit == "api" and forbidden.value and (repo == own or own is None):
        why = (
            f"submit: api opens the pull request on {repo} through the API, and the target's "
            f"policy forbids automated submissions ({forbidden.citations[0].where}): use submit: "
            "manual, or api with your own fork as upstream.repo"
        )
        return Check("role", FAIL, why, submitted_at, forbidden.citations)
    goes = role.changes_go_to
    if role.kind == "pull-request" and goes and goes != repo:
        ev = policy.rule("changes_go_to").citations
        why = f"{role.text}; but the target's files send changes to {goes} ({ev[0].where})"
        return Check("role", WARN, why, submitted_at, ev)
    return Check("role", PASS, role.text, rule=policy.role.citations)


def check_sync(
    sync: Optional[SyncMap],
    report: Optional[SyncReport],
    script: Optional[str],
    goes_to: Optional[str],
) -> Check:
    if sync is None or report is None:
        why = (
            f"no sync script {script or '(unknown)'} with a `git format-patch ... -- PATHS` in the "
            f"target's tree: cannot tell what {goes_to}'s sync carries"
        )
        return Check("sync", WARN, why, ())
    ev = (Citation(file=sync.script, line=sync.line, text="git format-patch ... -- PATHS"),)
    carried = ", ".join(f"{a} -> {b}" for a, b in report.carried) or "nothing"
    if report.mismatched:
        written = ", ".join(b for _, b in report.mismatched)
        why = f"the sync would write {written}, which the series in this layout does not change"
        return Check("sync", FAIL, why, tuple(a for a, _ in report.mismatched), ev)
    left = sorted(set(report.not_carried) | set(report.target_only))
    if left:
        why = (
            f"{sync.script} carries {carried}; not {', '.join(left)} "
            "(those reach this target only by hand)"
        )
        return Check("sync", WARN, why, tuple(left), ev)
    return Check("sync", PASS, f"{sync.script} carries the whole series: {carried}", rule=ev)


def check_related(policy: Policy, cov: cover.Cover, related: tuple) -> Check:
    """Every open pull request of patches/related-upstream.yaml is referenced in cover.md (its URL
    or #N): upstream asks a contributor to find an existing PR for the same change and talk
    there."""
    rule = policy.rule("existing_pr_first").citations
    open_prs = [r for r in related if r.kind == "pr" and r.state == "open"]
    if not open_prs:
        return Check(
            "related-pr-referenced", PASS, "no open related pull request recorded", rule=rule
        )
    text = cover.visible(cov.text or "")
    missing = [r for r in open_prs if not r.referenced_in(text)]
    if not missing:
        why = f"{cov.path} references {', '.join(f'#{r.number}' for r in open_prs)}"
        return Check("related-pr-referenced", PASS, why, rule=rule)
    cite = f" ({rule[0].where}: {shorten(rule[0].text.strip(), 100)})" if rule else ""
    urls = ", ".join(r.url for r in missing)
    why = f"{cov.path} does not reference the open related PR(s) {urls}{cite}"
    return Check("related-pr-referenced", WARN, why, (cov.path,), rule)


# ---------------------------------------------------------------- all of them

PR_ONLY = tuple(
    (
        "ascii-pr-text pr-body-headings pr-body-words pr-body-length cut-words issue-form "
        "cover-written disclosure issue-referenced related-pr-referenced commit-messages"
    ).split()
)


def run(
    policy: DerivedPolicy,
    patches: list[tuple[str, str]],
    texts: dict[str, str],
    cov: Optional[cover.Cover],
    cover_problems: list[str],
    sync: Optional[SyncMap] = None,
    sync_report: Optional[SyncReport] = None,
    sync_script: Optional[str] = None,
    related: tuple = (),
    form_problems: tuple[str, ...] = (),
) -> Readiness:
    """texts: PR_TITLE, PR_BODY.md, ISSUE.md and the COMMENT drafts as written (none for a target
    that takes no pull request); form_problems: ISSUE.md's required fields without data."""
    messages = [message_of(n, t) for n, t in patches]
    parsed = [(n, *added_lines(n, t)) for n, t in patches]
    added = [a for _, lines, _ in parsed for a in lines]
    new_files = [(n, path) for n, _, new in parsed for path in new]
    checks = [
        check_ascii_messages(policy, messages),
        check_ascii_added(policy, added),
        check_comment_length(policy, added),
        check_comment_wrap(policy, added),
        check_subjects(policy, messages),
        check_trailers(policy, messages),
        check_new_tests(policy, new_files),
        check_role(policy),
    ]
    not_applicable = {}
    if policy.takes_pull_request and cov is not None:
        checks += [
            check_ascii_texts(policy, texts),
            check_headings(policy, texts.get("PR_BODY.md", "")),
            check_pr_words(texts.get("PR_BODY.md", "")),
            check_pr_length(texts.get("PR_BODY.md", "")),
            check_cut_words(texts),
            check_issue_form(list(form_problems)),
            check_cover(cov, cover_problems),
            check_disclosure(policy, cov),
            check_issue(policy, cov),
            check_related(policy, cov, related),
            check_messages(policy, cov, messages),
        ]
    else:
        not_applicable = {
            name: f"no pull request on this target: {policy.role_value.text}" for name in PR_ONLY
        }
    goes_to = policy.role_value.changes_go_to
    if not policy.takes_pull_request and goes_to:
        checks.append(check_sync(sync, sync_report, sync_script, goes_to))
    summary = {s: sum(c.status == s for c in checks) for s in (PASS, WARN, FAIL)}
    return Readiness(checks=tuple(checks), not_applicable=not_applicable, summary=summary)


def markdown(target: str, readiness: Readiness, draft_reasons: list[str], policy: Policy) -> str:
    """READINESS.md: the checks as a table, then each check's locations and the policy lines
    behind it."""
    # the target's own files (AGENTS.md lines, patch texts) are data here: every value inert
    out = [
        f"# Readiness: {publish.text(target, 200)}",
        "",
        f"- role: {publish.text(policy.role_value.text)}",
        f"- draft: {'yes' if draft_reasons else 'no'}",
    ]
    out += [f"  - {publish.text(r)}" for r in draft_reasons]
    out += ["", "| check | status | detail |", "|---|---|---|"]
    out += [
        f"| {publish.cell(c.name)} | {publish.cell(c.status)} | {publish.cell(c.detail, 2_000)} |"
        for c in readiness.checks
    ]
    out += [
        f"| {publish.cell(name)} | not applicable | {publish.cell(why, 2_000)} |"
        for name, why in readiness.not_applicable.items()
    ]
    for c in readiness.checks:
        if c.where or c.rule:
            out += ["", f"## {publish.text(c.name, 200)}: {publish.text(c.status, 50)}"]
            if c.where:
                out += [""] + [f"- {publish.text(w)}" for w in c.where]
            if c.rule:
                rules = [
                    f"- {publish.text(e.where)}: {publish.text(e.text, start=False)}"
                    for e in c.rule
                ]
                out += ["", "Policy lines:", *rules]
    return publish.bounded("\n".join(out) + "\n", where="READINESS.md")
