"""The committed sample results (tests/data/): loaded, split per cell, edited into runs that
do not prove the fix."""
import copy
import json

from .tools import DATA

CPU_SAMPLE = DATA / "results-cpu-sample.json"
VULKAN_SAMPLE = DATA / "results-vulkan-mesa22-sample.json"
GATE, UPSTREAM = "test-opt-dynamic-accum", "test-opt"


def sample(path=CPU_SAMPLE) -> dict:
    """A fresh copy of a committed results.json (CPU cells of both targets, by default)."""
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


def split(results: dict, cell: str) -> dict:
    """The results a run over this one cell makes."""
    part = copy.deepcopy(results)
    part["cells"] = [c for c in part["cells"] if c["cell"] == cell]
    part["records"] = [r for r in part["records"] if r["cell"] == cell]
    part["exit_code"] = part["cells"][0]["exit_code"]
    return part


def control_survived(results: dict, cell: str = "ggml/cpu") -> dict:
    """The run as it would be if the gate passed without the fix (it would not be a gate)."""
    r = copy.deepcopy(results)
    rec = next(x for x in r["records"] if x["cell"] == cell and x["variant"] == "control")
    gate = rec["tests"][GATE]
    n = len(gate["rows"])
    gate.update(outcome="passed", exit_code=0, failure_line=None,
                summary_line=f"{n}/{n} device*opt_period passed, 0 skipped",
                rows=[{**{k: x[k] for k in ("device", "case", "opt_period") if k in x}, "status": "OK"}
                      for x in gate["rows"]])
    rec.update(status="survived", verdict="survived", failure_line=None,
               verdict_reason="the gate test passed without the fix: it is not a gate")
    c = next(x for x in r["cells"] if x["cell"] == cell)
    c.update(status="failed", exit_code=7,
             reason="negative control survived: the gate test passed without the fix: it is not a gate")
    return r


def gate_regressed(results: dict, cell: str = "llama.cpp/cpu") -> dict:
    r = copy.deepcopy(results)
    rec = next(x for x in r["records"] if x["cell"] == cell and x["variant"] == "patched")
    rec["tests"][GATE].update(outcome="failed", exit_code=1)
    c = next(x for x in r["cells"] if x["cell"] == cell)
    c.update(status="failed", exit_code=6, reason=f"with the fix: {GATE} failed")
    return r


def current_series_sha() -> str:
    from orchestrator.config import load_matrix
    from orchestrator.patchset.files import load_series

    from .tools import ROOT

    return load_series(load_matrix(ROOT / "matrix.yaml")).sha256


def results_dir(tmp_path, results: dict):
    """A results directory holding `results` as its results.json."""
    d = tmp_path / "results"
    d.mkdir()
    (d / "results.json").write_text(json.dumps(results, indent=2))
    return d


def edited(edit, path=CPU_SAMPLE) -> dict:
    """A committed sample with `edit` (a function of its data) applied."""
    data = sample(path)
    edit(data)
    return data


SANITIZE_SKIP = "test-opt leaks under LeakSanitizer (test stand-in)"


def with_sanitize_cell(results: dict, of: str = "ggml/cpu", skip: str = SANITIZE_SKIP) -> dict:
    """`results` plus a copy of cell `of` as `<target>/cpu-sanitize`, whose backend does not run
    test-opt: recorded skipped, with `skip` as the reason, in both variants."""
    r = copy.deepcopy(results)
    target = of.split("/")[0]
    cid = f"{target}/cpu-sanitize"
    cell = copy.deepcopy(next(c for c in r["cells"] if c["cell"] == of))
    cell.update(cell=cid, backend="cpu-sanitize",
                reason="every test run passes with the fix (test-opt not run on this backend); "
                       "the gate fails without it")
    r["cells"].append(cell)
    for rec in [x for x in r["records"] if x["cell"] == of]:
        rec = copy.deepcopy(rec)
        rec.update(cell=cid, backend="cpu-sanitize")
        rec["tests"][UPSTREAM] = {"outcome": "skipped", "exit_code": None, "signal": None, "duration_s": 0.0,
                                  "log": "", "rows": [], "summary_line": None, "skipped": skip}
        r["records"].append(rec)
    return r
