"""End to end: `ggml-patch evidence` on the pinned llama.cpp (llama-cpp-python 0.3.36): libllama and
native_tests/finetune-opt-dynamic built in the llama.cpp CPU cell's tree (the cell pipeline's fetch and
apply, a build tree of its own), the smallest case (AdamW lr 1e-3, opt_period 1 and 2, 2 epochs) run with
the fix and with its hunks reverted; then again with nothing changed: the cached result.

It shares the session's tool cache (the sdist, the cell's worktree when the matrix test ran first) and
ccache. Measured on 2 shared cores: 173 s with a mostly cold ccache (libllama: 127 s wall, 167 CPU s;
the runs 35 s), 60 s with a warm one (build 18 s, the four 2-epoch runs 30 s wall, 54 CPU s); a fully
cold ccache adds about a minute. The re-run: 0.55 s for the process, 0.11 s in the tool.
"""
from __future__ import annotations

import hashlib
import math
import time

import pytest

from orchestrator.finetune import results as ft
from orchestrator.finetune import section as evidence_section

from ..helpers.tools import git, run_tool

CASES = ["--case", "adamw:1e-3:1:2", "--case", "adamw:1e-3:2:2"]


@pytest.fixture(scope="module")
def evidence_run(repo_root, tool_cache, tmp_path_factory):
    results = tmp_path_factory.mktemp("evidence-results")
    args = ["evidence", "--matrix", str(repo_root / "matrix.yaml"), "--cache", str(tool_cache),
            "--results", str(results), *CASES]
    t0 = time.monotonic()
    first = run_tool(*args, "--rerun", cwd=results)  # built and run for real, whatever the cache holds
    cold_s = time.monotonic() - t0
    written = (results / "evidence" / "finetune.json").read_bytes() if first.returncode == 0 else b""
    t0 = time.monotonic()
    again = run_tool(*args, cwd=results)
    again_s = time.monotonic() - t0
    assert (results / "evidence" / "finetune.json").read_bytes() == written  # the same record, copied
    return first, again, results, cold_s, again_s


def loaded(results) -> ft.FinetuneResults:
    return ft.FinetuneResults.from_json((results / "evidence" / "finetune.json").read_text())


def test_both_variants_have_their_loss_per_epoch_and_the_curves_differ(evidence_run):
    first, _, results, cold_s, _ = evidence_run
    assert first.returncode == 0, first.stderr[-3000:] + first.stdout[-2000:]
    r = loaded(results)
    assert {(run.variant, run.optimizer, run.opt_period, run.lr) for run in r.runs} == {
        (v, "adamw", p, 1e-3) for v in ft.VARIANTS for p in (1, 2)}
    for run in r.runs:
        assert run.outcome == "ok" and run.exit_code == 0 and [e.epoch for e in run.epochs] == [1, 2], run
        assert all(math.isfinite(e.train_loss) and math.isfinite(e.eval_loss) for e in run.epochs)
        assert run.epochs[0].train_loss < math.log(32000) + 0.5  # cross-entropy over 32,000 tokens at the start
    verdicts = ft.verdicts(r)
    assert len(verdicts) == 2 and all(v.differ and v.max_rel_diff > 10 * ft.DIFFER_REL for v in verdicts), verdicts
    # what the command printed is the verdicts computed from these numbers
    for v in verdicts:
        assert f"adamw lr 0.001 opt_period {v.opt_period}, 2 epochs: {v.label} (" in first.stdout
    print(f"evidence, cold for this session: {cold_s:.1f} s; timings {r.timings}")


def test_the_records_name_the_model_data_and_series(evidence_run, tool_cache, repo_root):
    _, _, results, _, _ = evidence_run
    r = loaded(results)
    model = tool_cache / "evidence" / "models" / f"tiny-llama-{r.model['seed']}-{r.model['vocab_sha256'][:12]}.gguf"
    assert hashlib.sha256(model.read_bytes()).hexdigest() == r.model["sha256"]
    assert r.data["files"] == list(ft.DATA_FILES) and r.data["tokens"] > 1000
    assert r.series["patches"] == sorted(p.name for p in (repo_root / "patches").glob("*.patch"))
    with_fix = r.run("with_fix", "adamw", 1).command
    without = r.run("without_fix", "adamw", 1).command
    assert with_fix[0].endswith("variants/with_fix/finetune-opt-dynamic") and with_fix[1:] == without[1:]
    assert "-b" in with_fix and with_fix[with_fix.index("-b") + 1] == "128"
    assert r.run("with_fix", "adamw", 2).command[with_fix.index("-b") + 1] == "256"


def test_the_cell_s_tree_is_left_patched_and_the_two_programs_differ(evidence_run, tool_cache):
    first, _, _, _, _ = evidence_run
    assert "reverted ggml/src/ggml-opt.cpp" in first.stderr
    cell = tool_cache / "cells" / "llama.cpp-cpu"
    assert git(cell / "src", "status", "--porcelain", "--untracked-files=no") == ""
    variants = cell / "build-evidence" / "variants"
    assert (variants / "with_fix" / ft.PROGRAM).read_bytes() != (variants / "without_fix" / ft.PROGRAM).read_bytes()


def test_progress_names_the_case_the_variant_and_the_epoch(evidence_run):
    first, _, _, _, _ = evidence_run
    assert "run without fix adamw lr 0.001 opt_period 2, 2 epochs" in first.stderr
    assert "epoch 2/2: train loss " in first.stderr


def test_summary_md_has_the_section_and_the_plot_is_there_with_matplotlib(evidence_run):
    _, _, results, _, _ = evidence_run
    summary = (results / "summary.md").read_text()
    section = evidence_section.extract(summary)
    assert section and "**adamw, lr 0.001, opt_period 2** (n_batch 256, n_ubatch 128)" in section
    png = results / "evidence" / "finetune-loss.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not png.exists() and "matplotlib is not installed" in section
        pytest.skip("the plot needs the [plot] extra (matplotlib): the table was checked")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_re_run_with_nothing_changed_is_the_cached_result(evidence_run):
    first, again, results, _, again_s = evidence_run
    assert again.returncode == 0, again.stderr[-2000:]
    assert "cached result, nothing changed" in again.stderr and "build with_fix" not in again.stderr
    assert again.stdout.splitlines()[:2] == first.stdout.splitlines()[:2]  # the same verdicts
    tool_s = float(again.stdout.split("cached result, key ")[1].split(" in ")[1].split(" s;")[0])
    print(f"evidence re-run: {again_s:.2f} s for the process, {tool_s:.2f} s in the tool")
    assert tool_s < 1.0 and again_s < 10
