"""CUDA: built and run where an NVIDIA device is present; built only on request (`--build-only`)
where just the toolkit is; skipped with the reason otherwise."""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Optional

from ..config_records import Backend
from ..errors import ConfigError
from .base import BackendModule, CiLeg, CiSetup, NoCiLeg, Runner, command_output
from .device import DeviceRecord

TOOLKIT_HINT = (
    "install the CUDA toolkit (nvcc and cuBLAS), or pip install nvidia-cuda-nvcc nvidia-cublas"
)


def gpu_names(nvidia_smi_list: str) -> list[str]:
    """`nvidia-smi -L` lines ("GPU 0: NVIDIA H100 (UUID: ...)") -> device names."""
    return [
        m.strip()
        for m in re.findall(r"^GPU \d+: (.+?)(?: \(UUID: [^)]*\))?$", nvidia_smi_list, re.M)
    ]


DEVICE_NODE = Path("/dev/nvidia0")
PYPI_SETUP = "orchestrator/scripts/setup-cuda-pypi.sh"
# after the setup script, its prefix is this job's toolkit
_CI_SETUP = f"""root=$(bash {PYPI_SETUP} "$RUNNER_TEMP/cuda")
echo "CUDA_HOME=$root" >> "$GITHUB_ENV"
echo "$root/bin" >> "$GITHUB_PATH"
"""


def pypi_setup_script() -> Path:
    """The script as installed (package data): the same file the workflow runs from the checkout."""
    return Path(__file__).resolve().parents[1] / "scripts" / Path(PYPI_SETUP).name


def pypi_wheels_key() -> str:
    """The CUDA wheels' cache key: nvcc's version and a digest of every pinned wheel, read from
    the setup script, so a new pin is a new key."""
    script = pypi_setup_script()
    try:
        text = script.read_text(encoding="utf-8")
    except OSError as e:  # package data left out of an install
        raise ConfigError(
            f"{script}: cannot read it ({e.strerror}): reinstall ggml-patch"
        ) from None
    found = re.search(r"^packages=\((.*?)\)", text, re.M | re.S)
    if not found:
        raise ConfigError(f"{script}: no `packages=(...)` line: the CUDA wheels are not pinned")
    wheels = " ".join(found[1].split())
    nvcc = re.search(r"nvidia-cuda-nvcc==(\S+)", wheels)
    digest = hashlib.sha256(wheels.encode()).hexdigest()[:12]
    return f"cuda-pypi-${{{{ runner.os }}}}-{nvcc[1] if nvcc else 'nvcc'}-{digest}"


def ci_pypi_setup() -> CiSetup:
    """A hosted Linux leg's toolkit: PyPI's CUDA wheels, kept between runs under their pins' key."""
    return CiSetup(
        name="cuda-pypi",
        title="CUDA toolkit from PyPI (nvcc, cuBLAS; no GPU: build only)",
        run=_CI_SETUP,
        cache_title="CUDA wheels",
        cache_path="${{ runner.temp }}/cuda",
        cache_key=pypi_wheels_key(),
    )  # the first GPU's device file, where the driver is loaded


class CudaDevice(DeviceRecord):
    """What a CUDA cell ran on, as results.json's `device` holds it."""

    devices: Optional[list[str]] = None  # nvidia-smi -L's names, or the device node
    nvcc: Optional[str] = None  # the nvcc found (None: none)
    # nvidia-smi's name, driver and memory per GPU: written only when it answered
    nvidia_smi: Optional[list[str]] = None


