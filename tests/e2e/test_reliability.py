"""Interrupts, concurrent runs and crashing tests, on the real ggml target (CPU).

Each test uses its own cache seeded with the pinned ggml-python sdist (fetched once into the
tool's default cache), so builds are real but cheap with ccache.
"""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import filelock
import pytest

from orchestrator.cache import Cache
from orchestrator.config import load_matrix
from orchestrator.progress import Reporter
from orchestrator.run.matrix import RunOptions, run_matrix
from orchestrator.sources import pypi_sdist
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree

from ..helpers.patches import queue_topics
from ..helpers.tools import ROOT, run_tool

GGML = {
    "package": "ggml-python",
    "version": "0.0.45",
    "sha256": "10aac52075cf3c7ef2b00d6c35b1c23f7b018dbeff8ae8df67339b4be1166f05",
}


@pytest.fixture(scope="module")
def ggml_sdist(tool_cache) -> Path:
    return pypi_sdist.download(
        GGML["package"], GGML["version"], GGML["sha256"], Cache(tool_cache), "test"
    )


@pytest.fixture
def setup(tmp_path, ggml_sdist):
    cache = tmp_path / "cache"
    d = cache / "downloads" / "pypi-ggml-python-0.0.45"
    d.mkdir(parents=True)
    shutil.copy(ggml_sdist, d / ggml_sdist.name)
    m = tmp_path / "matrix.yaml"
    m.write_text(f"""queue: {{path: {ROOT / "patches"}, layout: llama.cpp}}
native_tests: {ROOT / "native_tests"}
targets:
  ggml:
    layout: ggml
    source: {{kind: pypi-sdist, package: ggml-python, version: "0.0.45",
              sha256: {GGML["sha256"]}, subdirectory: vendor/ggml}}
backends:
  cpu: {{cmake_flags: ["-DGGML_CPU=ON"], timeout: 120}}
profiles:
  default: {{targets: [ggml], backends: [cpu]}}
""")
    return m, cache


class InterruptAt(Reporter):
    """Raises KeyboardInterrupt (what SIGINT and SIGTERM become) at a chosen point."""

    def __init__(self, step: str, during_build: bool = False):
        super().__init__(1)
        self.at, self.during_build, self.armed = step, during_build, False

    def step(self, name, detail=""):
        super().step(name, detail)
        # "build control" is every topic's control build ("build control:<topic>"): the first
        if name == self.at or name.startswith(f"{self.at}:"):
            if not self.during_build:
                raise KeyboardInterrupt
            self.armed = True

    def build_progress(self, done, total):
        if self.armed and done >= 2:  # a compiler is running on the tree right now
            raise KeyboardInterrupt


def _run(m, cache, results, reporter=None):
    return run_matrix(
        RunOptions(matrix=load_matrix(m), cache=Cache(cache), results_dir=results), reporter
    ).to_json()


def _assert_no_lock_held(cache: Path):
    for lock in list((cache / "locks").glob("*.lock")) + list(cache.glob("*.lock")):
        filelock.FileLock(
            str(lock), timeout=0
        ).acquire()  # raises Timeout if a lock were still held


def _assert_passes(m, cache, tmp_path):
    results = _run(m, cache, tmp_path / "again")
    cell = results["cells"][0]
    assert cell["status"] == "passed", cell
    control = next(r for r in results["records"] if r["variant"].startswith("control:"))
    assert control["verdict"] == "killed"
    return results


