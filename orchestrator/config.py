"""matrix.yaml: load, validate against a JSON Schema, resolve into typed options, in one place.

Every error is one line naming the file, the line and the key (from the YAML node marks).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import jsonschema
import yaml

from .errors import ConfigError
from .patchset.layout import LAYOUTS

BACKEND_NAMES = ("cpu", "vulkan", "cuda", "metal")
SOURCE_KINDS = ("pypi-sdist", "git", "local", "tarball")

# \Z, not $: jsonschema uses re.search, where $ also matches before a final newline
_SHA256 = {"type": "string", "pattern": r"^[0-9a-f]{64}\Z"}
_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z"}
_STR = {"type": "string", "minLength": 1}
_RELPATH = {"type": "string", "minLength": 1, "not": {"pattern": r"(^/|(^|/)\.\.(/|$))"}}

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["series", "targets", "backends", "profiles"],
    "properties": {
        "series": {
            "type": "object", "additionalProperties": False, "required": ["path", "layout"],
            "properties": {"path": _STR, "layout": {"enum": sorted(LAYOUTS)}},
        },
        "native_tests": _STR,
        "targets": {
            "type": "object", "minProperties": 1,
            "propertyNames": _NAME,
            "additionalProperties": {
                "type": "object", "additionalProperties": False, "required": ["layout", "source"],
                "properties": {
                    "layout": {"enum": sorted(LAYOUTS)},
                    "prefix": _RELPATH,
                    "description": {"type": "string"},
                    "source": {
                        "type": "object", "required": ["kind"],
                        "properties": {"kind": {"enum": list(SOURCE_KINDS)}},
                        "allOf": [
                            {"if": {"properties": {"kind": {"const": "pypi-sdist"}}},
                             "then": {"additionalProperties": False,
                                      "required": ["package", "version", "sha256"],
                                      "properties": {"kind": {}, "package": _STR, "version": _STR,
                                                     "sha256": _SHA256, "subdirectory": _RELPATH}}},
                            {"if": {"properties": {"kind": {"const": "tarball"}}},
                             "then": {"additionalProperties": False, "required": ["url", "sha256"],
                                      "properties": {"kind": {}, "url": _STR, "sha256": _SHA256,
                                                     "subdirectory": _RELPATH}}},
                            {"if": {"properties": {"kind": {"const": "git"}}},
                             "then": {"additionalProperties": False, "required": ["url", "ref"],
                                      "properties": {"kind": {}, "url": _STR, "ref": _STR,
                                                     "subdirectory": _RELPATH,
                                                     # submodules to fill in (a fork vendored in a superproject)
                                                     "submodules": {"type": "array", "items": _RELPATH,
                                                                    "uniqueItems": True}}}},
                            {"if": {"properties": {"kind": {"const": "local"}}},
                             "then": {"additionalProperties": False, "required": ["path"],
                                      "properties": {"kind": {}, "path": _STR, "subdirectory": _RELPATH}}},
                        ],
                    },
                },
            },
        },
        "backends": {
            "type": "object", "minProperties": 1,
            "propertyNames": {"enum": list(BACKEND_NAMES)},
            "additionalProperties": {
                "type": "object", "additionalProperties": False,
                "properties": {
                    "cmake_flags": {"type": "array", "items": {"type": "string", "pattern": r"^-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=[^\n]*\Z"}},
                    "env": {"type": "object", "additionalProperties": {"type": "string"}},
                    "tools": {"type": "array", "items": _STR},
                    "timeout": {"type": "number", "exclusiveMinimum": 0},
                    "runs_on": _STR,
                },
            },
        },
        "profiles": {
            "type": "object", "minProperties": 1, "propertyNames": _NAME,
            "additionalProperties": {
                "type": "object", "additionalProperties": False, "required": ["targets", "backends"],
                "properties": {
                    "targets": {"type": "array", "minItems": 1, "items": _NAME, "uniqueItems": True},
                    "backends": {"type": "array", "minItems": 1, "items": {"type": "string"}, "uniqueItems": True},
                },
            },
        },
    },
}


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
class Target:
    name: str
    layout: str
    prefix: str
    source: Source
    description: str = ""


@dataclass(frozen=True)
class Backend:
    name: str
    cmake_flags: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    tools: tuple[str, ...] = ()
    timeout: float = 600.0
    runs_on: str = "ubuntu-24.04"


@dataclass(frozen=True)
class Matrix:
    path: Path
    series_dir: Path
    series_layout: str
    native_tests_dir: Path
    targets: dict[str, Target]
    backends: dict[str, Backend]
    profiles: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    lines: dict[tuple, int] = field(default_factory=dict, repr=False)

    def target(self, name: str) -> Target:
        if name not in self.targets:
            raise ConfigError(f"{self.path}: unknown target {name!r}{_did_you_mean(name, self.targets)}"
                              f" (targets: {', '.join(self.targets)})")
        return self.targets[name]

    def backend(self, name: str) -> Backend:
        if name not in self.backends:
            raise ConfigError(f"{self.path}: unknown backend {name!r}{_did_you_mean(name, self.backends)}"
                              f" (backends: {', '.join(self.backends)})")
        return self.backends[name]

    def cells(self, profile: str = "default", targets: Optional[list[str]] = None,
              backends: Optional[list[str]] = None) -> list[tuple[Target, Backend]]:
        """The (target, backend) cells of a profile, narrowed by --target/--backend."""
        if profile not in self.profiles:
            raise ConfigError(f"{self.path}: unknown profile {profile!r}{_did_you_mean(profile, self.profiles)}")
        p_targets, p_backends = self.profiles[profile]
        t_names = list(targets) if targets else list(p_targets)
        b_names = list(backends) if backends else list(p_backends)
        return [(self.target(t), self.backend(b)) for t in t_names for b in b_names]


# ---- YAML with line numbers ----

class _Loader(yaml.SafeLoader):
    pass


def _load_with_lines(text: str, where: str) -> tuple[Any, dict[tuple, int]]:
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f":{mark.line + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}{line}: invalid YAML: {problem}") from None
    lines: dict[tuple, int] = {}

    def build(n: yaml.Node, path: tuple) -> Any:
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in n.value:
                key = _Loader(k.value).construct_object(k) if not isinstance(k, yaml.ScalarNode) else k.value
                if key in out:
                    raise ConfigError(f"{where}:{k.start_mark.line + 1}: {_dotted(path + (key,))}: duplicate key")
                lines[path + (key,)] = k.start_mark.line + 1
                out[key] = build(v, path + (key,))
                lines[path + (key,)] = k.start_mark.line + 1
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(v, path + (i,)) for i, v in enumerate(n.value)]
        loader = _Loader("")
        return loader.construct_object(n, deep=True)

    return (build(node, ()) if node is not None else None), lines


def _dotted(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _schema_message(err: jsonschema.ValidationError) -> tuple[tuple, str]:
    path = tuple(err.absolute_path)
    v = err.validator
    if "propertyNames" in err.schema_path:  # a bad mapping key: report it at its own line
        bad = err.instance
        if v == "enum":
            allowed = [str(a) for a in err.validator_value]
            return path + (bad,), f"unknown name {bad!r}{_did_you_mean(bad, allowed)} (expected one of {', '.join(allowed)})"
        return path + (bad,), f"{bad!r} is not a valid name (letters, digits, '.', '_', '-')"
    if v == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        key = extra[0] if extra else "?"
        return path + (key,), f"unknown key{_did_you_mean(key, allowed)} (allowed: {', '.join(allowed)})"
    if v == "required":
        return path, f"missing required key {err.message.split(' ')[0]}"
    if v == "enum":
        return path, f"{err.instance!r} is not one of {', '.join(map(str, err.validator_value))}"
    if v == "propertyNames":
        bad = err.instance
        allowed = err.schema["propertyNames"].get("enum")
        if allowed:
            return path + (bad,), f"unknown name {bad!r}{_did_you_mean(bad, allowed)} (expected one of {', '.join(allowed)})"
        return path + (bad,), f"{bad!r} is not a valid name (letters, digits, '.', '_', '-')"
    if v == "pattern" and err.validator_value == _SHA256["pattern"]:
        return path, f"{err.instance!r} is not a sha256 (expected 64 lowercase hex digits)"
    if v == "pattern" and path and path[-2:-1] == ("cmake_flags",):
        return path, f"{err.instance!r} is not a CMake definition (expected -DNAME=VALUE)"
    if v == "not":
        return path, f"{err.instance!r} must be a relative path inside the tree (no '..', not absolute)"
    if v == "type":
        want = err.validator_value
        article = "an" if isinstance(want, str) and want[0] in "aeiou" else "a"
        return path, f"expected {article + ' ' + want if isinstance(want, str) else ' or '.join(want)}, got {type(err.instance).__name__} {err.instance!r}"
    if v == "minProperties" or v == "minItems":
        return path, "must not be empty"
    if v == "exclusiveMinimum":
        return path, f"expected a positive number, got {err.instance!r}"
    return path, err.message


def _line_for(lines: dict[tuple, int], path: tuple) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)


def load_matrix(path: str | Path) -> Matrix:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (pass --matrix PATH)") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    data, lines = _load_with_lines(text, str(path))
    if data is None:
        raise ConfigError(f"{path}:1: the matrix is empty; expected keys series, targets, backends, profiles")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping at the top level, got {type(data).__name__}")
    errors = sorted(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data),
                    key=lambda e: (_line_for(lines, tuple(e.absolute_path)), len(e.absolute_path)))
    errors = [e for e in errors if e.validator not in ("if", "allOf")] or errors
    if errors:
        key, msg = _schema_message(_deepest(errors[0]))
        raise ConfigError(f"{path}:{_line_for(lines, key)}: {_dotted(key)}: {msg}")
    return _resolve(path, data, lines)


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    while err.context:
        err = max(err.context, key=lambda e: len(e.absolute_path))
    return err


def _resolve(path: Path, data: dict, lines: dict[tuple, int]) -> Matrix:
    root = path.parent
    targets = {
        name: Target(name, t["layout"], t.get("prefix", ""),
                     Source(t["source"]["kind"], dict(t["source"]), f"targets.{name}.source", root),
                     t.get("description", ""))
        for name, t in data["targets"].items()
    }
    backends = {
        name: Backend(name, tuple(b.get("cmake_flags", ())), dict(b.get("env", {})), tuple(b.get("tools", ())),
                      float(b.get("timeout", 600)), b.get("runs_on", "ubuntu-24.04"))
        for name, b in data["backends"].items()
    }
    profiles = {}
    for pname, p in data["profiles"].items():
        for i, t in enumerate(p["targets"]):
            if t not in targets:
                raise ConfigError(f"{path}:{_line_for(lines, ('profiles', pname, 'targets', i))}: "
                                  f"profiles.{pname}.targets: unknown target {t!r}{_did_you_mean(t, targets)}")
        for i, b in enumerate(p["backends"]):
            if b not in backends:
                raise ConfigError(f"{path}:{_line_for(lines, ('profiles', pname, 'backends', i))}: "
                                  f"profiles.{pname}.backends: unknown backend {b!r}{_did_you_mean(b, backends)}")
        profiles[pname] = (tuple(p["targets"]), tuple(p["backends"]))
    if "default" not in profiles:
        raise ConfigError(f"{path}:{_line_for(lines, ('profiles',))}: profiles: missing required profile 'default'")
    return Matrix(path, root / data["series"]["path"], data["series"]["layout"],
                  root / data.get("native_tests", "native_tests"), targets, backends, profiles, lines)
