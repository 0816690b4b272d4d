"""PR_BODY.md and ISSUE.md. The body is the target's template: its headings in order, the
contributor's own sections from patches/cover.md, the template's fixed lines (Requirements) as
they are with the disclosure line answered from cover.md, and, under "Additional information",
only data: the run's evidence tables, the gate's failure line, the base commits, the commands
that reproduce it, the toolchain. ISSUE.md is the data for the issue opened first: the
reproduction on the pinned base. The tool writes no prose; everything it writes is ASCII. Pure."""

from __future__ import annotations

import re
import unicodedata
from typing import Optional

from ..finetune import results as ft
from ..finetune.results import FinetuneResults
from ..patchset.layout import GATE_TEST, UPSTREAM_TEST
from ..redact import redact
from ..report.model import Provenance, Results
from ..verdicts.known_limits import FILE as _LIMITS_FILE
from ..verdicts.known_limits import KnownLimit
from ..verdicts.known_limits import table as limits_table
from ..verdicts.training import table_markdown
from . import cover as C
from . import views as B
from .policy import Template, _disclosure_prefix

DATA_HEADING = re.compile(r"^additional information$", re.I)
_ASCII = {
    "\u2014": "-",
    "\u2013": "-",
    "\u2212": "-",
    "\u2192": "->",
    "\u2190": "<-",
    "\u00d7": "x",
    "\u2026": "...",
    "\u2018": "'",
    "\u2019": "'",
    "\u201c": '"',
    "\u201d": '"',
    "\u2264": "<=",
    "\u2265": ">=",
    "\u2248": "~",
    "\u00a0": " ",
    "\u00b5": "u",
}
NONE = "-"
KNOWN_LIMITS_PATH = f"patches/{_LIMITS_FILE}"


def ascii_text(text: str) -> str:
    """The tool's own data in ASCII: the usual typographic characters by their ASCII equivalents
    (AGENTS.md's list), accents dropped, anything else as a visible \\uXXXX escape."""
    out = []
    for ch in text:
        if ord(ch) < 128:
            out.append(ch)
        elif ch in _ASCII:
            out.append(_ASCII[ch])
        else:
            plain = unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode()
            out.append(plain or f"\\u{ord(ch):04x}")
    return "".join(out)


# ---------------------------------------------------------------- data from results.json


def _v(x) -> str:
    return NONE if x is None or x == "" else ascii_text(B.number_text(x) if isinstance(x, (int, float)) else str(x))


def _code(x) -> str:
    return f"`{ascii_text(str(x))}`" if x else NONE


def _summary(rec, test: str) -> Optional[str]:
    t = rec.test(test) if rec else None
    if t and t.skipped is not None:
        return "skipped"  # the backend does not run it: the reason is in the notes below the table
    return t.summary_line if t else None


def cell_table(results: Results, target: str) -> list[str]:
    out = ["| " + " | ".join(B.CELL_COLUMNS) + " |", "|" + "---|" * len(B.CELL_COLUMNS)]
    for c in results.cells_of(target):
        recs = results.records_of(c.cell)
        patched, control = recs.get("patched"), recs.get("control")
        vals = [
            _v(c.cell),
            _v(c.backend),
            _v(str(c.status)),
            _v(control.verdict if control else None),
            _code(_summary(patched, UPSTREAM_TEST)),
            _code(_summary(patched, GATE_TEST)),
            _code(_summary(control, GATE_TEST)),
            _v(c.timings.get("build_patched")),
            _v(c.timings.get("build_control")),
        ]
        out.append("| " + " | ".join(vals) + " |")
    return out


