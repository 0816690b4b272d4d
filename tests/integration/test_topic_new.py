"""`ggml-patch topic new`: a fork's commit (real git, a temporary checkout) made into a topic of the
queue: the source change first, then its tests, git am-able on the commit's parent; topic.yaml with
state local and the commit as its origin; queue.yaml naming it last. Bad input: one line, exit 2."""

import shutil
from pathlib import Path

import pytest

from orchestrator.config import load_matrix
from orchestrator.patchset.files import load_queue

from ..helpers.forks import ROOT, git
from ..helpers.tools import run_tool

OPT = "ggml/src/ggml-opt.cpp"
TEST = "tests/test-opt.cpp"


@pytest.fixture
def project(tmp_path):
    """A copy of the project (matrix.yaml, the queue, native_tests) and a fork checkout whose
    HEAD fixes a bug in ggml-opt.cpp and adds its case to test-opt.cpp."""
    for name in ("patches", "native_tests"):
        shutil.copytree(ROOT / name, tmp_path / "project" / name)
    shutil.copy(ROOT / "matrix.yaml", tmp_path / "project" / "matrix.yaml")
    fork = tmp_path / "fork"
    (fork / "ggml" / "src").mkdir(parents=True)
    (fork / "tests").mkdir()
    (fork / OPT).write_text("int ggml_opt_reset(void) {\n    return 0;\n}\n")
    (fork / TEST).write_text("int main(void) {\n    return 0;\n}\n")
    git(fork, "init", "-q", "-b", "master")
    git(fork, "remote", "add", "origin", "https://user:s3cret@example.org/fork/llama.cpp.git")
    git(fork, "add", ".")
    git(fork, "commit", "-qm", "base")
    (fork / OPT).write_text("int ggml_opt_reset(void) {\n    return 1; // zero the momenta\n}\n")
    git(fork, "commit", "-qam", "ggml-opt : reset the momenta too\n\nWhy: they leaked.")
    (fork / TEST).write_text("int main(void) {\n    return ggml_opt_reset() != 1;\n}\n")
    git(fork, "commit", "-qam", "tests : check the reset")
    return tmp_path / "project" / "matrix.yaml", fork


def _new(matrix: Path, *args: str):
    cache = matrix.parent.parent / "cache"
    return run_tool("topic", "new", *args, "--matrix", str(matrix), "--cache", str(cache))


def _one_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_fork_range_becomes_a_topic_that_git_am_applies(project):
    matrix, fork = project
    proc = _new(matrix, "momenta-reset", "--from", "HEAD~2..HEAD", "--repo", str(fork))
    assert proc.returncode == 0, proc.stderr
    topic = matrix.parent / "patches" / "momenta-reset"
    fix, test = sorted(topic.glob("*.patch"))
    assert fix.name == "0001-ggml-opt-reset-the-momenta-too.patch"
    assert test.name.startswith("0002-tests-add-the-cases-of-ggml-opt")
    assert f"diff --git a/{OPT}" in fix.read_text() and TEST not in fix.read_text()
    assert f"diff --git a/{TEST}" in test.read_text() and OPT not in test.read_text()
    assert "Why: they leaked." in fix.read_text()
    assert (topic / "cover.md").read_text().startswith("## Overview\n")
    queue = load_queue(load_matrix(matrix))
    # the new topic joins the end of the project's queue (a copy of patches/queue.yaml)
    shipped = load_queue(load_matrix(ROOT / "matrix.yaml")).names()
    assert queue.names() == [*shipped, "momenta-reset"]
    meta = queue.topic("momenta-reset").meta
    assert meta.state == "local" and meta.summary == "ggml-opt : reset the momenta too"
    # the remote without credentials and the commits, never the checkout's folder
    base, head = (git(fork, "rev-parse", r).strip() for r in ("HEAD~2", "HEAD"))
    assert meta.origin == f"https://example.org/fork/llama.cpp.git commits {base}..{head}"
    assert "s3cret" not in proc.stdout + proc.stderr + (topic / "topic.yaml").read_text()
    # the series, git am'd on the range's base, gives the fork's tree
    git(fork, "checkout", "-q", "-b", "replay", "HEAD~2")
    git(fork, "am", "-q", str(fix), str(test))
    assert git(fork, "rev-parse", "HEAD^{tree}") == git(fork, "rev-parse", "master^{tree}")


def test_one_commit_and_a_diff_file(project, tmp_path):
    matrix, fork = project
    both = tmp_path / "change.diff"
    both.write_text(git(fork, "diff", "--full-index", "HEAD~2", "HEAD"))
    proc = _new(matrix, "from-diff", "--from-diff", str(both), "--summary", "a fix from a diff")
    assert proc.returncode == 0, proc.stderr
    meta = load_queue(load_matrix(matrix)).topic("from-diff").meta
    assert (meta.summary, meta.origin) == ("a fix from a diff", "diff file change.diff")
    # one commit that touches only the source: no test, no topic
    line = _one_line(_new(matrix, "only-source", "--from", "HEAD~1", "--repo", str(fork)))
    assert "the change has no test under tests/" in line
    assert not (matrix.parent / "patches" / "only-source").exists()


