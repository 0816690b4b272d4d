"""COMMENT-<name>.md: for each fix proposed elsewhere that the project ported
(native_tests/competing/NAME.patch) and ran, a draft comment for the place where that work is
discussed: the reproduction, the line test-opt fails with, what it would take to pass. Never part of
PR_BODY.md or ISSUE.md (upstream's way is to comment on the other work, not to rule on it in one's
own pull request); the contributor posts it or not. Pure."""

from __future__ import annotations

from typing import Optional

from .. import publish
from ..model.layout import UPSTREAM_TEST
from ..model.results import Results
from ..verdicts.competing import CompetingFix
from . import pr_body

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


def draft(
    fix: CompetingFix,
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    repo: Optional[str],
) -> Optional[str]:
    """The draft for one ported fix; None when no cell of this target judged it."""
    found = _judged(results, target, fix.name)
    if found is None:
        return None
    cell, rec = found
    judged = rec.judged
    source = pr_body._source(results, target)
    version = source.upstream_commit or source.base_commit or pr_body.NONE
    where = fix.discussed_at or fix.url
    text = pr_body.inert  # every value from data goes through one function (ASCII, inert Markdown)
    out = [
        "<!--",
        "ggml-patch: a draft comment, for you to post or not, where this work is discussed:",
        pr_body.ascii_text(where).replace("--", "- -"),
        "It is data from one run; put it in your own words. The tool never posts it.",
        "-->",
        "",
        f"I ported {publish.link(fix.url.removeprefix('https://github.com/'), fix.url)} "
        f"to {text(repo or target)} "
        f"at {text(version[:8])} "
        f"({text(fix.title)}) and ran {UPSTREAM_TEST} with the per-step graph cases of a fix "
        "for the same bug.",
        "",
    ]
    test_line = judged.failure_line or judged.reason
    out += [
        f"On {pr_body.backend_name(cell.backend)}, {text(judged.failing_test or UPSTREAM_TEST)} "
        + ("fails:" if judged.failure_line else f"gives: {text(judged.reason)}"),
    ]
    if judged.failure_line:
        out += ["", "```", *pr_body.inert_lines([test_line]), "```"]
    tests = [n for c, n in zip(commits, patch_names, strict=True) if c.is_test]
    commands = [
        f"git checkout --detach {version}",
        f"git apply {fix.name}.patch",
        *([f"git am {' '.join(tests)}"] if tests else []),
        f"cmake -B build -D{'GGML' if cell.layout == 'ggml' else 'LLAMA'}_BUILD_TESTS=ON",
        f"cmake --build build --target {UPSTREAM_TEST}",
        f"./build/bin/{UPSTREAM_TEST}",
    ]
    out += ["", "To reproduce:", "", "```sh", *commands, "```"]
    if fix.to_pass:
        out += ["", f"What it would take to pass: {text(fix.to_pass)}"]
    else:
        out += [
            "",
            f"What it would take to pass: every case of {UPSTREAM_TEST} prints OK (per-step "
            "graphs give the same weights as static graphs after every step).",
        ]
    port = "".join(f.text for f in fix.files)
    lines = pr_body.code_lines(port.splitlines())
    out += pr_body._details(f"The port ({text(fix.name)}.patch)", ["```diff", *lines, "```"])
    if fix.provenance:
        out += ["", f"Provenance of the port: {text(fix.provenance)}"]
    return "\n".join(out) + "\n"


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
