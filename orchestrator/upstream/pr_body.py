"""PR_BODY.md and ISSUE.md. The body is the target's template: the contributor's sections from
patches/cover.md, the template's fixed lines (the disclosure answered from cover.md), and only data
under "Additional information". ISSUE.md is the reproduction on the pinned base. The tool writes
no prose; everything it writes is ASCII. Pure."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Optional

from .. import publish
from ..finetune import results as finetune_results
from ..finetune.bundle import plot_name
from ..model.layout import GATE_TEST, UPSTREAM_TEST
from ..model.results import Outcome, Provenance, Results
from ..model.testspec import TestSpec
from ..redact import redact
from ..verdicts import known_limits as limits
from ..verdicts.competing import first_failing_line
from ..verdicts.mutants import tally_line
from . import contributor, cover
from .manifest import Verification
from .policy import Template, _disclosure_prefix, strip_blank
from .views import NOT_RUN, WARNING_TITLE, device_text, one_line

DATA_HEADING = re.compile(r"^additional information$", re.I)
_ASCII = dict(
    zip(
        "\u2014\u2013\u2212\u00d7\u2018\u2019\u201c\u201d\u2248\u00a0\u00b5",
        "---x''\"\"~ u",
        strict=True,
    )
)
_ASCII.update({"\u2192": "->", "\u2190": "<-", "\u2026": "...", "\u2264": "<=", "\u2265": ">="})
NONE = "-"


def ascii_text(text: str) -> str:
    """The tool's own data in ASCII: the usual typographic characters by their ASCII equivalents
    (AGENTS.md's list), accents dropped, anything else as a visible \\uXXXX escape."""
    return "".join(ch if ch.isascii() else _ASCII.get(ch) or _unaccented(ch) for ch in text)


def inert(value: object) -> str:
    """A value from data (results, a target's file, a competing fix's header) as inert inline
    Markdown in ASCII: the one way data joins the tool's text (publish.text)."""
    return publish.text(ascii_text(str(value)))


def inert_lines(lines: list[str]) -> list[str]:
    """Lines from data for inside a ``` block the tool opens: ASCII, none closes the fence."""
    return publish.lines_in_block([ascii_text(line) for line in lines])


def code_lines(lines: list[str]) -> list[str]:
    """Lines from data for inside a ``` block, whitespace kept (a diff): ASCII, control
    characters shown, a line that could close the fence indented four more spaces."""
    out = []
    for line in lines:
        flat = publish.plain(ascii_text(line))
        indent = len(flat) - len(flat.lstrip(" "))
        closes = indent < 4 and flat.lstrip(" ").startswith(("```", "~~~"))
        out.append("    " + flat if closes else flat)
    return out


def _unaccented(ch: str) -> str:
    return (
        unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or f"\\u{ord(ch):04x}"
    )


# ---------------------------------------------------------------- data from results.json


def _v(x) -> str:  # a value as results.json holds it (a float without its ".0"), one cell
    if x is None or x == "":
        return NONE
    return publish.cell(
        ascii_text(str(int(x)) if isinstance(x, float) and x.is_integer() else str(x))
    )


def _code(x) -> str:  # a value shown literally in a table cell
    return publish.code(ascii_text(str(x)), 300, in_table=True) if x else NONE


def _summary(rec, test: str) -> Optional[str]:
    t = rec.test(test) if rec else None
    if t and t.skipped is not None:
        return "skipped"  # the backend does not run it: the reason is in the notes below the table
    return t.summary_line if t else None


def _controls(results: Results, target: str) -> list:
    return [(c, results.control_of(c.cell)) for c in results.cells_of(target)]


def _source(results: Results, target: str) -> Provenance:
    return next((c.source for c in results.cells_of(target) if c.source), None) or Provenance(
        kind="", description=NONE
    )


@dataclass(frozen=True)
class ShownRun:
    """The tests a contributor runs (contributor.shown_tests; none: test-opt, and the gate where
    a patch adds it) and the verification that ran them, whose output lines the documents quote
    (None: not verified; the lines come from the matrix's results)."""

    tests: tuple[TestSpec, ...] = ()
    verified: Optional[Verification] = None


NOT_VERIFIED = ShownRun()


def _commands(
    results: Results,
    target: str,
    applied: list[str],
    patch_names: list[str],
    prior: tuple[str, ...] = (),
    tests: tuple[TestSpec, ...] = (),
) -> list[str]:
    """`applied` on the base (after `prior`: the patches of the pull requests it follows), then
    the tests built and run: contributor.commands, the lines the verification runs."""
    cells = results.cells_of(target)
    layout = cells[0].layout if cells else "llama.cpp"
    source = _source(results, target)
    base = source.upstream_commit or source.base_commit or NONE
    shown = tests or contributor.shown_tests((), patch_names)
    return contributor.commands(layout, base, applied, shown, prior).lines


def reproduce_bug(
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    prior: tuple[str, ...] = (),
    tests: tuple[TestSpec, ...] = (),
) -> Optional[list[str]]:
    """Only the test commits on the base: the tests fail with the lines above. None when no commit
    of the series is only tests (the test cannot go in without the fix)."""
    only = [name for c, name in zip(commits, patch_names, strict=True) if c.is_test]
    return _commands(results, target, only, patch_names, prior, tests) if only else None


def verified_lines(verified: Verification) -> tuple[list[str], list[str]]:
    """The lines the verification's own run of the shown commands printed: each failing test's
    line with the test commits alone, each test's passing line with the fix."""
    before = [ascii_text(c.shown) for c in verified.reproduction if c.shown]
    after = [ascii_text(c.shown) for c in verified.commands if c.shown]
    # shown inside ``` blocks: each one line, none able to close the block
    return (
        publish.lines_in_block(list(dict.fromkeys(before)), 400),
        publish.lines_in_block(list(dict.fromkeys(after)), 400),
    )


def _details(summary: str, lines: list[str]) -> list[str]:
    """A folded block: GitHub shows its summary line only, until opened."""
    return ["", f"<details><summary>{summary}</summary>", "", *lines, "", "</details>"]


def _without_fix_line(control, test: str) -> Optional[str]:
    """The line `test` shows without the fix: its first failing line, or for a crash of test-opt
    the signal and the case it died in (the control's, classify.crash_line)."""
    t = control.test(test) if control else None
    if t is None:
        return None
    line = t.failure_line or first_failing_line(test, t.output or "")
    crash = control.failure_line or ""
    if not line and test == UPSTREAM_TEST and t.outcome == Outcome.CRASHED:
        line = crash if crash.startswith(f"{UPSTREAM_TEST}: ") else f"{UPSTREAM_TEST}: crashed"
    return line


def before_fix_lines(results: Results, target: str) -> list[str]:
    """test-opt's line without the fix on each backend that ran it, once each: what the PR's own
    test commit prints there."""
    out = []
    for _, control in _controls(results, target):
        line = _without_fix_line(control, UPSTREAM_TEST) if control else None
        out += [ascii_text(line)] if line else []
    # shown inside a ``` block: each one line, none able to close the block
    return publish.lines_in_block(dict.fromkeys(out), 400)


def shorten(text: str, width: int) -> str:
    """`text` cut to at most `width` characters at a word boundary, " ..." marking the cut:
    never a word cut in two."""
    if len(text) <= width:
        return text
    words, out = text.split(" "), ""
    for w in words:
        if len(out) + len(w) + 1 + len(" ...") > width:
            break
        out = f"{out} {w}" if out else w
    return (out or words[0]) + " ..."


_BACKEND_NAMES = {"cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal"}
_BACKEND_NAMES |= {"hip": "HIP", "sycl": "SYCL", "opencl": "OpenCL", "musa": "MUSA"}
# the device name Vulkan reports for Mesa's software driver, and the driver's own name
_SOFTWARE_DEVICES = {"llvmpipe": "lavapipe"}


def backend_name(backend: str) -> str:
    return _BACKEND_NAMES.get(backend.lower(), backend)


def compiler_short(compiler: str) -> str:
    """ "GNU 12.2.0 (/usr/bin/c++)" -> "gcc 12"; "Clang 17.0.6 (...)" -> "clang 17"; else as is."""
    m = re.match(r"^(GNU|Clang|AppleClang|MSVC)\s+(\d+)", compiler)
    if not m:
        return compiler.split(" (")[0]
    names = {"GNU": "gcc", "Clang": "clang", "AppleClang": "Apple clang", "MSVC": "MSVC"}
    return f"{names[m[1]]} {m[2]}"


def _device_short(c) -> str:
    devices = c.device.strings("devices") if c.device else []
    if not devices:
        return ""
    name = devices[0].split(" (")[0].strip()
    return inert(_SOFTWARE_DEVICES.get(name.lower(), name))


def tested_line(results: Results, target: str, toolchain: dict, machine: str = "") -> str:
    """ "Tested on CPU (x86_64, gcc 12) and Vulkan (lavapipe); CUDA and Metal not run." from
    the cells: a backend is tested when its cell ran the tests, not run when it was skipped."""
    tested: dict[str, str] = {}
    not_run: list[str] = []
    compiler = compiler_short(toolchain.get("cxx_compiler") or "")
    for c in results.cells_of(target):
        name = backend_name(c.backend)
        if c.status in NOT_RUN:
            not_run.append(name)
            continue
        if c.backend == "cpu":
            detail = ", ".join(x for x in (machine, compiler) if x)
        else:
            detail = _device_short(c)
        tested.setdefault(name, f"{name} ({detail})" if detail else name)
    not_run = [n for n in dict.fromkeys(not_run) if n not in tested]
    if not tested:
        return ""
    line = f"Tested on {_and(list(tested.values()))}"
    if not_run:
        line += f"; {_and(not_run)} not run"
    return ascii_text(line + ".")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def before_after(
    results: Results, target: str, patch_names: list[str], verified: Optional[Verification] = None
) -> tuple[list[str], list[str]]:
    """The lines `verified` (the bundle's verification) printed running the shown commands;
    without one, test-opt's first failing line without the fix and its passing line with it (the
    first cell that has both), the series' own gate test too, only when a patch adds it."""
    if verified is not None and verified.commands:
        return verified_lines(verified)
    series_gate = any(GATE_TEST in n for n in patch_names)
    before: list[str] = []
    after: list[str] = []
    # upstream's test; the gate only when the series adds it (a reader has no other gate to run)
    for tests in ([UPSTREAM_TEST] + ([GATE_TEST] if series_gate else []),):
        for c, control in _controls(results, target):
            patched = results.records_of(c.cell).get("patched")
            for test in tests:
                ok = patched.test(test) if patched else None
                if ok is None or ok.outcome != Outcome.PASSED:
                    continue
                line = _without_fix_line(control, test)
                if line and ok.summary_line:
                    before.append(ascii_text(line))
                    after.append(ascii_text(ok.summary_line))
            if before:
                break
        if before:
            break
    # shown inside ``` blocks: each one line, none able to close the block
    shown_before = publish.lines_in_block(dict.fromkeys(before), 400)
    return shown_before, publish.lines_in_block(dict.fromkeys(after), 400)


def backend_table(results: Results, target: str) -> list[str]:
    """One row per backend that ran test-opt: its device and the line test-opt prints with the fix
    and with only the test commit (nothing of this machine's setup)."""
    out = [
        f"| backend | device | {UPSTREAM_TEST} with the fix | without the fix |",
        "|---|---|---|---|",
    ]
    for c, control in _controls(results, target):
        patched = results.records_of(c.cell).get("patched")
        if c.status in NOT_RUN or patched is None or patched.test(UPSTREAM_TEST) is None:
            continue
        device = _cell_text(shorten(device_text(c.device) or NONE, 60))
        before = _without_fix_line(control, UPSTREAM_TEST) if control else None
        out.append(
            f"| {backend_name(c.backend)} | {device} | {_code(_summary(patched, UPSTREAM_TEST))} "
            f"| {_code(ascii_text(before) if before else None)} |"
        )
    return out if len(out) > 2 else []


def kill_matrix_line(results: Results, target: str) -> Optional[str]:
    """ "N known-wrong fixes: K killed by test-opt alone (...)", from the first cell that ran
    them."""
    for c in results.cells_of(target):
        t = c.mutants
        if t and t.total and t.killed_by and UPSTREAM_TEST in t.killed_by:
            return tally_line(t.total, t.killed_by)
    return None


def additional_information(
    results: Results,
    results_sha256: str,
    target: str,
    commits: list,
    patch_names: list[str],
    toolchain: dict,
    repo: Optional[str],
    known_limits: tuple[limits.KnownLimit, ...] = (),
    finetune: tuple[finetune_results.FinetuneResults, ...] = (),
    issue_ref: Optional[str] = None,
    machine: str = "",
    related: list[str] | None = None,
    notes: list[str] | None = None,
    prior: tuple[str, ...] = (),
    shown: ShownRun = NOT_VERIFIED,
) -> list[str]:
    """Everything the tool puts under "Additional information", ASCII, only what the PR's own
    commands print. Visible: `Fixes #N` once the issue is recorded, the other PRs of the set
    (`related`), the backends tested in one line, test-opt's line with only the test commit (a
    crash: its signal and the case) and its passing line with the fix, the commands. Folded: the
    commands without the fix and test-opt's line per backend, the training evidence, `notes`
    (e.g. one neutral line on other work on the same code). `results_sha256` and `known_limits`
    stay in manifest.json. `shown`: the tests and the verification that ran them (its lines are
    the ones quoted)."""
    out: list[str] = []
    if issue_ref:
        out += [issue_ref, ""]
    if related:
        out += [*related, ""]
    tested = tested_line(results, target, toolchain, machine)
    if tested:
        out += [tested, ""]
    before, after = before_after(results, target, patch_names, shown.verified)
    if before:
        out += ["Without the fix (its test commit alone):", "", "```", *before, "```", ""]
    if after:
        out += ["With the fix:", "", "```", *after, "```", ""]
    fixed = _commands(results, target, patch_names, patch_names, prior, shown.tests)
    out += ["Reproduce:", "", "```sh", *fixed, "```"]
    bug = reproduce_bug(results, target, commits, patch_names, prior, shown.tests)
    every = before_fix_lines(results, target)
    folded = (["```sh", *bug, "```"] if bug else []) + (["", "```", *every, "```"] if every else [])
    if folded:
        out += _details("Without the fix", folded)
    table = backend_table(results, target)
    if table:
        out += _details(f"{UPSTREAM_TEST} per backend", table)
    for evidence in finetune:
        tuned = finetune_lines(evidence, "####")
        if not tuned:
            continue
        # the signed lines, the plot and 2-3 commands visible; the tables folded
        out += ["", *finetune_summary(evidence)]
        title = "Fine-tuning with llama-finetune, with and without the fix: the tables"
        if len(finetune) > 1:
            title += f" ({_model_words(evidence)})"
        out += _details(title, tuned)
    if notes:
        noted = publish.bounded_rows([inert(n) for n in notes], 20_000, "notes")
        out += _details("Other work on the same code", noted)
    # the run's records may name URLs: never their credentials
    return [redact(line) for line in out]


def visible_lines(text: str) -> list[str]:
    """The non-blank lines GitHub shows before anything is opened (a <details> block's summary
    line only)."""
    out, depth = [], 0
    for line in cover.visible(text).split("\n"):
        opens, closes = line.count("<details"), line.count("</details>")
        if depth == 0 and line.strip():
            out.append(line)
        depth = max(0, depth + opens - closes)
    return out


# ---------------------------------------------------------------- the two documents


def banner(draft_reasons: list[str], warnings: list[str]) -> list[str]:
    caution = ["> [!CAUTION]", "> DRAFT (ggml-patch readiness): not ready to submit:"]
    out: list[str] = []
    for head, items in (
        (caution, draft_reasons),
        (["> [!WARNING]", f"> {WARNING_TITLE}:"], warnings),
    ):
        if items:
            out += [*head, *(f"> - {inert(one_line(x))}" for x in items), ""]
    return out


def body(template: Optional[Template], cov: cover.Cover, data: list[str]) -> str:
    """PR_BODY.md without the banner: the template's sections filled from the cover (a fixed one
    as it is)."""
    if template is None:  # no template: the cover as written, the data after it
        return "\n".join([(cov.text or "").rstrip("\n"), "", *data]).lstrip("\n") + "\n"
    out = list(template.preamble) + ([""] if template.preamble else [])
    # the template's disclosure line gets the contributor's answer in place of its placeholder
    disclosure, answer = (
        template.disclosure and template.disclosure.text,
        cover.disclosure(cov, template).answer,
    )
    for s in template.sections:
        out += [f"## {s.heading}", ""]
        mine, data_here = cov.section(s.heading), bool(DATA_HEADING.match(s.heading) and data)
        if s.fixed:
            out += strip_blank(
                [
                    f"{_disclosure_prefix(ln)} {answer}" if answer and ln == disclosure else ln
                    for ln in s.lines
                ]
            )
        elif mine is not None and cover.visible(mine.text).strip():
            out += [mine.text]
        elif not data_here:
            out += strip_blank(s.lines)  # the template's placeholder, as the template has it
        if data_here:
            out += ([""] if out[-1] != "" else []) + data
        out.append("")
    if data and not any(DATA_HEADING.match(s.heading) for s in template.sections):
        out += ["<details><summary>ggml-patch data</summary>", "", *data, "", "</details>", ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ------------------------------------------------- the fine-tuning evidence (ggml-patch evidence)


def _cell_text(value: str) -> str:
    """A value for one table cell: ASCII, one line, inert (publish.cell)."""
    return publish.cell(ascii_text(" ".join(str(value).split())))


def finetune_summary(results: Optional[finetune_results.FinetuneResults]) -> list[str]:
    """The fine-tuning evidence visible: one signed line per case (direction and size), the
    plot's file name and the 2-3 commands that reproduce it with llama.cpp alone (the tables
    and every other command folded)."""
    if results is None or not results.runs:
        return []
    lines = finetune_results.signed_lines(results) or ["- no case with both builds"]
    head = "Fine-tuning (upstream llama-finetune, held-out eval loss, fixed vs unfixed build):"
    commands = finetune_results.reproduce_commands(results)
    shown = plot_name(results)
    out = [head, "", *lines, "", f"Plot: `{shown}` in the bundle (both curves per case)."]
    if commands:
        out += ["", "```sh", *commands, "```"]
    return [ascii_text(line) for line in out]


def _model_words(results: finetune_results.FinetuneResults) -> str:
    """Which models a record's runs are on, in a title's words (the name is the record's: inert)."""
    real = results.model.real
    return inert(real.name) if real else "tiny llama models"


def finetune_lines(results: Optional[finetune_results.FinetuneResults], level: str) -> list[str]:
    """results/evidence/finetune.json (validated) as data (finetune/results.py writes it), ASCII."""
    return [ascii_text(line) for line in finetune_results.pr_lines(results, level, _fine_cell)]


def _fine_cell(value: str) -> str:
    """A cell of the fine-tuning tables: its `code spans` kept, the rest inert."""
    return publish.cell_with_code(ascii_text(str(value)))
