"""A fork commit made into a topic and run through the matrix (issue 31 point 6, the README's walk
for a fork maintainer): a git repository holding the pinned ggml tree gets one commit with a small
source change (an empty result's loss without its uncertainty: no write through a NULL pointer)
and its test-opt case; `ggml-patch topic new NAME --from REV` splits it into the topic's series, and
`ggml-patch matrix --topic NAME` runs it (after accumulator-reset, which it declares it follows)
on one CPU cell: the cell passes and the topic's control (its source hunks reverted) is killed in
its own case (a crash, which its topic.yaml declares); its bundle carries only its own commits."""

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
        "ggml-opt : the loss of an empty result without its uncertainty\n\n"
        "ggml_opt_result_loss wrote the uncertainty of a result with no batch\n"
        "through unc, which callers may pass as NULL.",
    )
    matrix = write_matrix(tmp / "project", {"ggml": pinned_targets(refs)["ggml"]})
    cache = seeded_cache(tmp / "cache", tool_cache)
    where = ("--matrix", str(matrix), "--cache", str(cache.root))
    # --after: the topic follows accumulator-reset (its bundle goes on top of that topic)
    made = run_tool(
        "topic",
        "new",
        NAME,
        "--from",
        rev,
        "--repo",
        str(fork),
        "--layout",
        "ggml",
        "--after",
        "accumulator-reset",
        *where,
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
    assert data["series"]["topics"] == ["accumulator-reset", NAME]  # with what it follows
    (cell,) = data["cells"]
    assert (cell["cell"], cell["status"]) == ("ggml/cpu", "passed"), cell
    recs = {r["variant"]: r for r in data["records"]}
    patched = recs["patched"]
    assert patched["tests"]["test-opt"]["outcome"] == "passed"
    log = open(patched["tests"]["test-opt"]["log"], encoding="utf-8").read()
    assert "test_empty_result_loss(adamw): \x1b[1;32mOK" in log  # its case passed with the fix
    control = recs[f"control:{NAME}"]
    assert control["topic"] == NAME and control["verdict"] == "killed", control["verdict_reason"]
    reason = control["verdict_reason"]
    assert reason.startswith("crash: SIGSEGV in its own case test_empty_result_loss"), reason
    assert control["reverted"] == ["src/ggml-opt.cpp"]
    assert recs["control:accumulator-reset"]["verdict"] == "killed"  # by the gate


def test_its_bundle_carries_only_its_own_commits_after_the_topic_it_follows(run):
    """`after: [accumulator-reset]`: the topic's bundle goes on the base with that topic applied
    first; the bundle holds only the topic's own two commits and the manifest names what it
    follows; the verification (git am of both, build, tests) passes."""
    _, ran, results, project = run
    assert ran.returncode == 0, ran.stderr[-3000:]
    made = run_tool(
        "bundle",
        "--topic",
        NAME,
        "--target",
        "ggml",
        "--results",
        str(results),
        "--matrix",
        str(project / "matrix.yaml"),
        "--cache",
        str(project.parent / "cache"),
        "--author",
        "Ada Contributor <ada@example.org>",
        cwd=project.parent,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    out = results / "bundle" / NAME / "ggml"
    patches = sorted(p.name for p in out.glob("*.patch"))
    own = sorted(p.name for p in (project / "patches" / NAME).glob("*.patch"))
    assert len(patches) == len(own) == 2
    texts = [(out / p).read_text() for p in patches]
    assert "the loss of an empty result" in texts[0]  # its subject (folded further on)
    assert "test_empty_result_loss" in texts[1]
    assert not any("reset gradient accumulators" in t for t in texts)
    man = json.loads((out / "manifest.json").read_text())
    assert man["topic"] == NAME and man["after"] == ["accumulator-reset"]
    assert man["verification"]["tests"]["test-opt"]["outcome"] == "passed"
    assert not (results / "bundle" / "accumulator-reset").exists()  # only the topic asked for