@pytest.mark.parametrize("where", ["fetch", "apply", "build patched", "build control"])
def test_interrupt_then_rerun_succeeds(setup, tmp_path, monkeypatch, where):
    m, cache = setup
    if where == "fetch":  # inside the snapshot import, after files were staged
        real = SnapshotRepo.import_tree

        def import_then_interrupt(self, *a, **kw):
            real(self, *a, **kw)
            raise KeyboardInterrupt

        monkeypatch.setattr(SnapshotRepo, "import_tree", import_then_interrupt)
        reporter = Reporter(1)
    elif where == "apply":  # between the two patches of git am
        real_git = Worktree.git

        def git_then_interrupt(self, *args, **kw):
            out = real_git(self, *args, **kw)
            if args and args[0] == "am" and "--abort" not in args:
                raise KeyboardInterrupt
            return out

        monkeypatch.setattr(Worktree, "git", git_then_interrupt)
        reporter = Reporter(1)
    else:
        reporter = InterruptAt(where, during_build=True)
    with pytest.raises(KeyboardInterrupt):
        _run(m, cache, tmp_path / "r", reporter)
    monkeypatch.undo()
    _assert_no_lock_held(cache)
    wt = cache / "cells" / "ggml-cpu" / "src"
    if where == "build control":
        # the reverted file was put back on the way out: the tree is the patched commit, clean
        state = json.loads((cache / "cells" / "ggml-cpu" / "state.json").read_text())
        w = Worktree(SnapshotRepo(cache / "snapshots.git"), wt)
        assert w.head() == state["head"] and w.is_clean()
    _assert_passes(m, cache, tmp_path)


def _wait_for(proc, text, timeout=300):
    seen = []
    t0 = time.monotonic()
    for line in proc.stderr:
        seen.append(line)
        if text in line:
            return "".join(seen)
        assert time.monotonic() - t0 < timeout, "".join(seen)
    raise AssertionError(f"{text!r} never printed:\n" + "".join(seen))


