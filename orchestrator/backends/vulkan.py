"""Vulkan: ggml-vulkan, run for real on machines without a GPU through Mesa's lavapipe.
orchestrator/scripts/setup-vulkan-lavapipe.sh writes <cache>/vulkan-sdk/env.json: the CMake flags
for a private prefix (Debian 12: headers 1.4.x from trixie), and the test environment (a
private ICD json naming Mesa 25's lavapipe by absolute path). Without it the system's own
headers and ICDs are used when recent enough."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Optional

from ..cache import default_cache_dir
from ..config_records import Backend
from ..records import Record
from .base import BackendModule, CiLeg, CiSetup, NoCiLeg, Runner, command_output
from .device import DeviceRecord

SETUP = "orchestrator/scripts/setup-vulkan-lavapipe.sh"
MIN_HEADERS = (1, 4)  # 1.3.x lacks vk::LayerSettingEXT, which ggml-vulkan uses
ICD_DIRS = ("/usr/share/vulkan/icd.d", "/usr/local/share/vulkan/icd.d", "/etc/vulkan/icd.d")
LOADER_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
)
SPIRV_CONFIG_DIRS = tuple(
    f"{d}/cmake/SPIRV-Headers"
    for d in ("/usr/share", "/usr/lib", "/usr/local/share", "/usr/lib/x86_64-linux-gnu")
)
# GGML_PATCH_VULKAN_ICD=system runs the tests on the system's lavapipe (Debian 12: Mesa 22.3.6,
# which crashes in test-opt) instead of the private one; any other value is an ICD json path.
ICD_OVERRIDE = "GGML_PATCH_VULKAN_ICD"
_HEADER_VERSION = re.compile(
    r"#define\s+VK_HEADER_VERSION_COMPLETE\s+VK_MAKE_API_VERSION\("
    r"\s*\d+\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*VK_HEADER_VERSION\s*\)"
)
_HEADER_PATCH = re.compile(r"#define\s+VK_HEADER_VERSION\s+(\d+)")


def header_version(vulkan_core_h: str) -> Optional[tuple[int, int, int]]:
    """(major, minor, patch) from vulkan_core.h's text, or None."""
    m, p = _HEADER_VERSION.search(vulkan_core_h), _HEADER_PATCH.search(vulkan_core_h)
    return (int(m[1]), int(m[2]), int(p[1])) if m and p else None


def flag_value(flags: list[str] | tuple[str, ...], name: str) -> Optional[str]:
    """The value of -D<name>=... (or -D<name>:TYPE=...) in a flag list; the last one wins."""
    pattern = re.compile(rf"^-D{re.escape(name)}(?::[A-Z]+)?=(.*)$")
    value = None
    for flag in flags:
        m = pattern.match(flag)
        if m:
            value = m[1]
    return value


def summary_values(vulkaninfo_summary: str, key: str) -> list[str]:
    """The `key = value` values of `vulkaninfo --summary`
    (deviceName, driverInfo), one per device."""
    return [m.strip() for m in re.findall(rf"^\s*{key}\s*=\s*(.+)$", vulkaninfo_summary, re.M)]


class VulkanSetup(Record):
    """What the setup script wrote (env.json): each key kept, null when it did not say."""

    NULLS = frozenset({"debian", "mode", "mesa", "glslc"})

    debian: Optional[str] = None
    mode: Optional[str] = None
    mesa: Optional[str] = None
    glslc: Optional[str] = None


class VulkanDevice(DeviceRecord):
    """What a Vulkan cell ran on, as results.json's `device` holds it."""

    icd: Optional[str] = None  # VK_ICD_FILENAMES (None: the loader's own search)
    visible_devices: Optional[str] = None  # GGML_VK_VISIBLE_DEVICES
    setup: Optional[VulkanSetup] = None  # the private SDK's env.json, when there is one
    icd_override: Optional[str] = None  # GGML_PATCH_VULKAN_ICD=..., when set
    devices: Optional[list[str]] = None  # vulkaninfo --summary: deviceName, driverInfo
    drivers: Optional[list[str]] = None


# the hosted Linux legs' setup (ci/workflow.py runs it where a leg names it)
CI_LAVAPIPE = CiSetup(
    name="vulkan-lavapipe",
    title="Vulkan (Mesa lavapipe)",
    run=(
        f"bash {SETUP}\n"
        "# as llama.cpp's own llvmpipe job: lavapipe's f16 and coopmat paths are left out\n"
        'echo "GGML_VK_DISABLE_F16=1" >> "$GITHUB_ENV"\n'
        'echo "GGML_VK_DISABLE_COOPMAT=1" >> "$GITHUB_ENV"\n'
    ),
)


