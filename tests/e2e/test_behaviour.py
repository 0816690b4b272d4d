"""Fixed upstream by behaviour (issue 31 point 4), for real: local targets (`path:` sources, the
ggml layout) made from the pinned ggml sdist's tree. One has topic 1's fix written differently
(its own loop zeroing the accumulators, at the place the patch inserts its reset, so the patch
conflicts): its test cases pass there, but `status` says "fixed upstream (behaviour)" only once a
matrix run has killed the topic's control in that layout (issue 46 point 5): before it, and in
the llama.cpp layout where no run killed it, "the topic's tests cannot tell". One has a fork's
line at that place and no fix: the same conflict, and its test cases fail. A re-run with nothing
changed builds nothing; --no-behaviour skips the check and says so."""

import json
from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.drift.behaviour import result_file
from orchestrator.drift.check import status_of_targets
from orchestrator.drift.status import (
    ALONE,
    CANNOT_TELL,
    CONFLICT,
    FAILED,
    FIXED_BEHAVIOUR,
    PASSED,
    SKIPPED,
    TOPIC_NOT_TRIED,
)
from orchestrator.errors import ExitCode

from ..helpers.forks import (
    CONTEXT_LINE,
    FORK_LINE,
    INSERT_AFTER,
    pinned_targets,
    real_snapshot_refs,
    replace_once,
    repo_from_snapshot,
    seeded_cache,
    write_matrix,
)
from ..helpers.tools import run_tool

pytestmark = pytest.mark.e2e

OPT = "src/ggml-opt.cpp"  # the ggml layout
TOPIC = "accumulator-reset"
# ggml_opt_eval as the pinned ggml has it, from the optimizer step's compute to the graphs' drop
BEFORE = (
    "    ggml_backend_sched_graph_compute(opt_ctx->backend_sched, "
    "opt_ctx->allocated_graph_copy);\n"
    "    opt_ctx->iter += opt_ctx->allocated_graph == opt_ctx->gb_opt;\n" + INSERT_AFTER
)
# the same behaviour as topic 1's fix (ggml_graph_reset(gb_grad) after an optimizer step), in
# other words: a flag taken before the compute, a loop of public calls zeroing each accumulator
# and putting the loss's seed back to 1
OTHER_FIX = (
    "    const bool optimizer_step = opt_ctx->allocated_graph == opt_ctx->gb_opt;\n"
    "    ggml_backend_sched_graph_compute(opt_ctx->backend_sched, "
    "opt_ctx->allocated_graph_copy);\n"
    "    opt_ctx->iter += optimizer_step;\n" + CONTEXT_LINE + "\n"
    "    if (!opt_ctx->static_graphs) {\n"
    "        if (optimizer_step) {\n"
    "            // upstream's own take: every accumulator by hand, the loss seeded with 1\n"
    "            for (int i = 0; i < ggml_graph_n_nodes(opt_ctx->gb_grad); ++i) {\n"
    "                struct ggml_tensor * node = ggml_graph_node(opt_ctx->gb_grad, i);\n"
    "                struct ggml_tensor * acc  = "
    "ggml_graph_get_grad_acc(opt_ctx->gb_grad, node);\n"
    "                if (acc == nullptr) {\n"
    "                    continue;\n"
    "                }\n"
    "                if (node->flags & GGML_TENSOR_FLAG_LOSS) {\n"
    "                    const float one = 1.0f;\n"
    "                    ggml_backend_tensor_set(acc, &one, 0, sizeof(one));\n"
    "                } else {\n"
    "                    ggml_set_zero(acc);\n"
    "                }\n"
    "            }\n"
    "        }\n"
)


def _checkout(tmp, name: str, ref: str, tool_cache, edit, layout: str = "ggml") -> str:
    """A checkout of a pinned tree with ggml-opt.cpp edited (uncommitted: the local source takes
    the files as they are); its matrix.yaml block."""
    co = repo_from_snapshot(tmp / name, ref, tool_cache)
    opt = co / (OPT if layout == "ggml" else f"ggml/{OPT}")
    opt.write_text(edit(opt.read_text()))
    return f"layout: {layout}\nsource: {{kind: local, path: {co}}}\n"


