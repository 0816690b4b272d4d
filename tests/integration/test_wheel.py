"""The tool as a user installs it: a wheel built from the tracked files, installed (not editable)
into a fresh virtual environment, run from there. Everything it reads or runs from itself at run
time must be in that wheel (the CUDA setup script, whose pins name the CUDA cache key, was not:
`ci-workflow` exited 8 from any install). Offline: setuptools' own PEP 517 backend builds the
wheel (no build isolation), pip installs it with --no-index, and the fresh environment borrows
this one's dependencies by a .pth line, which adds their folder after its own (never this
checkout, never an editable install's finder)."""

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from ..helpers.tools import ROOT, git

pytestmark = pytest.mark.integration

BUILD = "import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))"


def _run(argv: list, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    pytest.importorskip("setuptools", reason="the test extra installs setuptools (the backend)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    for name in git(ROOT, "ls-files", "-z").split("\0"):  # what a clone has
        if name and (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_"))}
    built = _run([sys.executable, "-c", BUILD, str(tmp / "dist")], src, env)
    assert built.returncode == 0, built.stderr[-3000:]
    wheel = tmp / "dist" / built.stdout.strip().splitlines()[-1]
    venv = tmp / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)], tmp, env)  # pip from ensurepip
    assert made.returncode == 0, made.stderr[-2000:]
    python = venv / "bin" / "python"
    site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp, env
    )
    ours = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib")}
    (Path(site.stdout.strip()) / "borrowed-deps.pth").write_text("\n".join(sorted(ours)) + "\n")
    # --ignore-installed: where the tests run from an install (nox's session, not editable), the
    # borrowed folder holds ggml-patch too, and pip would call it already satisfied, installing
    # nothing (the venv then imported the session's copy and had no `ggml-patch` script)
    pip = [str(python), "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    pip += ["--ignore-installed", str(wheel)]
    done = _run(pip, tmp, {**env, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    env["GGML_PATCH_CACHE"] = str(tmp / "cache")
    return wheel, venv, env


def test_the_wheel_holds_every_file_the_package_has(installed):
    wheel, _, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = [
        n
        for n in git(ROOT, "ls-files", "-z", "orchestrator").split("\0")
        if n and (ROOT / n).is_file()
    ]
    missing = [n for n in tracked if n not in names]
    assert not missing, f"tracked in orchestrator/ but not in the wheel: {missing}"
    assert "orchestrator/scripts/setup-cuda-pypi.sh" in names


def test_the_installed_tool_checks_the_workflows_and_answers_help(installed, tmp_path):
    _, venv, env = installed
    where = _run(
        [str(venv / "bin" / "python"), "-c", "import orchestrator as o; print(o.__file__)"],
        tmp_path,
        env,
    )
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    tool = str(venv / "bin" / "ggml-patch")
    check = _run([tool, "ci-workflow", "--check"], ROOT, env)  # in the repository, as CI runs it
    assert check.returncode == 0, check.stderr[-3000:]
    assert "up to date" in check.stdout + check.stderr
    for command in ("matrix", "bundle"):
        proc = _run([tool, command, "--help"], tmp_path, env)
        assert proc.returncode == 0 and f"usage: ggml-patch {command}" in proc.stdout, proc.stderr


@pytest.mark.skipif(sys.platform == "darwin", reason="Metal runs on macOS: the cell would build")
def test_the_installed_tool_runs_a_matrix_and_writes_its_results(installed, tmp_path):
    """A real `matrix` run from the wheel, one cell that needs no build here (Metal off macOS:
    skipped with its reason): the records, summary and junit writers work from the install."""
    _, venv, env = installed
    results = tmp_path / "results"
    argv = [str(venv / "bin" / "ggml-patch"), "matrix", "--matrix", str(ROOT / "matrix.yaml")]
    argv += ["--results", str(results), "--target", "ggml", "--backend", "metal"]
    proc = _run(argv, tmp_path, {**env, "GGML_PATCH_REQUIRE_BACKEND": ""})
    assert proc.returncode == 0, proc.stderr[-3000:]
    cell = json.loads((results / "results.json").read_text())["cells"][0]
    assert cell["status"] == "skipped" and "Metal needs macOS" in cell["reason"]
    assert (results / "summary.md").is_file() and (results / "junit.xml").is_file()