def outcome_table(results: Results, target: str) -> list[str]:
    out = ["| " + " | ".join(B.OUTCOME_COLUMNS) + " |", "|" + "---|" * len(B.OUTCOME_COLUMNS)]
    for r in B.outcome_rows(results, target):
        vals = [
            _v(r["backend"]),
            _v(r["device"]),
            _code(r["test"]),
            _v(r["optimizer"]),
            _v(r["opt_period"]),
            _v(r["with_fix"]),
            _v(r["reverted"]),
            _v(r["step"]),
            _v(r["w"]),
            _v(r["expected"]),
        ]
        out.append("| " + " | ".join(vals) + " |")
    return out


def _controls(results: Results, target: str) -> list:
    return [(c, results.records_of(c.cell).get("control")) for c in results.cells_of(target)]


def failure_lines(results: Results, target: str) -> list[str]:
    """The gate's own failure line with the fix reverted, once per distinct line, verbatim."""
    return list(
        dict.fromkeys(ascii_text(r.failure_line) for _, r in _controls(results, target) if r and r.failure_line)
    )


def training_lines(results: Results, target: str, level: str) -> list[str]:
    trained = B.training_cell(results, target)
    if not trained or not trained.training:
        return []
    t = trained.training
    verdict = {True: "yes", False: "no", None: "too few epochs"}[t.diverges_as_predicted]
    return [
        f"{level} Training: loss per epoch with and without the fix ({ascii_text(trained.cell)})",
        "",
        f"`native_tests/train-opt-dynamic.cpp`, per-step graphs, SGD; diverges as predicted without the fix: {verdict}",
        "",
        ascii_text(table_markdown(t.with_fix, t.without_fix).rstrip("\n")),
    ]


def _source(results: Results, target: str) -> Provenance:
    return next((c.source for c in results.cells_of(target) if c.source), None) or Provenance(kind="", description=NONE)


def _base(results: Results, target: str) -> str:
    source = _source(results, target)
    return source.upstream_commit or source.base_commit or NONE


def base_rows(results: Results, target: str, repo: Optional[str]) -> list[str]:
    source = _source(results, target)
    upstream = source.upstream_commit
    patched = next((c.patched_commit for c in results.cells_of(target) if c.patched_commit), None)
    sdist = f", sdist sha256 `{source.sdist_sha256}`" if source.sdist_sha256 else ""
    where = repo or source.url or "upstream"
    return [
        "| | commit |",
        "|---|---|",
        f"| {ascii_text(where)} | `{upstream}` |"
        if upstream
        else f"| {ascii_text(where)} | unknown: the source carries no git metadata |",
        f"| ggml-patch snapshot of {ascii_text(source.description)}{sdist} | `{source.base_commit or NONE}` |",
        f"| the snapshot with this series applied | `{patched or NONE}` |",
    ]


def _build_commands(layout: str, targets: tuple[str, ...]) -> list[str]:
    option = "GGML_BUILD_TESTS" if layout == "ggml" else "LLAMA_BUILD_TESTS"
    return [
        f"cmake -B build -D{option}=ON",
        f"cmake --build build --target {' '.join(targets)}",
        *[f"./build/bin/{t}" for t in targets],
    ]


def reproduce_fixed(results: Results, target: str, patch_names: list[str], layout: str) -> list[str]:
    """The series on the base, the two tests built and run: what the cells did with the fix."""
    return [
        f"git checkout --detach {_base(results, target)}",
        f"git am {' '.join(patch_names)}",
        *_build_commands(layout, (UPSTREAM_TEST, GATE_TEST)),
    ]


def reproduce_bug(
    results: Results, target: str, commits: list, patch_names: list[str], layout: str
) -> Optional[list[str]]:
    """Only the test commits on the base, the gate built and run: it fails with the line above.
    None when no commit of the series is only tests (the test cannot go in without the fix)."""
    tests = [name for c, name in zip(commits, patch_names, strict=True) if c.is_test]
    if not tests:
        return None
    return [
        f"git checkout --detach {_base(results, target)}",
        f"git am {' '.join(tests)}",
        *_build_commands(layout, (GATE_TEST,)),
    ]


