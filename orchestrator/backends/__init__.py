"""Backends behind one small interface: probe the toolchain, probe the device, CMake flags.

One module per backend; `get(name)` returns it.
"""
from __future__ import annotations

import shutil
from typing import Optional

from ..config import Backend
from ..errors import ConfigError


class BackendModule:
    """What every backend module provides. The defaults suit a backend needing nothing extra."""

    name = ""
    cmake_flags: tuple[str, ...] = ()  # what the backend always needs, before matrix.yaml's flags

    def missing_toolchain(self, backend: Backend) -> Optional[str]:
        """Why this machine cannot build the backend (and how to fix it), or None."""
        missing = [t for t in backend.tools if shutil.which(t) is None]
        if missing:
            return f"required tool(s) not found on PATH: {', '.join(missing)}"
        return None

    def missing_device(self, backend: Backend) -> Optional[str]:
        """Why this machine cannot run the backend's tests, or None."""
        return None

    def configure_flags(self, backend: Backend) -> list[str]:
        return [*self.cmake_flags, *backend.cmake_flags]


def get(name: str) -> BackendModule:
    from . import cpu

    modules = {"cpu": cpu.MODULE}
    try:
        return modules[name]
    except KeyError:
        raise ConfigError(f"backend {name!r} is not supported yet (supported: {', '.join(modules)})") from None
