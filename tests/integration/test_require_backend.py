"""--require-backend (and $GGML_PATCH_REQUIRE_BACKEND): on a machine meant to run a backend, a cell
that would be skipped there fails instead (exit 9), saying why; never a silent green skip.
Metal on Linux is the skip here: it is decided before anything is fetched or built."""

import json
import os
import re
import sys

import pytest

from ..helpers.tools import ROOT, run_tool

pytestmark = pytest.mark.skipif(
    sys.platform == "darwin", reason="Metal runs on macOS: no skip to turn into a failure"
)


def _matrix(tmp_path, *extra, env=None):
    old = os.environ.copy()
    os.environ.update(env or {})
    try:
        return run_tool(
            "matrix",
            "--matrix",
            str(ROOT / "matrix.yaml"),
            "--cache",
            str(tmp_path / "cache"),
            "--results",
            str(tmp_path / "results"),
            "--target",
            "ggml",
            "--backend",
            "metal",
            *extra,
        )
    finally:
        os.environ.clear()
        os.environ.update(old)


def _cell(tmp_path) -> dict:
    return json.loads((tmp_path / "results" / "results.json").read_text())["cells"][0]


def test_without_it_the_skip_is_a_skip(tmp_path):
    proc = _matrix(tmp_path, env={"GGML_PATCH_REQUIRE_BACKEND": ""})
    assert proc.returncode == 0, proc.stderr
    assert _cell(tmp_path)["status"] == "skipped" and "0 passed, 0 failed, 1 skipped" in proc.stdout


@pytest.mark.parametrize("how", ["option", "environment"])
def test_a_required_backend_that_cannot_run_fails_with_exit_9(tmp_path, how):
    extra, env = (
        (["--require-backend", "metal"], {})
        if how == "option"
        else ([], {"GGML_PATCH_REQUIRE_BACKEND": "cuda, metal"})
    )
    proc = _matrix(tmp_path, *extra, env=env)
    assert proc.returncode == 9, proc.stderr
    cell = _cell(tmp_path)
    assert cell["status"] == "failed" and cell["exit_code"] == 9
    assert cell["reason"].startswith(
        "metal is required here (--require-backend metal) but cannot run: Metal needs macOS"
    )
    assert "0 passed, 1 failed, 0 skipped" in proc.stdout
    junit = (tmp_path / "results" / "junit.xml").read_text()
    assert "<failure" in junit and "<skipped" not in junit.split("control")[0]


def test_an_unknown_required_backend_is_a_config_error(tmp_path):
    proc = _matrix(tmp_path, "--require-backend", "metl")
    assert proc.returncode == 2 and "unknown backend 'metl'; did you mean 'metal'?" in proc.stderr


def test_the_variable_names_the_machine_so_a_backend_the_matrix_lacks_is_not_asked(tmp_path):
    m = tmp_path / "no-vulkan.yaml"
    text = (
        (ROOT / "matrix.yaml").read_text().replace("path: patches", f"path: '{ROOT / 'patches'}'")
    )
    text = text.replace("native_tests: native_tests", f"native_tests: '{ROOT / 'native_tests'}'")
    m.write_text(re.sub(r"\n  vulkan:\n(    .*\n)+", "\n", text).replace(", vulkan,", ","))
    old = os.environ.copy()
    os.environ["GGML_PATCH_REQUIRE_BACKEND"] = "vulkan"
    try:
        proc = run_tool(
            "matrix",
            "--matrix",
            str(m),
            "--cache",
            str(tmp_path / "cache"),
            "--results",
            str(tmp_path / "results"),
            "--target",
            "ggml",
            "--backend",
            "metal",
        )
    finally:
        os.environ.clear()
        os.environ.update(old)
    assert proc.returncode == 0, proc.stderr
    assert _cell(tmp_path)["status"] == "skipped"


def test_an_unknown_backend_in_the_variable_is_a_config_error(tmp_path):
    proc = _matrix(tmp_path, env={"GGML_PATCH_REQUIRE_BACKEND": "vulkn"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "ggml-patch: error: $GGML_PATCH_REQUIRE_BACKEND: unknown backend 'vulkn' "
        "(backends: cpu, vulkan, cuda, metal, cpu-sanitize)"
    )
