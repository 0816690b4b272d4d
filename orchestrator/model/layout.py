"""Layouts: where ggml's files live in each project, and how a test is registered there. Pure, POSIX
paths relative to the project root; ggml's own layout is the neutral one every other maps to and
from (the map of ggml's scripts/sync-llama-am.sh)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional

from ..errors import ConfigError

GATE_TEST = "test-opt-dynamic-accum"
UPSTREAM_TEST = "test-opt"
REGISTRATION_FILE = "tests/CMakeLists.txt"

# Paths under these ggml-layout prefixes belong to the ggml library itself.
_GGML_OWNED = ("src/", "include/", "cmake/", "CMakeLists.txt")


@dataclass(frozen=True)
class Layout:
    name: str
    ggml_root: str  # where ggml's own tree starts: "" (ggml) or "ggml/" (llama.cpp, whisper.cpp)
    build: str  # "own-tests": the layout's own test build is cheap; "harness": native_tests/
    prefix: str = ""  # the project's place inside a superproject, e.g. "core/vendor/llama.cpp/"
    # "required": the project builds ggml's tests (llama.cpp, ggml): the gate test
    # registered next to test-opt. "optional": maybe no test harness (whisper.cpp):
    # added unregistered, built by native_tests/.
    registration: str = "required"

    def to_ggml(self, path: str) -> str:
        if not path.startswith(self.prefix):
            raise ConfigError(f"{path}: outside {self.prefix!r}, the place of layout {self.name}")
        rel = path[len(self.prefix) :]
        if rel.startswith("tests/"):
            return rel
        if self.ggml_root:
            if not rel.startswith(self.ggml_root):
                raise ConfigError(
                    f"{path}: outside ggml/ and tests/, no counterpart in the ggml layout"
                )
            rel = rel[len(self.ggml_root) :]
        if not rel.startswith(_GGML_OWNED):
            raise ConfigError(
                f"{path}: not a ggml source, header, cmake or test path in layout {self.name}"
            )
        return rel

    def from_ggml(self, path: str) -> str:
        if path.startswith("tests/"):
            return self.prefix + path
        if not path.startswith(_GGML_OWNED):
            raise ConfigError(f"{path}: not a ggml source, header, cmake or test path")
        return self.prefix + self.ggml_root + path

    def ggml_dir(self) -> str:
        """Directory (relative, no trailing slash; "" for
        the root) holding ggml's CMakeLists.txt."""
        return (self.prefix + self.ggml_root).rstrip("/")

    def tests_dir(self) -> str:
        return self.prefix + "tests"


def translate(path: str, src: Layout, dst: Layout) -> str:
    return dst.from_ggml(src.to_ggml(path))


LAYOUTS = {
    "ggml": Layout("ggml", ggml_root="", build="own-tests"),
    "llama.cpp": Layout("llama.cpp", ggml_root="ggml/", build="harness"),
    "whisper.cpp": Layout(
        "whisper.cpp", ggml_root="ggml/", build="harness", registration="optional"
    ),
}


def get_layout(name: str, prefix: str = "") -> Layout:
    if name not in LAYOUTS:
        raise ConfigError(f"unknown layout {name!r}; expected one of {', '.join(sorted(LAYOUTS))}")
    return replace(
        LAYOUTS[name], prefix=prefix + "/" if prefix and not prefix.endswith("/") else prefix
    )


# test-opt's registration in tests/CMakeLists.txt, which the gate test's follows in each convention
_LLAMA_ANCHOR = re.compile(
    r"^(?P<indent>[ \t]*)llama_build_and_test\(test-opt\.cpp\)[ \t]*\r?$", re.M
)
_GGML_ANCHOR = re.compile(
    r"^(?P<indent>[ \t]*)set\(TEST_TARGET test-opt\)\n(?:(?P=indent)\S.*\n)*?"
    r"(?P=indent)set_property\(TEST \$\{TEST_TARGET\}[^\n]*\n",
    re.M,
)


class RegistrationError(ConfigError):
    pass


