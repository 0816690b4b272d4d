"""Readiness checks: is the bundle ready by the target's own rules? Each check is pass, warn or
fail, with file:line where it applies and the policy lines it enforces. A fail makes the bundle
a draft. Pure: patch texts, the tool's own texts, the cover and the policy in; checks out."""

from __future__ import annotations

import email.header
import re
from dataclasses import dataclass, field
from typing import Optional

import unidiff

from . import cover as C
from . import manifest as M
from .policy import Evidence, Policy
from .sync import SyncMap, SyncReport

PASS, WARN, FAIL = "pass", "warn", "fail"
MAX_LOCATIONS = 12  # listed per check; the count says how many more
WRAP_COLUMNS = 60  # a comment line this long that stops mid-sentence reads as filled to a column
SUBJECT = re.compile(
    r"^(?P<module>[A-Za-z0-9_][A-Za-z0-9_.+/-]*(?:\s*,\s*[A-Za-z0-9_][A-Za-z0-9_.+/-]*)*)"
    r" : (?P<title>\S.*)$"
)
_C_FAMILY = (
    ".c",
    ".cc",
    ".cpp",
    ".cxx",
    ".h",
    ".hh",
    ".hpp",
    ".cu",
    ".cuh",
    ".m",
    ".mm",
    ".metal",
    ".comp",
    ".glsl",
    ".wgsl",
    ".cl",
    ".swift",
)
_HASH_FAMILY = (".cmake", ".py", ".sh", ".txt")  # .txt: CMakeLists.txt
_SENTENCE_END = (".", ":", ";", "!", "?", ")", ",")


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    where: tuple[str, ...] = ()
    rule: tuple[Evidence, ...] = ()

    def record(self) -> M.CheckRecord:
        rule = list(self.rule)
        return M.CheckRecord(name=self.name, status=self.status, detail=self.detail, where=list(self.where), rule=rule)


@dataclass(frozen=True)
class Readiness:
    checks: tuple[Check, ...]
    not_applicable: dict[str, str] = field(default_factory=dict)  # check name -> why it does not apply

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.status == FAIL]

    def record(self) -> M.ReadinessRecord:
        return M.ReadinessRecord(
            checks=[c.record() for c in self.checks],
            not_applicable=self.not_applicable,
            summary={s: sum(c.status == s for c in self.checks) for s in (PASS, WARN, FAIL)},
        )


# ---------------------------------------------------------------- the series, read from its patch files


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
    """The commit message of one `git format-patch` file: the decoded subject, then the body up to `---`."""
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
    body = []
    for n in range(i + 1, len(lines)):
        if lines[n] == "---" or lines[n].startswith("diff --git "):
            break
        body.append((n + 1, lines[n]))
    while body and not body[-1][1].strip():
        body.pop()
    return Message(name, subject, subject_line, tuple(body))


def added_lines(name: str, text: str) -> tuple[list[Added], list[str]]:
    """Every added line of one patch file, and the files it creates."""
    added, new_files = [], []
    for f in unidiff.PatchSet(text):
        path = f.path
        if f.is_added_file:
            new_files.append(path)
        for hunk in f:
            for ln in hunk:
                if ln.is_added:  # an added line has both numbers
                    added.append(Added(name, ln.diff_line_no or 0, path, ln.target_line_no or 0, ln.value.rstrip("\n")))
    return added, new_files


# ---------------------------------------------------------------- one function per check


def _non_ascii(text: str) -> Optional[str]:
    bad = sorted({c for c in text if ord(c) > 127})
    return " ".join(f"{c!r} U+{ord(c):04X}" for c in bad) if bad else None


def _listed(where: list[str]) -> tuple[str, ...]:
    return tuple(where[:MAX_LOCATIONS]) + (
        (f"... and {len(where) - MAX_LOCATIONS} more",) if len(where) > MAX_LOCATIONS else ()
    )


def _rule(policy: Policy, name: str) -> tuple[Evidence, ...]:
    return policy.rule(name).evidence


def _source(policy: Policy, name: str) -> str:
    ev = _rule(policy, name)
    return ev[0].where if ev else "ggml-patch's standard (the target's files state no such rule)"


