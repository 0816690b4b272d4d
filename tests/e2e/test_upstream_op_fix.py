"""A real upstream op fix, tested by test-backend-ops, carried as a topic (issue 46 point 8; the
README's "Adding a fork's fix tested in test-backend-ops" is this walk by hand).

The fix: llama.cpp's CPU concat of quantized types (it copied a quantized row element by element,
past the end of its buffers; the fix copies whole blocks) with its 20 CONCAT cases in
tests/test-backend-ops.cpp. It is taken from two pinned PyPI sdists, never from a copy kept here:
llama-cpp-python 0.3.32 vendors llama.cpp without it, 0.3.33 with it. Between the two, its
vendored ggml/src/ggml-cpu/ops.cpp changed by this fix alone (3 hunks), and
tests/test-backend-ops.cpp by 3 hunks, one of them the concat cases; the topic's diff is those 4
hunks (unidiff). ggml 0.15.3 (the ggml target, ggml-python 0.0.45) still has the bug.

`topic new --from-diff` names the test (test-backend-ops -o CONCAT); `matrix --topic` on the ggml
target's CPU cell builds test-backend-ops alone (never test-opt), passes with the fix, and the
topic's control (its ops.cpp hunks reverted, its cases kept) dies in the quantized cases: killed,
as topic.yaml's control_crash declares (a CPU-only cell compares the CPU with its own reference
path, so a wrong value could not be seen there; the heap overflow can). `status` on a fork that
still has the bug, where the fix conflicts, never says "fixed upstream": the topic's own cases
crash there."""

from __future__ import annotations

import json
import os
import subprocess
import tarfile
from pathlib import Path

import pytest
import unidiff

from orchestrator.cache import Cache
from orchestrator.sources.pypi_sdist import download

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

NAME = "concat-quantized"
PACKAGE = "llama-cpp-python"
# (version, sha256) of the sdists just before and just after the fix (PyPI, 2026-06-29 and -07-05)
BEFORE = ("0.3.32", "b06502361770f82eb08b7f1a192eb084b9ead2b88fe32cda8c397a2782eabde6")
AFTER = ("0.3.33", "369ba03d02caaef42c1ed07bbdc454f7436e47c7675b8b9757fa13fbac6acd92")
VENDORED = "vendor/llama.cpp/"
OPS = "ggml/src/ggml-cpu/ops.cpp"
CASES = "tests/test-backend-ops.cpp"
TEST_LINE = "test-backend-ops -o CONCAT"
SUBJECT = "ggml-cpu: concat of quantized types copies whole blocks"
CRASH = "a quantized row is copied element by element, past the end of its buffers"
# the fork's edit: the line the fix replaces, annotated (the bug kept; the fix conflicts)
BUGGY = "    o[dim] = src0->ne[dim];\n\n    const char * x;\n"
FORKED = "    o[dim] = src0->ne[dim]; // fork: where src1 starts\n\n    const char * x;\n"


def _vendored(archive: Path) -> dict[str, bytes]:
    """OPS and CASES as the sdist vendors them (read from the archive; nothing unpacked)."""
    found = {}
    with tarfile.open(archive) as tar:
        for member in tar:
            rel = member.name.partition("/")[2]  # below the sdist's own top folder
            path = rel[len(VENDORED) :] if rel.startswith(VENDORED) else ""
            if member.isfile() and path in (OPS, CASES):
                found[path] = tar.extractfile(member).read()
    assert sorted(found) == sorted((OPS, CASES)), f"{archive.name}: {sorted(found)}"
    return found


def _git_diff(before: dict[str, bytes], after: dict[str, bytes], tmp: Path) -> str:
    """`git diff` of the two versions of the files (blob ids and all, as upstream's own)."""
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=tmp,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout

    git("init", "-q")
    for files in (before, after):
        for path, data in files.items():
            (tmp / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp / path).write_bytes(data)
        if files is before:
            git("add", "-A")
            git("commit", "-q", "-m", "before")
    return git("diff", "--", OPS, CASES)


def upstream_fix(tool_cache: Path, tmp: Path) -> Path:
    """The fix as a diff file: the pinned sdists (cached as the targets' are) compared, kept to
    ops.cpp's hunks and the hunk of the concat cases; a Subject: line of our own words."""
    cache = Cache(tool_cache)
    trees = [
        _vendored(download(PACKAGE, version, sha256, cache, f"{PACKAGE}=={version}"))
        for version, sha256 in (BEFORE, AFTER)
    ]
    (tmp / "trees").mkdir()
    patch = unidiff.PatchSet(_git_diff(*trees, tmp / "trees"))
    assert [(f.path, len(f)) for f in patch] == [(OPS, 3), (CASES, 3)]
    cases = patch[1]
    for hunk in list(cases):
        if not any("new test_concat(" in line.value for line in hunk if line.is_added):
            cases.remove(hunk)
    assert len(cases) == 1
    out = tmp / "ggml-cpu-concat-quantized.diff"
    out.write_text(f"Subject: {SUBJECT}\n\n{patch}")
    return out


