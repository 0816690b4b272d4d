"""Backend modules: toolchain and device probes, CMake flags, test environment, and what a cell does
when something is missing (skip with the reason, or build only on request)."""

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from orchestrator import backends
from orchestrator.backends import cuda as cuda_mod
from orchestrator.backends import metal as metal_mod
from orchestrator.backends import vulkan as vk
from orchestrator.cache import Cache
from orchestrator.config import Backend, load_matrix
from orchestrator.errors import ConfigError
from orchestrator.report.summary import summary_markdown
from orchestrator.run.cellrun import cell_action
from orchestrator.run.matrix import RunOptions, run_matrix

from ..helpers.tools import ROOT  # noqa: E402

VK_CORE_1_3 = (
    "#define VK_HEADER_VERSION 239\n"
    "#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, 1, 3, VK_HEADER_VERSION)\n"
)
VK_CORE_1_4 = (
    "#define VK_HEADER_VERSION 309\n"
    "#define VK_HEADER_VERSION_COMPLETE VK_MAKE_API_VERSION(0, 1, 4, VK_HEADER_VERSION)\n"
)


def _exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def bare_path(tmp_path, monkeypatch):
    """PATH holding only a directory the test fills, so no real tool on this machine leaks in."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    for var in ("CUDA_HOME", "CUDA_PATH", vk.ICD_OVERRIDE, "GGML_PATCH_CACHE", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(var, raising=False)
    # no default cache with a real vulkan-sdk
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return bin_dir


# ---- registry ----


def test_the_matrix_schema_takes_its_backend_names_from_the_registry():
    from orchestrator.config import schema

    assert backends.names() == ["cpu", "vulkan", "cuda", "metal", "cpu-sanitize"]
    assert schema()["properties"]["backends"]["propertyNames"]["enum"] == backends.names()
    for name in backends.names():
        assert backends.get(name).name == name


def test_unknown_backend_is_a_one_line_config_error():
    with pytest.raises(ConfigError) as e:
        backends.get("opencl")
    assert (
        "\n" not in str(e.value)
        and "'opencl'" in str(e.value)
        and "cpu, vulkan, cuda, metal" in str(e.value)
    )


def test_cpu_needs_nothing():
    m, b = backends.get("cpu"), Backend("cpu", ("-DGGML_NATIVE=OFF",))
    assert m.missing_toolchain(b) is None and m.missing_device(b) is None
    assert m.configure_flags(b) == ["-DGGML_CPU=ON", "-DGGML_NATIVE=OFF"]
    assert m.test_env(Backend("cpu", env={"X": "1"})) == {"X": "1"}


def test_a_missing_required_tool_names_it_and_how_to_get_it(bare_path):
    reason = backends.get("vulkan").missing_toolchain(Backend("vulkan", tools=("glslc",)))
    assert reason.startswith("required tool(s) not found on PATH: glslc")
    assert "orchestrator/scripts/setup-vulkan-lavapipe.sh" in reason
    assert (
        backends.get("cpu").missing_toolchain(Backend("cpu", tools=("no-such-tool-x",)))
        == "required tool(s) not found on PATH: no-such-tool-x"
    )


# ---- the cell's action ----


@pytest.mark.parametrize(
    "toolchain, device, ok, flag, expected",
    [
        (None, None, False, False, ("run", "")),
        (None, None, True, True, ("run", "")),  # a device present: --build-only changes nothing
        ("no nvcc", None, True, True, ("skip", "no nvcc")),
        # every missing thing is named
        ("no nvcc", "no GPU", True, True, ("skip", "no nvcc; no GPU")),
        (None, "no GPU", True, False, ("skip", "no GPU")),
        (None, "no GPU", True, True, ("build-only", "no GPU")),
        # build-only means nothing for this backend
        (None, "no Metal", False, True, ("skip", "no Metal")),
        (
            "Metal needs macOS (Linux)",
            "Metal needs macOS",
            False,
            False,
            ("skip", "Metal needs macOS (Linux)"),
        ),
    ],
)
def test_cell_action(toolchain, device, ok, flag, expected):
    assert cell_action(toolchain, device, ok, flag) == expected


# ---- Vulkan ----


def _sdk(tmp_path, core=VK_CORE_1_4, spirv=True, loader=True, icd=True, extra=None) -> Path:
    """A fake private prefix + env.json as the Vulkan setup script writes them."""
    cache = tmp_path / "cache"
    root = cache / "vulkan-sdk" / "root"
    (root / "usr/include/vulkan").mkdir(parents=True)
    (root / "usr/include/vulkan/vulkan_core.h").write_text(core)
    spirv_dir = root / "usr/share/cmake/SPIRV-Headers"
    if spirv:
        spirv_dir.mkdir(parents=True)
        (spirv_dir / "SPIRV-HeadersConfig.cmake").write_text("")
    lib = tmp_path / "libvulkan.so.1"
    if loader:
        lib.write_text("")
    icd_path = cache / "vulkan-sdk" / "lvp_icd.json"
    if icd:
        icd_path.write_text("{}")
    data = {
        "schema_version": 1,
        "mode": "private",
        "mesa": "25.0.7-2~bpo12+1",
        "debian": "12.11",
        "cmake_flags": [
            f"-DVulkan_INCLUDE_DIR={root}/usr/include",
            f"-DVulkan_LIBRARY={lib}",
            f"-DSPIRV-Headers_DIR={spirv_dir}",
        ],
        "env": {"VK_ICD_FILENAMES": str(icd_path), "LD_LIBRARY_PATH": f"{root}/usr/lib"},
        "system_icd": "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json",
        **(extra or {}),
    }
    (cache / "vulkan-sdk" / "env.json").write_text(json.dumps(data))
    return cache


def test_vulkan_header_version_and_flag_values():
    assert vk.header_version(VK_CORE_1_3) == (1, 3, 239)
    assert vk.header_version(VK_CORE_1_4) == (1, 4, 309)
    assert vk.header_version("nothing") is None
    flags = ["-DA=1", "-DVulkan_INCLUDE_DIR:PATH=/x", "-DVulkan_INCLUDE_DIR=/y"]
    assert vk.flag_value(flags, "Vulkan_INCLUDE_DIR") == "/y"
    assert vk.flag_value(flags, "Vulkan") is None


def test_vulkan_flags_and_env_come_from_the_setup_scripts_env_file(tmp_path, bare_path):
    cache = _sdk(tmp_path)
    m = backends.get("vulkan", cache)
    b = Backend("vulkan", ("-DGGML_VULKAN=ON", "-DX=1"), {"GGML_VK_VISIBLE_DEVICES": "0"})
    flags = m.configure_flags(b)
    # matrix.yaml's flags come last, so they win
    assert flags[0] == "-DGGML_VULKAN=ON" and flags[-1] == "-DX=1"
    assert any(f.startswith("-DVulkan_INCLUDE_DIR=") and "vulkan-sdk/root" in f for f in flags)
    env = m.test_env(b)
    assert env["GGML_VK_VISIBLE_DEVICES"] == "0"
    assert env["VK_ICD_FILENAMES"] == str(cache / "vulkan-sdk/lvp_icd.json")
    assert (
        m.test_env(Backend("vulkan", env={"VK_ICD_FILENAMES": "/mine.json"}))["VK_ICD_FILENAMES"]
        == "/mine.json"
    )
    assert m.missing_toolchain(b) is None


def test_vulkan_icd_override_selects_the_system_lavapipe(tmp_path, bare_path, monkeypatch):
    m = backends.get("vulkan", _sdk(tmp_path))
    monkeypatch.setenv(vk.ICD_OVERRIDE, "system")
    assert (
        m.test_env(Backend("vulkan"))["VK_ICD_FILENAMES"]
        == "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
    )
    monkeypatch.setenv(vk.ICD_OVERRIDE, "/elsewhere/icd.json")
    assert m.test_env(Backend("vulkan"))["VK_ICD_FILENAMES"] == "/elsewhere/icd.json"


def test_vulkan_private_libraries_come_before_the_users(tmp_path, bare_path, monkeypatch):
    m = backends.get("vulkan", _sdk(tmp_path))
    monkeypatch.setenv("LD_LIBRARY_PATH", "/user/lib")
    assert m.test_env(Backend("vulkan"))["LD_LIBRARY_PATH"].endswith(os.pathsep + "/user/lib")


def test_vulkan_without_setup_uses_the_default_cache_env_file(tmp_path, bare_path, monkeypatch):
    cache = _sdk(tmp_path)
    monkeypatch.setenv("GGML_PATCH_CACHE", str(cache))
    # --cache elsewhere: the script wrote the default one
    m = backends.get("vulkan", tmp_path / "another-cache")
    assert m.env_file() == cache / "vulkan-sdk" / "env.json"


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"core": VK_CORE_1_3}, "Vulkan headers 1.3.239 in"),
        ({"spirv": False}, "SPIRV-Headers (CMake config) not found"),
        ({"loader": False}, "the Vulkan loader (libvulkan.so) was not found"),
    ],
)
def test_vulkan_toolchain_problems_name_the_fix(tmp_path, bare_path, kwargs, expected):
    reason = backends.get("vulkan", _sdk(tmp_path, **kwargs)).missing_toolchain(Backend("vulkan"))
    assert reason.startswith(expected) and "orchestrator/scripts/setup-vulkan-lavapipe.sh" in reason
    assert "\n" not in reason


def test_vulkan_old_system_headers_without_setup(tmp_path, bare_path, monkeypatch):
    include = tmp_path / "include"
    (include / "vulkan").mkdir(parents=True)
    (include / "vulkan/vulkan_core.h").write_text(VK_CORE_1_3)
    m = backends.get("vulkan", tmp_path / "empty-cache")
    reason = m.missing_toolchain(Backend("vulkan", (f"-DVulkan_INCLUDE_DIR={include}",)))
    assert "1.3.239" in reason and "need >= 1.4" in reason
    reason = m.missing_toolchain(Backend("vulkan", (f"-DVulkan_INCLUDE_DIR={tmp_path / 'none'}",)))
    assert reason.startswith("Vulkan headers not found")


def test_vulkan_device_probe(tmp_path, bare_path):
    m = backends.get("vulkan", _sdk(tmp_path))
    b = Backend("vulkan")
    assert m.missing_device(b) is None  # no vulkaninfo: the ICD file is all it can check
    _exe(
        bare_path / "vulkaninfo",
        "echo 'Devices:'\necho '\tdeviceName = llvmpipe (LLVM 15.0.6, 256 bits)'\n"
        "echo '\tdriverInfo = Mesa 25.0.7'\n",
    )
    assert m.missing_device(b) is None
    info = m.device_info(b)
    assert info.devices == ["llvmpipe (LLVM 15.0.6, 256 bits)"] and info.drivers == ["Mesa 25.0.7"]
    assert info.setup.mesa == "25.0.7-2~bpo12+1"
    _exe(bare_path / "vulkaninfo", "echo 'ERROR: no devices'\nexit 1\n")
    assert "lists no device" in m.missing_device(b)


def test_vulkan_missing_icd(tmp_path, bare_path):
    m = backends.get("vulkan", _sdk(tmp_path, icd=False))
    reason = m.missing_device(Backend("vulkan"))
    assert "lvp_icd.json does not exist" in reason and "setup-vulkan-lavapipe.sh" in reason


# ---- CUDA ----


def _toolkit(tmp_path, cublas=True) -> Path:
    root = tmp_path / "cuda"
    _exe(root / "bin/nvcc", "echo nvcc\n")
    if cublas:
        (root / "lib64").mkdir(parents=True)
        (root / "lib64/libcublas.so").write_text("")
        (root / "lib64/libcublasLt.so").write_text("")
    return root


def test_cuda_gpu_names():
    out = "GPU 0: NVIDIA H200 (UUID: GPU-0a1b)\nGPU 1: NVIDIA L4 (UUID: GPU-2c3d)\n"
    assert cuda_mod.gpu_names(out) == ["NVIDIA H200", "NVIDIA L4"]
    assert cuda_mod.gpu_names("No devices were found\n") == []


def test_cuda_without_nvcc(bare_path, monkeypatch, tmp_path):
    reason = backends.get("cuda").missing_toolchain(Backend("cuda"))
    assert reason.startswith("nvcc not found") and "install the CUDA toolkit" in reason
    # no GPU here, whatever this machine has
    monkeypatch.setattr(cuda_mod, "DEVICE_NODE", tmp_path / "no-nvidia0")
    # no toolkit: --build-only cannot help, so the device reason does not offer it
    assert "--build-only" not in backends.get("cuda").missing_device(Backend("cuda"))


def test_cuda_required_tool_missing(bare_path):
    reason = backends.get("cuda").missing_toolchain(Backend("cuda", tools=("nvcc",)))
    assert (
        reason.startswith("required tool(s) not found on PATH: nvcc") and "CUDA toolkit" in reason
    )


def test_cuda_without_cublas(tmp_path, bare_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(_toolkit(tmp_path, cublas=False)))
    monkeypatch.setattr(sys, "path", [])  # no pip nvidia-cublas either
    monkeypatch.setattr(cuda_mod.glob, "glob", lambda pattern: [])  # nor /usr/local/cuda*
    reason = backends.get("cuda").missing_toolchain(Backend("cuda"))
    assert reason.startswith("cuBLAS not found") and "pip install nvidia-cublas" in reason


def test_cuda_toolkit_with_and_without_a_device(tmp_path, bare_path, monkeypatch):
    root = _toolkit(tmp_path)
    monkeypatch.setenv("CUDA_HOME", str(root))
    m, b = (
        backends.get("cuda"),
        Backend("cuda", ("-DGGML_CUDA=ON", "-DCMAKE_CUDA_ARCHITECTURES=89")),
    )
    assert m.missing_toolchain(b) is None
    # no GPU here, whatever this machine has
    monkeypatch.setattr(cuda_mod, "DEVICE_NODE", tmp_path / "no-nvidia0")
    reason = m.missing_device(b)
    assert reason.startswith("no CUDA device") and "--build-only" in reason
    flags = m.configure_flags(b)
    assert f"-DCMAKE_CUDA_COMPILER={root}/bin/nvcc" in flags
    assert "-DGGML_CUDA_NO_VMM=ON" in flags  # no driver to link against
    assert flags[-1] == "-DCMAKE_CUDA_ARCHITECTURES=89"  # matrix.yaml's choice wins
    _exe(
        bare_path / "nvidia-smi",
        'if [ "$1" = -L ]; then echo "GPU 0: NVIDIA H200 (UUID: GPU-1)"; '
        'else echo "NVIDIA H200, 570.1, 143771 MiB"; fi\n',
    )
    assert m.missing_device(b) is None
    assert "-DCMAKE_CUDA_ARCHITECTURES=native" in m.configure_flags(Backend("cuda"))
    assert m.device_info(b).devices == ["NVIDIA H200"]


def test_cuda_nvcc_wrapper_script_resolves_to_the_real_compiler(tmp_path, bare_path):
    root = _toolkit(tmp_path)
    _exe(bare_path / "nvcc", f'exec {root}/bin/nvcc "$@"\n')
    m = backends.get("cuda")
    assert m.real_nvcc() == f"{root}/bin/nvcc"
    assert root in m.toolkit_roots()
    assert m.cublas()[0] == str(root / "lib64/libcublas.so")


def test_cuda_cublas_from_pip(tmp_path, bare_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(_toolkit(tmp_path, cublas=False)))
    site = tmp_path / "site"
    (site / "nvidia/cublas/lib").mkdir(parents=True)
    (site / "nvidia/cublas/lib/libcublas.so.13").write_text("")
    (site / "nvidia/cublas/lib/libcublasLt.so.13").write_text("")
    monkeypatch.setattr(sys, "path", [str(site)])
    monkeypatch.setattr(cuda_mod.glob, "glob", lambda pattern: [])
    m = backends.get("cuda")
    assert m.missing_toolchain(Backend("cuda")) is None
    flags = m.configure_flags(Backend("cuda"))
    assert f"-DCUDA_cublas_LIBRARY={site}/nvidia/cublas/lib/libcublas.so.13" in flags
    assert f"-DCUDA_cublasLt_LIBRARY={site}/nvidia/cublas/lib/libcublasLt.so.13" in flags


# ---- Metal ----


def test_metal_is_skipped_off_macos(monkeypatch):
    monkeypatch.setattr(metal_mod.sys, "platform", "linux")
    m = backends.get("metal")
    reason = m.missing_toolchain(Backend("metal", runs_on="macos-14"))
    assert reason.startswith("Metal needs macOS") and "macos-14" in reason
    assert m.missing_device(Backend("metal")) == "Metal needs macOS"
    assert not m.build_only_ok


def test_metal_on_macos(monkeypatch, bare_path):
    monkeypatch.setattr(metal_mod.sys, "platform", "darwin")
    m = backends.get("metal")
    assert m.missing_toolchain(Backend("metal")) is None
    assert m.missing_device(Backend("metal")) is None  # no system_profiler to ask
    _exe(
        bare_path / "system_profiler",
        "echo 'Chipset Model: Apple M1'\necho 'Metal Support: Metal 3'\n",
    )
    assert m.missing_device(Backend("metal")) is None
    _exe(bare_path / "system_profiler", "echo 'Chipset Model: VGA'\n")
    assert "no Metal-capable GPU" in m.missing_device(Backend("metal"))
    assert "-DGGML_METAL_EMBED_LIBRARY=ON" in m.configure_flags(Backend("metal"))


# ---- matrix.yaml bad input for backends (one line, the file, the line and the key) ----

# one line of matrix.yaml: the tests below name its line numbers
GGML_SOURCE = (
    '{kind: pypi-sdist, package: ggml-python, version: "0.0.45", sha256: "{sha}", '
    "subdirectory: vendor/ggml}"
)
MATRIX = """\
queue: {{path: {series}, layout: llama.cpp}}
native_tests: {native}
targets:
  ggml:
    layout: ggml
    source: {source}