class Cuda(BackendModule):
    name = "cuda"
    ops_device = "CUDA0"  # test-backend-ops -b CUDA0
    relative_cost = 30.0  # 139 .cu objects: 17-18 minutes at -j2
    ci_minutes = (15, 20)  # a cold compile is about 18 minutes at -j2
    cmake_flags = ("-DGGML_CUDA=ON",)
    build_only_ok = True
    toolchain_hint = TOOLKIT_HINT

    def ci_leg(self, runner: Runner) -> CiLeg:
        if runner.hosted and not runner.linux:
            raise NoCiLeg(
                f"{runner.labels[0]} has no CUDA toolkit or GPU: name ubuntu-24.04 (built there "
                "with PyPI's toolkit) or a self-hosted GPU runner"
            )
        # a hosted Linux runner has no GPU: it compiles with PyPI's toolkit and runs nothing;
        # a self-hosted one brings its GPU, and one without fails the leg (--require-backend)
        return CiLeg(setup=ci_pypi_setup(), build_only=True) if runner.hosted else CiLeg()

    def nvcc(self) -> Optional[str]:
        on_path = shutil.which("nvcc")
        if on_path:
            return on_path
        for root in _env_roots():
            candidate = Path(root) / "bin" / "nvcc"
            if candidate.is_file():
                return str(candidate)
        return None

    def real_nvcc(self) -> Optional[str]:
        """nvcc itself, not a wrapper script: CMake finds the toolkit next to it."""
        nvcc = self.nvcc()
        if nvcc is None:
            return None
        try:
            with open(nvcc, "rb") as f:
                head = f.read(4096).decode(errors="replace")
        except OSError:
            head = ""
        if not head.startswith("#!"):
            return os.path.realpath(nvcc)
        # the script's `exec /usr/local/cuda-13.0/bin/nvcc "$@"`
        m = re.search(r"(/\S+/bin/nvcc)\b", head)
        return m[1] if m and Path(m[1]).is_file() else nvcc

    def toolkit_roots(self) -> list[Path]:
        """Where cuBLAS may be: $CUDA_HOME/$CUDA_PATH, the real nvcc's toolkit, /usr/local/cuda*."""
        roots = [Path(r) for r in _env_roots()]
        nvcc = self.real_nvcc()
        if nvcc:
            roots.append(Path(nvcc).parent.parent)
        roots += [Path(p) for p in sorted(glob.glob("/usr/local/cuda*"))]
        return list(dict.fromkeys(roots))

    def cublas(self) -> tuple[Optional[str], Optional[str], bool]:
        """(libcublas, libcublasLt, from_pip): the
        toolkit's own first, then PyPI's nvidia-cublas."""
        for root in self.toolkit_roots():
            for lib in (
                "lib64",
                "lib",
                *(str(p.relative_to(root)) for p in sorted(root.glob("targets/*/lib"))),
            ):
                a, b = root / lib / "libcublas.so", root / lib / "libcublasLt.so"
                if a.exists() and b.exists():
                    return str(a), str(b), False
        for site in sys.path:
            pip_lib = Path(site) / "nvidia" / "cublas" / "lib"
            cublas = sorted(pip_lib.glob("libcublas.so*"))
            cublas_lt = sorted(pip_lib.glob("libcublasLt.so*"))
            if cublas and cublas_lt:
                return str(cublas[0]), str(cublas_lt[0]), True
        return None, None, False

    def devices(self) -> list[str]:
        out = command_output(["nvidia-smi", "-L"]) if shutil.which("nvidia-smi") else None
        if out:
            return gpu_names(out)
        if DEVICE_NODE.exists():
            return [str(DEVICE_NODE)]
        return []

    def missing_beyond_tools(self, backend: Backend) -> Optional[str]:
        nvcc = self.nvcc()
        if nvcc is None:
            return f"nvcc not found (PATH, $CUDA_HOME/bin): {TOOLKIT_HINT}"
        if self.cublas()[0] is None:
            return (
                f"cuBLAS not found next to {nvcc} (no libcublas.so in "
                f"{', '.join(str(r) for r in self.toolkit_roots()) or 'any toolkit'}): "
                "install the toolkit's cuBLAS, or pip install nvidia-cublas"
            )
        return None

    def missing_device(self, backend: Backend) -> Optional[str]:
        if self.devices():
            return None
        hint = (
            ""
            if self.missing_toolchain(backend)
            else "; `ggml-patch matrix --build-only` compiles them without one"
        )
        return (
            "no CUDA device: nvidia-smi lists no GPU and /dev/nvidia0 does not exist (run the "
            f"cuda cells on a machine with an NVIDIA GPU and its driver{hint})"
        )

    def own_flags(self, backend: Backend) -> list[str]:
        flags = list(self.cmake_flags)
        nvcc = self.real_nvcc()
        if nvcc:
            flags.append(f"-DCMAKE_CUDA_COMPILER={nvcc}")
        lib, lib_lt, from_pip = self.cublas()
        if from_pip:
            flags += [f"-DCUDA_cublas_LIBRARY={lib}", f"-DCUDA_cublasLt_LIBRARY={lib_lt}"]
        if self.devices():
            flags.append("-DCMAKE_CUDA_ARCHITECTURES=native")
        else:
            # no driver to link against (no libcuda stub) and
            # no GPU to ask: one architecture, no VMM
            flags += ["-DGGML_CUDA_NO_VMM=ON", "-DCMAKE_CUDA_ARCHITECTURES=90"]
        return flags

    def device_info(self, backend: Backend) -> CudaDevice:
        query = [
            "nvidia-smi",
            "--query-gpu=name,driver_version,memory.total",
            "--format=csv,noheader",
        ]
        info = CudaDevice(devices=self.devices(), nvcc=self.nvcc())
        if out := command_output(query):  # a key written only when set (set nulls are kept)
            info.nvidia_smi = out.strip().splitlines()
        return info


def _env_roots() -> list[str]:
    return [v for v in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")) if v]