@pytest.mark.parametrize(
    "args, expected",
    [
        (["accumulator-reset", "--from", "HEAD"], "exists: the topic 'accumulator-reset' is there"),
        (["Bad_Name", "--from", "HEAD"], "'Bad_Name' is not a topic name"),
        (["x", "--from", "no-such-rev"], "--from 'no-such-rev': "),
        (["x", "--from", "HEAD", "--after", "nope"], "--after[0]: unknown topic 'nope'"),
        (["x", "--from-diff", "/no/such.diff"], "--from-diff: /no/such.diff: no such file"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(project, args, expected):
    matrix, fork = project
    before = (matrix.parent / "patches" / "queue.yaml").read_text()
    line = _one_line(_new(matrix, *args, "--repo", str(fork)))
    assert expected in line, line
    assert (matrix.parent / "patches" / "queue.yaml").read_text() == before


def _op_fix(tmp_path: Path, cases: str) -> Path:
    """A diff fixing a CPU op whose cases are in tests/test-backend-ops.cpp (ggml's layout)."""
    ops = "tests/test-backend-ops.cpp"
    diff = tmp_path / "op-fix.diff"
    diff.write_text(
        "diff --git a/src/ggml-cpu/ops.cpp b/src/ggml-cpu/ops.cpp\n"
        "--- a/src/ggml-cpu/ops.cpp\n+++ b/src/ggml-cpu/ops.cpp\n"
        "@@ -1,3 +1,3 @@ static void ggml_compute_forward_concat_any(\n"
        "     int a;\n-    int o = 1;\n+    int o = 2;\n     int c;\n"
        f"diff --git a/{ops} b/{ops}\n--- a/{ops}\n+++ b/{ops}\n"
        "@@ -10,2 +10,3 @@ static std::vector<std::unique_ptr<test_case>> "
        "make_test_cases_eval() {\n"
        f"     }}\n+{cases}\n \n"
    )
    return diff


def test_the_tests_the_change_implies_are_written_and_said(project, tmp_path):
    matrix, _ = project
    diff = _op_fix(tmp_path, "    test_cases.emplace_back(new test_concat(type, ne, 7, 0, 0));")
    proc = _new(matrix, "op-fix", "--from-diff", str(diff), "--layout", "ggml")
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stdout.splitlines() if "tests:" in line]
    assert said == [
        "  op-fix: tests: `test-backend-ops -o CONCAT` (from tests/test-backend-ops.cpp: cases of "
        "test_concat)"
    ]
    meta = load_queue(load_matrix(matrix)).topic("op-fix").meta
    assert meta.tests == ["test-backend-ops -o CONCAT"]
    # the fork's commit above touches tests/test-opt.cpp
    fork = project[1]
    proc = _new(matrix, "momenta", "--from", "HEAD~2..HEAD", "--repo", str(fork))
    assert proc.returncode == 0, proc.stderr
    assert load_queue(load_matrix(matrix)).topic("momenta").meta.tests == ["test-opt"]


def test_tests_that_cannot_be_told_are_refused_with_the_line_and_given_by_test(project, tmp_path):
    matrix, _ = project
    loop = (
        "    for (int op = 0; op < GGML_UNARY_OP_COUNT; op++) new test_unary((ggml_unary_op) op);"
    )
    diff = _op_fix(tmp_path, loop)
    before = (matrix.parent / "patches" / "queue.yaml").read_text()
    line = _one_line(_new(matrix, "op-fix", "--from-diff", str(diff), "--layout", "ggml"))
    assert "test_unary cases do not name their op" in line
    assert "--test 'test-backend-ops -o OP'" in line
    assert not (matrix.parent / "patches" / "op-fix").exists()
    assert (matrix.parent / "patches" / "queue.yaml").read_text() == before
    bad = _one_line(_new(matrix, "op-fix", "--from-diff", str(diff), "--test", "backend -o X"))
    assert bad.startswith("ggml-patch: error: --test[0]: 'backend' is not a test program")
    proc = _new(
        matrix,
        "op-fix",
        "--from-diff",
        str(diff),
        "--layout",
        "ggml",
        "--test",
        "test-backend-ops -o GELU,SILU",
    )
    assert proc.returncode == 0, proc.stderr
    assert "tests: `test-backend-ops -o GELU,SILU` (as --test gives them)" in proc.stdout
    meta = load_queue(load_matrix(matrix)).topic("op-fix").meta
    assert meta.tests == ["test-backend-ops -o GELU,SILU"]
