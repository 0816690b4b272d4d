"""The layout map on the real series and the real bases: llama.cpp -> ggml -> llama.cpp, a nested
superproject prefix, and whisper.cpp (no ggml test harness: the gate test goes unregistered and is
built through native_tests/) all map back to patches/ byte for byte, and each rendering applies.
"""

import os
from pathlib import Path

import pytest

from orchestrator.errors import ConfigError
from orchestrator.model.layout import (
    GATE_TEST,
    LAYOUTS,
    build_plan,
    get_layout,
    register_gate_test,
    registered,
)
from orchestrator.patchset.render import render
from orchestrator.patchset.series import parse_series
from orchestrator.vcs.snapshots import SnapshotRepo, Worktree

from ..helpers.forks import ROOT, real_snapshot_refs
from ..helpers.patches import real_series

LLAMA, GGML, WHISPER = LAYOUTS["llama.cpp"], LAYOUTS["ggml"], LAYOUTS["whisper.cpp"]
NESTED = get_layout("llama.cpp", "core/vendor/llama.cpp")
GGML_NESTED = get_layout("ggml", "third_party/ggml")
PATCHES = [
    *sorted((ROOT / "patches" / "accumulator-reset").glob("0001-*.patch")),
    *sorted((ROOT / "native_tests" / "accumulator-reset" / "upstream-gate").glob("*.patch")),
]
# whisper.cpp's tests/CMakeLists.txt has its own tests and none of ggml's (no test-opt.cpp)
WHISPER_TESTS_CMAKE = """\
set(TEST_TARGET test-whisper-full)
add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)
target_link_libraries(${TEST_TARGET} PRIVATE whisper)
add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)
"""


def _series():
    """The fix and the gate test's own patch (its registration is what the layouts render)."""
    return real_series()


def _text(series) -> list[tuple[str, bytes]]:
    return [(p.name, p.text().encode()) for p in series.patches]


@pytest.fixture(scope="module")
def bases(tool_cache):
    """(snapshot repo, {layout name: base commit}) of the real pinned snapshots."""
    refs = real_snapshot_refs(tool_cache)
    repo = SnapshotRepo(tool_cache / "snapshots.git")
    return repo, {name: repo.ref_commit(ref) for name, ref in refs.items()}


def _reader(repo, commit, prefix=""):
    return lambda p: repo.read_blob(commit, p[len(prefix) :]) if p.startswith(prefix) else None


def test_llama_ggml_llama_is_byte_identical(bases):
    repo, base = bases
    s = _series()
    as_ggml = render(s, LLAMA, GGML, _reader(repo, base["ggml"]))
    assert as_ggml.paths() == ["src/ggml-opt.cpp", "tests/CMakeLists.txt", f"tests/{GATE_TEST}.cpp"]
    reg = as_ggml.patches[1].files[0].text
    assert "llama_build_and_test" not in reg and f"+    set(TEST_TARGET {GATE_TEST})\n" in reg
    back = render(as_ggml, GGML, LLAMA, _reader(repo, base["llama.cpp"]))
    assert _text(back) == [(p.name, p.read_bytes()) for p in PATCHES]


def test_through_text_too(bases):
    """ggml patch files written out and parsed back (what
    `export` hands a user) map back the same."""
    repo, base = bases
    as_ggml = render(_series(), LLAMA, GGML, _reader(repo, base["ggml"]))
    reparsed = parse_series("ggml", [(p.name, p.text()) for p in as_ggml.patches])
    back = render(reparsed, GGML, LLAMA, _reader(repo, base["llama.cpp"]))
    assert _text(back) == [(p.name, p.read_bytes()) for p in PATCHES]


@pytest.mark.parametrize(
    "nested, flat",
    [(NESTED, LLAMA), (GGML_NESTED, GGML)],
    ids=["llama-in-superproject", "ggml-in-superproject"],
)
def test_nested_superproject_round_trip(bases, nested, flat):
    repo, base = bases
    s = _series()
    flat_base = base["llama.cpp" if flat is LLAMA else "ggml"]
    inside = render(s, LLAMA, nested, _reader(repo, flat_base, nested.prefix))
    assert all(p.startswith(nested.prefix) for p in inside.paths())
    assert inside.fix_paths() == [
        nested.prefix + ("ggml/src/ggml-opt.cpp" if flat is LLAMA else "src/ggml-opt.cpp")
    ]
    back = render(inside, nested, LLAMA, _reader(repo, base["llama.cpp"]))
    assert _text(back) == [(p.name, p.read_bytes()) for p in PATCHES]


def test_whisper_without_a_test_harness_renders_and_maps_back(bases):
    repo, base = bases
    whisper_files = {"tests/CMakeLists.txt": WHISPER_TESTS_CMAKE}
    as_whisper = render(_series(), LLAMA, WHISPER, whisper_files.get)
    # the fix unchanged (whisper.cpp uses llama.cpp's
    # paths for ggml); the test added, not registered
    assert as_whisper.patches[0] == _series().patches[0]
    assert [f.path for f in as_whisper.patches[1].files] == [f"tests/{GATE_TEST}.cpp"]
    assert as_whisper.gate_test_source() == (ROOT / "native_tests" / f"{GATE_TEST}.cpp").read_text()
    # no tests/CMakeLists.txt at all: the same
    assert render(_series(), LLAMA, WHISPER, {}.get) == as_whisper
    # and back to llama.cpp: the registration is added again, in llama.cpp's convention
    back = render(as_whisper, WHISPER, LLAMA, _reader(repo, base["llama.cpp"]))
    assert _text(back) == [(p.name, p.read_bytes()) for p in PATCHES]


