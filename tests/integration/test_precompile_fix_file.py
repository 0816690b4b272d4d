"""Issue 35: a run recompiles ggml-opt.cpp once per control, known-wrong and competing fix; with
native_tests/precompile-fix-file.cmake the standard headers it includes are precompiled once per
build tree. A real CMake project shaped like ggml (a `ggml-base` library in a subdirectory, with
ggml-opt.cpp, another C++ file and a C file), configured and built with the real cmake and ninja
as the tool configures ggml's own build (CMAKE_PROJECT_ggml_INCLUDE)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator import buildenv
from orchestrator.run import cmake

NATIVE = Path(__file__).resolve().parents[2] / "native_tests"

TOP = """cmake_minimum_required(VERSION 3.14)
project("ggml" C CXX)
add_subdirectory(src)
"""
SRC = """add_library(ggml-base ggml-opt.cpp other.cpp plain.c ../include/ggml.h)
target_include_directories(ggml-base PUBLIC ../include)
"""
OPT = """#include "ggml.h"
#include <algorithm>
#include <map>
#include <vector>

int ggml_opt_answer() {
    std::vector<int> v = {3, 1, 2};
    std::map<int, int> m;
    m[1] = *std::max_element(v.begin(), v.end());
    return m[1] + GGML_ANSWER;
}
"""
OTHER = """#include "ggml.h"
#include <string>
int other_answer() { return (int) std::string("ab").size(); }
"""
PLAIN = "int plain_answer(void) { return 1; }\n"


def _project(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "include").mkdir()
    (root / "CMakeLists.txt").write_text(TOP)
    (root / "src" / "CMakeLists.txt").write_text(SRC)
    (root / "src" / "ggml-opt.cpp").write_text(OPT)
    (root / "src" / "other.cpp").write_text(OTHER)
    (root / "src" / "plain.c").write_text(PLAIN)
    (root / "include" / "ggml.h").write_text("#define GGML_ANSWER 40\n")
    return root


def _configure(
    src: Path, build: Path, precompile: str, extra: tuple[str, ...] = (), env=None
) -> None:
    subprocess.run(
        [
            cmake.cmake_exe(),
            "-G",
            "Ninja",
            "-S",
            str(src),
            "-B",
            str(build),
            f"-DCMAKE_MAKE_PROGRAM={cmake.ninja_exe()}",
            f"-DCMAKE_PROJECT_ggml_INCLUDE={NATIVE / 'precompile-fix-file.cmake'}",
            f"-DGGML_PATCH_PRECOMPILE={precompile}",
            *extra,
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )


def _command(build: Path, obj: str) -> str:
    out = subprocess.run(
        [cmake.ninja_exe(), "-C", str(build), "-t", "commands", obj],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return out.strip().splitlines()[-1]


def _obj(name: str) -> str:
    return f"src/CMakeFiles/ggml-base.dir/{name}.o"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src = _project(tmp_path_factory.mktemp("ggml"))
    build = src.parent / "build-on"
    _configure(src, build, "ON")
    subprocess.run([cmake.ninja_exe(), "-C", str(build)], check=True, capture_output=True)
    return src, build


def test_only_the_fix_file_uses_a_header_of_its_own_standard_includes(built):
    _, build = built
    assert "cmake_pch.hxx" in _command(build, _obj("ggml-opt.cpp"))
    assert "cmake_pch" not in _command(build, _obj("other.cpp"))
    assert "cmake_pch" not in _command(build, _obj("plain.c"))
    pch = (build / "src" / "CMakeFiles" / "ggml-base.dir" / "cmake_pch.hxx").read_text()
    # its own `#include <...>` lines, in its order; nothing of ggml's own headers
    found = [ln.split()[-1] for ln in pch.splitlines() if ln.startswith("#include <")]
    assert found == ["<algorithm>", "<map>", "<vector>"]
    assert "ggml.h" not in pch
    assert not list(build.rglob("cmake_pch.h"))  # no C header: plain.c is as upstream builds it


def test_a_changed_fix_file_recompiles_alone_with_the_header_kept(built):
    src, build = built
    text = (src / "src" / "ggml-opt.cpp").read_text()
    (src / "src" / "ggml-opt.cpp").write_text(text.replace("+ GGML_ANSWER", "+ GGML_ANSWER + 1"))
    out = subprocess.run(
        [cmake.ninja_exe(), "-C", str(build), "-n", "-d", "explain"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    steps = [ln for ln in out.splitlines() if ln.startswith("[")]
    assert "ggml-opt.cpp.o" in steps[0]
    assert not any("cmake_pch" in s or "other.cpp" in s for s in steps)


def test_off_builds_every_file_as_upstream_does(tmp_path):
    src = _project(tmp_path / "ggml")
    build = tmp_path / "build-off"
    _configure(src, build, "OFF")
    assert "cmake_pch" not in _command(build, _obj("ggml-opt.cpp"))
    assert not list(build.rglob("cmake_pch.hxx"))


def test_the_tool_precompiles_with_and_without_ccache(monkeypatch, tmp_path):
    from orchestrator.model.layout import BuildPlan

    plan = BuildPlan(str(tmp_path), (), (), precompiles=True)
    monkeypatch.setattr(cmake.shutil, "which", lambda name: None)
    assert "-DGGML_PATCH_PRECOMPILE=ON" in cmake.configure_args(plan, tmp_path / "b", [])
    monkeypatch.setattr(cmake.shutil, "which", lambda name: f"/usr/bin/{name}")
    args = cmake.configure_args(plan, tmp_path / "b", [])
    assert {"-DGGML_PATCH_PRECOMPILE=ON", "-DGGML_CCACHE=ON"} <= set(args)
    # a build without the harness (the fine-tuning evidence's llama-finetune) is not told
    other = BuildPlan(str(tmp_path), (), ())
    assert not any("PRECOMPILE" in a for a in cmake.configure_args(other, tmp_path / "b", []))


def _ccache_stats(env: dict) -> dict[str, int]:
    out = subprocess.run(
        ["ccache", "--print-stats"], env=env, check=True, capture_output=True, text=True
    ).stdout
    return {k: int(v) for k, v in (ln.split("\t") for ln in out.splitlines() if "\t" in ln)}


@pytest.mark.skipif(not shutil.which("ccache"), reason="ccache is not installed")
@pytest.mark.parametrize("sloppy", [True, False])
def test_ccache_caches_the_precompiled_compile_only_with_the_tools_sloppiness(sloppy, tmp_path):
    """A variant's ggml-opt.cpp restored (the fix after a control) is a ccache hit in the
    environment the tool builds in (buildenv.clean_env); without the sloppiness ccache passes
    over a compile that uses a precompiled header."""
    src = _project(tmp_path / "ggml")
    build = tmp_path / "build"
    env = {**buildenv.clean_env(), "CCACHE_DIR": str(tmp_path / "ccache")}
    if not sloppy:
        env["CCACHE_SLOPPINESS"] = ""  # none, whatever a ccache.conf says
    _configure(src, build, "ON", ("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",), env)
    fix = src / "src" / "ggml-opt.cpp"
    for text in (OPT, OPT.replace("+ GGML_ANSWER", "+ GGML_ANSWER + 1"), OPT):
        fix.write_text(text)
        subprocess.run([cmake.ninja_exe(), "-C", str(build)], env=env, check=True)
    hits = _ccache_stats(env).get("direct_cache_hit", 0)
    assert (hits >= 1) == sloppy


def test_every_cell_build_plan_includes_it():
    from orchestrator.model.layout import PRECOMPILE_CMAKE, build_plan, get_layout

    for name in ("ggml", "llama.cpp"):
        assert build_plan(get_layout(name), "/w/src", "/h").precompiles, name
    assert (NATIVE / PRECOMPILE_CMAKE).is_file()
    assert (
        f"include(${{CMAKE_CURRENT_LIST_DIR}}/{PRECOMPILE_CMAKE})"
        in (NATIVE / "CMakeLists.txt").read_text()
    )
