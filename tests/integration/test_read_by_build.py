"""What a cell's build reads (run/cmake.py's read_by_build): a variant whose changed files none of
its programs' builds reads cannot be judged on that cell (a CUDA fix on a Vulkan cell: the
reverted file is not even compiled there). A real CMake project shaped like a ggml tree with two
backends, one configured out, built with the real cmake and ninja."""

import subprocess
from pathlib import Path

import pytest

from orchestrator.run import cmake

pytestmark = pytest.mark.integration

TOP = """cmake_minimum_required(VERSION 3.14)
project(tiny C)
option(WITH_CUDA "" OFF)
add_library(base src/base.c)
target_include_directories(base PUBLIC src)
if (WITH_CUDA)
    add_library(cuda src/ggml-cuda/cpy.c)
endif()
add_executable(test-ops tests/test-ops.c)
target_link_libraries(test-ops base)
add_executable(other tests/other.c)
"""
FILES = {
    "CMakeLists.txt": TOP,
    "src/base.c": '#include "base.h"\nint base(void) { return BASE; }\n',
    "src/base.h": "#define BASE 1\nint base(void);\n",
    "src/ggml-cuda/cpy.c": "int cpy(void) { return 2; }\n",
    "tests/test-ops.c": '#include "base.h"\nint main(void) { return base() - BASE; }\n',
    "tests/other.c": "int main(void) { return 0; }\n",
}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    src = tmp_path_factory.mktemp("tree")
    for name, text in FILES.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(text)
    build = src / "build"
    subprocess.run(
        [cmake.cmake_exe(), "-S", str(src), "-B", str(build), "-G", "Ninja"]
        + [f"-DCMAKE_MAKE_PROGRAM={cmake.ninja_exe()}"],
        check=True,
        capture_output=True,
    )
    step = cmake.build(build, ("test-ops",), build / "build.log", {"PATH": "/usr/bin:/bin"})
    assert step.ok, Path(step.log).read_text()
    return src, build


def test_the_sources_and_headers_of_the_targets_are_read(built):
    src, build = built
    read = cmake.read_by_build(build, ("test-ops",))
    assert read is not None
    for name in ("src/base.c", "src/base.h", "tests/test-ops.c"):
        assert (src / name).resolve() in read, name  # base.h: a header, known from the deps log


def test_a_backend_configured_out_and_another_program_are_not(built):
    src, build = built
    read = cmake.read_by_build(build, ("test-ops",))
    assert read is not None
    assert (src / "src/ggml-cuda/cpy.c").resolve() not in read
    assert (src / "tests/other.c").resolve() not in read


def test_ninja_unable_to_say_concludes_nothing(tmp_path):
    assert cmake.read_by_build(tmp_path, ("test-ops",)) is None  # no build.ninja there
