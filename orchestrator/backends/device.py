"""The base of a backend module's own device record: what its tests run on (driver, ICD, ...),
declared in its module (VulkanDevice, CudaDevice, SanitizeDevice) and returned by its
`device_info`. results.json holds it as the model's generic DeviceInfo (model/results.py), which
knows no backend's keys: a new backend's record is its own, with no line in the model."""

from __future__ import annotations

from ..records import Record


class DeviceRecord(Record):
    """A backend's record: each field a string, a list of strings, a mapping of strings, or a
    nested record of optional strings (the shapes DeviceInfo accepts; another is refused when
    the cell records it). A key the module sets is written even when null ("not found" is a
    finding); one it leaves unset is not. The base records nothing (cpu, metal)."""

    def kept_nulls(self) -> frozenset[str]:
        return frozenset(self.model_fields_set)