def test_whisper_is_built_through_the_native_tests_harness():
    plan = build_plan(WHISPER, "/w", "/harness")
    assert plan.source_dir == "/harness"
    assert dict(plan.definitions)["GGML_SOURCE_DIR"] == "/w/ggml"
    # where the series adds the gate test
    assert dict(plan.definitions)["GGML_TESTS_DIR"] == "/w/tests"
    harness = (ROOT / "native_tests" / "CMakeLists.txt").read_text()
    # test-opt.cpp absent there: skipped
    assert 'if (EXISTS "${GGML_TESTS_DIR}/${test_name}.cpp")' in harness


def test_registration_rules():
    llama_cmake = "if (X)\n  llama_build_and_test(test-opt.cpp)\nendif()\n"
    assert registered(WHISPER, None) is None
    assert registered(WHISPER, WHISPER_TESTS_CMAKE) is None
    # a whisper.cpp that does build ggml's tests the llama.cpp way gets the llama.cpp registration
    assert registered(WHISPER, llama_cmake) == register_gate_test(LLAMA, llama_cmake)
    with pytest.raises(ConfigError, match=r"^tests/CMakeLists.txt: missing in the ggml base"):
        registered(GGML, None)
    with pytest.raises(ConfigError, match=r"no 'set\(TEST_TARGET test-opt\)' block"):
        registered(GGML, WHISPER_TESTS_CMAKE)


def test_real_registrations_in_each_convention(bases):
    repo, base = bases
    llama = repo.read_blob(base["llama.cpp"], "tests/CMakeLists.txt")
    ggml = repo.read_blob(base["ggml"], "tests/CMakeLists.txt")
    new = register_gate_test(LLAMA, llama)
    assert new.count(f"llama_build_and_test({GATE_TEST}.cpp)") == 1
    new = register_gate_test(GGML, ggml)
    block = new[new.index(f"set(TEST_TARGET {GATE_TEST})") :]
    assert (
        new.index("if (NOT GGML_BACKEND_DL)")
        < new.index(f"set(TEST_TARGET {GATE_TEST})")
        < new.index("endif()", new.index("if (NOT GGML_BACKEND_DL)"))
    )
    assert block.splitlines()[1:4] == [
        "    add_executable(${TEST_TARGET} ${TEST_TARGET}.cpp)",
        "    target_link_libraries(${TEST_TARGET} PRIVATE ggml)",
        "    add_test(NAME ${TEST_TARGET} COMMAND $<TARGET_FILE:${TEST_TARGET}>)",
    ]


@pytest.mark.parametrize("layout", ["ggml", "whisper.cpp", "nested"])
def test_each_rendering_applies_with_git_am(bases, tmp_path, layout):
    """On the real bases: ggml as is; whisper.cpp built from llama.cpp's ggml/ plus its own tests/;
    the nested layout as llama.cpp inside a superproject tree."""
    repo, base = bases
    work = SnapshotRepo(tmp_path / "s.git")
    (tmp_path / "s.git" / "objects" / "info" / "alternates").write_text(
        str(repo.path / "objects") + "\n"
    )
    if layout == "ggml":
        dst, commit = GGML, base["ggml"]
    elif layout == "whisper.cpp":
        tree = repo.tree_of(base["llama.cpp"], "ggml")
        blob = work.hash_data(WHISPER_TESTS_CMAKE.encode())
        top = work.tree_from_entries([("100644", blob, "tests/CMakeLists.txt")])
        dst, commit = (
            WHISPER,
            work.commit_tree(work.tree_with_subtree(top, "ggml", tree), "refs/w", "whisper-like"),
        )
    else:
        top = work.tree_from_entries([("100644", work.hash_data(b"superproject\n"), "README.md")])
        tree = work.tree_with_subtree(top, "core/vendor/llama.cpp", repo.tree_of(base["llama.cpp"]))
        dst, commit = NESTED, work.commit_tree(tree, "refs/n", "superproject")
    rendered = render(_series(), LLAMA, dst, lambda p: work.read_blob(commit, p))
    files = []
    for p in rendered.patches:
        f = tmp_path / p.name
        f.write_text(p.text())
        files.append(f)
    wt = Worktree(work, tmp_path / "wt")
    wt.ensure(commit)
    wt.am(files)
    gate = Path(wt.path, dst.prefix + f"tests/{GATE_TEST}.cpp")
    assert gate.read_text() == (ROOT / "native_tests" / f"{GATE_TEST}.cpp").read_text()
    opt = Path(wt.path, dst.from_ggml("src/ggml-opt.cpp")).read_text()
    assert "ggml_graph_reset(opt_ctx->gb_grad);" in opt
    assert os.path.exists(Path(wt.path, dst.tests_dir(), "CMakeLists.txt"))
