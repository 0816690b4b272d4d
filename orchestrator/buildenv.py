"""The environment of everything the tool builds and runs for a target (CMake, ninja, the
compilers, the target's own CMake code and build scripts, its tests, the training program, the
backends' probes): made from nothing, not inherited. A run may hold GITHUB_TOKEN or a password
and a `--profile live` run builds third-party fork HEADs, whose CMake code could read them.

Only the variables below pass, deliberately (the README lists them); BUILD_VARIABLES change
what is built, so they are part of each cell's result-cache key (`key_part`). Everything else
is dropped: tokens and credentials, CMAKE_TOOLCHAIN_FILE and every other CMAKE_* (CMake reads
those at configure), the caller's GIT_*, PIP_*, PYTHON*. A name that looks like a credential
never passes, even if listed. The backend's own variables (`extra`) are added on top."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Mapping, Optional

# what a build reads and a user may set on purpose: part of the result-cache key
BUILD_VARIABLES = (
    "CC",
    "CXX",
    "CFLAGS",
    "CXXFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDACXX",
    "PKG_CONFIG_PATH",
    "ASAN_OPTIONS",
    "UBSAN_OPTIONS",
    "LSAN_OPTIONS",
    "VK_ICD_FILENAMES",
    "VK_DRIVER_FILES",
)
# what programs need to run at all, or to find their cache: passed, not part of the key
RUN_VARIABLES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TMPDIR",
    "TZ",
    "LD_LIBRARY_PATH",
    "NINJA_STATUS",
)
RUN_PREFIXES = ("CCACHE_",)  # ccache's own settings (its folder, its size)
_CREDENTIAL = re.compile(
    r"(?i)(TOKEN|PASSWORD|PASSWD|SECRET|CREDENTIAL|_KEY$|^AWS_|^AZURE_|^GOOGLE_|AUTH)"
)


def is_credential(name: str) -> bool:
    """A variable name that holds, or may hold, a credential: never passed on."""
    return bool(_CREDENTIAL.search(name))


def _passes(name: str) -> bool:
    if is_credential(name):
        return False
    return name in BUILD_VARIABLES or name in RUN_VARIABLES or name.startswith(RUN_PREFIXES)


def clean_env(
    extra: Optional[Mapping[str, str]] = None, environ: Optional[Mapping[str, str]] = None
) -> dict[str, str]:
    """The environment for a build, a test or a probe: the listed variables of `environ` (the
    caller's), then `extra` (the backend's own, set by the tool); nothing else."""
    source = os.environ if environ is None else environ
    env = {k: v for k, v in source.items() if _passes(k)}
    env.setdefault("PATH", os.defpath)
    if not {"CCACHE_DEPEND", "CCACHE_NODEPEND"} & env.keys():
        # ccache's depend mode (4.0+) reads the -MD file ninja's compiles write: a miss costs no
        # preprocessor run, so a cold build with ccache takes what one without it does (6 % less)
        env["CCACHE_DEPEND"] = "1"
    env["CCACHE_SLOPPINESS"] = pch_sloppiness(env.get("CCACHE_SLOPPINESS", ""))
    for k, v in (extra or {}).items():
        if not is_credential(k):
            env[k] = v
    return env


# ggml-opt.cpp compiles with a precompiled header (native_tests/precompile-fix-file.cmake); ccache
# caches such a compile only with these (its manual, "Precompiled headers"); neither target uses
# __DATE__ or __TIME__, which time_macros would let a cached object keep
PCH_SLOPPINESS = ("pch_defines", "time_macros")


def pch_sloppiness(value: str) -> str:
    """The caller's CCACHE_SLOPPINESS (comma- or space-separated) with PCH_SLOPPINESS added."""
    kept = [v for v in value.replace(",", " ").split() if v]
    return ",".join([*kept, *(v for v in PCH_SLOPPINESS if v not in kept)])


def key_part(environ: Optional[Mapping[str, str]] = None) -> dict[str, str]:
    """The build-relevant variables set now: a change in one of them re-runs the cell."""
    source = os.environ if environ is None else environ
    return {k: source[k] for k in BUILD_VARIABLES if k in source}


def own_homes(root: Path, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """HOME, the XDG folders and TMPDIR of target code run confined, made in `root`, and the
    caller's compile cache (CCACHE_DIR, named before HOME moves): the behaviour check's and the
    bundle verification's one recipe."""
    home = root / "home"
    caller_home = Path(environ.get("HOME") or Path.home())
    ccache = environ.get("CCACHE_DIR") or str(
        Path(environ.get("XDG_CACHE_HOME") or caller_home / ".cache") / "ccache"
    )
    dirs = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "TMPDIR": root / "tmp",
    }
    for path in dirs.values():
        path.mkdir(parents=True, exist_ok=True)
    return {**{k: str(v) for k, v in dirs.items()}, "CCACHE_DIR": ccache}
