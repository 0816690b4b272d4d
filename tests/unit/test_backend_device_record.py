"""A backend module owns its device record (backends/device.py): it declares what it records as
its own typed record, and the results model (model/results.py DeviceInfo) holds any backend's
keys, validated by shape only. A new backend records its own fields with no line in the model:
one module-like class and one registry entry, as a new backend is."""

import json
from pathlib import Path
from typing import Optional

import pytest

from orchestrator import backends
from orchestrator.backends import cpu_sanitize, vulkan
from orchestrator.backends.base import BackendModule
from orchestrator.backends.device import DeviceRecord
from orchestrator.config_records import Backend
from orchestrator.errors import ConfigError
from orchestrator.model.results import DeviceInfo, dump_results, load_results
from orchestrator.records import Record
from orchestrator.upstream.views import device_text

from ..helpers.samples import VULKAN_SAMPLE, sample, sample_data
from ..helpers.tools import ROOT

pytestmark = pytest.mark.unit


class NpuBoard(Record):
    """A nested record of the fake backend's, its nulls kept (as Vulkan's setup)."""

    NULLS = frozenset({"revision", "serial"})

    revision: Optional[str] = None
    serial: Optional[str] = None


class NpuDevice(DeviceRecord):
    firmware: Optional[str] = None
    devices: Optional[list[str]] = None
    drivers: Optional[list[str]] = None
    limits: Optional[dict[str, str]] = None
    board: Optional[NpuBoard] = None
    probe_log: Optional[str] = None  # never set below: never written


class Npu(BackendModule):
    """A new backend as one would write it: a name, its flags and its own device record."""

    name = "npu"
    cmake_flags = ("-DGGML_NPU=ON",)

    def device_info(self, backend: Backend) -> NpuDevice:
        return NpuDevice(
            firmware=None,  # set, though not found: written as null
            devices=["NPU 0 (fake)"],
            drivers=["npu-driver 1.2"],
            limits={"sram": "8 MiB"},
            board=NpuBoard(revision="b2"),
        )


class Cores(DeviceRecord):
    cores: int = 0  # not a shape results.json holds


class Miscounts(BackendModule):
    name = "miscounts"

    def device_info(self, backend: Backend) -> Cores:
        return Cores(cores=8)


@pytest.fixture
def registered(monkeypatch):
    """The real registry, and the fake backends' entries."""
    real = backends._modules

    def with_fakes() -> dict[str, type[BackendModule]]:
        return {**real(), Npu.name: Npu, Miscounts.name: Miscounts}

    monkeypatch.setattr(backends, "_modules", with_fakes)


RECORDED = {
    "firmware": None,
    "devices": ["NPU 0 (fake)"],
    "drivers": ["npu-driver 1.2"],
    "limits": {"sram": "8 MiB"},
    "board": {"revision": "b2", "serial": None},
}


def test_a_new_backend_s_device_record_round_trips_through_results_json(registered, tmp_path):
    module = backends.get("npu")
    device = module.recorded_device(Backend("npu"))
    assert device.to_json() == RECORDED  # its keys in its order, the nulls it set kept

    results = sample()
    results.cells[0].device = device
    path = dump_results(results, tmp_path / "results.json")
    again = load_results(path)[0].cells[0].device
    assert again is not None and again.to_json() == RECORDED
    assert again.as_record(NpuDevice) == module.device_info(Backend("npu"))
    # the readers (PR body, bundle) show what it ran on from the generic record
    assert device_text(again) == "NPU 0 (fake); driver npu-driver 1.2"
    # and the model was not told about it
    model = (ROOT / "orchestrator" / "model" / "results.py").read_text(encoding="utf-8")
    assert not any(key in model for key in ("firmware", "sram", "NpuDevice"))


def test_a_record_outside_the_shapes_is_one_line_naming_the_key(registered):
    with pytest.raises(ConfigError) as e:
        backends.get("miscounts").recorded_device(Backend("miscounts"))
    msg = str(e.value)
    assert msg.startswith("backend miscounts: device record: cores: expected a string"), msg
    assert "\n" not in msg


def test_the_real_records_are_the_modules_own():
    """Each module's record holds the keys the committed results hold, and reads them back."""
    for cell in sample(VULKAN_SAMPLE).cells:
        assert cell.device is not None
        own = cell.device.as_record(vulkan.VulkanDevice)
        assert DeviceInfo.of(own, "vulkan").to_json() == cell.device.to_json()
    sanitize = backends.get("cpu-sanitize").recorded_device(Backend("cpu-sanitize"))
    assert list(sanitize.to_json()) == [
        "sanitizers",
        "ASAN_OPTIONS",
        "UBSAN_OPTIONS",
        "skipped_tests",
    ]
    assert sanitize.strings("sanitizers") == ["address", "undefined"]
    assert sanitize.as_record(cpu_sanitize.SanitizeDevice).skipped_tests == dict(
        cpu_sanitize.CpuSanitize.skip_tests
    )
    assert backends.get("cpu").recorded_device(Backend("cpu")).to_json() == {}


@pytest.mark.parametrize(
    "device, phrase",
    [
        ({"devices": [1]}, "cells[0].device.devices: expected a string, a list of strings"),
        ({"setup": {"mesa": 25}}, "cells[0].device.setup: expected a string"),
        ({"a b": "x"}, "cells[0].device: key 'a b' is not a device key"),
        ([], "cells[0].device: expected object, got list"),
    ],
)
def test_a_malformed_device_is_refused_in_one_line(tmp_path: Path, device, phrase):
    data = sample_data()
    data["cells"][0]["device"] = device
    f = tmp_path / "results.json"
    f.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as e:
        load_results(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: ") and phrase in msg and "\n" not in msg, msg
