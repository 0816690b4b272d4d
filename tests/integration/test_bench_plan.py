"""`benchmarks/bench.py --plan`: every route resolved without building, so a target or file a
route names that no longer exists fails the suite instead of the bench's first step."""

import subprocess
import sys
from pathlib import Path

from benchmarks.speed import routes
from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_series

from ..helpers.patches import queue_topics
from ..helpers.tools import ROOT

BENCH = ROOT / "benchmarks" / "bench.py"


def test_plan_resolves_every_route_of_this_tree(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--plan", "--out", str(tmp_path / "bench")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    # the by-hand route asks for both tests, the gate added as native_tests/ adds it
    assert "--target test-opt test-opt-dynamic-accum" in out
    assert f"-DCMAKE_PROJECT_INCLUDE={ROOT / 'native_tests' / 'extra-programs.cmake'}" in out
    assert "(a) llama.cpp: " in out and "(a) ggml: " in out
    assert "mutant(s)" in out and "competing fix(s)" in out
    # issue 31's costs: each topic's control reverts its own hunks; the queue against one topic
    series = load_series(load_matrix(ROOT / "matrix.yaml"))
    assert series.topics == tuple(queue_topics())  # patches/queue.yaml's, however many
    for topic in series.topics:
        paths = ", ".join(sorted({f.path for f in series.topic_fix_diffs(topic)}))
        assert f"(l) {topic}: git apply -R of its hunks in {paths}; " in out
    assert "(l) accumulator-reset: git apply -R of its hunks in ggml/src/ggml-opt.cpp; " in out
    assert f"(m) ggml-patch matrix --backend cpu (topics {', '.join(series.topics)}) " in out
    assert out.rstrip().endswith(f"out: {tmp_path / 'bench'}")
    # --plan writes nothing
    assert not (tmp_path / "bench").exists()


def test_plan_names_a_gate_the_cmake_file_does_not_build(tmp_path, monkeypatch):
    """extra-programs.cmake builds the native_tests/ programs beside it (by glob): a copy with
    none of them beside it builds neither the gate a topic declares nor the training program."""
    cmake = tmp_path / "extra-programs.cmake"
    cmake.write_text(routes.GATE_CMAKE.read_text(encoding="utf-8"))
    monkeypatch.setattr(routes, "GATE_CMAKE", cmake)
    matrix = load_matrix(ROOT / "matrix.yaml")
    _, missing = routes.plan(matrix, tmp_path / "bench")
    assert any("no add_executable(test-opt-dynamic-accum" in m for m in missing), missing
    assert any("no add_executable(train-opt-dynamic" in m for m in missing), missing


def test_plan_names_a_missing_tool_file_and_exits_1(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(routes, "CHECK_MODULES", ("orchestrator/no-such-module.py",))
    matrix = load_matrix(ROOT / "matrix.yaml")
    assert routes.main_plan(matrix, tmp_path / "bench") == 1
    err = capsys.readouterr().err
    assert "bench: --plan: " in err and "no-such-module.py: missing" in err


def test_plan_refuses_an_out_folder_inside_results(tmp_path):
    matrix = load_matrix(ROOT / "matrix.yaml")
    _, missing = routes.plan(matrix, ROOT / "results" / "bench")
    assert any("inside" in m and "results" in m for m in missing), missing
    _, missing = routes.plan(matrix, Path(tmp_path / "elsewhere"))
    assert missing == []


def test_plan_names_a_one_topic_run_of_a_topic_the_queue_does_not_apply(tmp_path, monkeypatch):
    monkeypatch.setattr(routes, "ONE_TOPIC", "no-such-topic")
    matrix = load_matrix(ROOT / "matrix.yaml")
    _, missing = routes.plan(matrix, tmp_path / "bench")
    assert missing == ["(m) --topic no-such-topic: not a topic the default runs"], missing


def test_plan_names_a_queue_of_one_topic_as_nothing_to_compare(tmp_path):
    matrix = load_matrix(ROOT / "matrix.yaml")
    # what `--topic accumulator-reset` does
    _, missing = routes.plan(matrix, tmp_path / "bench", [routes.ONE_TOPIC])
    assert missing == ["(m) the default run applies one topic: nothing to compare"], missing
