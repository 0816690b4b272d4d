"""The toolchain a cell is built with: versions that go into result-cache keys and PR bodies.

Each version is one `--version` process; a re-run with nothing changed would start five or six of
them, and process start-up is what grows most with the machine's load. With a memo folder (the
tool's cache) a version is kept beside the executable's identity (real path, size, mtime) and
probed again only when that changes (an upgrade replaces the file; CC/CXX name another)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Optional

from ..vcs import user as user_git
from .cmake import cmake_exe, ninja_exe
from .resultcache import write_atomic

MEMO_FILE = "toolchain.json"


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


def identity(exe: str) -> Optional[str]:
    """The executable's real path, size and mtime as one string; None when it is not found."""
    found = shutil.which(exe)
    if found is None:
        return None
    real = os.path.realpath(found)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def _probes() -> dict[str, tuple[str, Callable[[], str]]]:
    """name: (the executable, how its version line is read)."""
    cmake, ninja = cmake_exe(), ninja_exe()
    cc = os.environ.get("CC") or "cc"
    cxx = os.environ.get("CXX") or "c++"
    return {
        "cmake": (cmake, lambda: _first_line(cmake, "--version")),
        "ninja": (ninja, lambda: _first_line(ninja, "--version")),
        "cc": (cc, lambda: _first_line(cc, "--version")),
        "cxx": (cxx, lambda: _first_line(cxx, "--version")),
        "git": ("git", user_git.version),
    }


def _read_memo(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # absent or half-written: probed again
    return data if isinstance(data, dict) else {}


def versions(memo_dir: Optional[Path] = None) -> dict[str, str]:
    """cmake, ninja, the C and C++ compilers CMake will pick (CC/CXX or cc/c++), git, ccache;
    with `memo_dir`, each probed only when its executable changed since the last probe."""
    memo = _read_memo(memo_dir / MEMO_FILE) if memo_dir else {}
    probes = _probes()
    ccache = shutil.which("ccache")
    if ccache:
        probes["ccache"] = (ccache, lambda: _first_line(ccache, "--version"))
    info: dict[str, str] = {}
    fresh: dict[str, dict[str, str]] = {}
    for name, (exe, probe) in probes.items():
        ident = identity(exe)
        kept = memo.get(name)
        hit = ident is not None and isinstance(kept, dict) and kept.get("identity") == ident
        line = str(kept["line"]) if hit and isinstance(kept, dict) else probe()
        info[name] = line
        if ident is not None:
            fresh[name] = {"identity": ident, "line": line}
    if not ccache:
        info["ccache"] = "not installed"
    if memo_dir and fresh != memo:
        write_atomic(memo_dir / MEMO_FILE, json.dumps(fresh, sort_keys=True).encode())
    return info
