"""`ggml-patch bundle` reads patches/known-limits.yaml before any work: a malformed file is one line
naming the file, the line and the key, exit 2, nothing written."""

import shutil

from ..helpers.samples import current_series_sha, results_dir, sample
from ..helpers.tools import run_tool

AUTHOR = "Ada Contributor <ada@example.org>"


def test_a_malformed_known_limits_file_stops_bundle_before_any_work(tmp_path, repo_root):
    patches = tmp_path / "patches"
    shutil.copytree(repo_root / "patches", patches)
    limits = patches / "accumulator-reset" / "known-limits.yaml"
    limits.write_text(
        limits.read_text().replace("status: not changed by this series", "status: fixed", 1)
    )
    matrix = tmp_path / "matrix.yaml"
    matrix.write_text(
        (repo_root / "matrix.yaml")
        .read_text()
        .replace("path: patches", f"path: {patches}", 1)
        .replace("native_tests: native_tests", f"native_tests: {repo_root / 'native_tests'}", 1)
    )
    r = sample()
    r.series.sha256 = current_series_sha()
    results = results_dir(tmp_path, r)
    proc = run_tool(
        "bundle",
        "--matrix",
        str(matrix),
        "--results",
        str(results),
        "--cache",
        str(tmp_path / "cache"),
        "--author",
        AUTHOR,
        cwd=tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1
    assert (
        "patches/accumulator-reset/known-limits.yaml:" in lines[0]
        and ".status: 'fixed' is not 'not changed by this series'" in lines[0]
    )
    assert not (results / "bundle").exists() and not (tmp_path / "cache").exists()
