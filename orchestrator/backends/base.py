"""What every backend module provides (BackendModule), and the probe helper they share."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..buildenv import clean_env

if TYPE_CHECKING:  # the record, with pydantic, loads with a matrix: not for `--help` (start-up)
    from ..config_records import Backend
    from ..model.results import DeviceInfo


class BackendModule:
    """What every backend module provides. The defaults suit a backend needing nothing extra."""

    name = ""
    # the device test-backend-ops compares with the CPU reference on this backend's cells
    # (`-b NAME`): its first device of the kind
    ops_device = "CPU"
    cmake_flags: tuple[str, ...] = ()  # what the backend always needs, before matrix.yaml's flags
    tool_hints: dict[str, str] = {}  # tool -> how to get it, for skip reasons
    toolchain_hint = ""  # how to get the whole toolchain, after a missing tool's reason
    default_env: dict[str, str] = {}  # what the tests always run with, before matrix.yaml's env
    build_only_ok = False  # whether `--build-only` may build it on a machine without its device
    skip_tests: dict[
        str, str
    ] = {}  # test -> why this backend does not run it (the cell reports it skipped)
    # why this backend does not run the known-wrong fixes (None: it runs them)
    mutants_skip_reason: Optional[str] = None
    # how much a cell costs against a CPU cell (cold build
    # and tests): the run starts with the cheapest
    relative_cost = 1.0

    def __init__(self, cache_root: Optional[Path] = None):
        self.cache_root = cache_root

    def missing_toolchain(self, backend: Backend) -> Optional[str]:
        """Why this machine cannot build the backend (and how to fix it), or None."""
        missing = [t for t in backend.tools if shutil.which(t) is None]
        if not missing:
            return self.missing_beyond_tools(backend)
        hints = [f"{t}: {self.tool_hints[t]}" for t in missing if t in self.tool_hints]
        line = f"required tool(s) not found on PATH: {', '.join(missing)}" + (
            f" ({'; '.join(hints)})" if hints else ""
        )
        return f"{line}: {self.toolchain_hint}" if self.toolchain_hint else line

    def missing_beyond_tools(self, backend: Backend) -> Optional[str]:
        """With every tool found: what else the build lacks
        (headers, libraries, a runtime), or None."""
        return None

    def missing_device(self, backend: Backend) -> Optional[str]:
        """Why this machine cannot run the backend's tests (and where they can run), or None."""
        return None

    def own_flags(self, backend: Backend) -> list[str]:
        """What this module always configures with (its `cmake_flags`, and what it detects)."""
        return list(self.cmake_flags)

    def configure_flags(self, backend: Backend) -> list[str]:
        """The module's flags, then matrix.yaml's: each once (a flag both give is not repeated;
        a different value for the same variable comes after, so matrix.yaml's wins)."""
        return list(dict.fromkeys([*self.own_flags(backend), *backend.cmake_flags]))

    def test_env(self, backend: Backend) -> dict[str, str]:
        """Environment for configure, build and tests:
        matrix.yaml's `env` wins over the module's."""
        return {**self.default_env, **backend.env}

    def device_info(self, backend: Backend) -> DeviceInfo:
        """What the tests will run on (driver, ICD, ...), recorded in results.json."""
        from ..model.results import DeviceInfo  # pydantic: not at `--help` (start-up)

        return DeviceInfo()


def command_output(
    argv: list[str], env: Optional[dict[str, str]] = None, timeout: float = 30
) -> Optional[str]:
    """stdout+stderr of a probe command, or None when it cannot run or fails."""
    try:
        proc = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=clean_env(env),  # a probe gets what a build gets, no token
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout + proc.stderr if proc.returncode == 0 else None
