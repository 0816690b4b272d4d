"""The committed sample results (tests/data/): loaded, split per cell, edited into runs that
do not prove the fix."""

import json

from orchestrator.config import Upstream
from orchestrator.model.results import (
    CellStatus,
    DeviceRow,
    Outcome,
    RecordStatus,
    Results,
    RowStatus,
    TestRecord,
    Verdict,
    dump_results,
    load_results,
)

from .tools import DATA

CPU_SAMPLE = DATA / "results-cpu-sample.json"
VULKAN_SAMPLE = DATA / "results-vulkan-mesa22-sample.json"
GATE, UPSTREAM = "test-opt-dynamic-accum", "test-opt"


def sample(path=CPU_SAMPLE) -> Results:
    """A fresh copy of a committed results.json (CPU cells of both targets, by default)."""
    return load_results(path)[0]


def sample_data(path=CPU_SAMPLE) -> dict:
    """A committed results.json as JSON data (to make malformed files of)."""
    return json.loads(path.read_text())


def key_paths(x, path="") -> set[str]:
    """Every key path of a JSON document (lists as [])."""
    out = set()
    if isinstance(x, dict):
        for k, v in x.items():
            sub = f"{path}.{k}"
            out.add(sub)
            out |= key_paths(v, sub)
    elif isinstance(x, list):
        for v in x:
            out |= key_paths(v, f"{path}[]")
    return out


def split(results: Results, cell: str) -> Results:
    """The results a run over this one cell makes."""
    part = results.model_copy(deep=True)
    part.cells = [c for c in part.cells if c.cell == cell]
    part.records = [r for r in part.records if r.cell == cell]
    part.exit_code = part.cells[0].exit_code
    return part


def control_survived(results: Results, cell: str = "ggml/cpu") -> Results:
    """The run as it would be if the gate passed without the fix (it would not be a gate)."""
    r = results.model_copy(deep=True)
    rec = r.control_of(cell)
    gate = rec.tests[GATE]
    n = len(gate.rows)
    gate.outcome, gate.exit_code, gate.failure_line = Outcome.PASSED, 0, None
    gate.summary_line = f"{n}/{n} device*opt_period passed, 0 skipped"
    gate.rows = [
        DeviceRow(device=x.device, case=x.case, opt_period=x.opt_period, status=RowStatus.OK)
        for x in gate.rows
    ]
    rec.status, rec.verdict, rec.failure_line = RecordStatus.SURVIVED, Verdict.SURVIVED, None
    rec.verdict_reason = "the gate test passed without the fix: it is not a gate"
    c = next(x for x in r.cells if x.cell == cell)
    c.status, c.exit_code = CellStatus.FAILED, 7
    c.reason = "negative control survived: the gate test passed without the fix: it is not a gate"
    return r


def gate_regressed(results: Results, cell: str = "llama.cpp/cpu") -> Results:
    r = results.model_copy(deep=True)
    gate = r.records_of(cell)["patched"].tests[GATE]
    gate.outcome, gate.exit_code = Outcome.FAILED, 1
    c = next(x for x in r.cells if x.cell == cell)
    c.status, c.exit_code, c.reason = CellStatus.FAILED, 6, f"with the fix: {GATE} failed"
    return r


def current_series_sha() -> str:
    from orchestrator.config import load_matrix
    from orchestrator.patchset.files import load_series

    from .tools import ROOT

    return load_series(load_matrix(ROOT / "matrix.yaml")).sha256


def results_dir(tmp_path, results: Results):
    """A results directory holding `results` as its results.json."""
    d = tmp_path / "results"
    d.mkdir()
    dump_results(results, d / "results.json")
    return d


def edited(edit, path=CPU_SAMPLE) -> dict:
    """A committed sample's data with `edit` (a function of its data) applied."""
    data = sample_data(path)
    edit(data)
    return data


SANITIZE_SKIP = "test-opt leaks under LeakSanitizer (test stand-in)"


def with_sanitize_cell(
    results: Results, of: str = "ggml/cpu", skip: str = SANITIZE_SKIP
) -> Results:
    """`results` plus a copy of cell `of` as `<target>/cpu-sanitize`, whose backend does not run
    test-opt: recorded skipped, with `skip` as the reason, in both variants."""
    r = results.model_copy(deep=True)
    target = of.split("/")[0]
    cid = f"{target}/cpu-sanitize"
    cell = next(c for c in r.cells if c.cell == of).model_copy(deep=True)
    cell.cell, cell.backend = cid, "cpu-sanitize"
    cell.reason = (
        "every test run passes with the fix (test-opt not run on this backend); "
        "the gate fails without it"
    )
    r.cells.append(cell)
    for rec in [x for x in r.records if x.cell == of]:
        rec = rec.model_copy(deep=True)
        rec.cell, rec.backend = cid, "cpu-sanitize"
        rec.tests[UPSTREAM] = TestRecord(outcome=Outcome.SKIPPED, skipped=skip)
        r.records.append(rec)
    return r


def declared(repo, submit, where) -> Upstream:
    """matrix.yaml's `upstream:` as load_matrix gives it: its keys, and the file:line it sits at."""
    upstream = Upstream(repo=repo, submit=submit)
    upstream._where = where
    return upstream
