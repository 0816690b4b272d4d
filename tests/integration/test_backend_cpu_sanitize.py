"""The cpu-sanitize backend: ASan + UBSan flags, the sanitizer environment, the toolchain probe (a
real compile and link with -fsanitize), and the tests it reports skipped with their reason."""

import shutil
import stat
from pathlib import Path

import pytest

from orchestrator import backends
from orchestrator.backends import cpu_sanitize
from orchestrator.backends import names as backend_names
from orchestrator.config import Backend, load_matrix

ROOT = Path(__file__).resolve().parents[2]


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_registered_under_its_name():
    assert "cpu-sanitize" in backend_names()
    assert backends.get("cpu-sanitize").name == "cpu-sanitize"


def test_flags_turn_on_ggml_sanitizers_and_matrix_flags_come_last():
    m = backends.get("cpu-sanitize")
    flags = m.configure_flags(Backend("cpu-sanitize", ("-DGGML_NATIVE=OFF",)))
    assert flags[-1] == "-DGGML_NATIVE=OFF"
    assert {"-DGGML_SANITIZE_ADDRESS=ON", "-DGGML_SANITIZE_UNDEFINED=ON", "-DGGML_CPU=ON"} <= set(
        flags
    )
    assert "-DCMAKE_BUILD_TYPE=RelWithDebInfo" in flags


def test_sanitizer_findings_abort_and_stdbuf_is_allowed():
    env = backends.get("cpu-sanitize").test_env(Backend("cpu-sanitize"))
    asan, ubsan = (
        dict(o.split("=") for o in env["ASAN_OPTIONS"].split(":")),
        dict(o.split("=") for o in env["UBSAN_OPTIONS"].split(":")),
    )
    assert asan["abort_on_error"] == "1" and asan["detect_leaks"] == "1"
    assert asan["verify_asan_link_order"] == "0"  # the tests run under stdbuf, an LD_PRELOAD
    assert ubsan["halt_on_error"] == "1" and ubsan["abort_on_error"] == "1"


def test_matrix_env_wins_over_the_module():
    env = backends.get("cpu-sanitize").test_env(
        Backend("cpu-sanitize", env={"ASAN_OPTIONS": "detect_leaks=0"})
    )
    assert env["ASAN_OPTIONS"] == "detect_leaks=0"


def test_test_opt_is_skipped_with_the_measured_reason():
    skips = backends.get("cpu-sanitize").skip_tests
    assert list(skips) == ["test-opt"]
    assert "ctx_compute" in skips["test-opt"] and "LLAMA_SANITIZE_ADDRESS" in skips["test-opt"]
    assert "test-opt-dynamic-accum" not in skips  # the gate always runs
    for name in backends.names():
        if name != "cpu-sanitize":
            assert backends.get(name).skip_tests == {}


def test_device_info_records_the_options_and_skips():
    info = backends.get("cpu-sanitize").device_info(Backend("cpu-sanitize"))
    assert info.sanitizers == ["address", "undefined"]
    assert info.skipped_tests == {"test-opt": cpu_sanitize.TEST_OPT_SKIP}


def test_no_compiler_is_a_one_line_reason(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CC", raising=False)
    reason = backends.get("cpu-sanitize").missing_toolchain(Backend("cpu-sanitize"))
    assert reason == "C compiler 'cc' not found on PATH (set CC or install gcc/clang)"


def test_a_compiler_without_sanitizer_runtimes_is_named_with_its_error(tmp_path, monkeypatch):
    _exe(tmp_path / "fakecc", "echo '/usr/bin/ld: cannot find -lasan' >&2\nexit 1\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("CC", "fakecc")
    reason = backends.get("cpu-sanitize").missing_toolchain(Backend("cpu-sanitize"))
    assert reason.startswith(
        "fakecc cannot link with -fsanitize=address,undefined (/usr/bin/ld: cannot find -lasan)"
    )
    assert "\n" not in reason


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler named cc on this machine")
def test_the_real_compiler_links_with_sanitizers(monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    assert cpu_sanitize.sanitizer_link_error("cc") is None


def test_the_sanitize_profile_runs_it_and_the_default_does_not():
    m = load_matrix(ROOT / "matrix.yaml")
    assert m.profiles["sanitize"][1] == ("cpu-sanitize",)
    assert "cpu-sanitize" not in m.profiles["default"][1]
    assert m.backend("cpu-sanitize").cmake_flags == ("-DGGML_CPU=ON",)