def check_ascii_messages(policy: Policy, messages: list[Message]) -> Check:
    where = []
    for m in messages:
        bad = _non_ascii(m.subject)
        if bad:
            where.append(f"{m.patch}:{m.subject_line}: subject: {bad}")
        for n, line in m.body:
            bad = _non_ascii(line)
            if bad:
                where.append(f"{m.patch}:{n}: {bad}")
    return _verdict(
        "ascii-commit-messages",
        where,
        f"{len(messages)} commit message(s), ASCII only",
        "non-ASCII characters in commit messages",
        policy,
        "ascii_only",
    )


def check_ascii_added(policy: Policy, added: list[Added]) -> Check:
    where = [f"{a.where}: {_non_ascii(a.text)}" for a in added if _non_ascii(a.text)]
    return _verdict(
        "ascii-added-lines",
        where,
        f"{len(added)} added line(s), ASCII only",
        "non-ASCII characters in added lines",
        policy,
        "ascii_only",
    )


def check_ascii_texts(policy: Policy, texts: dict[str, str]) -> Check:
    where = []
    for name, text in texts.items():
        for n, line in enumerate(text.splitlines(), 1):
            bad = _non_ascii(line)
            if bad:
                where.append(f"{name}:{n}: {bad}")
    return _verdict(
        "ascii-pr-text",
        where,
        f"{', '.join(texts)}: ASCII only",
        "non-ASCII characters in the pull request's text",
        policy,
        "ascii_only",
    )


def _verdict(name: str, where: list[str], ok: str, bad: str, policy: Policy, rule: str) -> Check:
    if not where:
        return Check(name, PASS, ok, rule=_rule(policy, rule))
    return Check(
        name, FAIL, f"{bad} ({len(where)}; rule: {_source(policy, rule)})", _listed(where), _rule(policy, rule)
    )


@dataclass(frozen=True)
class CommentBlock:
    lines: tuple[Added, ...]

    @property
    def texts(self) -> list[str]:
        return [_comment_text(a.text) for a in self.lines]


def _comment_style(path: str) -> Optional[str]:
    low = path.lower()
    if low.endswith(_C_FAMILY):
        return "//"
    if low.endswith(_HASH_FAMILY) and (not low.endswith(".txt") or low.endswith("cmakelists.txt")):
        return "#"
    return None


def _comment_text(line: str) -> str:
    s = line.strip()
    for mark in ("///", "//", "/**", "/*", "*/", "*", "#"):
        if s.startswith(mark):
            return s[len(mark) :].strip().removesuffix("*/").strip()
    return s


def comment_blocks(added: list[Added]) -> list[CommentBlock]:
    """Runs of added full-line comments on consecutive lines of one file (a `/* */` block is one run)."""
    blocks: list[list[Added]] = []
    prev: Optional[Added] = None
    in_block_comment = False
    for a in added:
        style = _comment_style(a.path)
        s = a.text.strip()
        if style == "//":
            is_comment = in_block_comment or s.startswith("//") or s.startswith("/*")
            if s.startswith("/*") and "*/" not in s:
                in_block_comment = True
            elif in_block_comment and "*/" in s:
                in_block_comment = False
                is_comment = True
        elif style == "#":
            is_comment = s.startswith("#") and not s.startswith("#!")
        else:
            is_comment = False
        if not is_comment:
            prev = None
            continue
        joined = prev is not None and prev.path == a.path and prev.patch == a.patch and prev.line + 1 == a.line
        if joined:
            blocks[-1].append(a)
        else:
            blocks.append([a])
        prev = a
    return [CommentBlock(tuple(b)) for b in blocks]


def check_comment_length(policy: Policy, added: list[Added]) -> Check:
    limit = policy.max_comment_lines
    where = [f"{b.lines[0].where}: {len(b.lines)}-line comment" for b in comment_blocks(added) if len(b.lines) > limit]
    return _verdict_limit(
        "comment-length",
        where,
        f"every added comment at most {limit} line(s)",
        f"added comments longer than {limit} lines",
        policy,
    )