def evidence(
    results: Results,
    results_sha256: str,
    target: str,
    commits: list,
    patch_names: list[str],
    toolchain: dict,
    repo: Optional[str],
    known_limits: tuple[KnownLimit, ...] = (),
    finetune: Optional[FinetuneResults] = None,
) -> list[str]:
    """Everything the tool puts under "Additional information": data only, ASCII. `known_limits`:
    the contributor's patches/known-limits.yaml (what the series leaves as it is), as a table."""
    cells = results.cells_of(target)
    layout = cells[0].layout if cells else ""
    out = [
        "### Evidence (ggml-patch results.json)",
        "",
        "| | |",
        "|---|---|",
        f"| results.json sha256 | `{results_sha256}` |",
        f"| run started | {_v(results.started_at)} |",
        f"| profile | {_v(results.profile)} |",
        f"| series sha256 | `{results.series.sha256}` |",
        "",
        "#### Cells",
        "",
    ]
    out += cell_table(results, target)
    notes = [
        f"- {ascii_text(c.cell)} device: {ascii_text(B.device_text(c.device))}"
        for c in cells
        if B.device_text(c.device)
    ]
    notes += [
        f"- {ascii_text(c.cell)} {c.status}: {ascii_text(B.one_line(c.reason))}" for c in cells if c.status in B.NOT_RUN
    ]
    notes += [
        f"- {ascii_text(cell)}: {ascii_text(test)} not run on this backend: {ascii_text(B.one_line(why))}"
        for cell, test, why in B.skipped_tests(results, target)
    ]
    if notes:
        out += [""] + notes
    out += ["", "#### Outcomes: backend x device x optimizer", ""]
    out += outcome_table(results, target)
    out += ["", "#### Negative control: the gate with the fix reverted", ""]
    for c, control in _controls(results, target):
        if not control:
            continue
        gate = control.test(GATE_TEST)
        reverted = ", ".join(f"`{ascii_text(p)}`" for p in control.reverted or []) or NONE
        out.append(
            f"- {ascii_text(c.cell)}: reverted {reverted}; verdict {_v(control.verdict)}; "
            f"{GATE_TEST} exit code {_v(gate.exit_code if gate else None)}; "
            f"{UPSTREAM_TEST} {_v(control.outcome(UPSTREAM_TEST))}"
        )
    lines = failure_lines(results, target)
    if lines:
        out += ["", "Gate failure line, fix reverted:", "", "```", *lines, "```"]
    training = training_lines(results, target, "####")
    if training:
        out += [""] + training
    tuned = finetune_lines(finetune, "####")
    if tuned:
        out += [""] + tuned
    others = [c for c in results.cells if c.target != target]
    if others:
        out += ["", "#### Other targets in the same run", ""]
        for c in others:
            control = results.records_of(c.cell).get("control")
            verdict = control.verdict if control else None
            out.append(
                f"- {ascii_text(c.cell)} ({ascii_text(c.layout or NONE)} layout): {c.status}"
                + (f", control {verdict}" if verdict else "")
            )
    if known_limits:
        out += ["", f"#### Known limits, not changed by this series ({KNOWN_LIMITS_PATH})", ""]
        out += [ascii_text(line) for line in limits_table(known_limits)]
    out += ["", "#### Base commits", ""] + base_rows(results, target, repo)
    out += ["", "#### Reproduce", "", "```sh", *reproduce_fixed(results, target, patch_names, layout), "```"]
    bug = reproduce_bug(results, target, commits, patch_names, layout)
    if bug:
        out += ["", "Without the fix (the gate fails with the line above, exit code 1):", "", "```sh", *bug, "```"]
    out += ["", "#### Toolchain", ""]
    out += [f"- {ascii_text(name)}: {ascii_text(str(value))}" for name, value in B.toolchain_lines(toolchain)]
    return [redact(line) for line in out]  # the run's records may name URLs: never their credentials


