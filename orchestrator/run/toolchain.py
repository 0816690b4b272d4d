"""The toolchain a cell is built with: versions that go into result-cache keys and PR bodies."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from ..vcs import user as user_git
from .cmake import cmake_exe, ninja_exe


@functools.lru_cache(maxsize=None)
def _first_line(*argv: str) -> str:
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"unavailable ({e.__class__.__name__})"
    return (
        (out.stdout or out.stderr).strip().splitlines()[0]
        if (out.stdout or out.stderr).strip()
        else ""
    )


def versions() -> dict[str, str]:
    """cmake, ninja, the C and C++ compilers CMake will pick (CC/CXX or cc/c++), git, ccache."""
    info = {
        "cmake": _first_line(cmake_exe(), "--version"),
        "ninja": _first_line(ninja_exe(), "--version"),
        "cc": _first_line(os.environ.get("CC") or "cc", "--version"),
        "cxx": _first_line(os.environ.get("CXX") or "c++", "--version"),
        "git": user_git.version(),
    }
    ccache = shutil.which("ccache")
    info["ccache"] = _first_line(ccache, "--version") if ccache else "not installed"
    return info
