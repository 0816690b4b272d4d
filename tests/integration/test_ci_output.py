"""What a CI log shows: GitHub annotations for the cells that did not pass (only under GitHub
Actions), and progress lines never wrapped at 80 columns when stderr is not a terminal."""

import os
import sys
from pathlib import Path

import pytest

from orchestrator.ci.annotations import cell_annotations, escape_data, repo_path
from orchestrator.config import load_matrix
from orchestrator.model.results import Cell, Results, SeriesInfo

from ..helpers.tools import ROOT, run_tool


def _metal(tmp_path, env):
    old = os.environ.copy()
    os.environ.update(env)
    try:
        return run_tool(
            "matrix",
            "--matrix",
            str(ROOT / "matrix.yaml"),
            "--cache",
            str(tmp_path / "cache"),
            "--results",
            str(tmp_path / "results"),
            "--target",
            "llama.cpp",
            "--backend",
            "metal",
        )
    finally:
        os.environ.clear()
        os.environ.update(old)


@pytest.mark.skipif(sys.platform == "darwin", reason="Metal runs on macOS: no skip here")
def test_annotations_under_github_actions_and_no_wrapping(tmp_path):
    proc = _metal(
        tmp_path, {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": str(ROOT), "COLUMNS": "80"}
    )
    assert proc.returncode == 0, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("::"))
    target_line = load_matrix(ROOT / "matrix.yaml").lines[("targets", "llama.cpp")]
    assert line.startswith(
        f"::warning file=matrix.yaml,line={target_line},title=ggml-patch "
        "llama.cpp/metal%3A skipped::Metal needs macOS"
    )
    # the skip's reason (well over 80 characters) is one line of the log
    skip = next(ln for ln in proc.stderr.splitlines() if "skipped:" in ln)
    assert len(skip) > 100 and "runs_on: macos-15)" in skip
    plain = _metal(tmp_path, {"GITHUB_ACTIONS": ""})
    assert "::" not in plain.stdout


def test_annotation_lines_escape_and_levels():
    m = load_matrix(ROOT / "matrix.yaml")
    results = Results(
        series=SeriesInfo(layout="llama.cpp", sha256="0" * 64, patches=[]),
        cells=[
            Cell(
                cell="ggml/cpu",
                target="ggml",
                backend="cpu",
                status="failed",
                reason="50% broke:\nline two",
            ),
            Cell(cell="ggml/vulkan", target="ggml", backend="vulkan", status="passed", reason=""),
            Cell.model_validate({"cell": "ggml/cuda", "status": "build-only", "reason": "no GPU"}),
            Cell.model_validate({"cell": "llama.cpp/cuda", "status": "error", "reason": ""}),
        ],
    )
    lines = cell_annotations(results, m, workspace=str(ROOT))
    assert (
        lines[0]
        == f"::error file=matrix.yaml,line={m.lines[('targets', 'ggml')]},title=ggml-patch "
        # a reason is one line in the model (issue 36): the newline is a space before it gets here
        "ggml/cpu%3A failed::50%25 broke: line two"
    )
    assert lines[1].startswith("::notice ") and lines[1].endswith("::no GPU")
    assert lines[2].startswith("::error ") and lines[2].endswith("::error")
    assert len(lines) == 3
    assert escape_data("a\r\nb") == "a%0D%0Ab"
    assert repo_path(Path("/elsewhere/m.yaml"), str(ROOT)) == "/elsewhere/m.yaml"
