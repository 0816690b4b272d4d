"""results.json and summary.md from a results.json's data."""

import json

from orchestrator.model.results import results_of
from orchestrator.report.summary import summary_markdown, write_results

LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"


def _results(control_verdict="killed"):
    return {
        "profile": "default",
        "exit_code": 0,
        "series": {
            "layout": "llama.cpp",
            "sha256": "ab" * 32,
            "patches": [
                {"name": f"000{i}.patch", "subject": "s", "author": "a <a@b>"} for i in (1, 2)
            ],
        },
        "cells": [
            {
                "cell": "ggml/cpu",
                "status": "passed",
                "reason": "ok",
                "timings": {"fetch": 1.0},
                "source": {
                    "kind": "pypi-sdist",
                    "description": "ggml-python==0.0.45",
                    "base_commit": "c" * 40,
                },
                "patched_commit": "d" * 40,
            },
            {
                "cell": "ggml/metal",
                "status": "skipped",
                "reason": "Metal needs macOS",
                "timings": {},
            },
        ],
        "records": [
            {
                "cell": "ggml/cpu",
                "variant": "patched",
                "status": "passed",
                "tests": {
                    "test-opt": {
                        "outcome": "passed",
                        "rows": [
                            {"device": "CPU", "optimizer": "adamw", "status": "OK"},
                            {"device": "CPU", "optimizer": "sgd", "status": "OK"},
                        ],
                    },
                    "test-opt-dynamic-accum": {
                        "outcome": "passed",
                        "rows": [
                            {"device": "CPU", "opt_period": p, "status": "OK"} for p in (1, 2, 3)
                        ],
                    },
                },
            },
            {
                "cell": "ggml/cpu",
                "variant": "control:accumulator-reset",
                "topic": "accumulator-reset",
                "status": control_verdict,
                "verdict": control_verdict,
                "failure_line": LINE,
                "tests": {},
            },
        ],
    }


def test_summary_table(tmp_path):
    md = summary_markdown(results_of(_results()))
    assert "1/2 cells passed" in md
    row = next(ln for ln in md.splitlines() if ln.startswith("| ggml/cpu |") and "killed" in ln)
    assert "passed (2/2)" in row and "passed (3/3)" in row and LINE in row
    assert "Metal needs macOS" in md  # a skip is shown with its reason


def test_write_results(tmp_path):
    paths = write_results(results_of(_results()), tmp_path / "r")
    assert [p.name for p in paths] == ["results.json", "summary.md"]
    assert json.loads(paths[0].read_text())["cells"][0]["cell"] == "ggml/cpu"
