"""ggml-patch merge-results: directories and files merged with
their logs; bad input refused in one line."""

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from orchestrator.model.results import Results, results_json, results_of

from ..helpers.samples import sample as committed_sample
from ..helpers.samples import split as _split
from ..helpers.tools import run_tool

ORDER = ["llama.cpp/cpu", "ggml/cpu"]


@pytest.fixture
def sample() -> Results:
    return committed_sample()


def _write(d: Path, results) -> Path:
    """A results.json (a Results, or JSON data that is not one) in a new folder."""
    d.mkdir(parents=True)
    (d / "results.json").write_text(
        results_json(results) if isinstance(results, Results) else json.dumps(results)
    )
    return d


def test_cli_merges_directories_and_files_and_brings_the_logs(sample, tmp_path, repo_root):
    llama = _split(sample, "llama.cpp/cpu")
    a = _write(tmp_path / "cells/results+default+llama.cpp+cpu", llama)
    b = _write(tmp_path / "cells/results+default+ggml+cpu", _split(sample, "ggml/cpu"))
    # a leg's log, under the absolute path it had on its runner
    (a / "logs/llama.cpp-cpu").mkdir(parents=True)
    (a / "logs/llama.cpp-cpu/build-patched.log").write_text("[1/1] Linking test-opt\n")
    out = tmp_path / "merged"
    proc = run_tool(
        "merge-results",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--out",
        str(out),
        str(b / "results.json"),
        str(a),
    )
    assert proc.returncode == 0, proc.stderr
    assert "merged 2 cells from 2 results: 2 passed, 0 failed, 0 skipped" in proc.stdout
    merged = json.loads((out / "results.json").read_text())
    assert [c["cell"] for c in merged["cells"]] == ORDER
    assert "2/2 cells passed" in (out / "summary.md").read_text()
    # per cell: each variant's two tests and the topic's control as its own case
    assert ET.parse(out / "junit.xml").getroot().get("tests") == "10"
    log = merged["records"][0]["build"]["log"]
    assert log == str(out / "logs/llama.cpp-cpu/build-patched.log") and Path(
        log
    ).read_text().startswith("[1/1]")


@pytest.mark.parametrize(
    "case", ["other-series", "duplicate", "missing", "not-json", "not-results"]
)
def test_cli_refuses_bad_input_in_one_line(sample, tmp_path, repo_root, case):
    a = _write(tmp_path / "a", _split(sample, "ggml/cpu"))
    b = tmp_path / "b"
    if case == "other-series":
        other = _split(sample, "llama.cpp/cpu")
        other.series = other.series.model_copy(update={"sha256": "1" * 64})
        _write(b, other)
    elif case == "duplicate":
        _write(b, _split(sample, "ggml/cpu"))
    elif case == "not-json":
        _write(b, {}).joinpath("results.json").write_text("{not json")
    elif case == "not-results":
        _write(b, {"cells": []})
    out = tmp_path / "out"
    proc = run_tool(
        "merge-results",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--out",
        str(out),
        str(a),
        str(b),
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err.startswith("ggml-patch: error: ") and "\n" not in err and "Traceback" not in err
    assert str(b) in err
    assert not out.exists()  # refused before anything was written


def test_cli_refuses_a_leg_from_an_older_ggml_patch_saying_re_run(sample, tmp_path, repo_root):
    """A CI leg's results.json of schema 1 (its builds were with_fix/without_fix): one line
    naming the file and what to do, nothing written."""
    a = _write(tmp_path / "a", _split(sample, "ggml/cpu"))
    older = _split(sample, "llama.cpp/cpu").to_json()
    older["schema_version"] = 1
    b = _write(tmp_path / "b", older)
    out = tmp_path / "out"
    proc = run_tool(
        "merge-results",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--out",
        str(out),
        str(a),
        str(b),
    )
    assert proc.returncode == 2, proc.stderr
    err = proc.stderr.strip()
    assert err == (
        f"ggml-patch: error: {b / 'results.json'}: schema_version 1, expected 3 "
        "(another ggml-patch version wrote it); re-run `ggml-patch matrix`"
    ), err
    assert not out.exists()


def test_a_leg_that_never_reported_is_an_error_in_the_merge_and_the_drift_issue(
    sample, tmp_path, repo_root
):
    from orchestrator.ci import drift_issue as D
    from orchestrator.config import load_matrix

    a = _write(tmp_path / "cells/results+default+llama.cpp+cpu", _split(sample, "llama.cpp/cpu"))
    out = tmp_path / "merged"
    proc = run_tool(
        "merge-results",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--expect-profile",
        "default",
        "--out",
        str(out),
        str(a),
        str(tmp_path / "cells/results+nothing+*"),
    )
    assert proc.returncode == 0, proc.stderr
    merged = json.loads((out / "results.json").read_text())
    expected = [
        f"{t.name}/{b.name}" for t, b in load_matrix(repo_root / "matrix.yaml").cells("default")
    ]
    assert sorted(c["cell"] for c in merged["cells"]) == sorted(expected)
    never = {c["cell"]: c for c in merged["cells"] if c["cell"] != "llama.cpp/cpu"}
    assert never and all(
        c["status"] == "error" and "never reported" in c["reason"] for c in never.values()
    )
    assert merged["exit_code"] != 0
    _, failing = D.read_results(results_of(merged, "merged"))
    assert set(failing) == set(never)
    assert (
        run_tool(
            "merge-results",
            "--matrix",
            str(repo_root / "matrix.yaml"),
            "--expect-profile",
            "nope",
            "--out",
            str(tmp_path / "o2"),
            str(a),
        ).returncode
        == 2
    )
