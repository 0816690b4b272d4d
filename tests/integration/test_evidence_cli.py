"""`ggml-patch evidence`'s user errors: one line, exit 2, before any build (the real run is in
tests/e2e/test_evidence.py): a target without llama.cpp's training API (the ggml layout, a llama.cpp
tree whose llama.h has no llama_opt_epoch, a tree without the vocab file or without
examples/training/finetune.cpp), a bad --case, a --results
that is a file, an unknown target; and a results folder holding a user's files is never written."""

from __future__ import annotations

from pathlib import Path

from ..helpers.security import ROOT, isolated_env, tool

MATRIX = ROOT / "matrix.yaml"


def error_after_fetch(proc) -> str:
    """Found once the tree is fetched (what it holds
    decides): progress lines, then the one error line."""
    assert proc.returncode == 2, (proc.stdout[-2000:], proc.stderr[-3000:])
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("ggml-patch: ")]
    assert (
        len(errors) == 1
        and proc.stderr.rstrip().endswith(errors[0])
        and "Traceback" not in proc.stderr
    )
    assert errors[0].startswith("ggml-patch: error: ")
    return errors[0]


def no_build(proc, cache: Path) -> None:
    assert "build with_fix" not in proc.stderr, proc.stderr
    assert not list(cache.glob("cells/*/src")) and not list(cache.glob("cells/*/build-finetune"))


def test_the_ggml_layout_has_no_training_api(tmp_path):
    proc = tool(
        "evidence",
        "--matrix",
        MATRIX,
        "--target",
        "ggml",
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    line = proc.error_line(2)
    assert "--target ggml: the ggml layout has no libllama and no llama_opt_epoch" in line
    assert (
        "runs on a llama.cpp target (llama.cpp, "
        "llama.cpp-master, cambriantech-llama.cpp, continuum)" in line
    )
    no_build(proc, tmp_path / "cache")
    assert not (tmp_path / "r").exists()


def test_a_bad_case_and_an_unknown_target_are_one_line(tmp_path):
    env = isolated_env(tmp_path)
    proc = tool(
        "evidence",
        "--matrix",
        MATRIX,
        "--case",
        "adamw:1e-3:3:2",
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=env,
    )
    assert "--case 'adamw:1e-3:3:2': opt_period '3': expected one of 1, 2, 4" in proc.error_line(2)
    proc = tool(
        "evidence", "--matrix", MATRIX, "--target", "llama", "--cache", tmp_path / "cache", env=env
    )
    assert "unknown target 'llama'" in proc.error_line(2)
    no_build(proc, tmp_path / "cache")


def test_a_results_path_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "r").write_text("mine")
    proc = tool(
        "evidence",
        "--matrix",
        MATRIX,
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    assert "--results" in proc.error_line(2) and "not a folder" in proc.stderr
    assert (tmp_path / "r").read_text() == "mine"


def llama_tree(path: Path, header: str, vocab: bool, finetune: bool = True) -> Path:
    """A llama.cpp-layout `local` tree with what the series and the evidence read first."""
    (path / "ggml" / "src").mkdir(parents=True)
    (path / "include").mkdir()
    (path / "tests").mkdir()
    (path / "models").mkdir()
    (path / "ggml" / "src" / "ggml-opt.cpp").write_text("// ggml-opt\n")
    (path / "tests" / "CMakeLists.txt").write_text("llama_build_and_test(test-opt.cpp)\n")
    (path / "include" / "llama.h").write_text(header)
    (path / "LICENSE").write_text("MIT\n")
    (path / "CONTRIBUTING.md").write_text("contribute\n")
    (path / "docs").mkdir()
    (path / "docs" / "docker.md").write_text("docker\n")
    if finetune:
        (path / "examples" / "training").mkdir(parents=True)
        (path / "examples" / "training" / "finetune.cpp").write_text("int main() {}\n")
    if vocab:
        (path / "models" / "ggml-vocab-llama-spm.gguf").write_bytes(b"GGUF")
    return path


def llama_matrix(tmp: Path, tree: Path) -> Path:
    m = tmp / "matrix.yaml"
    m.write_text(
        f"queue: {{path: '{ROOT / 'patches'}', layout: llama.cpp}}\n"
        f"native_tests: '{ROOT / 'native_tests'}'\ntargets:\n  old-llama:\n    layout: llama.cpp\n"
        f"    source: {{kind: local, path: '{tree}'}}\nbackends:\n  cpu: {{}}\nprofiles:\n"
        "  default: {targets: [old-llama], backends: [cpu]}\n"
    )
    return m


def test_a_llama_cpp_tree_without_llama_opt_epoch_is_one_line(tmp_path):
    tree = llama_tree(tmp_path / "old", "LLAMA_API int llama_decode(void);\n", vocab=True)
    proc = tool(
        "evidence",
        "--matrix",
        llama_matrix(tmp_path, tree),
        "--target",
        "old-llama",
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    assert (
        "--target old-llama: include/llama.h has no llama_opt_epoch (llama.cpp's training API"
        in error_after_fetch(proc)
    )
    no_build(proc, tmp_path / "cache")


def test_a_tree_without_the_vocab_file_is_one_line(tmp_path):
    tree = llama_tree(tmp_path / "novocab", "LLAMA_API void llama_opt_epoch(void);\n", vocab=False)
    proc = tool(
        "evidence",
        "--matrix",
        llama_matrix(tmp_path, tree),
        "--target",
        "old-llama",
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    assert "models/ggml-vocab-llama-spm.gguf is not in the tree" in error_after_fetch(proc)
    no_build(proc, tmp_path / "cache")


def test_a_tree_without_upstream_s_finetune_example_is_one_line(tmp_path):
    tree = llama_tree(
        tmp_path / "nofinetune",
        "LLAMA_API void llama_opt_epoch(void);\n",
        vocab=True,
        finetune=False,
    )
    proc = tool(
        "evidence",
        "--matrix",
        llama_matrix(tmp_path, tree),
        "--target",
        "old-llama",
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    assert "examples/training/finetune.cpp is not in the tree" in error_after_fetch(proc)
    no_build(proc, tmp_path / "cache")


def test_an_evidence_folder_holding_a_user_s_files_is_refused(tmp_path):
    (tmp_path / "r" / "evidence").mkdir(parents=True)
    (tmp_path / "r" / "evidence" / "notes.txt").write_text("mine")
    proc = tool(
        "evidence",
        "--matrix",
        MATRIX,
        "--cache",
        tmp_path / "cache",
        "--results",
        tmp_path / "r",
        env=isolated_env(tmp_path),
    )
    assert "holds files ggml-patch did not create" in proc.error_line(2)
    assert (tmp_path / "r" / "evidence" / "notes.txt").read_text() == "mine"
    no_build(proc, tmp_path / "cache")
