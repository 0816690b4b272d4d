"""Backends behind one small interface: probe the toolchain, probe the device, CMake flags, and the
environment the build and the tests run in.

One module per backend; `get(name, cache_root)` returns an instance bound to the tool's cache (the
Vulkan module finds the private SDK the setup script put there).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Optional

from ..config import Backend
from ..errors import ConfigError
from ..report.model import DeviceInfo


class BackendModule:
    """What every backend module provides. The defaults suit a backend needing nothing extra."""

    name = ""
    cmake_flags: tuple[str, ...] = ()  # what the backend always needs, before matrix.yaml's flags
    tool_hints: dict[str, str] = {}  # tool -> how to get it, for skip reasons
    build_only_ok = False  # whether `--build-only` may build it on a machine without its device
    skip_tests: dict[str, str] = {}  # test -> why this backend does not run it (the cell reports it skipped)
    no_mutants: Optional[str] = None  # why this backend does not run the known-wrong fixes (None: it runs them)
    # how much a cell costs against a CPU cell (cold build and tests): the run starts with the cheapest
    relative_cost = 1.0

    def __init__(self, cache_root: Optional[Path] = None):
        self.cache_root = cache_root

    def missing_toolchain(self, backend: Backend) -> Optional[str]:
        """Why this machine cannot build the backend (and how to fix it), or None."""
        missing = [t for t in backend.tools if shutil.which(t) is None]
        if missing:
            hints = [f"{t}: {self.tool_hints[t]}" for t in missing if t in self.tool_hints]
            return f"required tool(s) not found on PATH: {', '.join(missing)}" + (
                f" ({'; '.join(hints)})" if hints else ""
            )
        return None

    def missing_device(self, backend: Backend) -> Optional[str]:
        """Why this machine cannot run the backend's tests (and where they can run), or None."""
        return None

    def configure_flags(self, backend: Backend) -> list[str]:
        return [*self.cmake_flags, *backend.cmake_flags]

    def test_env(self, backend: Backend) -> dict[str, str]:
        """Environment for configure, build and tests: matrix.yaml's `env` wins over the module's."""
        return dict(backend.env)

    def device_info(self, backend: Backend) -> DeviceInfo:
        """What the tests will run on (driver, ICD, ...), recorded in results.json."""
        return DeviceInfo()


def command_output(argv: list[str], env: Optional[dict[str, str]] = None, timeout: float = 30) -> Optional[str]:
    """stdout+stderr of a probe command, or None when it cannot run or fails."""
    import os

    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, errors="replace", timeout=timeout, env={**os.environ, **(env or {})}
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout + proc.stderr if proc.returncode == 0 else None


def _modules() -> dict[str, type[BackendModule]]:
    from . import cpu, cpu_sanitize, cuda, metal, vulkan

    return {
        "cpu": cpu.Cpu,
        "vulkan": vulkan.Vulkan,
        "cuda": cuda.Cuda,
        "metal": metal.Metal,
        "cpu-sanitize": cpu_sanitize.CpuSanitize,
    }


def names() -> list[str]:
    return list(_modules())


def get(name: str, cache_root: Optional[Path] = None) -> BackendModule:
    modules = _modules()
    try:
        return modules[name](cache_root)
    except KeyError:
        raise ConfigError(f"backend {name!r} is not supported (supported: {', '.join(modules)})") from None
