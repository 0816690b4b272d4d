"""CMake configure and Ninja builds, with PyPI's cmake and ninja; full output goes to a log."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..errors import BuildFailed
from ..model.layout import BuildPlan
from .testrun import spawn

_NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\] ")
ProgressFn = Callable[[int, int], None]


@functools.lru_cache(maxsize=None)
def cmake_exe() -> str:
    # PyPI cmake (optional): a known version rather than whatever the system has. Found where the
    # package keeps it without importing it: its import reads the whole install RECORD (about
    # 60 ms of CPU, several times that on a loaded machine, on every run, a no-change one too)
    spec = importlib.util.find_spec("cmake")
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            exe = Path(folder) / "data" / "bin" / "cmake"
            if exe.is_file():
                return str(exe.resolve())
    try:
        import cmake  # a layout the look-up above does not know: the package says where

        return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")
    except ImportError:
        return shutil.which("cmake") or "cmake"


def ninja_exe() -> str:
    try:
        import ninja  # PyPI ninja (optional), for the same reason

        return str(Path(ninja.BIN_DIR) / "ninja")
    except ImportError:
        return shutil.which("ninja") or "ninja"


def jobs() -> int:
    """Never more compile jobs than the cores this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


@dataclass
class BuildStep:
    ok: bool
    duration_s: float
    log: str
    skipped: bool = False  # configure: the existing build tree was reused as is
    error: str = ""


def configure_args(plan: BuildPlan, build_dir: Path, flags: list[str]) -> list[str]:
    has_ccache = bool(shutil.which("ccache"))
    ninja, ccache = (
        f"-DCMAKE_MAKE_PROGRAM={ninja_exe()}",
        f"-DGGML_CCACHE={'ON' if has_ccache else 'OFF'}",
    )
    # ggml-opt.cpp recompiles once per variant (each a ccache miss): its standard headers
    # precompiled (native_tests/precompile-fix-file.cmake); ccache caches those compiles too
    # (buildenv.PCH_SLOPPINESS), so the fix's file restored after a variant is still a hit;
    # a build without the harness (the evidence's) is not told
    precompile = ["-DGGML_PATCH_PRECOMPILE=ON"] if plan.precompiles else []
    defs = [f"-D{k}={v}" for k, v in plan.definitions]
    return [
        cmake_exe(),
        "-G",
        "Ninja",
        "-S",
        plan.source_dir,
        "-B",
        str(build_dir),
        ninja,
        *defs,
        ccache,
        *precompile,
        *flags,
    ]


def configure(
    plan: BuildPlan, build_dir: Path, flags: list[str], log: Path, env: dict[str, str]
) -> BuildStep:
    """Configure once per build tree; later runs reuse it (ninja re-runs CMake itself if a
    CMakeLists.txt changed), which keeps the patched and control variants in one tree."""
    args = configure_args(plan, build_dir, flags)
    stamp = build_dir / ".ggml-patch-configure.json"
    if (
        (build_dir / "build.ninja").exists()
        and stamp.exists()
        and json.loads(stamp.read_text()) == args
    ):
        return BuildStep(True, 0.0, str(log), skipped=True)
    if build_dir.exists():
        # configured differently (another checkout, cmake, flags): CMake refuses to switch
        # source directories in place, and stale cache entries would leak into this build
        shutil.rmtree(build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    step = _run_logged("cmake", args, log, env, None)
    if step.ok:
        stamp.write_text(json.dumps(args))
    return step


def build(
    build_dir: Path,
    targets: tuple[str, ...],
    log: Path,
    env: dict[str, str],
    progress: Optional[ProgressFn] = None,
    n_jobs: Optional[int] = None,
    makeflags: Optional[str] = None,
) -> BuildStep:
    """`makeflags`: a jobserver's (run/cores.py) that ninja joins instead of its own -j."""
    # ninja itself, as configured (CMAKE_MAKE_PROGRAM): `cmake --build` would add a process
    # that only starts it
    if makeflags:
        args = [ninja_exe(), "-C", str(build_dir), *targets]  # an explicit -j leaves the jobserver
        env = {**env, "MAKEFLAGS": makeflags}
    else:
        args = [ninja_exe(), "-C", str(build_dir), "-j", str(n_jobs or jobs()), *targets]
    return _run_logged("build", args, log, env, progress)


def read_by_build(build_dir: Path, targets: Sequence[str]) -> Optional[frozenset[Path]]:
    """Every file the last build of `targets` read: their sources (`ninja -t inputs`) and the
    headers each object included when it was compiled (`ninja -t deps`, every object's: more
    than the targets', never less). None where ninja cannot say: nothing is concluded then."""
    found: set[Path] = set()
    for tool in (["-t", "inputs", *targets], ["-t", "deps"]):
        try:  # ninja reads its own files here: nothing is built, nothing of the target runs
            out = subprocess.run(
                [ninja_exe(), "-C", str(build_dir), *tool],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=120,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        for line in out.stdout.splitlines():
            if tool[1] == "deps" and not line.startswith((" ", "\t")):
                continue  # an object's own line; its headers follow, indented
            if line.strip():
                found.add((build_dir / line.strip()).resolve())
    return frozenset(found)


def require(step: BuildStep, what: str) -> None:
    if not step.ok:
        raise BuildFailed(f"{what} failed: {step.error} (log: {step.log})")


def _run_logged(
    what: str, args: list[str], log: Path, env: dict[str, str], progress: Optional[ProgressFn]
) -> BuildStep:
    """The command run, its output in the log; failed, the log's first error line (or its exit
    code)."""
    t0 = time.monotonic()
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w", encoding="utf-8", errors="replace") as out:
        out.write("$ " + " ".join(args) + "\n")
        out.flush()
        proc = spawn(args, env, own_session=False)  # an interrupt reaches the compilers too
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                out.write(line)
                m = _NINJA_PROGRESS.match(line)
                if m and progress:
                    progress(int(m.group(1)), int(m.group(2)))
            rc = proc.wait()
        except BaseException:
            proc.kill()  # an interrupt must not leave a compiler running on the tree
            proc.wait()
            raise
    seconds = time.monotonic() - t0
    return BuildStep(
        rc == 0,
        seconds,
        str(log),
        error="" if rc == 0 else _first_error(log) or f"{what} exited {rc}",
    )


def _first_error(log: Path) -> str:
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    patterns = (r"\berror\b:", r"CMake Error", r"FAILED:")  # the most telling first
    for pattern in patterns:
        for ln in lines:
            if re.search(pattern, ln):
                return ln.strip()[:300]
    return ""