def _records(data: dict, cell: str) -> dict:
    return {r["variant"]: r for r in data["records"] if f"{r['target']}/{r['backend']}" == cell}


@pytest.fixture(scope="module")
def run(tool_cache, tmp_path_factory, vulkan_missing):
    tmp = tmp_path_factory.mktemp("upstream-op-fix")
    diff = upstream_fix(tool_cache, tmp)
    refs = real_snapshot_refs(tool_cache)
    fork = repo_from_snapshot(tmp / "fork", refs["ggml"], tool_cache)
    commit_change(
        fork, "concat-note", {"src/ggml-cpu/ops.cpp": replace_once(BUGGY, FORKED)}, "fork: a note"
    )
    targets = {
        "ggml": pinned_targets(refs)["ggml"],
        "fork": f"layout: ggml\nsource: {{kind: git, url: '{fork}', ref: concat-note}}\n",
    }
    backends = ("cpu",) if vulkan_missing else ("cpu", "vulkan")
    matrix = write_matrix(tmp / "project", targets, backends=backends)
    cache = seeded_cache(tmp / "cache", tool_cache)
    where = ("--matrix", str(matrix), "--cache", str(cache.root))
    # the diff's paths are llama.cpp's (the sdists vendor llama.cpp): the queue's own layout
    origin = f"{PACKAGE} {BEFORE[0]}..{AFTER[0]} sdists ({VENDORED.rstrip('/')})"
    made = run_tool("topic", "new", NAME, "--from-diff", str(diff), "--origin", origin, *where)
    topic_yaml = matrix.parent / "patches" / NAME / "topic.yaml"
    if made.returncode == 0:  # its bug overflows the heap: the control dies, as declared
        topic_yaml.write_text(topic_yaml.read_text() + f"control_crash: {CRASH}\n")
    results = tmp / "results"
    with pytest.MonkeyPatch.context() as mp:
        # paths relative to this folder in ccache's keys: the status check's own build of
        # test-backend-ops (another build tree in the same cache) reuses the cell's compiles
        mp.setenv("CCACHE_BASEDIR", str(tmp))
        ran = run_tool(
            "matrix",
            "--topic",
            NAME,
            "--target",
            "ggml",
            *(a for b in backends for a in ("--backend", b)),
            "--no-mutants",
            "--results",
            str(results),
            *where,
            cwd=tmp,
        )
        on = ("--topic", NAME, "--target", "ggml", "--target", "fork", *where)
        status = run_tool("status", *on)
        as_json = run_tool("status", *on, "--json")
    return made, ran, results, status, as_json, diff


def test_topic_new_names_test_backend_ops_for_the_cases_the_fix_adds(run):
    made, _, _, _, _, diff = run
    assert made.returncode == 0, made.stderr
    said = [line.strip() for line in made.stdout.splitlines() if "tests:" in line]
    assert said == [
        f"{NAME}: tests: `{TEST_LINE}` (from tests/test-backend-ops.cpp: cases of test_concat)"
    ], made.stdout
    text = diff.read_text()
    assert text.count("+            test_cases.emplace_back(new test_concat(type_a,") == 1
    assert "ne00/ggml_blck_size(src0->type)" in text