def _verdict_limit(name: str, where: list[str], ok: str, bad: str, policy: Policy) -> Check:
    if not where:
        return Check(name, PASS, ok, rule=_rule(policy, "max_comment_lines"))
    return Check(
        name,
        FAIL,
        f"{bad} ({len(where)}; rule: {_source(policy, 'max_comment_lines')})",
        _listed(where),
        _rule(policy, "max_comment_lines"),
    )


def hard_wrapped(block: CommentBlock) -> list[Added]:
    """Lines that stop mid-sentence at a fixed column while the next comment line goes on with it."""
    out = []
    texts = block.texts
    for i in range(len(texts) - 1):
        here, nxt = texts[i], texts[i + 1]
        line = block.lines[i].text.rstrip()
        if not here or not nxt or len(line) < WRAP_COLUMNS:
            continue
        if here.endswith(_SENTENCE_END) or re.match(r"^([-*+]|\d+[.)])\s", nxt):
            continue
        out.append(block.lines[i])
    return out


def check_comment_wrap(policy: Policy, added: list[Added]) -> Check:
    where = [f"{a.where}: continues on the next line" for b in comment_blocks(added) for a in hard_wrapped(b)]
    name = "comment-wrap"
    rule = _rule(policy, "no_hard_wrap")
    if not where:
        return Check(name, PASS, "no added comment is hard-wrapped mid-sentence", rule=rule)
    return Check(
        name,
        FAIL,
        f"added comments hard-wrapped mid-sentence ({len(where)}; rule: {_source(policy, 'no_hard_wrap')})",
        _listed(where),
        rule,
    )


def check_subjects(policy: Policy, messages: list[Message]) -> Check:
    where = [f"{m.patch}:{m.subject_line}: {m.subject!r}" for m in messages if not SUBJECT.match(m.subject)]
    fmt = policy.rule("subject_format").value or "<module> : <title>"
    if not where:
        return Check("subject", PASS, f"every subject is `{fmt}`", rule=_rule(policy, "subject_format"))
    return Check(
        "subject",
        FAIL,
        f"subjects not `{fmt}` ({len(where)}; rule: {_source(policy, 'subject_format')})",
        _listed(where),
        _rule(policy, "subject_format"),
    )


def check_trailers(policy: Policy, messages: list[Message]) -> Check:
    where = [
        f"{m.patch}:{n}: {line.strip()}"
        for m in messages
        for n, line in m.body
        if line.lower().startswith("co-authored-by:")
    ]
    rule = _rule(policy, "assisted_by_trailer")
    if not where:
        return Check("trailers", PASS, "no Co-authored-by trailer (an assistant is named with Assisted-by)", rule=rule)
    return Check(
        "trailers",
        FAIL,
        f"Co-authored-by trailer (use Assisted-by; rule: {_source(policy, 'assisted_by_trailer')})",
        _listed(where),
        rule,
    )


def check_new_tests(policy: Policy, new_files: list[tuple[str, str]]) -> Check:
    """new_files: (patch, path) of every file the series creates."""
    tests = [f"{path} (new in {patch})" for patch, path in new_files if path.startswith("tests/") or "/tests/" in path]
    rule = policy.rule("new_test_files_need_approval")
    if not tests:
        return Check("new-test-files", PASS, "no new file under tests/", rule=rule.evidence)
    if not rule.value:
        return Check(
            "new-test-files", PASS, "new files under tests/; the target's files state no approval rule", tuple(tests)
        )
    return Check(
        "new-test-files",
        WARN,
        f"new files under tests/ need the maintainers' approval ({rule.evidence[0].where})",
        tuple(tests),
        rule.evidence,
    )


def check_issue(policy: Policy, cov: C.Cover) -> Check:
    ref = C.issue_reference(cov)
    rule = _rule(policy, "issue_first")
    if ref:
        return Check("issue-referenced", PASS, f"{ref.text}", (ref.where,), rule)
    cite = next((e for e in rule if "bug" in e.text.lower()), rule[0]) if rule else None
    why = f" ({cite.where})" if cite else ""
    return Check(
        "issue-referenced",
        WARN,
        f"no `Fixes #N` or `Refs #N` in {cov.path}: open the issue first (ISSUE.md has its data){why}",
        (cov.path,),
        rule,
    )


