"""Layouts: the llama.cpp <-> ggml path map, gate-test
registration in each convention, build plans."""

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.errors import ConfigError, ExitCode
from orchestrator.model.layout import (
    GATE_TEST,
    LAYOUTS,
    BuildPlan,
    Layout,
    RegistrationError,
    build_plan,
    get_layout,
    register_gate_test,
    translate,
)

from ..helpers import patches as helpers_patches

GGML = LAYOUTS["ggml"]
LLAMA = LAYOUTS["llama.cpp"]
WHISPER = LAYOUTS["whisper.cpp"]
LLAMA_VENDORED = get_layout("llama.cpp", "core/vendor/llama.cpp/")
GGML_VENDORED = get_layout("ggml", "vendor/ggml")

# ---- the path map ----

# (llama.cpp path, ggml path): the map ggml's scripts/sync-llama-am.sh applies
PAIRS = [
    ("ggml/src/ggml-opt.cpp", "src/ggml-opt.cpp"),
    ("ggml/src/ggml-cpu/ops.cpp", "src/ggml-cpu/ops.cpp"),
    (
        "ggml/src/ggml-vulkan/vulkan-shaders/opt_step_sgd.comp",
        "src/ggml-vulkan/vulkan-shaders/opt_step_sgd.comp",
    ),
    ("ggml/include/ggml-opt.h", "include/ggml-opt.h"),
    ("ggml/cmake/ggml-config.cmake.in", "cmake/ggml-config.cmake.in"),
    ("ggml/CMakeLists.txt", "CMakeLists.txt"),
    ("tests/test-opt.cpp", "tests/test-opt.cpp"),
    ("tests/test-opt-dynamic-accum.cpp", "tests/test-opt-dynamic-accum.cpp"),
    ("tests/CMakeLists.txt", "tests/CMakeLists.txt"),
]


@pytest.mark.parametrize("llama_path, ggml_path", PAIRS)
def test_llama_to_ggml(llama_path, ggml_path):
    assert LLAMA.to_ggml(llama_path) == ggml_path
    assert translate(llama_path, LLAMA, GGML) == ggml_path


@pytest.mark.parametrize("llama_path, ggml_path", PAIRS)
def test_ggml_to_llama(llama_path, ggml_path):
    assert LLAMA.from_ggml(ggml_path) == llama_path
    assert translate(ggml_path, GGML, LLAMA) == llama_path


@pytest.mark.parametrize("llama_path, ggml_path", PAIRS)
def test_ggml_layout_is_neutral(llama_path, ggml_path):
    assert GGML.to_ggml(ggml_path) == ggml_path
    assert GGML.from_ggml(ggml_path) == ggml_path
    assert translate(ggml_path, GGML, GGML) == ggml_path


@pytest.mark.parametrize("llama_path, ggml_path", PAIRS)
def test_whisper_uses_the_llama_map(llama_path, ggml_path):
    assert translate(llama_path, LLAMA, WHISPER) == llama_path
    assert WHISPER.to_ggml(llama_path) == ggml_path


@pytest.mark.parametrize("llama_path, ggml_path", PAIRS)
def test_prefixed_layouts(llama_path, ggml_path):
    vendored = "core/vendor/llama.cpp/" + llama_path
    assert LLAMA_VENDORED.from_ggml(ggml_path) == vendored
    assert LLAMA_VENDORED.to_ggml(vendored) == ggml_path
    assert translate(llama_path, LLAMA, LLAMA_VENDORED) == vendored
    assert translate(vendored, LLAMA_VENDORED, GGML) == ggml_path
    assert translate(ggml_path, GGML, GGML_VENDORED) == "vendor/ggml/" + ggml_path


@pytest.mark.parametrize(
    "layout, path",
    [
        (LLAMA, "src/llama.cpp"),  # libllama's own src/, not ggml's
        (LLAMA, "common/common.cpp"),
        (LLAMA, "CMakeLists.txt"),  # llama.cpp's top level, not ggml's
        (LLAMA, "examples/training/finetune.cpp"),
        (LLAMA, "ggml/.gitignore"),
        (LLAMA, "ggml/tests/test-opt.cpp"),
        (LLAMA, "README.md"),
        (GGML, "examples/mnist/mnist-common.cpp"),
        (GGML, "scripts/sync-llama.sh"),
        (GGML, "ggml/src/ggml-opt.cpp"),  # a llama.cpp path handed to the ggml layout
        (GGML, "README.md"),
        (LLAMA_VENDORED, "ggml/src/ggml-opt.cpp"),  # outside the prefix
        (LLAMA_VENDORED, "core/vendor/other/ggml/src/ggml-opt.cpp"),
        (LLAMA_VENDORED, "core/vendor/llama.cpp/src/llama.cpp"),
        (GGML_VENDORED, "src/ggml-opt.cpp"),
    ],
)
def test_unmappable_paths_raise(layout, path):
    with pytest.raises(ConfigError) as e:
        layout.to_ggml(path)
    assert path in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_code == ExitCode.CONFIG


