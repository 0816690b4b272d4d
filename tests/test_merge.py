"""merge-results: per-cell results (one CI leg each) combined into one results.json, summary.md
and junit.xml, equal to one run over the same cells; different series and duplicate cells refused."""
import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.report.merge import merge_results
from orchestrator.report.model import Results

from .conftest import run_tool

ORDER = ["llama.cpp/cpu", "ggml/cpu"]


@pytest.fixture
def sample(repo_root) -> dict:
    """The committed sample as the results model writes it."""
    return Results.from_dict(json.loads((repo_root / "tests/data/results-cpu-sample.json").read_text())).to_dict()


def _split(results: dict, cell: str) -> dict:
    """The results a run over this one cell makes."""
    part = copy.deepcopy(results)
    part["cells"] = [c for c in part["cells"] if c["cell"] == cell]
    part["records"] = [r for r in part["records"] if r["cell"] == cell]
    part["exit_code"] = part["cells"][0]["exit_code"]
    return part


def test_merging_the_cells_gives_back_the_whole_run(sample):
    ggml, llama = _split(sample, "ggml/cpu"), _split(sample, "llama.cpp/cpu")
    llama["started_at"], ggml["started_at"] = "2026-11-30T00:40:00Z", "2026-11-30T00:39:51Z"
    llama["duration_s"], ggml["duration_s"] = 20.0, 4.61
    llama["orchestrator_cpu_s"], ggml["orchestrator_cpu_s"] = 0.5, 0.25
    merged = merge_results([("ggml", ggml), ("llama", llama)], ORDER).to_dict()  # given out of order
    # cells back in matrix order; earliest start; summed machine time; one leg each
    assert merged == {**sample, "orchestrator_cpu_s": 0.75, "parallel": {"legs": 2}}


def test_cells_not_in_the_order_keep_their_input_order(sample):
    extra = _split(sample, "ggml/cpu")
    for c in extra["cells"] + extra["records"]:
        c["cell"] = "ggml-master/cpu"
    merged = merge_results([("x", extra), ("a", _split(sample, "ggml/cpu"))], ["ggml/cpu"])
    assert [c.cell for c in merged.cells] == ["ggml/cpu", "ggml-master/cpu"]
    assert [r.cell for r in merged.records] == ["ggml/cpu"] * 2 + ["ggml-master/cpu"] * 2


def test_the_worst_exit_code_wins(sample):
    bad = _split(sample, "ggml/cpu")
    bad["cells"][0].update(status="failed", exit_code=7)
    merged = merge_results([("a", _split(sample, "llama.cpp/cpu")), ("b", bad)], ORDER)
    assert merged.exit_code == 7


def test_different_series_are_refused(sample):
    other = _split(sample, "ggml/cpu")
    other["series"] = dict(other["series"], sha256="0" * 64)
    with pytest.raises(ConfigError) as e:
        merge_results([("cells/a/results.json", _split(sample, "llama.cpp/cpu")), ("cells/b/results.json", other)])
    msg = str(e.value)
    assert "cells/b/results.json" in msg and "different series" in msg and "\n" not in msg


def test_a_cell_twice_is_refused(sample):
    with pytest.raises(ConfigError, match=r"b\.json: cell ggml/cpu is also in a\.json"):
        merge_results([("a.json", _split(sample, "ggml/cpu")), ("b.json", _split(sample, "ggml/cpu"))])


def _write(d: Path, results: dict) -> Path:
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(results))
    return d


