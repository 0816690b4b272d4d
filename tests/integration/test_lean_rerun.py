"""Issue 35: what a no-change re-run loads. CPU time is what a loaded machine stretches, so the
modules of the network (requests) and PyPI cmake's package (its import reads its whole install
RECORD) stay unloaded until a transfer or the package itself is needed."""

import subprocess
import sys
from pathlib import Path

from ..helpers.tools import ROOT

PROBE = """
import sys
from orchestrator import cli
from orchestrator.commands import matrix, evidence
from orchestrator.run import cell, toolchain
from orchestrator.run.cmake import cmake_exe, ninja_exe
from orchestrator.sources import pypi_sdist, tarball, http
cmake_exe(), ninja_exe()
print(sorted(m for m in ("requests", "urllib3", "cmake") if m in sys.modules))
"""


def test_the_tools_start_up_loads_neither_requests_nor_pypi_cmake():
    proc = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_cmake_is_found_where_pypi_cmake_says_it_is():
    import cmake  # a dependency of the tool (pyproject.toml): always installed with it

    from orchestrator.run.cmake import cmake_exe

    assert Path(cmake_exe()) == (Path(cmake.CMAKE_BIN_DIR) / "cmake").resolve()
