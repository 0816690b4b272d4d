"""CPU under AddressSanitizer (LeakSanitizer included) and UndefinedBehaviorSanitizer: ggml's own
options GGML_SANITIZE_ADDRESS / GGML_SANITIZE_UNDEFINED (both layouts: ggml/src/CMakeLists.txt
instruments the ggml libraries; with static libraries `-fsanitize` reaches the tests' link line, so
the ASan runtime is linked into every test). RelWithDebInfo, so a report names file and line. Every
sanitizer finding aborts (SIGABRT): the cell classifies it as a crash, never as the gate's own
failure (exit 1). Tests run through `stdbuf`, an LD_PRELOAD, which ASan refuses by default ("ASan
runtime does not come first in initial library list"): verify_asan_link_order=0."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Optional

from ..config_records import Backend
from .base import BackendModule
from .device import DeviceRecord

ASAN_OPTIONS = "detect_leaks=1:abort_on_error=1:verify_asan_link_order=0"
UBSAN_OPTIONS = "halt_on_error=1:abort_on_error=1:print_stacktrace=1"

# Measured on ggml 0.15.3 (ggml-python 0.0.45) and llama.cpp 0c1e570 (llama-cpp-python
# 0.3.36) with this backend's flags: every test-opt row passes and neither sanitizer
# reports an error, but LeakSanitizer aborts at exit.
TEST_OPT_SKIP = (
    "test-opt leaks under LeakSanitizer: test_regression in tests/test-opt.cpp never frees its "
    "ctx_compute (2003056 bytes in 4 allocations); llama.cpp does not build test-opt under "
    "LLAMA_SANITIZE_ADDRESS for known leaks (tests/CMakeLists.txt)"
)

# a mutant is a semantic check of the gate: the sanitizers add nothing
# to it, and each one costs a sanitized rebuild
MUTANTS_SKIP = (
    "the known-wrong fixes run under the plain cpu backend: "
    "a mutant checks the gate, not memory safety"
)

_PROBE = "int main(void) { return 0; }\n"


class SanitizeDevice(DeviceRecord):
    """What a sanitized cell ran under, as results.json's `device` holds it."""

    sanitizers: Optional[list[str]] = None
    ASAN_OPTIONS: Optional[str] = None  # the tests' environment: matrix.yaml's env wins
    UBSAN_OPTIONS: Optional[str] = None
    skipped_tests: Optional[dict[str, str]] = None  # test -> why this backend does not run it


class CpuSanitize(BackendModule):
    name = "cpu-sanitize"
    ci_minutes = (5, 8)  # the instrumented build and tests
    relative_cost = 3.0  # instrumented build, RelWithDebInfo: 110-130 s cold against about 40
    # after the plan's Release: the later -D wins
    cmake_flags = (
        "-DGGML_CPU=ON",
        "-DGGML_SANITIZE_ADDRESS=ON",
        "-DGGML_SANITIZE_UNDEFINED=ON",
        "-DCMAKE_BUILD_TYPE=RelWithDebInfo",
    )
    skip_tests = {"test-opt": TEST_OPT_SKIP}
    mutants_skip_reason = MUTANTS_SKIP
    default_env = {"ASAN_OPTIONS": ASAN_OPTIONS, "UBSAN_OPTIONS": UBSAN_OPTIONS}

    def missing_beyond_tools(self, backend: Backend) -> Optional[str]:
        return sanitizer_link_error(os.environ.get("CC") or "cc")

    def device_info(self, backend: Backend) -> SanitizeDevice:
        env = self.test_env(backend)
        return SanitizeDevice(
            sanitizers=["address", "undefined"],
            ASAN_OPTIONS=env["ASAN_OPTIONS"],
            UBSAN_OPTIONS=env["UBSAN_OPTIONS"],
            skipped_tests=dict(self.skip_tests),
        )


def sanitizer_link_error(compiler: str) -> Optional[str]:
    """Why `compiler` cannot link a program with
    -fsanitize=address,undefined (e.g. libasan missing), or None."""
    exe = shutil.which(compiler)
    if exe is None:
        return f"C compiler {compiler!r} not found on PATH (set CC or install gcc/clang)"
    with tempfile.TemporaryDirectory(prefix="ggml-patch-sanitize-") as tmp:
        src = Path(tmp) / "probe.c"
        src.write_text(_PROBE)
        try:
            argv = [exe, "-fsanitize=address,undefined", str(src), "-o", str(Path(tmp) / "probe")]
            proc = subprocess.run(
                argv, capture_output=True, text=True, errors="replace", timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"{compiler} could not be run to probe -fsanitize=address,undefined: {e}"
    if proc.returncode != 0:
        lines = [line.strip() for line in (proc.stderr + proc.stdout).splitlines() if line.strip()]
        first = lines[0] if lines else f"exit {proc.returncode}"
        return (
            f"{compiler} cannot link with -fsanitize=address,undefined ({first}): "
            "install the sanitizer runtimes (Debian/Ubuntu: libasan and libubsan "
            "come with gcc; clang needs its compiler-rt)"
        )
    return None
