"""A fork commit made into a topic and run through the matrix (issue 31 point 6, the README's walk
for a fork maintainer): a git repository holding the pinned ggml tree gets one commit with a small
source change (an empty result's loss without its uncertainty: no write through a NULL pointer)
and its test-opt case; `ggml-patch topic new NAME --from REV` splits it into the topic's series, and
`ggml-patch matrix --topic NAME` runs it on one CPU cell: the cell passes and the topic's control
(its source hunks reverted) is killed in its own case (a crash, which its topic.yaml declares)."""

import json

import pytest

from ..helpers.forks import (
    commit_change,
    pinned_targets,
    real_snapshot_refs,
    replace_once,
    repo_from_snapshot,
    seeded_cache,
    write_matrix,
)
from ..helpers.tools import run_tool

pytestmark = pytest.mark.e2e

NAME = "empty-result-loss"
OPT = "src/ggml-opt.cpp"  # the fork holds the ggml layout
TEST = "tests/test-opt.cpp"
EMPTY = "        *loss = 0.0;\n        *unc  = NAN;\n        return;\n"
EMPTY_FIXED = (
    "        *loss = 0.0;\n"
    "        if (unc) { // the caller may not want it\n"
    "            *unc = NAN;\n"
    "        }\n"
    "        return;\n"
)
CASE_BEFORE = "static std::pair<int, int> test_dataset(\n"
CASE = (
    "// the loss of an empty result, without its uncertainty (unc may be NULL)\n"
    "static std::pair<int, int> test_empty_result_loss(enum ggml_opt_optimizer_type optim) {\n"
    "    int ntest = 0;\n"
    "    int npass = 0;\n"
    "    // named first, flushed: a crash in ggml_opt_result_loss is attributed to it\n"
    '    printf("  %s(%s): running\\n", __func__, ggml_opt_optimizer_name(optim));\n'
    "    fflush(stdout);\n"
    "    ggml_opt_result_t result = ggml_opt_result_init();\n"
    "    double loss = -1.0;\n"
    "    ggml_opt_result_loss(result, &loss, /*unc =*/ nullptr);\n"
    "    print_ok(__func__, loss == 0.0, npass, ntest, ggml_opt_optimizer_name(optim));\n"
    "    ggml_opt_result_free(result);\n"
    "    return std::make_pair(npass, ntest);\n"
    "}\n"
    "\n"
)
REGISTER_AFTER = (
    "    int ntest = 0;\n\n    for (bool shuffle : {false, true}) {\n"
    "        std::pair<int, int> partial = test_dataset("
)
REGISTER = (
    "    int ntest = 0;\n\n"
    "    {\n"
    "        std::pair<int, int> partial = test_empty_result_loss(optim);\n"
    "        npass += partial.first;\n"
    "        ntest += partial.second;\n"
    "    }\n"
    "    for (bool shuffle : {false, true}) {\n"
    "        std::pair<int, int> partial = test_dataset("
)


def _test_edit(text: str) -> str:
    return replace_once(REGISTER_AFTER, REGISTER)(
        replace_once(CASE_BEFORE, CASE + CASE_BEFORE)(text)
    )


@pytest.fixture(scope="module")
def run(tool_cache, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("topic-matrix")
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp / "fork", refs["ggml"], tool_cache)
    rev = commit_change(
        fork,
        "empty-loss",
        {OPT: replace_once(EMPTY, EMPTY_FIXED), TEST: _test_edit},
        "ggml-opt : ggml_opt_result_loss of an empty result with no unc\n\nIt wrote the "
        "uncertainty of a result with no batch through unc,\nwhich callers may pass as NULL.",
    )
    matrix = write_matrix(tmp / "project", {"ggml": pinned_targets(refs)["ggml"]})
    cache = seeded_cache(tmp / "cache", tool_cache)
    where = ("--matrix", str(matrix), "--cache", str(cache.root))
    made = run_tool(
        "topic", "new", NAME, "--from", rev, "--repo", str(fork), "--layout", "ggml", *where
    )
    # its bug is a NULL dereference: the control dies in its own case, as topic.yaml declares
    topic_yaml = matrix.parent / "patches" / NAME / "topic.yaml"
    declared = "control_crash: ggml_opt_result_loss writes through a NULL unc\n"
    topic_yaml.write_text(topic_yaml.read_text() + declared)
    results = tmp / "results"
    ran = run_tool(
        "matrix",
        "--topic",
        NAME,
        "--target",
        "ggml",
        "--backend",
        "cpu",
        "--no-mutants",
        "--results",
        str(results),
        *where,
        cwd=tmp,
    )
    return made, ran, results, matrix.parent


def test_topic_new_splits_the_commit_into_source_then_tests(run):
    made, _, _, project = run
    assert made.returncode == 0, made.stderr
    fix, test = sorted((project / "patches" / NAME).glob("*.patch"))
    # the queue's layout (llama.cpp): the ggml paths re-targeted
    assert "diff --git a/ggml/src/ggml-opt.cpp" in fix.read_text()
    assert "tests/test-opt.cpp" not in fix.read_text()
    assert "+static std::pair<int, int> test_empty_result_loss(" in test.read_text()
    assert "state: local" in (project / "patches" / NAME / "topic.yaml").read_text()


def test_the_cell_runs_and_the_topics_control_is_killed_by_its_own_case(run):
    _, ran, results, _ = run
    assert ran.returncode == 0, ran.stderr[-3000:] + ran.stdout[-2000:]
    data = json.loads((results / "results.json").read_text())
    assert data["series"]["topics"] == [NAME]  # the topic alone: it follows no other
    (cell,) = data["cells"]
    assert (cell["cell"], cell["status"]) == ("ggml/cpu", "passed"), cell
    recs = {r["variant"]: r for r in data["records"]}
    patched = recs["patched"]
    assert patched["tests"]["test-opt"]["outcome"] == "passed"
    log = open(patched["tests"]["test-opt"]["log"], encoding="utf-8").read()
    assert "test_empty_result_loss(adamw): \x1b[1;32mOK" in log  # its case passed with the fix
    # the gate test is accumulator-reset's: not run without that topic, and said so
    assert patched["tests"]["test-opt-dynamic-accum"]["outcome"] == "skipped"
    control = recs["control"]
    assert control["topic"] == NAME and control["verdict"] == "killed", control["verdict_reason"]
    reason = control["verdict_reason"]
    assert reason.startswith("crash: SIGSEGV in its own case test_empty_result_loss"), reason
    assert control["reverted"] == ["src/ggml-opt.cpp"]