backends:
{backends}
profiles:
  default: {{targets: [ggml], backends: [{names}]}}
"""


def _matrix(tmp_path, backends_yaml: str, names: str) -> Path:
    p = tmp_path / "matrix.yaml"
    p.write_text(
        MATRIX.format(
            series=ROOT / "patches",
            native=ROOT / "native_tests",
            source=GGML_SOURCE.replace("{sha}", "1" * 64),
            backends=backends_yaml,
            names=names,
        )
    )
    return p


@pytest.mark.parametrize(
    "yaml_text, names, expected",
    [
        (
            '  vulkan:\n    cmake_flags: "-DGGML_VULKAN=ON"\n',
            "vulkan",
            ":9: backends.vulkan.cmake_flags: expected an array",
        ),
        (
            "  vulkan:\n    cmake_flags: [-DGGML_VULKAN=ON, 3]\n",
            "vulkan",
            ":9: backends.vulkan.cmake_flags.1: expected a string",
        ),
        (
            "  cuda:\n    timeout: 0\n",
            "cuda",
            ":9: backends.cuda.timeout: expected a positive number, got 0",
        ),
        (
            "  cuda:\n    timeout: -1\n",
            "cuda",
            ":9: backends.cuda.timeout: expected a positive number, got -1",
        ),
        ("  opencl:\n    timeout: 5\n", "opencl", ":8: backends.opencl: unknown name 'opencl'"),
        ("  metal:\n    tools: xcrun\n", "metal", ":9: backends.metal.tools: expected an array"),
        ("  cpu: {}\n", "vulkan", "profiles.default.backends: unknown backend 'vulkan'"),
    ],
)
def test_bad_backend_config_is_one_line(tmp_path, yaml_text, names, expected):
    with pytest.raises(ConfigError) as e:
        load_matrix(_matrix(tmp_path, yaml_text, names))
    msg = str(e.value)
    assert "\n" not in msg and expected in msg, msg


def test_unknown_backend_on_the_command_line(tmp_path):
    m = load_matrix(_matrix(tmp_path, "  cpu: {}\n", "cpu"))
    with pytest.raises(ConfigError) as e:
        m.cells("default", [], ["vulkn"])
    assert "unknown backend 'vulkn'" in str(e.value) and "\n" not in str(e.value)


def test_skipped_cells_carry_their_reason_and_never_count_as_passed(tmp_path, monkeypatch):
    """A missing required tool and a backend for another OS: both skipped with their reasons,
    before anything is fetched or built (so this runs offline)."""
    monkeypatch.setattr(metal_mod.sys, "platform", "linux")
    path = _matrix(tmp_path, "  cpu:\n    tools: [no-such-compiler-x]\n  metal: {}\n", "cpu, metal")
    opts = RunOptions(
        matrix=load_matrix(path), cache=Cache(tmp_path / "cache"), results_dir=tmp_path / "results"
    )
    results = run_matrix(opts)
    cells = {c.cell: c for c in results.cells}
    assert cells["ggml/cpu"].status == "skipped"
    assert cells["ggml/cpu"].reason == "required tool(s) not found on PATH: no-such-compiler-x"
    assert cells["ggml/metal"].status == "skipped" and cells["ggml/metal"].reason.startswith(
        "Metal needs macOS"
    )
    assert results.exit_code == 0 and results.records == []
    md = summary_markdown(results)
    assert "0/2 cells passed (2 skipped)" in md
    assert "no-such-compiler-x" in md and "Metal needs macOS" in md
    assert not (tmp_path / "cache" / "downloads").exists() or not any(
        (tmp_path / "cache" / "downloads").iterdir()
    )


def test_each_backend_configures_each_flag_once_with_the_real_matrix():
    """The module's own flags and matrix.yaml's, merged: -DGGML_CPU=ON (which both give for cpu)
    once; a flag only matrix.yaml gives is kept."""
    m = load_matrix(ROOT / "matrix.yaml")
    cpu = backends.get("cpu").configure_flags(m.backends["cpu"])
    assert cpu.count("-DGGML_CPU=ON") == 1
    vk = backends.get("vulkan").configure_flags(m.backends["vulkan"])
    assert vk.count("-DGGML_VULKAN=ON") == 1 and "-DGGML_CPU=ON" in vk
