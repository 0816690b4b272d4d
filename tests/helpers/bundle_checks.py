"""PR_BODY.md parsed back and checked against results.json, independently of the code under test:
the checks read the results as results.json holds them
(JSON data), not through the model's readers."""

import html
import re
from typing import Any, Callable

from orchestrator.model.results import Results

from .samples import GATE, UPSTREAM


def _cells(line: str) -> list[str]:
    """A table row's cells as a reader sees them: Markdown's backslash escapes and HTML entities
    (orchestrator/publish.py writes data that way) undone."""
    cells = re.split(r"(?<!\\)\|", line.strip().removeprefix("|").removesuffix("|"))
    return [html.unescape(re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", c)).strip() for c in cells]


def _table(body: str, heading: str) -> list[dict]:
    section = body.split(heading, 1)[1].split("</details>", 1)[0].split("\n#", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = _cells(lines[0])
    assert set(lines[1].replace("|", "")) == {"-"}
    return [dict(zip(header, _cells(ln), strict=True)) for ln in lines[2:]]


def _value(text: str):
    if text == "-":
        return None
    return text.strip("`")


def _number(row: dict, column: str, kind: Callable[[str], Any]) -> Any:
    """The column's value as `kind`, or None for a "-" cell."""
    if _value(row[column]) is None:
        return None
    return kind(row[column])


def parsed_outcomes(body: str) -> list[dict]:
    rows = []
    for r in _table(body, "<summary>Per-case results (backend x device x test x case)</summary>"):
        rows.append(
            {
                "backend": r["backend"],
                "device": r["device"],
                "test": _value(r["test"]),
                "case": _value(r["case"]),
                "patched": r["with the fix"],
                "control": _value(r["fix reverted"]),
                "step": _number(r, "first wrong step", int),
                "w": _number(r, "w", float),
                "expected": _number(r, "expected", float),
            }
        )
    return rows


def _row_key(row: dict) -> str:
    """What a row is about on its device: test-opt's optimizer, the gate's case (29 of them, several
    sharing an opt_period; older results name only the opt_period)."""
    return row.get("optimizer") or row.get("case") or f"opt_period={row.get('opt_period')}"


def expected_outcomes(results: Results, target: str) -> list[dict]:
    """Straight from results.json, independently of the code under test."""
    results = results.to_json()
    rows = []
    for cell in (c for c in results["cells"] if c["target"] == target):
        recs = _by_variant(results, cell["cell"])
        if "patched" not in recs:
            continue
        for test in (UPSTREAM, GATE):
            # none in a build-only cell
            for row in recs["patched"]["tests"].get(test, {}).get("rows", []):
                ctl = next(
                    x
                    for x in recs["control"]["tests"][test]["rows"]
                    if x["device"] == row["device"] and _row_key(x) == _row_key(row)
                )
                rows.append(
                    {
                        "backend": cell["backend"],
                        "device": row["device"],
                        "test": test,
                        "case": _row_key(row),
                        "patched": row["status"],
                        "control": ctl["status"],
                        "step": ctl.get("step"),
                        "w": ctl.get("actual"),
                        "expected": ctl.get("expected"),
                    }
                )
    return rows


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


def numbers_in(text: str) -> set[float]:
    return {float(m) for m in _NUMBER.findall(text)}


def numbers_of(results) -> set[float]:
    """Every number in results.json: its values, and the numbers inside its strings."""
    found = set()
    if isinstance(results, bool) or results is None:
        return found
    if isinstance(results, (int, float)):
        return {float(results)}
    if isinstance(results, str):
        return numbers_in(results)
    items = results.values() if isinstance(results, dict) else results
    for v in items:
        found |= numbers_of(v)
    return found


def evidence_section(body: str) -> str:
    """The run's data: the visible lines before and after the fix (up to the reproduce commands),
    then the folded per-backend table."""
    start = "\nWithout the fix:\n"
    shown = body.split(start, 1)[1] if start in body else ""
    table = "<details><summary>Results per backend and device</summary>"
    folded = body.split(table, 1)[1].split("</details>", 1)[0] if table in body else ""
    return shown.split("Reproduce:", 1)[0] + folded


def check_body_against_results(body: str, model: Results, target: str) -> None:
    assert parsed_outcomes(body) == expected_outcomes(model, target)
    results = model.to_json()
    table = "| cell | device |" + body.split("\n| cell | device |", 1)[1].split("\n\n", 1)[0]
    lines = table.splitlines()
    header = _cells(lines[0])
    rows = [dict(zip(header, _cells(ln), strict=True)) for ln in lines[2:]]
    cells = {row["cell"]: row for row in rows}
    for c in (c for c in results["cells"] if c["target"] == target):
        row = cells[c["cell"]]
        recs = _by_variant(results, c["cell"])
        verdict = recs.get("control", {}).get("verdict")
        ctl = _value(row["control (fix reverted)"])
        assert (ctl is None and verdict is None) or (ctl or "").split(" ")[0] == (
            verdict or c["status"] + ":"
        )
        assert _value(row["test-opt (with the new cases)"]) == recs.get("patched", {}).get(
            "tests", {}
        ).get(UPSTREAM, {}).get("summary_line")
        assert _value(row["gate (test-opt-dynamic-accum)"]) == recs.get("patched", {}).get(
            "tests", {}
        ).get(GATE, {}).get("summary_line")
        control = recs.get("control")
        if control and control.get("failure_line"):
            assert f"\n{control['failure_line']}\n" in body
    stray = numbers_in(evidence_section(body)) - numbers_of(results)
    assert not stray, f"numbers in PR_BODY.md's evidence that results.json does not hold: {stray}"
    sha = next(c for c in results["cells"] if c["target"] == target)["source"]["base_commit"]
    assert f"`{sha}`" in body
    check_training_table(body, model, target)


def check_training_table(body: str, model: Results, target: str) -> None:
    """The toy loss table stays in results.json and summary.md, out of the PR body."""
    assert "Training: loss per epoch" not in body


def _by_variant(results: dict, cell: str) -> dict:
    """The cell's records by variant; "control": its first control (a bundle's view holds only
    its topic's)."""
    recs = {r["variant"]: r for r in results["records"] if r["cell"] == cell}
    controls = [r for v, r in recs.items() if v.startswith("control:")]
    if controls:
        recs["control"] = controls[0]
    return recs
