"""End to end: the real default matrix on both pinned upstream targets (real sdists, CMake, tests):
CPU always, Vulkan through lavapipe where orchestrator/scripts/setup-vulkan-lavapipe.sh has run,
CUDA and Metal skipped with their reasons on a machine without them. Every known-wrong fix
(native_tests/<topic>/mutants/) is killed on both layouts. Then the `sanitize` profile
(cpu-sanitize on both layouts), named as a user names it.

Slow (about a minute cold on 2 cores for CPU, about 200 s more per target for Vulkan; the sdists
are fetched once into the tool's cache). cpu-sanitize runs on both layouts: a cell with an empty
ccache cost 347 s (ggml) and 322 s (llama.cpp) on 2 cores shared with another build (load average
about 4), 130 s and 110 s quiet; it no longer runs the 12 mutants (each a sanitized rebuild), so
it costs less than before in .ci/run (about 30 minutes cold, 90 allowed). One layout alone would
leave the other's sanitizer build unchecked (the native_tests harness for llama.cpp, ggml's own
test build for ggml).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..helpers.patches import queue_topics, real_queue, real_series_of_queue
from ..helpers.tools import run_tool

FAILURE_LINE = "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"
VK_FAILURE_LINE = "device=Vulkan0 opt_period=1: FAIL at step 2: w=0.25 expected 0.5"
TARGETS = ["llama.cpp", "ggml"]
BACKENDS = ["cpu", "vulkan", "cuda", "metal"]  # the default profile, in order
N_CELLS = len(TARGETS) * len(BACKENDS)
NATIVE = Path(__file__).resolve().parents[2] / "native_tests"
TOPICS = queue_topics()  # patches/queue.yaml, as a run without --topic applies it
QUEUE_SERIES = real_series_of_queue()
CONTROL = f"control:{TOPICS[0]}"  # the gate's topic's control
# each topic's known-wrong fixes; the gate (topic 1's test) kills topic 1's only
TOPIC_MUTANTS = {t: len(list((NATIVE / t / "mutants").glob("*.patch"))) for t in TOPICS}
N_MUTANTS = sum(TOPIC_MUTANTS.values())
N_GATE_KILLS = TOPIC_MUTANTS["accumulator-reset"]
# the case each topic's test patch adds to test-opt (its first): what kills its control and its
# mutants (tests/unit/test_topic_controls.py pins the shipped topics' cases)
OWN_CASE = {t: c[0] for t in TOPICS if (c := QUEUE_SERIES.topic_cases(t))}


def _cell(data, target, backend):
    return next(c for c in data["cells"] if c["target"] == target and c["backend"] == backend)


def _recs(data, target, backend):
    return {
        r["variant"]: r
        for r in data["records"]
        if r["target"] == target and r["backend"] == backend
    }


WHOLE_QUEUE = tuple(TOPICS)


@pytest.fixture(scope="module")
def matrix_run(repo_root, tool_cache, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    # --rerun: build and test for real even where the tool cache holds this exact result; no
    # --topic: the default run carries every active topic (WHOLE_QUEUE)
    proc = run_tool(
        "matrix",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--rerun",
        "--results",
        str(results),
        "--cache",
        str(tool_cache),
        cwd=results,
    )
    return proc, results


@pytest.fixture(scope="module")
def sanitize_run(repo_root, tool_cache, tmp_path_factory):
    """The sanitize profile, as the README names it (cpu-sanitize on both targets)."""
    results = tmp_path_factory.mktemp("results-sanitize")
    proc = run_tool(
        "matrix",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--profile",
        "sanitize",
        "--rerun",
        "--results",
        str(results),
        "--cache",
        str(tool_cache),
        cwd=results,
    )
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    return proc, results


def test_matrix_exits_zero_and_writes_results(matrix_run, vulkan_missing):
    proc, results = matrix_run
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-2000:]
    assert (results / "results.json").exists() and (results / "summary.md").exists()
    # without --topic the run carried the whole queue, in order
    data = json.loads((results / "results.json").read_text())
    assert data["series"]["topics"] == list(WHOLE_QUEUE)
    # CUDA and Metal are skipped here (no GPU, not macOS); Vulkan runs wherever its setup ran
    expected = (
        "2 passed, 0 failed, 6 skipped" if vulkan_missing else "4 passed, 0 failed, 4 skipped"
    )
    assert expected in proc.stdout
    # progress names the cell and the step
    assert re.search(rf"\[\d+/{N_CELLS}\] llama.cpp/cpu: build patched", proc.stderr)
    assert f"[1/{N_CELLS}] ggml/cpu: control" in proc.stderr  # the cheapest cell first


def test_each_cell_prints_its_verdict_and_time_as_it_ends_and_the_run_its_times(matrix_run):
    """The verdict as soon as a cell's control is judged, every cell's verdict before any cell's
    known-wrong fixes (issue 35: two phases), the cell's result with its time when it ends, and
    the time per cell at the end."""
    proc, _ = matrix_run
    err = proc.stderr
    ends, verdicts = {}, {}
    for cell in ("ggml/cpu", "llama.cpp/cpu"):
        verdict = err.index(
            f"  {cell}: verdict: with the fix every test passes; the control (fix reverted): killed"
        )
        m = re.search(rf"^  {re.escape(cell)}: passed - .* \((\d+\.\d) s\)$", err, re.M)
        assert m and verdict < m.start(), err[-3000:]
        # the verdict came before the mutants, the result after
        assert err.index(f"{cell}: mutant ") < m.start()
        ends[cell], verdicts[cell] = m.start(), verdict
    # phase 1: the cheapest cell builds first, with every core; the next starts once it has built
    # (beside the first cell's controls); phase 2: every cell's first verdict before any mutant
    built = err.index("    ggml/cpu: built (")
    fetch = err.index("llama.cpp/cpu: fetch")
    first_mutant = min(err.index(f"{cell}: mutant ") for cell in verdicts)
    first_verdicts = [err.index(f"  {cell}: verdict: ") for cell in verdicts]
    assert built < fetch < first_verdicts[1] <= verdicts["llama.cpp/cpu"]
    assert max(first_verdicts) < first_mutant
    assert err.index("phase 2/2: known-wrong and competing fixes") < first_mutant
    # phase 2 runs a cell per core: they end in either order, both after every first verdict
    assert min(ends.values()) > first_mutant
    times = err[err.index("time per cell:") :]
    assert err.index("time per cell:") > max(ends.values())
    rows = re.findall(r"^  (\S+)\s+(\d+\.\d) s  (\w[\w-]*)$", times, re.M)
    assert [r[0] for r in rows][:2] == ["ggml/cpu", "llama.cpp/cpu"] and len(rows) == N_CELLS, times
    assert {r[2] for r in rows} <= {"passed", "skipped"}
    assert re.search(r"^  all cells\s+\d+\.\d s$", times, re.M)


@pytest.mark.parametrize("target", ["llama.cpp", "ggml"])
def test_each_target_patched_passes_and_control_is_killed(matrix_run, target):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    cell = _cell(data, target, "cpu")
    assert cell["status"] == "passed", cell
    assert cell["source"]["base_commit"] and cell["patched_commit"]
    assert cell["attribution"] == []
    recs = _recs(data, target, "cpu")

    patched = recs["patched"]
    assert patched["tests"]["test-opt"]["outcome"] == "passed"
    assert {
        (r["device"], r["optimizer"], r["status"]) for r in patched["tests"]["test-opt"]["rows"]
    } == {("CPU", "adamw", "OK"), ("CPU", "sgd", "OK")}
    gate = patched["tests"]["test-opt-dynamic-accum"]
    assert gate["outcome"] == "passed"
    assert [r["case"] for r in gate["rows"][:3]] == ["opt_period=1", "opt_period=2", "opt_period=3"]
    assert len(gate["rows"]) == 29 and {r["status"] for r in gate["rows"]} == {"OK"}

    control = recs[CONTROL]
    assert control["verdict"] == "killed"
    assert control["failure_line"] == FAILURE_LINE
    assert control["tests"]["test-opt-dynamic-accum"]["exit_code"] == 1
    # test-opt's per-step cases (patch 0002, what upstream keeps)
    # fail without the fix too, by their own check
    assert (
        control["tests"]["test-opt"]["outcome"] == "failed"
        and control["tests"]["test-opt"]["exit_code"] == 1
    )
    assert control["verdict_reason"].endswith("test-opt fails too (its per-step cases)")
    assert control["reverted"] == (
        ["ggml/src/ggml-opt.cpp"] if target == "llama.cpp" else ["src/ggml-opt.cpp"]
    )
    # the control reused the patched build tree: only the reverted file and the relinks were rebuilt
    steps = re.findall(r"^\[(\d+)/(\d+)\]", Path(control["build"]["log"]).read_text(), re.M)
    assert steps and int(steps[-1][1]) <= 6, steps
    # one control per topic, each killed by its own cases (topic 2's by a crash it declares)
    assert control["topic"] == "accumulator-reset"
    for topic in TOPICS[1:]:
        other = recs[f"control:{topic}"]
        assert other["topic"] == topic and other["verdict"] == "killed", other["verdict_reason"]
        assert OWN_CASE[topic] in other["verdict_reason"]
        assert other["reverted"] == control["reverted"]
        steps = re.findall(r"^\[(\d+)/(\d+)\]", Path(other["build"]["log"]).read_text(), re.M)
        assert steps and int(steps[-1][1]) <= 6, steps
    crash = recs["control:grad-acc-non-static"]["verdict_reason"]
    assert crash.startswith("crash: SIGSEGV in its own case test_grad_non_static"), crash
    # killed by its own cases; another topic's case fails there only where that topic follows
    # this one (`after:`: its cases run on this one's fix, e.g. grad_acc across optimizer steps
    # needs the accumulators reset) (topic 2's control stops at its own crash, so the others'
    # cases do not run there)
    queue = real_queue()
    for variant, topic in ((CONTROL, TOPICS[0]), (f"control:{TOPICS[2]}", TOPICS[2])):
        log = Path(recs[variant]["tests"]["test-opt"]["log"]).read_text()
        failed = set(re.findall(r"^\s*(test_\w+)\(.*FAIL", log, re.M))
        followers = {t.name for t in queue.topics if topic in t.meta.after}
        allowed = {OWN_CASE[t] for t in followers if t in OWN_CASE}
        assert OWN_CASE[topic] in failed and failed <= {OWN_CASE[topic], *allowed}, (
            variant,
            failed,
        )
        others = [OWN_CASE[t] for t in TOPICS if t != topic and t not in followers]
        assert all(re.search(rf"^\s*{case}\(.*OK", log, re.M) for case in others), variant
    summary = (results / "summary.md").read_text()
    assert "## Controls per topic" in summary
    for topic in TOPICS:
        assert f"| {target}/cpu | {topic} | **killed** |" in summary


def test_results_json_keeps_every_key_of_the_committed_sample(matrix_run):
    """A fresh results.json has every key path the committed sample has (keys added since are
    additions); schema_version changes only when a key changes meaning or goes away."""
    from ..helpers.samples import CPU_SAMPLE as CPU
    from ..helpers.samples import key_paths

    _, results = matrix_run
    fresh = json.loads((results / "results.json").read_text())
    sample = json.loads(CPU.read_text())
    assert fresh["schema_version"] == sample["schema_version"]
    missing = key_paths(sample) - key_paths(fresh)
    assert not missing, (
        f"keys of the committed sample gone from a fresh results.json: {sorted(missing)}"
    )


def test_summary_names_the_failure_line(matrix_run, vulkan_missing):
    _, results = matrix_run
    summary = (results / "summary.md").read_text()
    assert (
        f"2/{N_CELLS} cells passed (6 skipped)"
        if vulkan_missing
        else f"4/{N_CELLS} cells passed (4 skipped)"
    ) in summary
    for cell in ("llama.cpp/cpu", "ggml/cpu"):
        row = next(line for line in summary.splitlines() if line.startswith(f"| {cell} | "))
        assert f"| killed | `{FAILURE_LINE}` |" in row, row
        assert (
            f"| {cell} | CPU | without fix | " in summary
            and f"| {cell} | CPU | with fix | " in summary
        )


@pytest.mark.parametrize("target", TARGETS)
def test_cuda_and_metal_are_skipped_with_their_reasons(matrix_run, target):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    cuda, metal = _cell(data, target, "cuda"), _cell(data, target, "metal")
    if cuda["status"] != "skipped":
        pytest.skip(f"this machine runs CUDA: {cuda['status']}")
    assert re.search(r"no CUDA device|nvcc|cuBLAS", cuda["reason"]), cuda["reason"]
    assert metal["status"] == "skipped" and metal["reason"].startswith("Metal needs macOS"), metal
    assert cuda["exit_code"] == metal["exit_code"] == 0
    # nothing built or run
    assert not _recs(data, target, "cuda") and not _recs(data, target, "metal")
    summary = (results / "summary.md").read_text()
    # the reasons are data: summary.md shows them inert (publish.text escapes `_`, `*`, ...)
    from orchestrator import publish

    assert f"**{target}/cuda**: skipped — {publish.text(cuda['reason'])}" in summary
    assert f"**{target}/metal**: skipped — {publish.text(metal['reason'])}" in summary


# ---- Vulkan through lavapipe (orchestrator/scripts/setup-vulkan-lavapipe.sh; .ci/run runs it) ----


@pytest.mark.parametrize("target", TARGETS)
def test_vulkan_cell_passes_with_rows_for_both_devices(matrix_run, vulkan_missing, target):
    if vulkan_missing:
        pytest.skip(f"Vulkan is not set up here: {vulkan_missing}")
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    cell = _cell(data, target, "vulkan")
    assert cell["status"] == "passed", cell
    assert cell["attribution"] == []
    assert any(d.startswith("llvmpipe") for d in cell["device"]["devices"]), cell["device"]
    recs = _recs(data, target, "vulkan")

    patched = recs["patched"]
    assert {
        (r["device"], r["optimizer"], r["status"]) for r in patched["tests"]["test-opt"]["rows"]
    } == {
        ("Vulkan0", "adamw", "OK"),
        ("Vulkan0", "sgd", "OK"),
        ("CPU", "adamw", "OK"),
        ("CPU", "sgd", "OK"),
    }
    gate = patched["tests"]["test-opt-dynamic-accum"]
    assert {r["device"] for r in gate["rows"]} == {"Vulkan0", "CPU"} and {
        r["status"] for r in gate["rows"]
    } == {"OK"}
    assert len(gate["rows"]) == 2 * 29

    control = recs[CONTROL]
    assert control["verdict"] == "killed", control["verdict_reason"]
    # the Vulkan device's own failure, not only the CPU's
    assert control["failure_line"] == VK_FAILURE_LINE
    vk_rows = [
        r for r in control["tests"]["test-opt-dynamic-accum"]["rows"] if r["device"] == "Vulkan0"
    ]
    assert [(r["opt_period"], r["status"]) for r in vk_rows[:3]] == [
        (1, "FAIL"),
        (2, "FAIL"),
        (3, "FAIL"),
    ]
    assert vk_rows[0]["actual"] == 0.25 and vk_rows[0]["expected"] == 0.5
    # test-opt's per-step cases (patch 0002, what upstream keeps)
    # fail without the fix too, by their own check
    assert (
        control["tests"]["test-opt"]["outcome"] == "failed"
        and control["tests"]["test-opt"]["exit_code"] == 1
    )
    assert control["verdict_reason"].endswith("test-opt fails too (its per-step cases)")

    summary = (results / "summary.md").read_text()
    assert f"| {target}/vulkan | Vulkan0 | with fix | 2/2 | 29/29 | — |" in summary
    row = next(
        ln
        for ln in summary.splitlines()
        if ln.startswith(f"| {target}/vulkan | Vulkan0 | without fix |")
    )
    # without the fix test-opt's per-step cases fail too (0/2), then the gate's own line
    assert (
        row.startswith(f"| {target}/vulkan | Vulkan0 | without fix | 0/2 | ")
        and f"`{VK_FAILURE_LINE}`" in row
    )
    assert f"| {target}/vulkan | CPU | with fix | 2/2 | 29/29 | — |" in summary


def _system_lavapipe_is_mesa_22(tool_cache):
    from orchestrator.backends import vulkan

    sdk = vulkan.Vulkan(tool_cache).sdk()
    icd = sdk.get("system_icd")
    if not icd or not Path(icd).is_file():
        return None
    out = subprocess.run(
        ["vulkaninfo", "--summary"],
        capture_output=True,
        text=True,
        env={**os.environ, "VK_ICD_FILENAMES": icd},
    ).stdout
    return icd if "Mesa 22." in out else None


def test_debian12_system_lavapipe_crash_is_pre_existing(
    matrix_run, vulkan_missing, repo_root, tool_cache, tmp_path
):
    """Debian 12's own Mesa 22.3.6 lavapipe crashes (a double free in the driver) in test-opt on
    Vulkan0 and in the gate's static-graph schedule cases, with and without the fix: pre-existing,
    not a regression, never a pass. The gate's per-step cases ran before the crash: OK with the
    fix, the exact failure lines without it; the control is invalid (a crash is not its own check).
    Reuses the vulkan cell's build tree (seconds)."""
    if vulkan_missing:
        pytest.skip(f"Vulkan is not set up here: {vulkan_missing}")
    if not _system_lavapipe_is_mesa_22(tool_cache):
        pytest.skip(
            "the system lavapipe is not Debian 12's Mesa 22.x (only Debian 12 has that crash)"
        )
    env = {**os.environ, "GGML_PATCH_VULKAN_ICD": "system"}
    results = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "matrix",
            "--matrix",
            str(repo_root / "matrix.yaml"),
            "--cache",
            str(tool_cache),
            "--results",
            str(results),
            "--target",
            "ggml",
            "--backend",
            "vulkan",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(repo_root)},
    )
    data = json.loads((results / "results.json").read_text())
    cell = _cell(data, "ggml", "vulkan")
    recs = _recs(data, "ggml", "vulkan")
    if recs["patched"]["tests"]["test-opt"]["outcome"] == "passed":
        pytest.skip("Mesa 22.3.6 did not crash this time (it did in every run measured)")
    assert "Mesa 22." in " ".join(cell["device"]["drivers"])
    assert proc.returncode == 6, proc.stderr[-2000:]  # a failing test with the fix: never a pass
    assert cell["status"] == "failed" and cell["failure_kind"] == "pre-existing", cell
    assert {(e["test"], e["label"]) for e in cell["attribution"]} == {
        ("test-opt", "pre-existing"),
        ("test-opt-dynamic-accum", "pre-existing"),
    }
    assert "pre-existing, fails without the fix too: test-opt on Vulkan0 crashed" in cell["reason"]
    gate = {v: recs[v]["tests"]["test-opt-dynamic-accum"] for v in ("patched", CONTROL)}
    assert gate["patched"]["outcome"] == gate[CONTROL]["outcome"] == "crashed"
    # Where the driver crashes varies from run to run (3
    # and 7 cases seen): every case before it is OK.
    statuses = [r["status"] for r in gate["patched"]["rows"]]
    assert len(statuses) >= 3 and set(statuses) == {"OK"}, statuses
    assert gate[CONTROL]["rows"][0]["line"] == VK_FAILURE_LINE
    assert recs[CONTROL]["verdict"] == "invalid"
    summary = (results / "summary.md").read_text()
    assert "## Failure attribution" in summary and "**pre-existing**" in summary


