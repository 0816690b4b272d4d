"""What every backend module provides (BackendModule), and the probe helper they share."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from ..buildenv import clean_env

if TYPE_CHECKING:  # the record, with pydantic, loads with a matrix: not for `--help` (start-up)
    from ..config_records import Backend
    from ..model.results import DeviceInfo
    from .device import DeviceRecord


@dataclass(frozen=True)
class Runner:
    """A CI runner as matrix.yaml names it (`runs_on`): its labels, lower-cased. GitHub-hosted:
    one image label (ubuntu-24.04, macos-15); anything else is a runner of the adopter's own."""

    labels: tuple[str, ...]

    @classmethod
    def of(cls, runs_on: str) -> Runner:
        """ "ubuntu-24.04" or a self-hosted runner's "self-hosted, linux, gpu" (all must match)."""
        return cls(tuple(s.strip().lower() for s in runs_on.split(",") if s.strip()))

    @property
    def hosted(self) -> bool:
        one = self.labels[0] if len(self.labels) == 1 else ""
        return one.startswith(("ubuntu-", "macos-", "windows-"))

    @property
    def linux(self) -> bool:
        return (self.hosted and self.labels[0].startswith("ubuntu-")) or "linux" in self.labels

    @property
    def mac(self) -> bool:
        return (self.hosted and self.labels[0].startswith("macos-")) or "macos" in self.labels


@dataclass(frozen=True)
class CiSetup:
    """What a leg runs before the cell (the generated workflow's step `title`, its bash `run`),
    after restoring `cache_path` under `cache_key` when it names one (a download kept between
    runs). `name` is the leg's `setup` value the steps are conditioned on."""

    name: str
    title: str
    run: str
    cache_title: str = ""
    cache_path: str = ""
    cache_key: str = ""


@dataclass(frozen=True)
class CiLeg:
    """How a backend's CI leg on one runner proves itself. Every leg requires its backend
    (`--require-backend`: a skip fails the leg), so no leg can go green by skipping; `setup` what
    it installs first (None: nothing), `build_only` no device on that runner (`--build-only`:
    built, tests not run, and the cell says so)."""

    setup: Optional[CiSetup] = None
    build_only: bool = False


class NoCiLeg(Exception):
    """This backend cannot prove anything on that runner (the generator refuses the leg)."""


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
    # a hosted CI leg's typical billed minutes (cold ccache to warm), for README's cost estimate
    # (ci/cost.py); its worst case is the leg's timeout
    ci_minutes: tuple[int, int] = (4, 6)

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

    def device_info(self, backend: Backend) -> DeviceRecord:
        """What the tests will run on (driver, ICD, ...): the module's own record (its `Device`,
        a DeviceRecord). The base records nothing."""
        from .device import DeviceRecord  # pydantic: not at `--help` (start-up)

        return DeviceRecord()

    def recorded_device(self, backend: Backend) -> DeviceInfo:
        """device_info as the cell records it in results.json: each key the record set, its
        value validated (one line naming the key if the module's record breaks the shapes)."""
        from ..model.results import DeviceInfo  # pydantic: not at `--help` (start-up)

        return DeviceInfo.of(self.device_info(backend), f"backend {self.name}: device record")

    def ci_leg(self, runner: Runner) -> CiLeg:
        """This backend's CI leg on `runner` (ci/workflow.py asks; it holds no table of backends).
        The default needs no setup and no device beyond the runner itself. Raise NoCiLeg(why)
        where the runner can never run the backend: the generator refuses that leg in one line."""
        return CiLeg()


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
