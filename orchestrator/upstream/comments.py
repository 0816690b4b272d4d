"""COMMENT-<name>.md: for each fix proposed elsewhere that the project ported
(native_tests/competing/NAME.patch) and ran, and whose discussion thread is known (`Discussed at:`),
the facts for a comment there: the reproduction and the line test-opt prints, for the contributor
to word (upstream forbids AI-written posts). Without a known thread: one neutral line in the PR's
details instead (neutral_lines), no draft. Never a ruling in PR_BODY.md or ISSUE.md. Pure."""

from __future__ import annotations

from typing import Optional

from ..model.layout import UPSTREAM_TEST
from ..model.results import Results
from ..model.testspec import TestSpec
from ..verdicts.competing import CompetingFix
from . import contributor, pr_body

PREFIX = "COMMENT-"


def file_name(name: str) -> str:
    return f"{PREFIX}{name}.md"


def _judged(results: Results, target: str, name: str):
    """The first cell's record of this fix that was judged (CPU first)."""
    cells = sorted(results.cells_of(target), key=lambda c: c.backend != "cpu")
    for c in cells:
        for r in results.competing_of(c.cell):
            if r.competing and r.competing.name == name and r.judged:
                return c, r
    return None


def _reproduction(fix: CompetingFix, cell, version: str, commits: list, names: list[str]):
    """The commands that show what test-opt prints with the other work in place of the fix: the
    port is the diff in the draft itself (saved as its file), the test commit of the series."""
    tests = [n for c, n in zip(commits, names, strict=True) if c.is_test]
    # the build and test lines as the bundle's own (contributor.py), test-opt judging the port
    shown = contributor.commands(cell.layout, version, [], (TestSpec(UPSTREAM_TEST),))
    return [
        f"git checkout --detach {version}",
        f"git apply {fix.name}.patch  # the diff below, saved under that name",
        *([f"git am {' '.join(tests)}"] if tests else []),
        *shown.run_lines,
    ]


def draft(
    fix: CompetingFix,
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    repo: Optional[str],
) -> Optional[str]:
    """The facts for one ported fix, for the thread where that work is discussed (its
    `Discussed at:`), for the contributor to put in their own words; None without a known thread
    or when no cell of this target judged it."""
    found = _judged(results, target, fix.name)
    if found is None or not fix.discussed_at:
        return None
    cell, rec = found
    judged = rec.judged
    source = pr_body._source(results, target)
    version = source.upstream_commit or source.base_commit or pr_body.NONE
    text = pr_body.inert  # every value from data goes through one function (ASCII, inert Markdown)
    out = [
        "<!--",
        "ggml-patch: facts for a comment in this thread, not a text to post:",
        pr_body.ascii_text(fix.discussed_at).replace("--", "- -"),
        "Write the comment yourself (CONTRIBUTING.md: no AI-written posts); the tool never posts.",
        "-->",
        "",
        f"- Thread: {text(fix.discussed_at)}",
        f"- The other work: {text(fix.url)} ({text(fix.title)})",
        f"- Tried on: {text(repo or target)} at {text(version[:8])}, "
        f"{pr_body.backend_name(cell.backend)}, with the test commit of this series",
        f"- {text(judged.failing_test or UPSTREAM_TEST)} "
        + ("prints:" if judged.failure_line else f"gives: {text(judged.reason)}"),
    ]
    if judged.failure_line:
        out += ["", "```", *pr_body.inert_lines([judged.failure_line]), "```", ""]
    if fix.to_pass:
        out.append(f"- What would pass: {text(fix.to_pass)}")
    commands = _reproduction(fix, cell, version, commits, patch_names)
    out += ["", "Reproduction:", "", "```sh", *commands, "```"]
    port = "".join(f.text for f in fix.files)
    lines = pr_body.code_lines(port.splitlines())
    out += pr_body._details(f"{text(fix.name)}.patch", ["```diff", *lines, "```"])
    return "\n".join(out) + "\n"


def neutral_lines(fixes: list[CompetingFix], results: Results, target: str) -> list[str]:
    """One neutral line for the PR's details per ported fix without a known thread: where the
    other work is and what test-opt prints with it in place of this fix; no judgment."""
    out = []
    for fix in fixes:
        found = _judged(results, target, fix.name)
        if found is None or fix.discussed_at:
            continue
        judged = found[1].judged
        shows = judged.failure_line or judged.reason
        out.append(
            f"{fix.url} also changes this code; with it in place of this fix, "
            f"{judged.failing_test or UPSTREAM_TEST} prints: {shows}"
        )
    return out


def drafts(
    fixes: list[CompetingFix],
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    repo: Optional[str],
) -> dict[str, str]:
    """file name -> text, one per fix this target's cells judged."""
    out = {}
    for fix in fixes:
        text = draft(fix, results, target, commits, patch_names, repo)
        if text is not None:
            out[file_name(fix.name)] = text
    return out
