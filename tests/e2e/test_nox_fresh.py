"""D6: right after the README's `pip install nox`, in a fresh virtual environment holding nothing
else, nox lists one `cell` session per cell and runs one (Metal on Linux: a skip with its reason,
no build). PyPI is needed (nox, then the session's own install): the e2e tier."""

import json
import subprocess
import sys
import venv

import pytest

from ..helpers.tools import ROOT

pytestmark = pytest.mark.skipif(
    sys.platform == "darwin", reason="Metal runs on macOS: the cell would build"
)


def test_cells_listed_and_runnable_after_a_bare_pip_install_nox(tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    py = env_dir / "bin" / "python"
    subprocess.run(
        [py, "-m", "pip", "install", "-q", "--disable-pip-version-check", "nox==2026.10.20"],
        check=True,
    )
    # nox brings no YAML
    assert subprocess.run([py, "-c", "import yaml"], capture_output=True).returncode != 0
    nox = [py, "-m", "nox", "-f", str(ROOT / "noxfile.py"), "--envdir", str(tmp_path / "nox-envs")]
    listed = subprocess.run(
        [*nox, "--list", "--json", "-s", "cell"], capture_output=True, text=True, cwd=tmp_path
    )
    assert listed.returncode == 0, listed.stderr
    sessions = {s["session"] for s in json.loads(listed.stdout)}
    cells = json.loads((ROOT / ".github" / "ggml-patch-cells.json").read_text())["cells"]
    assert sessions == {c["session"] for c in cells} and len(sessions) >= 8
    # the fine-tuning evidence is a session of its own, not
    # part of the default `nox` (it builds libllama)
    default = subprocess.run(
        [*nox, "--list", "--json"], capture_output=True, text=True, cwd=tmp_path
    )
    evidence = subprocess.run(
        [*nox, "--list", "--json", "-s", "evidence"], capture_output=True, text=True, cwd=tmp_path
    )
    assert [s["session"] for s in json.loads(default.stdout)] == ["matrix"]
    assert [s["session"] for s in json.loads(evidence.stdout)] == ["evidence"], evidence.stderr
    run = subprocess.run(
        [
            *nox,
            "-s",
            "cell(target='ggml', backend='metal')",
            "--",
            "--cache",
            str(tmp_path / "cache"),
            "--results",
            str(tmp_path / "results"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    cell = json.loads((tmp_path / "results" / "results.json").read_text())["cells"][0]
    assert cell["status"] == "skipped" and cell["reason"].startswith("Metal needs macOS")