def check_disclosure(policy: Policy, cov: C.Cover) -> Check:
    d = C.disclosure(cov, policy.template)
    rule = _rule(policy, "disclosure_required")
    if d.status == "answered":
        return Check("disclosure", PASS, f"answered: {d.answer[:80]}", (d.where,), rule)
    if d.status == "no-line":
        if rule:
            return Check(
                "disclosure",
                WARN,
                f"the policy asks for disclosure ({rule[0].where}) but the template "
                "has no disclosure line: say it in the cover",
                (cov.path,),
                rule,
            )
        return Check("disclosure", PASS, "the template has no disclosure line and the files ask for none")
    tline = policy.template.disclosure if policy.template else None
    what = "YES without how AI was used" if d.status == "undescribed" else "not answered (YES or NO)"
    if tline is None:  # disclosure() says "no-line" then; kept for the type checker
        return Check("disclosure", WARN, what, (d.where,), rule)
    return Check("disclosure", WARN, f"{what}: {tline.text.strip()[:60]} ({tline.where})", (d.where,), rule + (tline,))


def check_cover(cov: C.Cover, problems: list[str]) -> Check:
    if not problems:
        return Check("cover-written", PASS, f"{cov.path}: every section written")
    return Check(
        "cover-written",
        WARN,
        f"{cov.path} not written yet: the bundle stays a draft (the words are the contributor's)",
        _listed(problems),
    )


def check_headings(policy: Policy, body: str) -> Check:
    want = policy.template.headings if policy.template else []
    got = [ln[3:].strip() for ln in _outside_fences(body) if ln.startswith("## ")]
    if got == want:
        return Check(
            "pr-body-headings",
            PASS,
            "the template's headings in order: " + (", ".join(want) or "none"),
            rule=tuple(
                Evidence(file=policy.template.file, line=s.line, text=f"## {s.heading}")
                for s in policy.template.sections
            )
            if policy.template
            else (),
        )
    return Check(
        "pr-body-headings", FAIL, f"PR_BODY.md's headings {got} are not the template's {want}", ("PR_BODY.md",)
    )


def _outside_fences(text: str) -> list[str]:
    out, fenced = [], False
    for ln in text.splitlines():
        if ln.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced:
            out.append(ln)
    return out


def check_role(policy: Policy) -> Check:
    role = policy.role.value
    submit, repo = policy.submit.value, policy.repo.value
    forbidden = policy.rule("automated_submission_forbidden")
    own = policy.rule("own_repo").value
    if submit == "api" and forbidden.value and (repo == own or own is None):
        return Check(
            "role",
            FAIL,
            f"submit: api opens the pull request on {repo} through the API, and the target's "
            f"policy forbids automated submissions ({forbidden.evidence[0].where}): use submit: "
            "manual, or api with your own fork as upstream.repo",
            tuple(e.where for e in policy.submit.evidence),
            forbidden.evidence,
        )
    goes = role.get("changes_go_to")
    if role["kind"] == "pull-request" and goes and goes != repo:
        ev = policy.rule("changes_go_to").evidence
        return Check(
            "role",
            WARN,
            f"{role['text']}; but the target's files send changes to {goes} ({ev[0].where})",
            tuple(e.where for e in policy.submit.evidence),
            ev,
        )
    return Check("role", PASS, role["text"], rule=policy.role.evidence)


def check_sync(
    sync: Optional[SyncMap], report: Optional[SyncReport], script: Optional[str], goes_to: Optional[str]
) -> Check:
    if sync is None or report is None:
        return Check(
            "sync",
            WARN,
            f"no sync script {script or '(unknown)'} with a `git format-patch ... -- PATHS` in the "
            f"target's tree: cannot tell what {goes_to}'s sync carries",
            (),
        )
    ev = (Evidence(file=sync.script, line=sync.line, text="git format-patch ... -- PATHS"),)
    carried = ", ".join(f"{a} -> {b}" for a, b in report.carried) or "nothing"
    if report.mismatched:
        return Check(
            "sync",
            FAIL,
            f"the sync would write {', '.join(b for _, b in report.mismatched)}, which the "
            "series in this layout does not change",
            tuple(a for a, _ in report.mismatched),
            ev,
        )
    if report.not_carried or report.target_only:
        left = sorted(set(report.not_carried) | set(report.target_only))
        return Check(
            "sync",
            WARN,
            f"{sync.script} carries {carried}; not {', '.join(left)} (those reach this target only by hand)",
            tuple(left),
            ev,
        )
    return Check("sync", PASS, f"{sync.script} carries the whole series: {carried}", rule=ev)


