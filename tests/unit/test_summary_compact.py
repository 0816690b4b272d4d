"""summary.md stays readable with the 29-case gate: one row per cell x device x variant
(passed/total per test, the first FAIL line only), every row still in results.json; the mutants
table names each known-wrong fix, its verdict and the gate's first FAIL line."""

import copy

from orchestrator.model.results import results_of
from orchestrator.report.summary import summary_markdown

from ..helpers.samples import GATE, sample, with_sanitize_cell

CASES = (
    ["opt_period=1", "opt_period=2", "opt_period=3"]
    + [
        f"case=schedule-{s} opt_period={p} optimizer={o}"
        for s in ("TTETT", "ETTET", "TETTE", "TTTTT")
        for p in (1, 2, 3)
        for o in ("sgd", "adamw")
    ][:26]
    + ["case=mean opt_period=2", "case=mean opt_period=3"]
)
FIRST = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"


def _row(case, status, line=None):
    r = {"device": "CPU", "case": case, "status": status}
    if case.startswith("opt_period="):
        r["opt_period"] = int(case.split("=")[1])
    if line:
        r.update(line=line, step=2, actual=0.25, expected=0.5)
    return r


def _with_29_cases(data: dict) -> dict:
    d = copy.deepcopy(data)  # results.json's data: the sample's, or one made of it
    for rec in d["records"]:
        gate = rec["tests"][GATE]
        if rec["variant"] == "patched":
            gate["rows"] = [_row(c, "OK") for c in CASES]
        else:
            gate["rows"] = [
                _row(c, "FAIL", f"device=CPU {c}: FAIL at step 2: w=0.25 expected 0.5")
                for c in CASES[:20]
            ]
            gate["rows"] += [_row(c, "OK") for c in CASES[20:]]
    return d


def test_one_row_per_device_and_variant_with_counts_and_the_first_fail_line():
    assert len(CASES) == 29
    md = summary_markdown(results_of(_with_29_cases(sample().to_json())))
    section = md.split("## Per-device results", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ggml/cpu |")]
    assert rows == [
        "| ggml/cpu | CPU | with fix | 2/2 | 29/29 | — |",
        f"| ggml/cpu | CPU | without fix | 2/2 | 9/29 | `{FIRST}` |",
    ]
    # the first FAIL line per cell, the cells table's, and the controls per topic's (its reason
    # and its line)
    assert md.count("FAIL at step") == 2 + 2 + 2 * 2
    assert "opt_period=2: FAIL" not in md  # the other 19 FAIL rows stay in results.json only


def test_rows_of_skipped_cases_are_counted_apart_and_a_skipped_test_is_not_run():
    d = _with_29_cases(with_sanitize_cell(sample()).to_json())
    rec = next(
        r for r in d["records"] if r["cell"] == "ggml/cpu-sanitize" and r["variant"] == "patched"
    )
    rec["tests"][GATE]["rows"][-2:] = [
        dict(r, status="SKIPPED") for r in rec["tests"][GATE]["rows"][-2:]
    ]
    md = summary_markdown(results_of(d))
    assert "| ggml/cpu-sanitize | CPU | with fix | not run | 27/27 (2 skipped) | — |" in md


def test_the_mutants_table_names_verdict_and_first_fail_line():
    d = sample().to_json()
    d["records"].append(
        {
            "cell": "ggml/cpu",
            "variant": "mutant:01-no-reset",
            "status": "killed",
            "verdict": "killed",
            "verdict_reason": f"the gate test failed by its own check: {FIRST}",
            "failure_line": FIRST,
            "mutant": {"name": "01-no-reset", "title": "no reset", "why_wrong": "never zeroed"},
            "kills": {"test-opt": "survived", "test-opt-dynamic-accum": "killed"},
            "tests": {},
        }
    )
    d["records"].append(
        {
            "cell": "ggml/cpu",
            "variant": "mutant:02-x",
            "status": "survived",
            "verdict": "survived",
            "verdict_reason": "the gate test passed with this "
            "known-wrong fix: it does not catch it",
            "failure_line": None,
            "mutant": {"name": "02-x", "title": "x", "why_wrong": "y"},
            "tests": {},
        }
    )
    md = summary_markdown(results_of(d))
    assert "- **ggml/cpu**: the gate kills 1/2 known-wrong fixes" in md
    assert f"| ggml/cpu | 01-no-reset | **killed** | survived | killed | `{FIRST}` |" in md
    assert (
        "| ggml/cpu | 02-x | **survived** | — | — | the gate test passed with "
        "this known-wrong fix: it does not catch it |" in md
    )
    # mutants have no rows of their own in the per-device table
    assert "mutant:" not in md.split("## Per-device results", 1)[1].split("\n## ", 1)[0]


def test_the_kill_matrix_line_says_what_test_opt_kills_alone_and_competing_fixes_get_a_table():
    d = sample().to_json()
    cell = next(c for c in d["cells"] if c["cell"] == "ggml/cpu")
    cell["mutants"] = {
        "total": 11,
        "killed": 11,
        "survived": [],
        "invalid": [],
        "skipped": None,
        "killed_by": {"test-opt": 11, "test-opt-dynamic-accum": 11},
    }
    d["records"].append(
        {
            "cell": "ggml/cpu",
            "variant": "mutant:02-x",
            "status": "killed",
            "verdict": "killed",
            "verdict_reason": "r",
            "failure_line": "L",
            "kills": {"test-opt": "killed"},
            "mutant": {"name": "02-x", "title": "x", "why_wrong": "y"},
            "tests": {},
        }
    )
    d["records"].append(
        {
            "cell": "ggml/cpu",
            "variant": "competing:qlora",
            "status": "failed",
            "tests": {},
            "competing": {
                "name": "qlora",
                "title": "t",
                "url": "https://github.com/o/r/pull/1",
                "date": "2026-05",
                "summary": "s",
            },
            "judged": {
                "verdict": "wrong",
                "reason": "test-opt fails: L2",
                "failing_test": "test-opt",
                "failure_line": "L2",
            },
        }
    )
    md = summary_markdown(results_of(d))
    assert (
        "- **ggml/cpu**: 11 known-wrong fixes: 11 killed by "
        "test-opt alone (test-opt-dynamic-accum: 11)" in md
    )
    assert (
        "| ggml/cpu | qlora | [2026-05](https://github.com/o/r/pull/1) "
        "| **wrong** | test-opt: `L2` |" in md
    )
    assert "competing:" not in md.split("## Per-device results", 1)[1].split("\n## ", 1)[0]
