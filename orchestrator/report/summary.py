"""Writing a run's results: results.json (the record), summary.md (for people) and junit.xml."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from .. import publish, untrusted
from ..finetune import section as evidence_section
from ..model.layout import UPSTREAM_TEST
from ..model.results import (
    COMPETING_PREFIX,
    MUTANT_PREFIX,
    Cell,
    CellStatus,
    Outcome,
    RecordStatus,
    Results,
    RowStatus,
    VariantRecord,
    Verdict,
    dump_results,
    results_of,
)
from ..redact import redact, redact_data
from ..verdicts.mutants import kill_line, tally_line
from ..verdicts.training import table_markdown
from .junit import junit_xml

_ICON = {
    CellStatus.PASSED: "✅",
    CellStatus.FAILED: "❌",
    CellStatus.ERROR: "💥",
    CellStatus.SKIPPED: "⏭️",
    CellStatus.BUILD_ONLY: "🔨",
}


def _redacted(text: Optional[str]) -> Optional[str]:
    return None if text is None else redact(text)


def write_results(results: Results, directory: Path) -> list[Path]:
    # no credential of a source URL and no GITHUB_TOKEN in any file written (the one redaction)
    results = results_of(redact_data(results.to_json()), ours=True)
    directory.mkdir(parents=True, exist_ok=True)
    json_path = dump_results(results, directory / "results.json")
    md_path = directory / "summary.md"
    # the fine-tuning evidence's section (`ggml-patch evidence`) survives a matrix run
    # only a regular file of ours is kept from
    old = untrusted.read_lenient(md_path, "summary", root=directory)
    # each entry replaced, never written through a symlink (untrusted.write_replacing)
    untrusted.write_replacing(md_path, evidence_section.keep(old, summary_markdown(results)))
    # logs are read only inside the results folder, and redacted like everything else written:
    # each tail before XML escapes it (an escaped secret is no longer what redaction finds)
    xml = junit_xml(results, lambda p: _redacted(log_tail(p, root=directory)))
    # for CI systems' test views
    untrusted.write_replacing(directory / "junit.xml", redact(xml))
    return [json_path, md_path]


def log_tail(path: str, lines: int = 30, root: Optional[Path] = None) -> Optional[str]:
    """A log's last lines for junit.xml; None unless a regular
    file inside `root` (a results folder's own)."""
    text = untrusted.tail_text(path, root)  # a build log can be megabytes: only its end is read
    return None if text is None else "\n".join(text.splitlines()[-lines:]) or None


def _test_cell(rec: Optional[VariantRecord], test: str) -> str:
    t = rec.test(test) if rec else None
    if rec is not None and rec.status == RecordStatus.BUILD_FAILED:
        return "build failed"
    if not t:
        return "—"
    if t.outcome == Outcome.SKIPPED:
        return "skipped (see Tests not run)"
    ok = sum(1 for r in t.rows if r.status in (RowStatus.OK, RowStatus.SKIPPED))
    counted = f" ({ok}/{len(t.rows)})" if t.rows else ""
    return f"{t.outcome}{counted}"


def summary_markdown(results: Results) -> str:
    cells = results.cells
    good = sum(1 for c in cells if c.status == CellStatus.PASSED)
    counts = []
    for st in (CellStatus.FAILED, CellStatus.ERROR, CellStatus.BUILD_ONLY, CellStatus.SKIPPED):
        n = sum(1 for c in cells if c.status == st)
        if n:
            counts.append(f"{n} {st}")
    others = ", ".join(counts)
    series = results.series
    tests = run_tests(results)
    out = [
        f"# ggml-patch matrix: {good}/{len(cells)} cells passed"
        + (f" ({others})" if others else ""),
        "",
        f"Series: {len(series.patches)} patches in the {series.layout} layout (sha256 "
        f"`{series.sha256[:16]}`), profile {publish.code(results.profile, 100)}, "
        f"exit code {results.exit_code}.",
        "",
        "| cell | status | "
        + "".join(f"with fix: {publish.text(t)} | " for t in tests)
        + "control (fix reverted) | failure line without the fix |",
        "|---|---|" + "---|" * len(tests) + "---|---|",
    ]
    for c in cells:
        patched = results.records_of(c.cell).get("patched")
        control = results.control_of(c.cell)
        line = control.failure_line if control else None
        verdict = (control.verdict if control else None) or "—"
        out.append(
            f"| {_c(c.cell)} | {_ICON.get(c.status, '')} {c.status} | "
            + "".join(f"{_test_cell(patched, t)} | " for t in tests)
            + f"{verdict} | {_k(line)} |"
        )
    why = [f"- **{publish.text(c.cell)}**: {c.status} — {publish.text(c.reason)}" for c in cells]
    out += ["", "## Why", "", *publish.bounded_rows(why, 200_000, "cells")]
    out += _not_run_section(results)
    out += _topics_section(results)
    out += _controls_section(results)
    out += _device_section(results)
    out += _attribution_section(cells)
    out += _mutants_section(results)
    out += _competing_section(results)
    out += _training_section(cells)
    sources = []
    for c in cells:
        s = c.source
        description = s.description if s else "—"
        base = (s.base_commit if s else None) or ""
        upstream = (s.upstream_commit if s else None) or "—"
        head = c.patched_commit or ""
        sources.append(
            f"| {_c(c.cell)} | {_c(description)} | {_k(base[:12])} | {_k(upstream[:12])} | "
            f"{_k(head[:12])} |"
        )
    out += _table(
        "## Sources", "| cell | source | base commit | upstream commit | patched commit |", sources
    )
    keys = _timing_keys(cells)
    timings = [
        f"| {_c(c.cell)} | " + " | ".join(str(c.timings.get(k, "—")) for k in keys) + " |"
        for c in cells
    ]
    out += _table("## Timings (s)", "| cell | " + " | ".join(keys) + " |", timings)
    return publish.bounded("\n".join(out) + "\n", where="results.json")


def _c(value: object) -> str:
    """A value from the results in a table cell: inert (publish.cell)."""
    return publish.cell(value, 400) if value not in (None, "") else "—"


def _k(value: object) -> str:
    """A value from the results shown literally in a table cell (a code span)."""
    return publish.code(value, 400, in_table=True) if value else "—"


def _table(title: str, header: str, rows: list[str], intro: str = "") -> list[str]:
    return [
        "",
        title,
        "",
        *([intro, ""] if intro else []),
        header,
        "|" + "---|" * (header.count("|") - 1),
        *rows,
    ]


_TIMINGS = ("fetch", "apply", "configure", "build_patched")


def _timing_keys(cells: list[Cell]) -> list[str]:
    """The timings shown: the steps', each topic's control, the known-wrong fixes', the total."""
    controls = dict.fromkeys(k for c in cells for k in c.timings if k.startswith("control_"))
    return [*_TIMINGS, *controls, "mutants", "total"]


def run_tests(results: Results) -> list[str]:
    """The tests the run declared (each once, in queue order), else those its records name."""
    declared = results.series.tests()
    if declared:
        return declared
    names = (n for r in results.records if r.variant == "patched" for n in r.tests)
    return list(dict.fromkeys(names))


def _tally(rec: Optional[VariantRecord], test: str, device: str) -> str:
    """One test on one device in one variant: passed/total of its rows ("29/29", "1/29",
    "27/27 (2 skipped)"), "not run" for a test the backend skips, what stopped it on that device."""
    t = rec.test(test) if rec else None
    if rec is not None and rec.status == RecordStatus.BUILD_FAILED:
        return "build failed"
    if not t:
        return "—"
    if t.outcome == Outcome.SKIPPED:
        return "not run"
    rows = [r for r in t.rows if r.device == device]
    ok = sum(1 for r in rows if r.status == RowStatus.OK)
    skipped = sum(1 for r in rows if r.status == RowStatus.SKIPPED)
    text = ""
    if rows:
        text = f"{ok}/{len(rows) - skipped}"
        if skipped:
            text += f" ({skipped} skipped)"
    if t.stopped_on == device:
        signal = f" ({t.signal})" if t.signal else ""
        here = f"**{t.outcome}{signal} here**"
        text = f"{text}, {here}" if text else here
    return text or "—"


def _first_fail(rec: Optional[VariantRecord], test: str, device: str) -> Optional[str]:
    """The test's first FAIL line on that device (the gate's own
    line; test-opt's as "test-opt: sgd FAIL")."""
    t = rec.test(test) if rec else None
    if not t:
        return None
    fails = (r for r in t.rows if r.device == device and r.status == RowStatus.FAIL)
    fail = next(fails, None)
    if not fail:
        return None
    return fail.line or f"{test}: {fail.key} FAIL"


def _device_section(results: Results) -> list[str]:
    """Per device and variant, so a Vulkan cell shows the Vulkan device's own results."""
    rows, tests = [], run_tests(results)
    for c in results.cells:
        recs = results.records_of(c.cell)
        ran = [
            v for v in recs.values() if not v.variant.startswith((MUTANT_PREFIX, COMPETING_PREFIX))
        ]
        # every device a test printed a row for or stopped on, in the order met
        met: list[Optional[str]] = []
        for done in ran:
            for t in done.tests.values():
                met += [r.device for r in t.rows]
                met.append(t.stopped_on)
        for dev in dict.fromkeys(d for d in met if d):
            pair = ((recs.get("patched"), "with fix"), (results.control_of(c.cell), "without fix"))
            for rec, label in pair:
                if rec is None:
                    continue
                fails = [f for f in (_first_fail(rec, t, dev) for t in tests) if f]
                rows.append(
                    f"| {_c(c.cell)} | {_c(dev)} | {label} | "
                    + "".join(f"{_tally(rec, t, dev)} | " for t in tests)
                    + f"{'; '.join(_k(f) for f in fails) or '—'} |"
                )
    header = (
        "| cell | device | variant | "
        + "".join(f"{publish.text(t)} | " for t in tests)
        + "first FAIL line |"
    )
    intro = (
        "Rows passed/total per device (skipped rows apart); the first FAIL "
        "line of each test. Every row: results.json."
    )
    return _table("## Per-device results", header, rows, intro) if rows else []


def _not_run_section(results: Results) -> list[str]:
    rows = []
    for c in results.cells:
        for rec in results.records_of(c.cell).values():
            if rec.variant != "patched":
                continue
            for name, t in rec.tests.items():
                if t.outcome == Outcome.SKIPPED:
                    rows.append(f"| {_c(c.cell)} | {_c(name)} | {_c(t.skipped)} |")
    intro = (
        "Not run in any variant (with the fix, without it, with a mutant), and not built. Without "
        "test-opt the control's verdict rests on the gate alone, and its reason says so."
    )
    return _table("## Tests not run", "| cell | test | why |", rows, intro) if rows else []


def _attribution_section(cells: list[Cell]) -> list[str]:
    rows = [
        f"| {_c(c.cell)} | {_c(e.test)} | {_c(e.device)} | "
        f"{_c(e.patched)} | {_c(e.control)} | **{_c(e.label)}** |"
        for c in cells
        for e in c.attribution or []
    ]
    header = "| cell | test | device | with the fix | without the fix | attribution |"
    intro = (
        "Each test failing with the fix, compared with the same "
        "test and device without it (the control)."
    )
    return _table("## Failure attribution", header, rows, intro) if rows else []


PROVEN, CANNOT_JUDGE, FAILED, NOT_RUN = "proven", "cannot be judged", "failed", "not run"


def topic_outcome(results: Results, cell: Cell, topic: str) -> tuple[str, str]:
    """Where `topic` stands on `cell`: proven (the fix passes its tests and its control was
    killed by them), cannot be judged (the reason: its tests cannot see the bug on this device),
    failed (the fix fails a test, or its control survived or was invalid), not run (why)."""
    patched = results.records_of(cell.cell).get("patched")
    control = results.control_of(cell.cell, topic)
    if cell.topics is not None and topic not in cell.topics:
        return NOT_RUN, "not carried on this target (retired there)"
    if patched is not None and patched.status == RecordStatus.FAILED:
        return FAILED, "a test fails with the fix"
    if control is None:
        return NOT_RUN, cell.reason or str(cell.status)
    if control.status == RecordStatus.SKIPPED:
        return CANNOT_JUDGE, control.verdict_reason
    if control.verdict == Verdict.KILLED:
        return PROVEN, control.verdict_reason
    if control.verdict in (Verdict.SURVIVED, Verdict.INVALID):
        return FAILED, f"its control {control.verdict}: {control.verdict_reason}"
    return NOT_RUN, control.verdict_reason or str(control.status)


def _topics_section(results: Results) -> list[str]:
    """Per topic and cell (target/backend): proven, cannot be judged (why), failed (why) or not
    run; never passed on a control that was not killed."""
    topics, cells = results.series.topics or [], results.cells
    if not topics or not cells:
        return []
    counts: dict[str, int] = {}
    rows = []
    for topic in topics:
        shown = []
        for c in cells:
            word, why = topic_outcome(results, c, topic)
            counts[word] = counts.get(word, 0) + 1
            shown.append(f"**{word}**" + (f": {_c(why)}" if why and word != PROVEN else ""))
        rows.append(f"| {_c(topic)} | " + " | ".join(shown) + " |")
    header = "| topic | " + " | ".join(_c(c.cell) for c in cells) + " |"
    order = (PROVEN, CANNOT_JUDGE, FAILED, NOT_RUN)
    intro = (
        "A topic is proven on a cell only where its fix passes its own tests and its control "
        "(its source hunks reverted) fails them: "
        + ", ".join(f"{counts.get(w, 0)} {w}" for w in order)
        + "."
    )
    return _table("## Topics per backend", header, rows, intro)


def _controls_section(results: Results) -> list[str]:
    """A queue's controls, one row per topic: the whole queue with only that topic's source hunks
    reverted, judged by its own cases."""
    rows = []
    for c in results.cells:
        for r in results.controls_of(c.cell):
            rows.append(
                f"| {_c(c.cell)} | {_c(r.topic)} | **{r.verdict or r.status}** | "
                f"{_c(r.verdict_reason)} | {_k(r.failure_line)} |"
            )
    if not rows:
        return []
    header = "| cell | topic | control | why | first FAIL line |"
    intro = "Each topic's source hunks reverted on the whole queue, its tests kept."
    return _table("## Controls per topic", header, rows, intro)


def _mutants_section(results: Results) -> list[str]:
    """Each known-wrong fix per cell, each test judging it separately: which
    test kills it (test-opt's new cases are what upstream keeps), and the first
    FAIL line (or, when it was not killed, why)."""
    tallies, table = [], []
    tests = run_tests(results)
    for c in results.cells:
        recs = results.mutants_of(c.cell)
        if recs:
            by = (c.mutants.killed_by if c.mutants else None) or {}
            line = tally_line(c.mutants.total, by) if c.mutants and UPSTREAM_TEST in by else ""
            tallies.append(
                f"- **{publish.text(c.cell)}**: " + (line or kill_line([r.verdict for r in recs]))
            )
        table += [_mutant_row(c, r, tests) for r in recs]
    header = (
        "| cell | mutant | verdict | "
        + "".join(f"{publish.text(t)} | " for t in tests)
        + "first FAIL line (or why) |"
    )
    return (
        _table("## Known-wrong fixes (mutants)", header, table, "\n".join(tallies)) if table else []
    )


def _mutant_row(c: Cell, r: VariantRecord, tests: list[str]) -> str:
    """A known-wrong fix's row: its verdict, each test's kill, the first FAIL line or why not."""
    info, kills = r.mutant, r.kills or {}
    if r.verdict == Verdict.KILLED and r.failure_line:
        why = _k(r.failure_line)
    else:
        why = _c(r.verdict_reason or (info and info.skipped) or "")
    return (
        f"| {_c(c.cell)} | {_c(info.name if info else r.variant)} | "
        f"**{_c(r.verdict or r.status)}** | "
        + "".join(f"{_c(kills.get(t, '—'))} | " for t in tests)
        + f"{why} |"
    )


def _competing_section(results: Results) -> list[str]:
    """Each competing fix per cell: its verdict on the unfixed tree, and where it comes from."""
    out = []
    for c in results.cells:
        for r in results.competing_of(c.cell):
            info, j = r.competing, r.judged
            verdict = j.verdict if j else r.status
            why = "—"
            if j and j.failure_line:
                why = f"{_c(j.failing_test)}: {_k(j.failure_line)}"
            elif j:
                why = _c(j.reason)
            if info and info.skipped:
                why = _c(info.skipped)
            src = publish.link(info.date, info.url, in_table=True) if info else "—"
            out.append(
                f"| {_c(c.cell)} | {_c(info.name if info else r.variant)} | {src} | "
                f"**{_c(verdict)}** | {why} |"
            )
    header = "| cell | fix | source | verdict | first failing line (or why) |"
    return (
        _table("## Competing fixes (proposed elsewhere, applied to the unfixed tree)", header, out)
        if out
        else []
    )


def _training_section(cells: list[Cell]) -> list[str]:
    verdict = {True: "as the bug predicts", False: "NOT as the bug predicts", None: "undecided"}
    out = []
    for c in cells:
        if t := c.training:
            table = table_markdown(t.patched, t.control).rstrip("\n")
            heading = f"### {publish.text(c.cell)}: {verdict[t.diverges_as_predicted]}"
            out += ["", heading, "", table]
    return (["", "## Training: loss per epoch with and without the fix"] + out) if out else []