class Vulkan(BackendModule):
    name = "vulkan"
    ops_device = "Vulkan0"  # test-backend-ops -b Vulkan0
    relative_cost = 6.0  # ggml-vulkan.cpp alone about 82 s, shaders not cached by ccache
    ci_minutes = (8, 12)  # lavapipe setup, ggml-vulkan and its shaders
    cmake_flags = ("-DGGML_VULKAN=ON",)
    tool_hints = {
        "glslc": f"apt-get install glslc, or run {SETUP}",
        "vulkaninfo": f"apt-get install vulkan-tools, or run {SETUP}",
    }

    def ci_leg(self, runner: Runner) -> CiLeg:
        if runner.hosted and not runner.linux:
            raise NoCiLeg(
                f"{runner.labels[0]} has no Vulkan driver; a GitHub-hosted leg runs Mesa's "
                "lavapipe, set up on Linux: name an ubuntu runner (e.g. ubuntu-24.04)"
            )
        # a hosted Linux runner gets lavapipe (a real Vulkan device on the CPU); a self-hosted
        # one brings its own driver, and one without fails the leg (--require-backend)
        return CiLeg(setup=CI_LAVAPIPE if runner.hosted else None)

    def env_file(self) -> Optional[Path]:
        """<cache>/vulkan-sdk/env.json of the cache in use, else of the default cache."""
        for root in (self.cache_root, default_cache_dir()):
            if root is None:
                continue
            env_json = Path(root) / "vulkan-sdk" / "env.json"
            if env_json.is_file():
                return env_json
        return None

    def sdk(self) -> dict:
        """What the setup script wrote (env_file), or {}."""
        p = self.env_file()
        try:
            data = json.loads(p.read_text(encoding="utf-8")) if p else {}
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def own_flags(self, backend: Backend) -> list[str]:
        return [*self.cmake_flags, *self.sdk().get("cmake_flags", [])]

    def test_env(self, backend: Backend) -> dict[str, str]:
        # ggml-vulkan hides CPU-type devices (lavapipe is one) unless they are named visible
        env = {"GGML_VK_VISIBLE_DEVICES": "0", **self.sdk().get("env", {})}
        if icd := self._icd_override():
            env["VK_ICD_FILENAMES"] = icd
        if env.get("LD_LIBRARY_PATH") and os.environ.get("LD_LIBRARY_PATH"):
            # the private libdrm first
            env["LD_LIBRARY_PATH"] += os.pathsep + os.environ["LD_LIBRARY_PATH"]
        return {**env, **backend.env}

    def missing_beyond_tools(self, backend: Backend) -> Optional[str]:
        flags = self.configure_flags(backend)
        include = flag_value(flags, "Vulkan_INCLUDE_DIR") or "/usr/include"
        core = Path(include) / "vulkan" / "vulkan_core.h"
        if not core.is_file():
            return (
                f"Vulkan headers not found ({core} missing): run {SETUP} "
                "(Debian 12/13), or install the Vulkan SDK"
            )
        version = header_version(core.read_text(encoding="utf-8", errors="replace"))
        if version is None or version[:2] < MIN_HEADERS:
            shown = ".".join(map(str, version)) if version else "of unknown version"
            return (
                f"Vulkan headers {shown} in {include} are too old for ggml-vulkan (need >= 1.4): "
                f"run {SETUP} (on Debian 12 it unpacks trixie's 1.4 headers into the tool's cache)"
            )
        spirv = flag_value(flags, "SPIRV-Headers_DIR")
        dirs = [spirv] if spirv else SPIRV_CONFIG_DIRS
        if not any((Path(d) / "SPIRV-HeadersConfig.cmake").is_file() for d in dirs):
            return (
                f"SPIRV-Headers (CMake config) not found: run {SETUP}, or "
                "apt-get install spirv-headers (Debian 13)"
            )
        # else CMake's FindVulkan looks for the development link
        lib = flag_value(flags, "Vulkan_LIBRARY")
        if not (
            Path(lib).is_file()
            if lib
            else any((Path(d) / "libvulkan.so").exists() for d in LOADER_DIRS)
        ):
            return (
                "the Vulkan loader (libvulkan.so) was not found: "
                f"apt-get install libvulkan1, or run {SETUP}"
            )
        return None

    def missing_device(self, backend: Backend) -> Optional[str]:
        env = self.test_env(backend)
        icds = [p for p in env.get("VK_ICD_FILENAMES", "").split(os.pathsep) if p]
        absent = [p for p in icds if not Path(p).is_file()]
        if absent:
            return f"Vulkan ICD json {absent[0]} does not exist: run {SETUP} again"
        if not icds and not any(Path(d).is_dir() and any(Path(d).glob("*.json")) for d in ICD_DIRS):
            return (
                f"no Vulkan driver (ICD) installed: run {SETUP} for Mesa's lavapipe (a CPU Vulkan "
                "device), or install your GPU's Vulkan driver"
            )
        if shutil.which("vulkaninfo") is None:
            return None  # no way to ask the loader; the tests will tell
        summary = command_output(["vulkaninfo", "--summary"], env)
        if summary is None or not summary_values(summary, "deviceName"):
            return (
                f"the Vulkan loader lists no device (vulkaninfo --summary failed with "
                f"VK_ICD_FILENAMES={env.get('VK_ICD_FILENAMES', '(unset)')}): run {SETUP}"
            )
        return None

    def device_info(self, backend: Backend) -> VulkanDevice:
        env = self.test_env(backend)
        info = VulkanDevice(
            icd=env.get("VK_ICD_FILENAMES"), visible_devices=env.get("GGML_VK_VISIBLE_DEVICES")
        )
        if sdk := self.sdk():
            info.setup = VulkanSetup(
                **{k: None if sdk.get(k) is None else str(sdk[k]) for k in VulkanSetup.model_fields}
            )
        if self._icd_override():
            # not the setup's lavapipe
            info.icd_override = f"{ICD_OVERRIDE}={os.environ[ICD_OVERRIDE]}"
        summary = (
            command_output(["vulkaninfo", "--summary"], env) if shutil.which("vulkaninfo") else None
        )
        if summary:
            info.devices, info.drivers = (
                summary_values(summary, "deviceName"),
                summary_values(summary, "driverInfo"),
            )
        return info

    def _icd_override(self) -> Optional[str]:
        value = os.environ.get(ICD_OVERRIDE, "").strip()
        if value == "system":
            found = (str(p) for d in ICD_DIRS for p in sorted(Path(d).glob("lvp_icd*.json")))
            return self.sdk().get("system_icd") or next(
                found, "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
            )
        return value or None