# ---------------------------------------------------------------- the two documents


def banner(draft_reasons: list[str], warnings: list[str]) -> list[str]:
    out = []
    if draft_reasons:
        out += ["> [!CAUTION]", "> DRAFT (ggml-patch readiness): not ready to submit:"]
        out += [f"> - {ascii_text(B.one_line(r))}" for r in draft_reasons]
        out.append("")
    if warnings:
        out += ["> [!WARNING]", f"> {B.WARNING_TITLE}:"]
        out += [f"> - {ascii_text(B.one_line(w))}" for w in warnings]
        out.append("")
    return out


def _answered(line: str, cov: C.Cover, template: Template) -> str:
    """The template's disclosure line with the contributor's answer in place of its placeholder."""
    d = C.disclosure(cov, template)
    if not d.answer:
        return line
    return f"{_disclosure_prefix(line)} {d.answer}"


def body(template: Optional[Template], cov: C.Cover, data: list[str]) -> str:
    """PR_BODY.md without the banner: the template's sections in order, each filled from the cover
    or, for a fixed section, the template's own lines; the data under "Additional information"."""
    if template is None:  # no template: the cover as written, the data after it
        return "\n".join([(cov.text or "").rstrip("\n"), "", *data]).lstrip("\n") + "\n"
    out = list(template.preamble) + ([""] if template.preamble else [])
    placed = False
    for s in template.sections:
        out += [f"## {s.heading}", ""]
        mine = cov.section(s.heading)
        if s.fixed:
            lines = [
                (_answered(ln, cov, template) if template.disclosure and ln == template.disclosure.text else ln)
                for ln in s.lines
            ]
            out += _strip_blank(lines)
        elif mine is not None and C.visible(mine.text).strip():
            out += [mine.text]
        elif not (DATA_HEADING.match(s.heading) and data):
            out += _strip_blank(list(s.lines))  # the template's placeholder, as the template has it
        if DATA_HEADING.match(s.heading) and data:
            out += ([""] if out[-1] != "" else []) + data
            placed = True
        out.append("")
    if data and not placed:
        out += ["<details><summary>ggml-patch data</summary>", "", *data, "", "</details>", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _strip_blank(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def issue(
    results: Results,
    target: str,
    commits: list,
    patch_names: list[str],
    repo: Optional[str],
    finetune: Optional[FinetuneResults] = None,
) -> str:
    """ISSUE.md: the reproduction on the pinned base (commands, the gate's failure line, the
    training table), nothing else."""
    cells = results.cells_of(target)
    layout = cells[0].layout if cells else ""
    out = ["## Reproduction", ""] + base_rows(results, target, repo)[:-1]
    bug = reproduce_bug(results, target, commits, patch_names, layout)
    if bug:
        out += ["", "```sh", *bug, "```"]
    lines = failure_lines(results, target)
    if lines:
        codes = sorted(
            {
                str(gate.exit_code)
                for _, r in _controls(results, target)
                if r
                for gate in [r.test(GATE_TEST)]
                if gate and gate.exit_code is not None
            }
        )
        out += [
            "",
            f"## {GATE_TEST} output on the base (exit code {', '.join(codes) or NONE})",
            "",
            "```",
            *lines,
            "```",
        ]
    training = training_lines(results, target, "##")
    if training:
        out += [""] + training
    tuned = finetune_lines(finetune, "##")
    if tuned:
        out += [""] + tuned
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- the fine-tuning evidence (ggml-patch evidence)


def _cell_text(value: str) -> str:
    """A value for one table cell: ASCII, one line, no column separator."""
    return ascii_text(" ".join(str(value).split())).replace("|", "/")


def finetune_lines(results: Optional[FinetuneResults], level: str) -> list[str]:
    """results/evidence/finetune.json (validated) as data (finetune/results.py writes it), ASCII."""
    return [ascii_text(line) for line in ft.pr_lines(results, level, _cell_text)]
