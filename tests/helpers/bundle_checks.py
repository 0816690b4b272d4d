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


def _without_fix(recs: dict) -> str | None:
    """What test-opt shows with only the test commit, straight from results.json: its first FAIL
    line, or for a crash the control's line (signal and case)."""
    control = recs.get("control") or {}
    t = control.get("tests", {}).get(UPSTREAM)
    if not t:
        return None
    if t.get("failure_line"):
        return t["failure_line"]
    line = control.get("failure_line") or ""
    return line if t.get("outcome") == "crashed" and line.startswith(f"{UPSTREAM}: ") else None


def parsed_backends(body: str) -> dict[str, dict]:
    """The folded per-backend table: backend -> its row."""
    rows = _table(body, f"<summary>{UPSTREAM} per backend</summary>")
    return {r["backend"]: r for r in rows}


def expected_backends(results: Results, target: str) -> dict[str, tuple]:
    """backend -> (test-opt's line with the fix, its line without), from results.json."""
    data = results.to_json()
    out = {}
    names = {"cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal"}
    for cell in (c for c in data["cells"] if c["target"] == target):
        recs = _by_variant(data, cell["cell"])
        opt = recs.get("patched", {}).get("tests", {}).get(UPSTREAM)
        if not opt or cell["status"] in ("skipped", "build-only", "error"):
            continue
        out[names.get(cell["backend"], cell["backend"])] = (
            opt.get("summary_line"),
            _without_fix(recs),
        )
    return out


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
    start = "\nWithout the fix (its test commit alone):\n"
    shown = body.split(start, 1)[1] if start in body else ""
    table = f"<details><summary>{UPSTREAM} per backend</summary>"
    folded = body.split(table, 1)[1].split("</details>", 1)[0] if table in body else ""
    return shown.split("Reproduce:", 1)[0] + folded


def check_body_against_results(body: str, model: Results, target: str) -> None:
    """Every line of test-opt in the body is the one results.json holds, and the body carries
    nothing of the tool's own record (no digest, no snapshot commit, no gate line)."""
    expected = expected_backends(model, target)
    rows = parsed_backends(body) if expected else {}
    assert set(rows) == set(expected), (rows, expected)
    for backend, (with_fix, without) in expected.items():
        assert _value(rows[backend][f"{UPSTREAM} with the fix"]) == with_fix
        assert _value(rows[backend]["without the fix"]) == without
        if without:
            assert f"\n{without}\n" in body
    stray = numbers_in(evidence_section(body)) - numbers_of(model.to_json())
    assert not stray, f"numbers in PR_BODY.md's evidence that results.json does not hold: {stray}"
    data = model.to_json()
    for c in (c for c in data["cells"] if c["target"] == target):
        if c["source"].get("upstream_commit"):  # else the snapshot is the only base to name
            assert c["source"]["base_commit"] not in body  # the tool's snapshot: manifest.json's
    assert "sha256" not in body and GATE not in body
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