@pytest.fixture(scope="module")
def targets(tool_cache, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("behaviour")
    refs = real_snapshot_refs(tool_cache)
    ref = refs["ggml"]
    other_fix = replace_once(BEFORE, OTHER_FIX)
    blocks = {
        "ggml-fixed": _checkout(tmp, "fixed", ref, tool_cache, other_fix),
        # the other layout: llama.cpp's ggml-opt.cpp is byte-identical, the build is the harness
        "llama.cpp-fixed": _checkout(
            tmp, "llama.cpp", refs["llama.cpp"], tool_cache, other_fix, "llama.cpp"
        ),
        "ggml-bug": _checkout(
            tmp, "bug", ref, tool_cache, replace_once(INSERT_AFTER, INSERT_AFTER + FORK_LINE)
        ),
    }
    # the pinned ggml tree as it is: where a matrix run shows the topic's tests catch the bug
    matrix_path = write_matrix(tmp, {**blocks, **pinned_targets({"ggml": ref})})
    cache = seeded_cache(tmp / "cache", tool_cache)
    matrix = load_matrix(matrix_path)
    before = {r.target: r for r in status_of_targets(matrix, cache, list(blocks), [TOPIC])}
    proc = _tool(
        cache,
        matrix,
        "matrix",
        "--topic",
        TOPIC,
        "--target",
        "ggml",
        "--no-mutants",
        "--results",
        str(tmp / "results"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    rows = {r.target: r for r in status_of_targets(matrix, cache, list(blocks), [TOPIC])}
    return rows, cache, matrix, before


def test_passing_tests_never_seen_failing_cannot_tell(targets):
    """Before any run killed its control in the ggml layout, the same passing check is a conflict
    the tests cannot judge: resolve it, never retire it."""
    on = targets[3]["ggml-fixed"].topics[TOPIC]
    assert on.status == CONFLICT and on.behaviour.outcome == PASSED, on
    assert CANNOT_TELL in on.detail and f"ggml-patch matrix --topic {TOPIC}" in on.detail


def _tool(cache, matrix, *args):
    return run_tool(*args, "--matrix", str(matrix.path), "--cache", str(cache.root))


def test_a_fix_written_differently_is_fixed_upstream_by_behaviour(targets):
    rows = targets[0]
    row = rows["ggml-fixed"]
    assert row.status == CONFLICT, row  # the patch's text does not merge there
    on = row.topics[TOPIC]
    assert on.status == FIXED_BEHAVIOUR, on
    # checked once, before the matrix run; the status after it reuses that check
    assert not targets[3]["ggml-fixed"].topics[TOPIC].behaviour.cached
    assert on.behaviour.outcome == PASSED and on.behaviour.cached
    assert on.detail.startswith(
        f"its test cases pass on the target as it is, and caught the bug (control:{TOPIC} "
        "killed on ggml/cpu) (the patch: conflict"
    )
    log = open(on.behaviour.log, encoding="utf-8").read()
    assert "test_opt_period_non_static" in log and "FAIL" not in log.replace("FAILED", "")


def test_the_llama_cpp_layout_needs_its_own_proof(targets):
    """Its tests pass there too, but no run killed the control in the llama.cpp layout."""
    on = targets[0]["llama.cpp-fixed"].topics[TOPIC]
    assert (on.status, on.behaviour.outcome) == (CONFLICT, PASSED), on
    assert CANNOT_TELL in on.detail
    assert "/status/behaviour/llama.cpp/" in on.behaviour.log  # its own tree and build


def test_the_same_target_without_the_fix_is_not(targets):
    on = targets[0]["ggml-bug"].topics[TOPIC]
    assert on.status == CONFLICT, on
    assert on.behaviour.outcome == FAILED
    assert "its test cases fail on the target as it is: " in on.detail
    assert "test_opt_period_non_static(" in on.behaviour.detail and on.behaviour.detail.endswith(
        "FAIL"
    )


def test_queue_and_status_report_it_and_a_rerun_builds_nothing(targets):
    _, cache, matrix, _ = targets
    logs = cache.root / "status" / "behaviour" / "ggml" / "logs"
    build_log = logs / "ggml-fixed" / TOPIC / "build-patched.log"
    built = build_log.stat().st_mtime_ns
    proc = _tool(cache, matrix, "queue", "--json", "--results", str(cache.root / "none"))
    assert proc.returncode == 0, proc.stderr
    topics = {t["topic"]: t for t in json.loads(proc.stdout)["topics"]}
    where = topics[TOPIC]["targets"]
    assert where["ggml-fixed"]["status"] == FIXED_BEHAVIOUR
    assert where["ggml-fixed"]["behaviour"]["cached"] is True
    assert where["ggml-bug"]["status"] == CONFLICT
    assert where["ggml-bug"]["behaviour"]["outcome"] == FAILED
    # the queue's later topics: tried on their own where they do not need topic 1 (its conflict
    # hides none of them), else "not tried"
    later = topics["grad-acc-non-static"]["targets"]["ggml-fixed"]
    assert later["status"] == TOPIC_NOT_TRIED or later["detail"].startswith(ALONE), later
    assert "building test-opt" not in proc.stderr
    assert build_log.stat().st_mtime_ns == built  # nothing was built again
    table = _tool(cache, matrix, "queue", "--results", str(cache.root / "none"))
    assert table.returncode == 0, table.stderr
    assert f"{TOPIC} on ggml-fixed: {FIXED_BEHAVIOUR}: its test cases pass" in table.stdout
    proc = _tool(cache, matrix, "status", "--json", "--topic", TOPIC)
    assert proc.returncode == ExitCode.SERIES_DOES_NOT_APPLY, proc.stderr
    rows = {r["target"]: r for r in json.loads(proc.stdout)["targets"]}
    assert rows["ggml-fixed"]["topics"][TOPIC]["status"] == FIXED_BEHAVIOUR
    assert rows["ggml-bug"]["topics"][TOPIC]["status"] == CONFLICT
    proc = _tool(cache, matrix, "status", "--topic", TOPIC, "--target", "ggml-fixed")
    assert f"  {TOPIC}: {FIXED_BEHAVIOUR}: its test cases pass" in proc.stdout
    assert build_log.stat().st_mtime_ns == built


def test_no_behaviour_skips_the_check_and_says_so(targets):
    _, cache, matrix, _ = targets
    proc = _tool(cache, matrix, "status", "--json", "--no-behaviour", "--topic", TOPIC)
    assert proc.returncode == ExitCode.SERIES_DOES_NOT_APPLY, proc.stderr
    rows = {r["target"]: r for r in json.loads(proc.stdout)["targets"]}
    on = rows["ggml-fixed"]["topics"][TOPIC]
    assert on["status"] == CONFLICT and on["behaviour"]["outcome"] == SKIPPED
    assert on["detail"].endswith("; behaviour not checked: skipped (--no-behaviour)")


def test_a_changed_tree_is_checked_again(targets):
    """The key is the tree's content: an edit in the target's ggml-opt.cpp and the check runs
    again (last: it changes the fixed target's checkout)."""
    _, cache, matrix, _ = targets
    target = matrix.target("ggml-fixed")
    key = json.loads(result_file(cache, target, TOPIC).read_text())["key"]
    opt = Path(str(target.source["path"])) / OPT
    opt.write_text(opt.read_text() + "// touched\n")
    row = status_of_targets(matrix, cache, ["ggml-fixed"], [TOPIC])[0]
    on = row.topics[TOPIC]
    assert (on.status, on.behaviour.cached) == (FIXED_BEHAVIOUR, False)
    assert json.loads(result_file(cache, target, TOPIC).read_text())["key"] != key
