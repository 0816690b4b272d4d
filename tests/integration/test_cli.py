"""Bad input at the command line: one line, a distinct exit code, no traceback, nothing touched.

No network: sources are served from a cache seeded by the test.
"""

import hashlib
import io
import shutil
import tarfile
from pathlib import Path

import pytest

from ..helpers.tools import run_tool


def _run(*args, cwd=None):
    return run_tool(*args, cwd=cwd)


def _one_line_error(proc, code):
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ggml-patch: error: ")
    assert "Traceback" not in proc.stderr
    return lines[0]


def _sdist(path: Path, files: dict[str, str]) -> str:
    """A tiny sdist-like tarball (top folder pkg-1.0/); returns its sha256."""
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"pkg-1.0/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _matrix(tmp: Path, repo_root: Path, sha: str, series_dir: str = "patches") -> Path:
    m = tmp / "matrix.yaml"
    m.write_text(f"""queue: {{path: {series_dir}, layout: llama.cpp}}
native_tests: {repo_root / "native_tests"}
targets:
  tiny:
    layout: ggml
    source: {{kind: pypi-sdist, package: pkg, version: "1.0", sha256: {sha},
              subdirectory: vendor/ggml}}
backends:
  cpu: {{cmake_flags: ["-DGGML_CPU=ON"]}}
profiles:
  default: {{targets: [tiny], backends: [cpu]}}
""")
    if series_dir == "patches":
        shutil.copytree(repo_root / "patches", tmp / "patches")
    return m


def _seed(cache: Path, tarball: Path) -> None:
    d = cache / "downloads" / "pypi-pkg-1.0"
    d.mkdir(parents=True)
    shutil.copy(tarball, d / tarball.name)


def test_missing_matrix(tmp_path):
    line = _one_line_error(
        _run("matrix", "--matrix", str(tmp_path / "nope.yaml"), "--cache", str(tmp_path / "c")), 2
    )
    assert "nope.yaml" in line


def test_unknown_target_and_backend(repo_root, tmp_path):
    line = _one_line_error(
        _run(
            "matrix",
            "--matrix",
            str(repo_root / "matrix.yaml"),
            "--cache",
            str(tmp_path),
            "--target",
            "gml",
        ),
        2,
    )
    assert "unknown target 'gml'" in line and "did you mean 'ggml'" in line
    line = _one_line_error(
        _run(
            "matrix",
            "--matrix",
            str(repo_root / "matrix.yaml"),
            "--cache",
            str(tmp_path),
            "--backend",
            "cpux",
        ),
        2,
    )
    assert "unknown backend 'cpux'" in line


def test_malformed_matrix_names_file_line_and_key(tmp_path):
    m = tmp_path / "matrix.yaml"
    m.write_text(
        "queue: {path: patches, layout: llama.cpp}\ntargets: {}\nbackends:\n  cpu: {timeout: -1}\n"
        "profiles: {}\n"
    )
    line = _one_line_error(_run("matrix", "--matrix", str(m)), 2)
    assert f"{m}:" in line


def test_sha256_mismatch_is_refused_before_anything_is_built(repo_root, tmp_path):
    tarball = tmp_path / "pkg-1.0.tar.gz"
    _sdist(tarball, {"vendor/ggml/src/ggml-opt.cpp": "x\n"})
    _seed(tmp_path / "cache", tarball)
    m = _matrix(tmp_path, repo_root, "f" * 64)
    proc = _run(
        "matrix",
        "--matrix",
        str(m),
        "--cache",
        str(tmp_path / "cache"),
        "--results",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 3, proc.stderr
    assert (
        "targets.tiny.source.sha256"
        in proc.stdout + proc.stderr + (tmp_path / "r/summary.md").read_text()
    )
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "cache" / "cells" / "tiny-cpu" / "build").exists()


def test_series_that_does_not_apply(repo_root, tmp_path):
    files = {
        "vendor/ggml/src/ggml-opt.cpp": "// a ggml-opt.cpp that has moved on\n",
        "vendor/ggml/CMakeLists.txt": "project(ggml)\n",
        "vendor/ggml/tests/CMakeLists.txt": (
            "    #\n    # test-opt\n    set(TEST_TARGET test-opt)\n"
            "    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)\n"
            '    set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "X")\n'
        ),
        ".git/modules/vendor/ggml/HEAD": "0" * 40 + "\n",
    }
    tarball = tmp_path / "pkg-1.0.tar.gz"
    sha = _sdist(tarball, files)
    _seed(tmp_path / "cache", tarball)
    m = _matrix(tmp_path, repo_root, sha)
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = _run(
        "matrix",
        "--matrix",
        str(m),
        "--cache",
        str(tmp_path / "cache"),
        "--results",
        str(tmp_path / "r"),
    )
    assert proc.returncode == 4, proc.stderr
    assert "Traceback" not in proc.stderr
    summary = (tmp_path / "r/summary.md").read_text()
    assert "src/ggml-opt.cpp" in summary and "error" in summary
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "r") == sorted(
        set(before) - {"r"}
    )


def test_empty_series_is_a_config_error(repo_root, tmp_path):
    (tmp_path / "empty").mkdir()
    m = _matrix(tmp_path, repo_root, "f" * 64, series_dir="empty")
    line = _one_line_error(_run("matrix", "--matrix", str(m), "--cache", str(tmp_path / "c")), 2)
    assert "empty" in line


@pytest.mark.parametrize("argv", [["--help"], ["matrix", "--help"], ["export", "--help"]])
def test_help(argv):
    assert _run(*argv).returncode == 0