def test_the_upstream_base_commit_is_recorded(matrix_run):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    llama = next(c for c in data["cells"] if c["target"] == "llama.cpp")
    assert llama["source"]["upstream_commit"] == "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


def test_rerun_reuses_the_tree_and_the_exported_series_applies_with_plain_git_am(
    matrix_run, repo_root, tool_cache, tmp_path
):
    """`ggml-patch export` writes the ggml-layout series; plain `git am` applies it to the
    same snapshot checked out fresh, and the regression test
    there is the series' own cases in test-opt."""
    out = tmp_path / "series"
    proc = run_tool(
        "export",
        "--matrix",
        str(repo_root / "matrix.yaml"),
        "--cache",
        str(tool_cache),
        "--target",
        "ggml",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    patches = sorted(out.glob("*.patch"))
    assert len(patches) == 6  # the whole queue: each topic's source change, then its cases
    assert (
        "src/ggml-opt.cpp" in patches[0].read_text() and "ggml/src/" not in patches[0].read_text()
    )
    assert (
        "+++ b/tests/test-opt.cpp" in patches[1].read_text()
        and "new file mode" not in patches[1].read_text()
    )

    from orchestrator.vcs.snapshots import SnapshotRepo

    repo = SnapshotRepo(tool_cache / "snapshots.git")
    ref = next(
        r
        for r in repo.git("for-each-ref", "--format=%(refname)", "refs/snapshots/").split()
        if "ggml-python" in r
    )
    clone = tmp_path / "ggml"
    subprocess.run(["git", "clone", "-q", str(repo.path), str(clone)], check=True)
    env = {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}
    subprocess.run(
        ["git", "-C", str(clone), "checkout", "-q", "--detach", repo.ref_commit(ref)], check=True
    )
    am = subprocess.run(
        ["git", "-C", str(clone), "am", *map(str, patches)], capture_output=True, text=True, env=env
    )
    assert am.returncode == 0, am.stderr
    # the regression test is cases in upstream's own test-opt.cpp: no new file under tests/
    cases = (clone / "tests/test-opt.cpp").read_text()
    assert all(case in cases for case in OWN_CASE.values())
    assert not (clone / "tests/test-opt-dynamic-accum.cpp").exists()


def test_build_only_builds_both_variants_and_runs_nothing(
    matrix_run, repo_root, tool_cache, tmp_path, monkeypatch
):
    """`--build-only` on a cell whose device is missing (CUDA without a GPU, stood in for by the CPU
    backend here: a CUDA build takes 17 minutes): built with and without the fix, no test run,
    status build-only, never counted as passed."""
    from orchestrator import backends
    from orchestrator.backends.cpu import Cpu
    from orchestrator.cache import Cache
    from orchestrator.config import load_matrix
    from orchestrator.report.summary import summary_markdown
    from orchestrator.run import matrix

    class NoDevice(Cpu):
        build_only_ok = True

        def missing_device(self, backend):
            return "no device here (test stand-in)"

    # the registry every cell asks (run/pipeline.py and run/matrix.py import it by name)
    monkeypatch.setattr(backends, "get", lambda name, cache_root=None: NoDevice(cache_root))
    opts = matrix.RunOptions(
        matrix=load_matrix(repo_root / "matrix.yaml"),
        cache=Cache(tool_cache),
        results_dir=tmp_path / "results",
        targets=["ggml"],
        backends=["cpu"],
        build_only=True,
    )
    run = matrix.run_matrix(opts)
    results = run.to_json()
    (cell,) = results["cells"]
    assert cell["status"] == "build-only", cell
    assert (
        cell["reason"]
        == "built with and without the fix; tests not run: no device here (test stand-in)"
    )
    assert cell["exit_code"] == 0 and results["exit_code"] == 0
    recs = {r["variant"]: r for r in results["records"]}
    assert recs["patched"]["build"]["ok"] and recs[CONTROL]["build"]["ok"]
    assert recs["patched"]["tests"] == {} and recs[CONTROL]["tests"] == {}
    # the results model, not its JSON
    assert "0/1 cells passed (1 build-only)" in summary_markdown(run)
    # without --build-only the same cell is a skip with the reason
    opts.build_only = False
    (cell,) = matrix.run_matrix(opts).to_json()["cells"]
    assert (cell["status"], cell["reason"]) == ("skipped", "no device here (test stand-in)")


def test_training_evidence_for_both_variants(matrix_run):
    """train-opt-dynamic runs in both variants of the CPU cells; without the fix the loss grows."""
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    for target in ("llama.cpp", "ggml"):
        cell = next(c for c in data["cells"] if c["cell"] == f"{target}/cpu")
        t = cell["training"]
        assert len(t["patched"]) == len(t["control"]) == 6
        assert t["diverges_as_predicted"] is True
        assert t["patched"][-1]["train_loss"] < t["patched"][0]["train_loss"] / 10
        assert t["control"][-1]["train_loss"] > t["control"][0]["train_loss"]
        recs = {r["variant"]: r for r in data["records"] if r["cell"] == cell["cell"]}
        assert recs["patched"]["training"]["epochs"] == t["patched"]
        assert recs[CONTROL]["training"]["epochs"] == t["control"]
        assert recs["patched"]["training"]["duration_s"] < 60
    assert "## Training: loss per epoch" in (results / "summary.md").read_text()


# ---- cpu-sanitize (ASan + UBSan): the gate alone, test-opt skipped with its reason ----


@pytest.mark.parametrize("target", TARGETS)
def test_cpu_sanitize_passes_with_test_opt_skipped_and_the_verdict_on_the_gate_alone(
    sanitize_run, target
):
    from orchestrator.backends.cpu_sanitize import MUTANTS_SKIP, TEST_OPT_SKIP

    _, results = sanitize_run
    data = json.loads((results / "results.json").read_text())
    cell = _cell(data, target, "cpu-sanitize")
    assert cell["status"] == "passed" and cell["exit_code"] == 0, cell
    assert "test-opt not run on this backend" in cell["reason"]
    assert cell["device"]["sanitizers"] == ["address", "undefined"]
    recs = _recs(data, target, "cpu-sanitize")
    for variant in ("patched", CONTROL):
        t = recs[variant]["tests"]["test-opt"]
        assert (t["outcome"], t["skipped"], t["exit_code"]) == ("skipped", TEST_OPT_SKIP, None)
    assert recs["patched"]["tests"]["test-opt-dynamic-accum"]["outcome"] == "passed"
    control = recs[CONTROL]
    assert control["verdict"] == "killed" and control["failure_line"] == FAILURE_LINE
    assert control["verdict_reason"].endswith(
        f"(verdict on the gate alone: test-opt is not run on this backend: {TEST_OPT_SKIP})"
    )
    # test-opt is never built there
    build_log = Path(recs["patched"]["build"]["log"]).read_text()
    # `$ ninja -C BUILD [-j N] TARGET...` (no -j where the run's jobserver sets the jobs)
    cmd = build_log.splitlines()[0].split()
    assert "test-opt-dynamic-accum" in cmd[4:] and "test-opt" not in cmd, cmd
    # the known-wrong fixes run under the plain cpu cell only
    assert cell["mutants"]["skipped"] == MUTANTS_SKIP and cell["mutants"]["total"] == 0
    assert not [r for r in recs.values() if r["variant"].startswith("mutant:")]
    summary = (results / "summary.md").read_text()
    row = next(
        line for line in summary.splitlines() if line.startswith(f"| {target}/cpu-sanitize | ")
    )
    assert f"| killed | `{FAILURE_LINE}` |" in row, row
    # a skip reason is data: summary.md's table shows it as one inert cell
    from orchestrator import publish

    assert f"| {target}/cpu-sanitize | test-opt | {publish.cell(TEST_OPT_SKIP)} |" in summary
    import xml.etree.ElementTree as ET

    cases = [
        c
        for c in ET.parse(results / "junit.xml").iter("testcase")
        if c.get("classname", "").startswith(f"ggml-patch/{target}/cpu-sanitize/")
        and c.get("name") == "test-opt"
    ]
    assert len(cases) == 2 and all(c.find("skipped") is not None for c in cases)


@pytest.mark.parametrize("backend", ["cpu"])
@pytest.mark.parametrize("target", TARGETS)
def test_every_known_wrong_fix_is_killed(matrix_run, target, backend):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    cell = _cell(data, target, backend)
    # each test judged on its own: test-opt's new cases alone kill every one, each topic's by its
    # own cases; the gate (topic 1's test) kills topic 1's
    assert cell["mutants"] == {
        "total": N_MUTANTS,
        "killed": N_MUTANTS,
        "survived": [],
        "invalid": [],
        "skipped": None,
        "killed_by": {"test-opt": N_MUTANTS, "test-opt-dynamic-accum": N_GATE_KILLS},
    }, cell["mutants"]
    mutants = [
        r for r in _recs(data, target, backend).values() if r["variant"].startswith("mutant:")
    ]
    assert len(mutants) == N_MUTANTS and all(
        r["verdict"] == "killed" and r["failure_line"] for r in mutants
    )
    assert {t: sum(r["topic"] == t for r in mutants) for t in TOPICS} == TOPIC_MUTANTS
    # each judged by its own topic's tests (topic.yaml `tests:`), each of which kills it
    declared = {t.name: t.meta.tests for t in real_queue().topics}
    for r in mutants:
        assert r["kills"] == {t: "killed" for t in declared[r["topic"]]}, r
    # topic 1's: its per-step cases fail (the first FAIL line may be topic 2's case, which runs
    # before them in test-opt and also reads the accumulators)
    for r in mutants:
        if r["topic"] == "accumulator-reset":
            log = Path(r["tests"]["test-opt"]["log"]).read_text()
            assert re.search(r"^\s*test_opt_period_non_static\(.*FAIL", log, re.M), r["variant"]
    for r in mutants:
        if r["topic"] != "accumulator-reset":
            assert r["failure_line"].startswith(OWN_CASE[r["topic"]] + "("), r
    assert (
        f"- **{target}/{backend}**: {N_MUTANTS} known-wrong fixes: {N_MUTANTS} killed by test-opt "
        f"alone (test-opt-dynamic-accum: {N_GATE_KILLS})"
    ) in (results / "summary.md").read_text()


@pytest.mark.parametrize("target", TARGETS)
def test_competing_fixes_are_judged_on_the_unfixed_tree(matrix_run, target):
    _, results = matrix_run
    data = json.loads((results / "results.json").read_text())
    comp = {
        r["competing"]["name"]: r
        for r in _recs(data, target, "cpu").values()
        if r["variant"].startswith("competing:")
    }
    assert set(comp) == {"qlora-branch-alloc-zeroing"}  # the fork's reset is mutant 02 now
    qlora = comp["qlora-branch-alloc-zeroing"]["judged"]
    # placed as its original (start of alloc): it zeroes the loss seed from the second period on,
    # so test-opt's first per-step case fails at step 2
    assert qlora["verdict"] == "wrong" and qlora["failing_test"] == "test-opt", qlora
    assert qlora["failure_line"] == (
        "test_opt_period_non_static(high_level=no, schedule=TTTTTT, opt_period=1, "
        "subtest=weights, optimizer=adamw): FAIL"
    )
    log = Path(comp["qlora-branch-alloc-zeroing"]["tests"]["test-opt"]["log"]).read_text()
    assert "step 2: weights=2.83299 with non-static graphs, 2.93661 with static graphs" in log
    # the fork's reconstructed reset, as mutant 02: evals shift opt_i, a period starts unreset
    fork = _recs(data, target, "cpu")["mutant:02-reset-at-build-when-opt-i-zero"]
    fork_line = fork["tests"]["test-opt"]["failure_line"]
    assert (
        fork["kills"]["test-opt"] == "killed" and "schedule=TTETTTETTT, opt_period=2" in fork_line
    )
    # the fix was reverted for them and put back: the tree is the patched one again
    assert (
        comp["qlora-branch-alloc-zeroing"]["tests"]["test-opt-dynamic-accum"]["outcome"] == "failed"
    )
    summary = (results / "summary.md").read_text()
    assert "## Competing fixes (proposed elsewhere, applied to the unfixed tree)" in summary
    assert (
        f"| {target}/cpu | qlora-branch-alloc-zeroing | [unknown]"
        "(https://github.com/ggml-org/llama.cpp/commit/0eb92d8f033fbc86c7f2ec9bc32f61f75fed88d4)"
        " | **wrong** |" in summary
    )