def register_gate_test(layout: Layout, cmakelists: str) -> str:
    """tests/CMakeLists.txt text -> the same text with the gate test registered after test-opt."""
    if GATE_TEST in cmakelists:
        return cmakelists
    llama = layout.name in ("llama.cpp", "whisper.cpp")
    anchor, what = (_LLAMA_ANCHOR, "line") if llama else (_GGML_ANCHOR, "block")
    m = anchor.search(cmakelists)
    if not m:
        test_opt = "llama_build_and_test(test-opt.cpp)" if llama else "set(TEST_TARGET test-opt)"
        raise RegistrationError(
            f"{REGISTRATION_FILE}: no '{test_opt}' {what} to register {GATE_TEST} after"
        )
    ind, end = m.group("indent"), m.end()
    if llama:
        line = f"{ind}llama_build_and_test({GATE_TEST}.cpp)\n"
        if end == len(cmakelists):  # the anchor is the last line, with no newline of its own
            return cmakelists + "\n" + line
        return cmakelists[: end + 1] + line + cmakelists[end + 1 :]
    block = (
        f"\n{ind}#\n{ind}# {GATE_TEST}\n\n"
        f"{ind}set(TEST_TARGET {GATE_TEST})\n"
        f"{ind}add_executable(${{TEST_TARGET}} ${{TEST_TARGET}}.cpp)\n"
        f"{ind}target_link_libraries(${{TEST_TARGET}} PRIVATE ggml)\n"
        f"{ind}add_test(NAME ${{TEST_TARGET}} COMMAND $<TARGET_FILE:${{TEST_TARGET}}>)\n"
        f"{ind}set_property(TEST ${{TEST_TARGET}} PROPERTY ENVIRONMENT "
        '"LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")\n'
    )
    return cmakelists[:end] + block + cmakelists[end:]


def registered(layout: Layout, cmakelists: Optional[str]) -> Optional[str]:
    """tests/CMakeLists.txt text (None: absent) registered; None where
    the layout has no harness to register in."""
    if layout.registration == "optional":
        if cmakelists is None or (
            GATE_TEST not in cmakelists and not _LLAMA_ANCHOR.search(cmakelists)
        ):
            return None
    if cmakelists is None:
        raise RegistrationError(
            f"{layout.tests_dir()}/CMakeLists.txt: missing in the "
            f"{layout.name} base; cannot register {GATE_TEST}"
        )
    return register_gate_test(layout, cmakelists)


PRECOMPILE_CMAKE = "precompile-fix-file.cmake"  # native_tests/: build speed (GGML_PATCH_PRECOMPILE)


@dataclass(frozen=True)
class BuildPlan:
    source_dir: str  # CMake source directory, absolute
    definitions: tuple[tuple[str, str], ...]
    targets: tuple[str, ...]  # the test programs the topics declare
    # the training programs the topics declare, built and run beside the tests
    programs: tuple[str, ...] = ()
    # the build includes native_tests/PRECOMPILE_CMAKE (GGML_PATCH_PRECOMPILE then means something)
    precompiles: bool = False


def build_plan(
    layout: Layout,
    worktree: str,
    harness_dir: str,
    targets: tuple[str, ...] = (),
    programs: tuple[str, ...] = (),
    native: tuple[str, ...] = (),
) -> BuildPlan:
    """Only the ggml libraries and the declared test programs (`targets`; `native`: those of
    native_tests/, which extra-programs.cmake adds) and training `programs`: never libllama or
    the examples."""
    ggml_dir = f"{worktree}/{layout.ggml_dir()}".rstrip("/")
    # upstream's default shared libraries (a cold build 4 % faster than static), and the tests not
    # relinked when only a library changed: a control or a known-wrong fix rebuilds one object
    # and one library, and the test loads it at run time
    common = (
        ("CMAKE_BUILD_TYPE", "Release"),
        ("BUILD_SHARED_LIBS", "ON"),
        ("CMAKE_LINK_DEPENDS_NO_SHARED", "ON"),
    )
    if layout.build == "own-tests":
        extra = f"{harness_dir}/extra-programs.cmake"
        own = (
            ("GGML_BUILD_TESTS", "ON"),
            ("GGML_BUILD_EXAMPLES", "OFF"),
            ("CMAKE_PROJECT_INCLUDE", extra),
            # ggml's project(ggml): its own build gets what the harness includes
            ("CMAKE_PROJECT_ggml_INCLUDE", f"{harness_dir}/{PRECOMPILE_CMAKE}"),
        )
        return BuildPlan(ggml_dir, common + own, targets, programs, precompiles=True)
    upstream = ";".join(t for t in targets if t not in native)
    harness = (
        ("GGML_SOURCE_DIR", ggml_dir),
        ("GGML_TESTS_DIR", f"{worktree}/{layout.tests_dir()}"),
        ("HARNESS_TESTS", upstream),
    )
    return BuildPlan(harness_dir, common + harness, targets, programs, precompiles=True)