def test_the_cell_runs_test_backend_ops_and_the_control_dies_in_the_quantized_cases(run):
    _, ran, results, _, _, _ = run
    assert ran.returncode == 0, ran.stderr[-3000:] + ran.stdout[-3000:]
    said = ran.stderr + ran.stdout  # the steps go to stderr
    assert "build patched targets test-backend-ops\n" in said  # that program alone
    assert "test-opt" not in said
    data = json.loads((results / "results.json").read_text())
    assert data["series"]["topics"] == [NAME]
    assert data["series"]["topic_tests"] == {NAME: [TEST_LINE]}
    cell = next(c for c in data["cells"] if c["cell"] == "ggml/cpu")
    recs = _records(data, "ggml/cpu")
    patched = recs["patched"]["tests"]
    assert list(patched) == [TEST_LINE] and patched[TEST_LINE]["outcome"] == "passed"
    log = Path(patched[TEST_LINE]["log"]).read_text(encoding="utf-8")
    ok = "\x1b[1;32mOK"  # test-backend-ops colours its verdicts
    assert f"CONCAT(type=q4_0,ne_a=[128,12,13,14],ne_b_d=256,dim=0,v=0): {ok}" in log
    assert f"Backend CPU: {ok}" in log
    control = recs[f"control:{NAME}"]
    assert control["topic"] == NAME
    assert control["reverted"] == ["src/ggml-cpu/ops.cpp"]
    # killed where test-backend-ops can see it; a heap overflow that happens not to crash is
    # "cannot be judged" on the CPU (never survived, never passed)
    if control["verdict"] == "killed":
        assert control["tests"][TEST_LINE]["outcome"] == "crashed", control["tests"]
        assert control["failure_line"].startswith(f"{TEST_LINE}: SIG"), control["failure_line"]
        reason = control["verdict_reason"]
        assert reason.startswith("132 cases pass with the fix; without it: the process died ("), (
            reason
        )
        assert cell["status"] == "passed", cell
        # no gate ran here: the cell's reason does not name one
        assert cell["reason"].endswith("each topic's control is killed by its own tests"), cell
    else:
        assert control["status"] == "skipped", control
        assert "own reference path" in control["verdict_reason"], control["verdict_reason"]
        assert cell["status"] == "skipped", cell  # neither passed nor failed
        assert cell["reason"].startswith("cannot be judged here: "), cell


def test_the_vulkan_cell_compares_with_the_cpu_reference_and_says_what_it_can_judge(
    run, vulkan_missing
):
    # issue 46 point 4: the same topic on a second backend's cell. Vulkan0 is compared with the
    # CPU reference; ggml 0.15.3's Vulkan does not support quantized CONCAT (its supports_op),
    # so the 20 cases that catch the bug are not run there: "cannot be judged", never passed.
    if vulkan_missing:
        pytest.skip(f"Vulkan is not set up here: {vulkan_missing}")
    _, ran, results, _, _, _ = run
    assert ran.returncode == 0, ran.stderr[-3000:] + ran.stdout[-3000:]
    data = json.loads((results / "results.json").read_text())
    cell = next(c for c in data["cells"] if c["cell"] == "ggml/vulkan")
    recs = _records(data, "ggml/vulkan")
    patched = recs["patched"]["tests"][TEST_LINE]
    assert patched["outcome"] == "passed", patched["outcome"]
    devices = {r["device"] for r in patched["rows"]}
    assert devices == {"Vulkan0"}, devices  # Vulkan's rows, each compared with the CPU's
    unsupported = [r["case"] for r in patched["rows"] if r["status"] == "SKIPPED"]
    control = recs[f"control:{NAME}"]
    assert control["reverted"] == ["src/ggml-cpu/ops.cpp"]
    summary = (results / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith(f"| {NAME} |"))
    if control.get("verdict") == "killed":  # a Vulkan that runs them: the CPU reference dies
        assert cell["status"] == "passed", cell
        assert row.endswith("| **proven** |"), row
        return
    assert control["status"] == "skipped", control  # neither passed nor failed
    assert "verdict" not in control, control
    assert all(case.startswith("CONCAT(type=q") for case in unsupported), unsupported
    compared = len(patched["rows"]) - len(unsupported)
    why = (
        f"cannot be judged on Vulkan0: the control passes the {compared} cases compared there; "
        f"{len(unsupported)} are not supported there"
    )
    assert len(unsupported) == 20 and control["verdict_reason"] == f"{TEST_LINE}: {why}", control
    assert cell["status"] == "skipped" and cell["reason"].endswith(why), cell
    assert f"| **cannot be judged**: {TEST_LINE}: {why} |" in row, row
    cpu = _records(data, "ggml/cpu")[f"control:{NAME}"]
    if cpu["verdict"] == "killed":  # the table's two columns: proven on the CPU, not here
        assert row.startswith(f"| {NAME} | **proven** | **cannot be judged**: "), row


def test_status_on_a_fork_that_keeps_the_bug_never_says_fixed_upstream(run):
    _, _, _, status, as_json, _ = run
    assert status.returncode == as_json.returncode == 4, status.stderr[-3000:]  # a conflict
    assert "fixed upstream" not in status.stdout + status.stderr
    rows = {t["target"]: t for t in json.loads(as_json.stdout)["targets"]}
    assert rows["ggml"]["topics"][NAME]["status"] == "applies cleanly"
    fork = rows["fork"]["topics"][NAME]
    assert fork["status"] == "conflict", fork
    # its own cases, built and run on the fork as it is, die there: the bug is still present
    assert fork["behaviour"]["outcome"] == "failed", fork
    assert fork["behaviour"]["detail"].startswith(f"{TEST_LINE} crashed ("), fork