@pytest.mark.parametrize(
    "sig,marker", [(signal.SIGTERM, "build patched"), (signal.SIGINT, "build control")]
)
def test_signal_during_a_real_run(setup, tmp_path, sig, marker):
    m, cache = setup
    env_cmd = [
        sys.executable,
        "-m",
        "orchestrator",
        "matrix",
        "--matrix",
        str(m),
        "--cache",
        str(cache),
        "--results",
        str(tmp_path / "r"),
    ]
    # as from a terminal: a shell's background job (nohup, `&`) starts it with SIGINT ignored,
    # and Python then keeps ignoring it
    proc = subprocess.Popen(
        env_cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    _wait_for(proc, marker)
    time.sleep(0.3)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    _assert_no_lock_held(cache)
    again = run_tool(
        "matrix", "--matrix", str(m), "--cache", str(cache), "--results", str(tmp_path / "r2")
    )
    assert again.returncode == 0, again.stderr[-2000:]


def test_two_concurrent_runs_on_one_cache(setup, tmp_path):
    m, cache = setup
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "orchestrator",
                "matrix",
                "--matrix",
                str(m),
                "--cache",
                str(cache),
                "--results",
                str(tmp_path / f"r{i}"),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (_out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:]
    for i in range(2):
        data = json.loads((tmp_path / f"r{i}" / "results.json").read_text())
        assert data["cells"][0]["status"] == "passed"
        control = next(r for r in data["records"] if r["variant"].startswith("control:"))
        assert (
            control["failure_line"]
            == "device=CPU opt_period=1: FAIL at step 2: w=0.25 expected 0.5"
        )


# ---- a user's checkout as the source: byte-identical after interrupted runs ----


@pytest.fixture
def user_checkout(tool_cache, tmp_path):
    from ..helpers.forks import git, real_snapshot_refs, repo_from_snapshot, write_matrix

    co = repo_from_snapshot(tmp_path / "ggml", real_snapshot_refs(tool_cache)["ggml"], tool_cache)
    opt = co / "src" / "ggml-opt.cpp"
    opt.write_text(opt.read_text() + "// work in progress\n")  # uncommitted
    (co / "notes.txt").write_text("untracked\n")
    git(co, "add", "notes.txt")  # staged
    m = write_matrix(tmp_path, {"mine": f"layout: ggml\nsource: {{kind: local, path: {co}}}\n"})
    return co, m, tmp_path / "cache"


@pytest.mark.parametrize("where", ["fetch", "build patched", "build control"])
def test_interrupted_runs_leave_a_users_checkout_byte_identical(user_checkout, tmp_path, where):
    from ..helpers.forks import tree_state

    co, m, cache = user_checkout
    before = tree_state(co)
    reporter = InterruptAt(where, during_build=where.startswith("build"))
    with pytest.raises(KeyboardInterrupt):
        _run(m, cache, tmp_path / "r", reporter)
    assert tree_state(co) == before
    _assert_no_lock_held(cache)
    results = _run(m, cache, tmp_path / "again")
    assert results["cells"][0]["status"] == "passed", results["cells"][0]
    assert tree_state(co) == before  # files, index, HEAD: bytes, modes and times


# ---- the bundle ----


def test_interrupted_bundle_leaves_nothing_half_made(setup, tmp_path, monkeypatch):
    from orchestrator.upstream import bundle

    m, cache = setup
    from orchestrator.report.summary import write_results

    results_dir = tmp_path / "r"
    run = run_matrix(RunOptions(matrix=load_matrix(m), cache=Cache(cache), results_dir=results_dir))
    assert run.exit_code == 0
    write_results(run, results_dir)  # the results model, not its JSON
    out = tmp_path / "bundle"

    real = bundle.verify

    def verify_then_interrupt(*a, **kw):
        real(*a, **kw)
        raise KeyboardInterrupt

    monkeypatch.setattr(bundle, "verify", verify_then_interrupt)
    from orchestrator.upstream.authorship import parse_author

    opts = bundle.BundleOptions(
        load_matrix(m),
        Cache(cache),
        results_dir,
        out,
        author=parse_author("Ada Contributor <ada@example.org>"),
    )
    with pytest.raises(KeyboardInterrupt):
        bundle.make_bundles(opts)
    monkeypatch.undo()
    assert not out.exists() or not any(out.iterdir()), "a half-made bundle was left"
    _assert_no_lock_held(cache)
    made, _, refused = bundle.make_bundles(opts)
    topics = queue_topics()  # one bundle per topic of patches/queue.yaml
    assert [(b.manifest.topic, b.target) for b in made] == [(t, "ggml") for t in topics]
    assert refused == []
    man = json.loads((out / "accumulator-reset" / "ggml" / "manifest.json").read_text())
    # what went in is the tested patched tree, never the control's reverted one
    assert man["verification"]["tree_is_patched_tree"] is True


def test_interrupt_stops_parallel_cells_and_rerun_succeeds(setup, tmp_path):
    """Two cells at once: an interrupt in one stops the other at its next step or build line."""
    m, cache = setup
    text = m.read_text()
    block = text[text.index("  ggml:\n") : text.index("backends:")]
    m.write_text(
        text.replace("backends:", block.replace("  ggml:", "  ggml-too:") + "backends:", 1).replace(
            "targets: [ggml]", "targets: [ggml, ggml-too]"
        )
    )
    matrix = load_matrix(m)
    reporter = InterruptAt("build patched", during_build=True)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        run_matrix(
            RunOptions(matrix=matrix, cache=Cache(cache), results_dir=tmp_path / "r", parallel=2),
            reporter,
        )
    assert time.monotonic() - t0 < 120
    _assert_no_lock_held(cache)
    results = run_matrix(
        RunOptions(matrix=matrix, cache=Cache(cache), results_dir=tmp_path / "again", parallel=2)
    ).to_json()
    assert [c["status"] for c in results["cells"]] == ["passed", "passed"], results["cells"]
    from orchestrator.run.cmake import jobs

    if jobs() >= 2:
        assert results["parallel"] == {
            "cells_at_once": 2,
            "jobs_per_build": jobs() // 2,
            "later_cells_at_once": 2,
            "later_jobs_per_build": jobs() // 2,
        }
