"""Backends behind one small interface (backends/base.py), one module each; `get(name, cache_root)`
returns an instance bound to the tool's cache (the Vulkan module finds
the private SDK the setup script put there)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import ConfigError
from .base import BackendModule

__all__ = ["BackendModule", "get", "names"]


def _modules() -> dict[str, type[BackendModule]]:
    # the modules load on first use: `--help` lists the names without the probes' imports (start-up)
    from . import cpu, cpu_sanitize, cuda, metal, vulkan

    return {
        m.name: m
        for m in (cpu.Cpu, vulkan.Vulkan, cuda.Cuda, metal.Metal, cpu_sanitize.CpuSanitize)
    }


def names() -> list[str]:
    return list(_modules())


def get(name: str, cache_root: Optional[Path] = None) -> BackendModule:
    modules = _modules()
    try:
        return modules[name](cache_root)
    except KeyError:
        raise ConfigError(
            f"backend {name!r} is not supported (supported: {', '.join(modules)})"
        ) from None