@pytest.mark.parametrize(
    "path", ["examples/simple/simple.cpp", "README.md", "ggml/src/x.c", "scripts/x.sh"]
)
def test_from_ggml_rejects_non_ggml_paths(path):
    for layout in (GGML, LLAMA, LLAMA_VENDORED):
        with pytest.raises(ConfigError, match="not a ggml source"):
            layout.from_ggml(path)


def test_dirs():
    assert GGML.ggml_dir() == "" and GGML.tests_dir() == "tests"
    assert LLAMA.ggml_dir() == "ggml" and LLAMA.tests_dir() == "tests"
    assert LLAMA_VENDORED.ggml_dir() == "core/vendor/llama.cpp/ggml"
    assert LLAMA_VENDORED.tests_dir() == "core/vendor/llama.cpp/tests"
    assert (
        GGML_VENDORED.ggml_dir() == "vendor/ggml"
        and GGML_VENDORED.tests_dir() == "vendor/ggml/tests"
    )


# ---- get_layout ----


def test_get_layout_known():
    assert get_layout("ggml") == GGML
    assert get_layout("llama.cpp") == LLAMA
    assert get_layout("whisper.cpp") == WHISPER
    assert get_layout("llama.cpp").build == "harness" and get_layout("ggml").build == "own-tests"


def test_get_layout_prefix_gets_a_slash():
    assert get_layout("ggml", "vendor/ggml").prefix == "vendor/ggml/"
    assert get_layout("ggml", "vendor/ggml/").prefix == "vendor/ggml/"
    assert get_layout("llama.cpp", "").prefix == ""
    lay = get_layout("llama.cpp", "core/vendor/llama.cpp/")
    assert (lay.name, lay.ggml_root, lay.build) == ("llama.cpp", "ggml/", "harness")


@pytest.mark.parametrize("name", ["llama", "gguf", "", "GGML", "llama.cpp/"])
def test_get_layout_unknown(name):
    with pytest.raises(ConfigError) as e:
        get_layout(name)
    msg = str(e.value)
    assert "\n" not in msg and f"unknown layout {name!r}" in msg
    assert "ggml, llama.cpp, whisper.cpp" in msg


# ---- property: translating there and back is the identity ----

_SEGMENT = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-.", min_size=1, max_size=12
).filter(lambda s: s not in (".", ".."))
_REST = st.lists(_SEGMENT, min_size=1, max_size=4).map("/".join)
_GGML_PATHS = st.one_of(
    st.tuples(st.sampled_from(["src/", "include/", "cmake/", "tests/"]), _REST).map("".join),
    st.just("CMakeLists.txt"),
)
_LAYOUTS = st.sampled_from(
    [
        GGML,
        LLAMA,
        WHISPER,
        LLAMA_VENDORED,
        GGML_VENDORED,
        get_layout("whisper.cpp", "third_party/whisper.cpp"),
    ]
)


@given(neutral=_GGML_PATHS, a=_LAYOUTS, b=_LAYOUTS)
def test_translate_round_trip(neutral, a, b):
    p = a.from_ggml(neutral)
    q = translate(p, a, b)
    assert q == b.from_ggml(neutral)
    assert translate(q, b, a) == p
    assert a.to_ggml(p) == neutral


# ---- registering the gate test ----

# llama.cpp's tests/CMakeLists.txt around test-opt (the context of patches/0002)
LLAMA_CMAKE = """\
llama_build_and_test(test-model-resolution.cpp)
target_link_libraries(test-model-resolution PRIVATE cpp-httplib)

if (NOT LLAMA_SANITIZE_ADDRESS AND NOT GGML_SCHED_NO_REALLOC)
  # TODO: repair known memory leaks
  llama_build_and_test(test-opt.cpp)
endif()

# TODO: make this test (and others) not link `libllama` as it is not needed [TAG_TESTS_LLAMA_LINK]
llama_build_and_test(test-gguf.cpp)
"""

LLAMA_CMAKE_REGISTERED = LLAMA_CMAKE.replace(
    "  llama_build_and_test(test-opt.cpp)\n",
    "  llama_build_and_test(test-opt.cpp)\n  llama_build_and_test(test-opt-dynamic-accum.cpp)\n",
)

