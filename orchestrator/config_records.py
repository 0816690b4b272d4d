"""The records matrix.yaml's sources and backends are read into, and the JSON Schema pieces the
registries' own schemas use (sources/: each kind's options). A leaf: sources/ and backends/ use
it without importing config.py, which composes their schemas."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

# Schema pieces the registries' own schemas use (sources/: each kind's options).
# \Z, not $: jsonschema uses re.search, where $ also matches before a final newline
SHA256 = {"type": "string", "pattern": r"^[0-9a-f]{64}\Z"}
STR = {"type": "string", "minLength": 1}
RELPATH = {"type": "string", "minLength": 1, "not": {"pattern": r"(^/|(^|/)\.\.(/|$))"}}


@dataclass(frozen=True)
class Source:
    kind: str
    options: dict[str, Any]
    key: str  # e.g. targets.ggml.source, for error messages
    base_dir: Optional[Path] = None  # matrix.yaml's directory: a local source's relative path starts there

    def __getitem__(self, name: str) -> Any:
        return self.options[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


@dataclass(frozen=True)
class Backend:
    name: str
    cmake_flags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    timeout: float = 600.0
    runs_on: str = "ubuntu-24.04"  # the first of `runners`
    runners: tuple[str, ...] = ()  # every runner matrix.yaml names for it (CI: one leg each)

    def all_runners(self) -> tuple[str, ...]:
        return self.runners or (self.runs_on,)