def test_cli_merges_directories_and_files_and_brings_the_logs(sample, tmp_path, repo_root):
    llama = _split(sample, "llama.cpp/cpu")
    a = _write(tmp_path / "cells/results+default+llama.cpp+cpu", llama)
    b = _write(tmp_path / "cells/results+default+ggml+cpu", _split(sample, "ggml/cpu"))
    # a leg's log, under the absolute path it had on its runner
    (a / "logs/llama.cpp-cpu").mkdir(parents=True)
    (a / "logs/llama.cpp-cpu/build-patched.log").write_text("[1/1] Linking test-opt\n")
    out = tmp_path / "merged"
    proc = run_tool("merge-results", "--matrix", str(repo_root / "matrix.yaml"), "--out", str(out),
                    str(b / "results.json"), str(a))
    assert proc.returncode == 0, proc.stderr
    assert "merged 2 cells from 2 results: 2 passed, 0 failed, 0 skipped" in proc.stdout
    merged = json.loads((out / "results.json").read_text())
    assert [c["cell"] for c in merged["cells"]] == ORDER
    assert "2/2 cells passed" in (out / "summary.md").read_text()
    assert ET.parse(out / "junit.xml").getroot().get("tests") == "8"
    log = merged["records"][0]["build"]["log"]
    assert log == str(out / "logs/llama.cpp-cpu/build-patched.log") and Path(log).read_text().startswith("[1/1]")


@pytest.mark.parametrize("case", ["other-series", "duplicate", "missing", "not-json", "not-results"])
def test_cli_refuses_bad_input_in_one_line(sample, tmp_path, repo_root, case):
    a = _write(tmp_path / "a", _split(sample, "ggml/cpu"))
    b = tmp_path / "b"
    if case == "other-series":
        _write(b, dict(_split(sample, "llama.cpp/cpu"), series=dict(sample["series"], sha256="1" * 64)))
    elif case == "duplicate":
        _write(b, _split(sample, "ggml/cpu"))
    elif case == "not-json":
        _write(b, {}).joinpath("results.json").write_text("{not json")
    elif case == "not-results":
        _write(b, {"cells": []})
    out = tmp_path / "out"
    proc = run_tool("merge-results", "--matrix", str(repo_root / "matrix.yaml"), "--out", str(out), str(a), str(b))
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("ggml-patch: error: ") and "\n" not in err and "Traceback" not in err
    assert str(b) in err
    assert not out.exists()  # refused before anything was written


_VOLATILE = {"started_at", "duration_s", "timings", "log", "orchestrator_cpu_s", "parallel", "cached"}


def _comparable(x):
    """Results without what differs between two runs of the same cells (times, where logs went)."""
    if isinstance(x, dict):
        return {k: _comparable(v) for k, v in x.items() if k not in _VOLATILE}
    if isinstance(x, list):
        return [_comparable(v) for v in x]
    return x


@pytest.mark.e2e
def test_two_cells_run_apart_and_merged_equal_one_run_over_both(repo_root, tool_cache, tmp_path):
    """Real runs (warm cache: about 20 s): `matrix` for each CPU cell on its own, as two CI legs
    do, merged, against one `matrix` over both cells."""
    common = ["--matrix", str(repo_root / "matrix.yaml"), "--cache", str(tool_cache), "--backend", "cpu"]
    runs = {}
    for name, targets in (("llama", ["llama.cpp"]), ("ggml", ["ggml"]), ("both", ["llama.cpp", "ggml"])):
        args = [a for t in targets for a in ("--target", t)]
        proc = run_tool("matrix", *common, *args, "--results", str(tmp_path / name), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[name] = tmp_path / name
    out = tmp_path / "merged"
    proc = run_tool("merge-results", "--matrix", str(repo_root / "matrix.yaml"), "--out", str(out),
                    str(runs["ggml"]), str(runs["llama"]), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((out / "results.json").read_text())
    whole = json.loads((runs["both"] / "results.json").read_text())
    assert [c["status"] for c in whole["cells"]] == ["passed", "passed"]
    assert _comparable(merged) == _comparable(whole)
    # junit.xml agrees too, apart from times
    def cases(p):
        return sorted((c.get("classname"), c.get("name"), tuple(sorted(k.tag for k in c)))
                      for c in ET.parse(p).getroot().iter("testcase"))
    assert cases(out / "junit.xml") == cases(runs["both"] / "junit.xml")
