"""Issue 35: the project's sessions never lock each other out. `nox -s bench`, `matrix`,
`evidence` and `bundle` run in any order on one clone: each with its default folders (the tool's
results/ in the working directory, the bench's own folder), on its cheapest setting, no builds."""

from benchmarks.speed import report as bench_report
from benchmarks.speed.common import DEFAULT_OUT

from ..helpers.tools import ROOT, run_tool

AUTHOR = "Ada Contributor <ada@example.org>"
LOCKED = "holds files ggml-patch did not create"


def _bench_writes(clone):
    """What `nox -s bench` leaves behind (bench.json, bench.md), at its default place in `clone`."""
    out = clone / DEFAULT_OUT.relative_to(ROOT)
    out.mkdir(parents=True, exist_ok=True)
    report = {
        "machine": {"cores": 2, "loadavg_start": [0.0, 0.0, 0.0]},
        "goals": bench_report.GOALS,
    }
    bench_report.finish(report, out)
    assert (out / "bench.json").is_file() and (out / "bench.md").is_file()


def _matrix(clone, cache):
    # the cheapest complete run: a cell that is skipped here (Metal needs macOS), results written
    proc = run_tool(
        "matrix",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--cache",
        str(cache),
        "--target",
        "llama.cpp",
        "--backend",
        "metal",
        cwd=clone,
    )
    assert proc.returncode == 0, proc.stderr
    assert (clone / "results" / "results.json").is_file()


def _evidence(clone, cache):
    # past the results folder's checks, then refused for its unknown case: nothing built
    proc = run_tool(
        "evidence",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--cache",
        str(cache),
        "--case",
        "no-such-case",
        cwd=clone,
    )
    assert LOCKED not in proc.stderr, proc.stderr
    assert proc.returncode == 2 and "no-such-case" in proc.stderr, proc.stderr


def _bundle(clone, cache):
    # past the folder's checks, then refused: a skipped cell proves nothing
    proc = run_tool(
        "bundle",
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--cache",
        str(cache),
        "--author",
        AUTHOR,
        # a bundle documents one topic of the queue
        "--topic",
        "accumulator-reset",
        cwd=clone,
    )
    assert LOCKED not in proc.stderr, proc.stderr
    assert proc.returncode != 0 and "refusing to bundle" in proc.stderr, proc.stderr


def test_bench_matrix_evidence_and_bundle_run_in_any_order_on_one_clone(tmp_path):
    clone, cache = tmp_path / "clone", tmp_path / "cache"
    clone.mkdir()
    _bench_writes(clone)
    _matrix(clone, cache)
    _evidence(clone, cache)
    _bundle(clone, cache)
    _bench_writes(clone)
    _evidence(clone, cache)
    _matrix(clone, cache)
    _bench_writes(clone)