# ggml's tests/CMakeLists.txt around test-opt
GGML_CMAKE = (
    "# undefine NDEBUG so asserts don't get disabled in tests\n" + helpers_patches.GGML_CMAKE
)

GGML_GATE_BLOCK = """
    #
    # test-opt-dynamic-accum

    set(TEST_TARGET test-opt-dynamic-accum)
    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)
    target_link_libraries(${TEST_TARGET} PRIVATE ggml)
    add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)
    set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")
"""  # noqa: E501 (upstream's own set_property line, as register_gate_test writes it)

_OPT_SET_PROPERTY = (
    "    set(TEST_TARGET test-opt)\n"
    "    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)\n"
    "    target_link_libraries(${TEST_TARGET} PRIVATE ggml)\n"
    "    add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)\n"
    "    set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "
    '"LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")\n'
)
GGML_CMAKE_REGISTERED = GGML_CMAKE.replace(_OPT_SET_PROPERTY, _OPT_SET_PROPERTY + GGML_GATE_BLOCK)


def test_register_llama_convention():
    assert register_gate_test(LLAMA, LLAMA_CMAKE) == LLAMA_CMAKE_REGISTERED


def test_register_whisper_uses_llama_convention():
    assert register_gate_test(WHISPER, LLAMA_CMAKE) == LLAMA_CMAKE_REGISTERED


def test_register_llama_prefixed_layout_same_convention():
    assert register_gate_test(LLAMA_VENDORED, LLAMA_CMAKE) == LLAMA_CMAKE_REGISTERED


@pytest.mark.parametrize("indent", ["", "    ", "\t", "  \t"])
def test_register_llama_keeps_indentation(indent):
    text = f"foreach(x)\n{indent}llama_build_and_test(test-opt.cpp)\nendforeach()\n"
    out = register_gate_test(LLAMA, text)
    assert out == (
        f"foreach(x)\n{indent}llama_build_and_test(test-opt.cpp)\n"
        f"{indent}llama_build_and_test(test-opt-dynamic-accum.cpp)\nendforeach()\n"
    )


def test_register_llama_trailing_whitespace_on_anchor():
    text = "llama_build_and_test(test-opt.cpp)  \nx\n"
    assert register_gate_test(LLAMA, text) == (
        "llama_build_and_test(test-opt.cpp)  \nllama_build_and_test(test-opt-dynamic-accum.cpp)\n"
        "x\n"
    )


def test_register_llama_anchor_on_last_line_without_newline():
    out = register_gate_test(LLAMA, "if (X)\n  llama_build_and_test(test-opt.cpp)")
    assert out.splitlines() == [
        "if (X)",
        "  llama_build_and_test(test-opt.cpp)",
        "  llama_build_and_test(test-opt-dynamic-accum.cpp)",
    ]
    assert register_gate_test(LLAMA, "llama_build_and_test(test-opt.cpp)\n") == (
        "llama_build_and_test(test-opt.cpp)\nllama_build_and_test(test-opt-dynamic-accum.cpp)\n"
    )


def test_register_ggml_convention():
    assert register_gate_test(GGML, GGML_CMAKE) == GGML_CMAKE_REGISTERED


def test_register_ggml_prefixed_layout_same_convention():
    assert register_gate_test(GGML_VENDORED, GGML_CMAKE) == GGML_CMAKE_REGISTERED


def test_register_ggml_top_level_block():
    """Older ggml trees register test-opt at the top level, outside any if()."""
    text = (
        "#\n# test-opt\n\n"
        "set(TEST_TARGET test-opt)\n"
        "add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)\n"
        "target_link_libraries(${TEST_TARGET} PRIVATE ggml)\n"
        "add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)\n"
        "set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "
        '"LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")\n'
        "\n#\n# test-quantize-fns\n"
    )
    out = register_gate_test(GGML, text)
    block = GGML_GATE_BLOCK.replace("\n    ", "\n")
    anchor = (
        "set_property(TEST ${TEST_TARGET} PROPERTY ENVIRONMENT "
        '"LLVM_PROFILE_FILE=${TEST_TARGET}.profraw")\n'
    )
    assert out == text.replace(anchor, anchor + block, 1)
    assert out.index("set(TEST_TARGET test-opt-dynamic-accum)") < out.index("# test-quantize-fns")


def test_register_ggml_does_not_anchor_on_other_tests():
    only_backend_ops = GGML_CMAKE.split("\nif (NOT GGML_BACKEND_DL)")[0]
    with pytest.raises(RegistrationError):
        register_gate_test(GGML, only_backend_ops)


