"""PR_BODY.md parsed back and checked against results.json, independently of the code under test:
the checks read the results as results.json holds them (JSON data), not through the model's readers."""
import re

from orchestrator.report.model import Results

from .samples import GATE, UPSTREAM


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _table(body: str, heading: str) -> list[dict]:
    section = body.split(heading, 1)[1].split("\n#", 1)[0]
    lines = [ln for ln in section.splitlines() if ln.startswith("|")]
    header = _cells(lines[0])
    assert set(lines[1].replace("|", "")) == {"-"}
    return [dict(zip(header, _cells(ln))) for ln in lines[2:]]


def _value(text: str):
    if text == "-":
        return None
    return text.strip("`")


def parsed_outcomes(body: str) -> list[dict]:
    rows = []
    for r in _table(body, "#### Outcomes: backend x device x optimizer"):
        num = lambda k, f: None if _value(r[k]) is None else f(r[k])  # noqa: E731
        rows.append({"backend": r["backend"], "device": r["device"], "test": _value(r["test"]),
                     "optimizer": _value(r["optimizer"]), "opt_period": num("opt_period", int),
                     "with_fix": r["with the fix"], "reverted": _value(r["fix reverted"]),
                     "step": num("first wrong step", int), "w": num("w", float), "expected": num("expected w", float)})
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
        recs = {r["variant"]: r for r in results["records"] if r["cell"] == cell["cell"]}
        if "patched" not in recs:
            continue
        for test in (UPSTREAM, GATE):
            for row in recs["patched"]["tests"].get(test, {}).get("rows", []):  # none in a build-only cell
                ctl = next(x for x in recs["control"]["tests"][test]["rows"]
                           if x["device"] == row["device"] and _row_key(x) == _row_key(row))
                rows.append({"backend": cell["backend"], "device": row["device"], "test": test,
                             "optimizer": row.get("optimizer"), "opt_period": row.get("opt_period"),
                             "with_fix": row["status"], "reverted": ctl["status"], "step": ctl.get("step"),
                             "w": ctl.get("actual"), "expected": ctl.get("expected")})
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
    """The run's data, up to the known limits (the contributor's patches/known-limits.yaml) or the base
    commits (after them: commands and tool versions, not results)."""
    data = body.split("### Evidence (ggml-patch results.json)", 1)[1].split("#### Base commits", 1)[0]
    return data.split("#### Known limits", 1)[0]


def check_body_against_results(body: str, model: Results, target: str) -> None:
    assert parsed_outcomes(body) == expected_outcomes(model, target)
    results = model.to_json()
    cells = {r["cell"]: r for r in _table(body, "#### Cells")}
    for c in (c for c in results["cells"] if c["target"] == target):
        row = cells[c["cell"]]
        recs = {r["variant"]: r for r in results["records"] if r["cell"] == c["cell"]}
        assert row["status"] == c["status"]
        assert _value(row["negative control"]) == recs.get("control", {}).get("verdict")
        assert _value(row["test-opt with the fix"]) == recs.get("patched", {}).get("tests", {}).get(UPSTREAM, {}).get("summary_line")
        assert _value(row["gate with the fix"]) == recs.get("patched", {}).get("tests", {}).get(GATE, {}).get("summary_line")
        assert _value(row["gate with the fix reverted"]) == recs.get("control", {}).get("tests", {}).get(GATE, {}).get("summary_line")
        for col, key in (("build with the fix (s)", "build_patched"), ("control rebuild (s)", "build_control")):
            got = _value(row[col])
            assert (None if got is None else float(got)) == c["timings"].get(key)
        control = recs.get("control")
        if control and control.get("failure_line"):
            assert f"\n{control['failure_line']}\n" in body
    stray = numbers_in(evidence_section(body)) - numbers_of(results)
    assert not stray, f"numbers in PR_BODY.md's evidence that results.json does not hold: {stray}"
    sha = next(c for c in results["cells"] if c["target"] == target)["source"]["base_commit"]
    assert f"`{sha}`" in body
    check_training_table(body, model, target)


def check_training_table(body: str, model: Results, target: str) -> None:
    """The loss table holds exactly the shown cell's epochs from results.json, both variants."""
    results = model.to_json()
    trained = [c for c in results["cells"] if c["target"] == target and (c.get("training") or {}).get("with_fix")]
    if not trained:
        assert "### Training" not in body
        return
    cell = sorted(trained, key=lambda c: c["backend"] != "cpu")[0]
    section = body.split(f"#### Training: loss per epoch with and without the fix ({cell['cell']})", 1)[1]
    rows = [line for line in section.splitlines() if re.match(r"^\| \d+ \|", line)]
    got = [[float(x) for x in row.strip("| ").split(" | ")] for row in rows]
    t = cell["training"]
    want = [[a["epoch"], a["train_loss"], a["eval_loss"], b["train_loss"], b["eval_loss"]]
            for a, b in zip(t["with_fix"], t["without_fix"])]
    assert got == want
