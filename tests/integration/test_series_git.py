"""The series' diffs against real git: they apply, blob ids and unified diffs are git's own."""

import os
import subprocess
from pathlib import Path

import pytest

from orchestrator.model.layout import register_gate_test
from orchestrator.patchset.render import render
from orchestrator.patchset.series import git_blob_id, parse_patch, unified_file_diff

from ..helpers.patches import DIFF_CASES, GGML, GGML_CMAKE, HDR, LLAMA, NATIVE_TEST, BaseFiles
from ..helpers.patches import pre_image as _pre_image
from ..helpers.patches import real_series as _real_series


def _git(cwd: Path, *args: str, input: str = None) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    r = subprocess.run(
        ["git", *args], cwd=cwd, input=input, capture_output=True, text=True, env=env
    )
    if r.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({r.returncode}): {r.stderr}")
    return r.stdout


def _repo(path: Path, files: dict) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    _git(path, "init", "-q")
    for name, text in files.items():
        f = path / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_bytes(text.encode())
    _git(path, "add", "-A")
    _git(path, "commit", "-qm", "base")
    return path


def _apply(repo: Path, patch_text: str) -> None:
    p = repo.parent / f"{repo.name}.patch"
    p.write_bytes(patch_text.encode())
    _git(repo, "apply", "--check", str(p))
    _git(repo, "apply", str(p))


def test_real_series_applies_to_a_llama_tree(tmp_path):
    """Fixture check: the pre-images built from the hunks take the real series with plain git."""
    s = _real_series()
    fix, reg = s.patches[0].files[0], s.patches[1].files[0]
    repo = _repo(tmp_path / "llama", {fix.path: _pre_image(fix), reg.path: _pre_image(reg)})
    for p in s.patches:
        _apply(repo, p.text())
    assert (repo / "tests/test-opt-dynamic-accum.cpp").read_text() == NATIVE_TEST.read_text()
    assert (
        "llama_build_and_test(test-opt-dynamic-accum.cpp)"
        in (repo / "tests/CMakeLists.txt").read_text()
    )


def test_render_to_ggml_applies_with_git(tmp_path):
    s = _real_series()
    r = render(s, LLAMA, GGML, BaseFiles({"tests/CMakeLists.txt": GGML_CMAKE}))
    opt_pre = _pre_image(s.patches[0].files[0])
    repo = _repo(
        tmp_path / "ggml", {"src/ggml-opt.cpp": opt_pre, "tests/CMakeLists.txt": GGML_CMAKE}
    )
    for p in r.patches:
        _apply(repo, p.text())
    assert (repo / "tests/CMakeLists.txt").read_text() == register_gate_test(GGML, GGML_CMAKE)
    assert (repo / "tests/test-opt-dynamic-accum.cpp").read_text() == NATIVE_TEST.read_text()
    # the fix's own lines reached ggml's file (each added line of the series' source patch)
    added = [
        ln[1:].strip()
        for ln in s.patches[0].files[0].text.splitlines()
        if ln.startswith("+") and not ln.startswith("+++") and ln[1:].strip()
    ]
    text = (repo / "src/ggml-opt.cpp").read_text()
    assert added and all(line in text for line in added)
    assert not (repo / "ggml").exists()


def test_render_ggml_back_to_llama_applies(tmp_path):
    """ggml -> llama.cpp: the registration is regenerated in llama.cpp's convention."""
    ggml_series = render(
        _real_series(), LLAMA, GGML, BaseFiles({"tests/CMakeLists.txt": GGML_CMAKE})
    )
    llama_reg = _real_series().patches[1].files[0]
    llama_base = _pre_image(llama_reg)
    back = render(ggml_series, GGML, LLAMA, BaseFiles({"tests/CMakeLists.txt": llama_base}))
    assert back.layout == "llama.cpp"
    assert back.paths() == _real_series().paths()
    assert back.patches[0] == _real_series().patches[0]  # the fix maps back byte for byte
    repo = _repo(
        tmp_path / "llama",
        {
            "ggml/src/ggml-opt.cpp": _pre_image(_real_series().patches[0].files[0]),
            "tests/CMakeLists.txt": llama_base,
        },
    )
    for p in back.patches:
        _apply(repo, p.text())
    assert (repo / "tests/CMakeLists.txt").read_text() == register_gate_test(LLAMA, llama_base)


@pytest.mark.parametrize(
    "text", ["", "a\n", "no newline", "line 1\nline 2\n" * 50, "ünïcödé ✓\n", GGML_CMAKE]
)
def test_git_blob_id_matches_git(tmp_path, text):
    f = tmp_path / "blob"
    f.write_bytes(text.encode())
    assert git_blob_id(text) == _git(tmp_path, "hash-object", str(f)).strip()


@pytest.mark.parametrize("case", sorted(DIFF_CASES))
def test_unified_file_diff_applies_with_git(tmp_path, case):
    old, new = DIFF_CASES[case]
    path = "tests/CMakeLists.txt"
    diff = unified_file_diff(path, old, new)
    assert diff.startswith(
        f"diff --git a/{path} b/{path}\nindex {git_blob_id(old)}..{git_blob_id(new)} 100644\n"
        f"--- a/{path}\n+++ b/{path}\n@@ "
    )
    repo = _repo(tmp_path / "r", {path: old})
    _apply(repo, diff)
    assert (repo / path).read_bytes() == new.encode()
    # and the tool's own parser takes it
    assert parse_patch("0001-x.patch", HDR + diff).files[0].path == path


def test_unified_file_diff_three_way(tmp_path):
    """The index line carries real blob ids, so `git apply --3way` can fall back on them."""
    old, new = DIFF_CASES["registration"]
    path = "tests/CMakeLists.txt"
    repo = _repo(tmp_path / "r", {path: old})
    drifted = "# local change at the top\n" + old
    (repo / path).write_text(drifted)
    _git(repo, "commit", "-qam", "drift")
    p = tmp_path / "d.patch"
    p.write_text(unified_file_diff(path, old, new))
    _git(repo, "apply", "--3way", str(p))
    assert (repo / path).read_text() == "# local change at the top\n" + new


@pytest.mark.parametrize(
    "old, new",
    [("a\nb\n", "a\n++i;\nb\n"), ("a\n-- x\nb\n", "a\nb\n")],
    ids=["added-plus-plus", "removed-dash-dash"],
)
def test_unified_file_diff_keeps_lines_that_look_like_headers(tmp_path, old, new):
    diff = unified_file_diff("f.txt", old, new)
    repo = _repo(tmp_path / "r", {"f.txt": old})
    _apply(repo, diff)
    assert (repo / "f.txt").read_text() == new
