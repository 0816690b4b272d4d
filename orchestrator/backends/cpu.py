"""CPU: always buildable and runnable."""

from __future__ import annotations

from .base import BackendModule


class Cpu(BackendModule):
    name = "cpu"
    cmake_flags = ("-DGGML_CPU=ON",)