@pytest.mark.parametrize(
    "layout, text", [(LLAMA, LLAMA_CMAKE), (WHISPER, LLAMA_CMAKE), (GGML, GGML_CMAKE)]
)
def test_register_is_idempotent(layout, text):
    once = register_gate_test(layout, text)
    assert once != text
    assert register_gate_test(layout, once) == once
    assert once.count(GATE_TEST) == (1 if layout.build == "harness" else 2)


@pytest.mark.parametrize(
    "layout, text",
    [
        (LLAMA, LLAMA_CMAKE_REGISTERED),
        (GGML, GGML_CMAKE_REGISTERED),
        (LLAMA, "llama_build_and_test(test-opt-dynamic-accum.cpp)\n"),
    ],
)
def test_register_already_registered_is_unchanged(layout, text):
    assert register_gate_test(layout, text) == text


@pytest.mark.parametrize(
    "layout, text",
    [
        (LLAMA, ""),
        (LLAMA, "llama_build_and_test(test-gguf.cpp)\n"),
        (LLAMA, "# llama_build_and_test(test-opt.cpp)\n"),  # commented out
        (LLAMA, "llama_build_and_test(test-opt-foo.cpp)\n"),
        (LLAMA, GGML_CMAKE),  # a ggml-style file handed to the llama.cpp convention
        (GGML, ""),
        (GGML, LLAMA_CMAKE),  # a llama.cpp-style file handed to the ggml convention
        # no set_property
        (GGML, "set(TEST_TARGET test-opt)\nadd_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)\n"),
    ],
)
def test_register_missing_anchor(layout, text):
    with pytest.raises(RegistrationError) as e:
        register_gate_test(layout, text)
    assert isinstance(e.value, ConfigError)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("tests/CMakeLists.txt: ") and GATE_TEST in msg


# ---- build plans ----

COMMON = (
    ("CMAKE_BUILD_TYPE", "Release"),
    ("BUILD_SHARED_LIBS", "ON"),
    ("CMAKE_LINK_DEPENDS_NO_SHARED", "ON"),
)


TESTS = ("test-opt", "test-opt-dynamic-accum")  # as a topic declares them
NATIVE = ("test-opt-dynamic-accum", "train-opt-dynamic")


def test_build_plan_ggml_builds_its_own_tests():
    plan = build_plan(GGML, "/w/src", "/repo/native_tests", TESTS, ("train-opt-dynamic",), NATIVE)
    # the training program joins ggml's own build through a project include (not the series),
    # and so does the precompiled header of the fix file (build speed only)
    assert plan == BuildPlan(
        "/w/src",
        COMMON
        + (
            ("GGML_BUILD_TESTS", "ON"),
            ("GGML_BUILD_EXAMPLES", "OFF"),
            ("CMAKE_PROJECT_INCLUDE", "/repo/native_tests/extra-programs.cmake"),
            ("CMAKE_PROJECT_ggml_INCLUDE", "/repo/native_tests/precompile-fix-file.cmake"),
        ),
        TESTS,
        ("train-opt-dynamic",),
        precompiles=True,
    )
    assert plan.targets == ("test-opt", "test-opt-dynamic-accum")
    assert plan.programs == ("train-opt-dynamic",)


def test_build_plan_ggml_prefixed():
    plan = build_plan(GGML_VENDORED, "/w/src", "/repo/native_tests")
    assert plan.source_dir == "/w/src/vendor/ggml"
    assert dict(plan.definitions)["GGML_BUILD_TESTS"] == "ON"


@pytest.mark.parametrize("layout", [LLAMA, WHISPER])
def test_build_plan_llama_uses_the_harness(layout):
    plan = build_plan(layout, "/w/src", "/repo/native_tests", TESTS, (), NATIVE)
    # the harness builds the upstream tests the topics declare; native_tests/ adds its own
    assert plan == BuildPlan(
        "/repo/native_tests",
        COMMON
        + (
            ("GGML_SOURCE_DIR", "/w/src/ggml"),
            ("GGML_TESTS_DIR", "/w/src/tests"),
            ("HARNESS_TESTS", "test-opt"),
        ),
        TESTS,
        precompiles=True,
    )
    defs = dict(plan.definitions)
    assert "GGML_BUILD_TESTS" not in defs and "LLAMA_BUILD_TESTS" not in defs


def test_build_plan_llama_prefixed():
    plan = build_plan(LLAMA_VENDORED, "/w/src", "/h")
    defs = dict(plan.definitions)
    assert plan.source_dir == "/h"
    assert defs["GGML_SOURCE_DIR"] == "/w/src/core/vendor/llama.cpp/ggml"
    assert defs["GGML_TESTS_DIR"] == "/w/src/core/vendor/llama.cpp/tests"


def test_layout_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        GGML.name = "x"  # type: ignore[misc]
    assert Layout("ggml", "", "own-tests") == GGML