def check_related(policy: Policy, cov: C.Cover, related: tuple) -> Check:
    """Every open pull request of patches/related-upstream.yaml is referenced in cover.md (its URL
    or #N): upstream asks a contributor to find an existing PR for the same change and talk there."""
    rule = _rule(policy, "existing_pr_first")
    open_prs = [r for r in related if r.kind == "pr" and r.state == "open"]
    if not open_prs:
        return Check("related-pr-referenced", PASS, "no open related pull request recorded", rule=rule)
    text = C.visible(cov.text or "")
    missing = [r for r in open_prs if not r.referenced_in(text)]
    if not missing:
        return Check(
            "related-pr-referenced",
            PASS,
            f"{cov.path} references {', '.join(f'#{r.number}' for r in open_prs)}",
            rule=rule,
        )
    cite = f" ({rule[0].where}: {rule[0].text.strip()[:100]})" if rule else ""
    return Check(
        "related-pr-referenced",
        WARN,
        f"{cov.path} does not reference the open related PR(s) {', '.join(r.url for r in missing)}{cite}",
        (cov.path,),
        rule,
    )


# ---------------------------------------------------------------- all of them

PR_ONLY = (
    "ascii-pr-text",
    "pr-body-headings",
    "cover-written",
    "disclosure",
    "issue-referenced",
    "related-pr-referenced",
)


def run(
    policy: Policy,
    patches: list[tuple[str, str]],
    texts: dict[str, str],
    cov: Optional[C.Cover],
    cover_problems: list[str],
    sync: Optional[SyncMap] = None,
    sync_report: Optional[SyncReport] = None,
    sync_script: Optional[str] = None,
    related: tuple = (),
) -> Readiness:
    """texts: what the tool writes for upstream (PR_TITLE, PR_BODY.md, ISSUE.md); empty for a target
    that takes no pull request."""
    messages = [message_of(n, t) for n, t in patches]
    added, new_files = [], []
    for n, t in patches:
        a, new = added_lines(n, t)
        added += a
        new_files += [(n, p) for p in new]
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
            check_cover(cov, cover_problems),
            check_disclosure(policy, cov),
            check_issue(policy, cov),
            check_related(policy, cov, related),
        ]
    else:
        why = f"no pull request on this target: {policy.role.value['text']}"
        not_applicable = {name: why for name in PR_ONLY}
    if not policy.takes_pull_request and policy.role.value.get("changes_go_to"):
        checks.append(check_sync(sync, sync_report, sync_script, policy.role.value["changes_go_to"]))
    return Readiness(tuple(checks), not_applicable)


def markdown(target: str, readiness: Readiness, draft_reasons: list[str], policy: Policy) -> str:
    """READINESS.md: the checks as a table, then each check's locations and the policy lines behind it."""
    out = [
        f"# Readiness: {target}",
        "",
        f"- role: {policy.role.value['text']}",
        f"- draft: {'yes' if draft_reasons else 'no'}",
    ]
    out += [f"  - {r}" for r in draft_reasons]
    out += ["", "| check | status | detail |", "|---|---|---|"]
    for c in readiness.checks:
        out.append(f"| {c.name} | {c.status} | {c.detail.replace('|', '/')} |")
    for name, why in readiness.not_applicable.items():
        out.append(f"| {name} | not applicable | {why} |")
    for c in readiness.checks:
        if not c.where and not c.rule:
            continue
        out += ["", f"## {c.name}: {c.status}"]
        if c.where:
            out += [""] + [f"- {w}" for w in c.where]
        if c.rule:
            out += ["", "Policy lines:"] + [f"- {e.where}: {e.text}" for e in c.rule]
    return "\n".join(out) + "\n"
