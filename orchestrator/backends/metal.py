"""Metal: built and run on macOS; skipped elsewhere with the reason."""

from __future__ import annotations

import platform
import shutil
import sys
from typing import Optional

from ..config_records import Backend
from .base import BackendModule, CiLeg, NoCiLeg, Runner, command_output


class Metal(BackendModule):
    name = "metal"
    ops_device = "MTL0"  # test-backend-ops -b MTL0
    relative_cost = 4.0
    # the shader library is embedded in the binary: no offline `metal` compiler (full Xcode) needed
    cmake_flags = ("-DGGML_METAL=ON", "-DGGML_METAL_EMBED_LIBRARY=ON")
    toolchain_hint = "install the Xcode command line tools (xcode-select --install)"
    ci_minutes = (7, 10)

    def ci_leg(self, runner: Runner) -> CiLeg:
        if not runner.mac:
            raise NoCiLeg("Metal runs on macOS only: name a macOS runner (e.g. macos-15)")
        return CiLeg()

    def missing_toolchain(self, backend: Backend) -> Optional[str]:
        if sys.platform != "darwin":
            return (
                f"Metal needs macOS (this machine runs {platform.system() or sys.platform}): run "
                "the metal cells on a Mac with the Xcode command line tools (matrix.yaml "
                f"runs_on: {', '.join(backend.all_runners())})"
            )
        return super().missing_toolchain(backend)

    def missing_device(self, backend: Backend) -> Optional[str]:
        if sys.platform != "darwin":
            return "Metal needs macOS"
        if shutil.which("system_profiler") is None:
            return None
        out = command_output(["system_profiler", "SPDisplaysDataType"], timeout=60)
        if out is not None and "Metal" not in out:
            return "no Metal-capable GPU reported by system_profiler SPDisplaysDataType"
        return None
