"""matrix.yaml: load, validate against a JSON Schema, resolve into typed options, in one place.

Every error is one line naming the file, the line and the key (from the YAML node marks).
"""

from __future__ import annotations

import difflib
import functools
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import jsonschema
import yaml

from . import backends, sources, untrusted
from .config_records import RELPATH, SHA256, STR, Backend, Source
from .errors import ConfigError
from .patchset.layout import GATE_TEST, LAYOUTS

_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z"}
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")  # POSIX: what a shell and execve accept
MAX_VALUES = 20_000  # YAML nodes after aliases are expanded: a real matrix has a few hundred
MAX_DEPTH = 32  # nesting levels: a real matrix has 6
_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_REPO = {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\Z"}
SUBMIT_MODES = ("manual", "api", "none")
# where the change goes and how it is submitted; `api` only for a fork the user owns, so it names it
_UPSTREAM = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"repo": _REPO, "submit": {"enum": list(SUBMIT_MODES)}},
    "if": {"properties": {"submit": {"const": "api"}}, "required": ["submit"]},
    "then": {"required": ["repo"]},
}


@functools.lru_cache(maxsize=None)
def schema() -> dict[str, Any]:
    """matrix.yaml's JSON Schema, composed here from what each registry owns: the source kinds
    and their options (sources/), the backend names (backends/)."""

    return _schema(sources.names(), sources.schema_pieces(), backends.names())


def _schema(source_kinds: list[str], source_pieces: list[dict], backend_names: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["series", "targets", "backends", "profiles"],
        "properties": {
            "series": {
                "type": "object",
                "additionalProperties": False,
                "required": ["path", "layout"],
                "properties": {
                    "path": STR,
                    "layout": {"enum": sorted(LAYOUTS)},
                    # the maintainers' approval of a new test file: the gate's own patch joins the series
                    "gate_approval": {"type": "string", "pattern": r"^https://\S+\Z"},
                },
            },
            "native_tests": STR,
            # the repository that owns the scheduled workflows: they run there only, never in forks
            "ci": {
                "type": "object",
                "additionalProperties": False,
                "properties": {"repository": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\Z"}},
            },
            "targets": {
                "type": "object",
                "minProperties": 1,
                "propertyNames": _NAME,
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["layout", "source"],
                    "properties": {
                        "layout": {"enum": sorted(LAYOUTS)},
                        "prefix": RELPATH,
                        "description": {"type": "string"},
                        "upstream": _UPSTREAM,
                        "source": {
                            "type": "object",
                            "required": ["kind"],
                            "properties": {"kind": {"enum": source_kinds}},
                            "allOf": source_pieces,
                        },
                    },
                },
            },
            "backends": {
                "type": "object",
                "minProperties": 1,
                "propertyNames": {"enum": backend_names},
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "cmake_flags": {
                            "type": "array",
                            "items": {"type": "string", "pattern": r"^-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=[^\n]*\Z"},
                        },
                        "env": {"type": "object", "additionalProperties": {"type": "string"}},  # names: _value_problems
                        "tools": {"type": "array", "items": STR},
                        "timeout": {"type": "number", "exclusiveMinimum": 0},
                        # one runner (a label, or "self-hosted, linux, gpu"), or several: a leg each
                        "runs_on": {
                            "oneOf": [STR, {"type": "array", "minItems": 1, "items": STR, "uniqueItems": True}]
                        },
                    },
                },
            },
            "profiles": {
                "type": "object",
                "minProperties": 1,
                "propertyNames": _NAME,
                "additionalProperties": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["targets", "backends"],
                    "properties": {
                        "targets": {"type": "array", "minItems": 1, "items": _NAME, "uniqueItems": True},
                        "backends": {"type": "array", "minItems": 1, "items": {"type": "string"}, "uniqueItems": True},
                    },
                },
            },
        },
    }


@dataclass(frozen=True)
class Target:
    name: str
    layout: str
    prefix: str
    source: Source
    description: str = ""
    upstream: Optional["Upstream"] = None  # matrix.yaml's `upstream:`, when declared


@dataclass(frozen=True)
class Upstream:
    repo: Optional[str]
    submit: Optional[str]
    where: str  # matrix.yaml:LINE of the `upstream:` key


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
    ci_repository: str = ""  # OWNER/NAME whose schedules run the workflows (matrix.yaml ci.repository)
    gate_approval: str = ""  # series.gate_approval: the URL where maintainers approved the gate as a new test file

    def target(self, name: str) -> Target:
        if name not in self.targets:
            raise ConfigError(
                f"{self.path}: unknown target {name!r}{_did_you_mean(name, self.targets)}"
                f" (targets: {', '.join(self.targets)})"
            )
        return self.targets[name]

    def backend(self, name: str) -> Backend:
        if name not in self.backends:
            raise ConfigError(
                f"{self.path}: unknown backend {name!r}{_did_you_mean(name, self.backends)}"
                f" (backends: {', '.join(self.backends)})"
            )
        return self.backends[name]

    def cells(
        self, profile: str = "default", targets: Optional[list[str]] = None, backends: Optional[list[str]] = None
    ) -> list[tuple[Target, Backend]]:
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
    """The document as plain data, and the line of every key. Bounded: aliases may not expand to
    more than MAX_VALUES values (an alias bomb is refused at once, not expanded), keys are plain
    scalars, numbers are finite, nesting is limited by the interpreter's stack (one line if not)."""
    try:
        _check_depth(text, where)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise ConfigError(_yaml_message(e, where)) from None
    except RecursionError:
        raise ConfigError(f"{where}: invalid YAML: nested too deeply") from None
    lines: dict[tuple, int] = {}
    count = [0]
    seen: set[int] = set()
    aliased = [False]

    def build(n: yaml.Node, path: tuple) -> Any:
        count[0] += 1
        if isinstance(n, (yaml.MappingNode, yaml.SequenceNode)):
            if id(n) in seen:
                aliased[0] = True  # the same node again: an alias
            seen.add(id(n))
        if count[0] > MAX_VALUES:
            why = "YAML aliases expand to more than" if aliased[0] else "the file has more than"
            raise ConfigError(
                f"{where}:{n.start_mark.line + 1}: {_dotted(path)}: {why} {MAX_VALUES} values "
                "(an alias bomb?); refused without expanding it"
            )
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, (yaml.MappingNode, yaml.SequenceNode)) and n.tag not in _PLAIN_TAGS:
            # PyYAML's SafeLoader would refuse the tag; building collections here must too
            raise ConfigError(
                f"{where}:{n.start_mark.line + 1}: invalid YAML: {_dotted(path)}: the tag {n.tag} "
                "is not allowed (plain mappings and lists only)"
            )
        if isinstance(n, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    kind = "sequence" if isinstance(k, yaml.SequenceNode) else "mapping"
                    raise ConfigError(
                        f"{where}:{k.start_mark.line + 1}: {_dotted(path)}: a YAML {kind} used as a "
                        "key; keys are plain names"
                    )
                key = k.value
                if key in out:
                    raise ConfigError(f"{where}:{k.start_mark.line + 1}: {_dotted(path + (key,))}: duplicate key")
                lines[path + (key,)] = k.start_mark.line + 1
                out[key] = build(v, path + (key,))
                lines[path + (key,)] = k.start_mark.line + 1
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(v, path + (i,)) for i, v in enumerate(n.value)]
        value = _Loader("").construct_object(n, deep=True)
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(
                f"{where}:{n.start_mark.line + 1}: {_dotted(path)}: expected a finite number, got {n.value!r}"
            )
        return value

    try:
        return (build(node, ()) if node is not None else None), lines
    except yaml.YAMLError as e:  # a tag SafeLoader does not construct (!!python/..., !custom)
        raise ConfigError(_yaml_message(e, where)) from None
    except RecursionError:
        raise ConfigError(f"{where}: invalid YAML: nested too deeply") from None


def _check_depth(text: str, where: str) -> None:
    """Refuse deep nesting from the event stream, before composing: PyYAML's scanner is quadratic
    in flow nesting ("[[[[..." takes seconds) and its composer recursive."""
    depth = 0
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(
                    f"{where}:{ev.start_mark.line + 1}: invalid YAML: nested too deeply (more than {MAX_DEPTH} levels)"
                )
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _yaml_message(e: yaml.YAMLError, where: str) -> str:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    line = f":{mark.line + 1}" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return f"{where}{line}: invalid YAML: {' '.join(str(problem).split())}"


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
            return path + (
                bad,
            ), f"unknown name {bad!r}{_did_you_mean(bad, allowed)} (expected one of {', '.join(allowed)})"
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
            return path + (
                bad,
            ), f"unknown name {bad!r}{_did_you_mean(bad, allowed)} (expected one of {', '.join(allowed)})"
        return path + (bad,), f"{bad!r} is not a valid name (letters, digits, '.', '_', '-')"
    if v == "pattern" and err.validator_value == _REPO["pattern"]:
        return path, f"{err.instance!r} is not a GitHub repository (expected OWNER/NAME, e.g. ggml-org/llama.cpp)"
    if v == "pattern" and err.validator_value == SHA256["pattern"]:
        return path, f"{err.instance!r} is not a sha256 (expected 64 lowercase hex digits)"
    if v == "pattern" and path == ("ci", "repository"):
        return path, f"{err.instance!r} is not a repository (expected OWNER/NAME)"
    if v == "pattern" and path and path[-2:-1] == ("cmake_flags",):
        return path, f"{err.instance!r} is not a CMake definition (expected -DNAME=VALUE)"
    if v == "not":
        return path, f"{err.instance!r} must be a relative path inside the tree (no '..', not absolute)"
    if v == "type":
        want = err.validator_value
        article = "an" if isinstance(want, str) and want[0] in "aeiou" else "a"
        return (
            path,
            f"expected {article + ' ' + want if isinstance(want, str) else ' or '.join(want)}, got {type(err.instance).__name__} {err.instance!r}",
        )
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
    path = Path(os.path.expanduser(str(path))).absolute()  # every path below is absolute from here on

    if not path.exists():
        raise ConfigError(f"{path}: no such file (pass --matrix PATH)")
    text = untrusted.read_text(path, "matrix")
    data, lines = _load_with_lines(text, str(path))
    if data is None:
        raise ConfigError(f"{path}:1: the matrix is empty; expected keys series, targets, backends, profiles")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping at the top level, got {type(data).__name__}")
    errors = sorted(
        jsonschema.Draft202012Validator(schema()).iter_errors(data),
        key=lambda e: (_line_for(lines, tuple(e.absolute_path)), len(e.absolute_path)),
    )
    errors = [e for e in errors if e.validator not in ("if", "allOf")] or errors
    if errors:
        key, msg = _schema_message(_deepest(errors[0]))
        raise ConfigError(f"{path}:{_line_for(lines, key)}: {_dotted(key)}: {msg}")
    problems = sorted(_value_problems(data), key=lambda p: _line_for(lines, p[0]))
    if problems:
        key, msg = problems[0]
        raise ConfigError(f"{path}:{_line_for(lines, key)}: {_dotted(key)}: {msg}")
    return _resolve(path, data, lines)


def _value_problems(data: dict) -> list[tuple[tuple, str]]:
    """What the schema cannot say, [(key path, message)]: each source kind's own checks (package
    names and PEP 440 versions, URLs and refs that reach git or requests: sources/), and
    environment variable names."""

    found = []
    for name, t in data["targets"].items():
        key = ("targets", name, "source")
        found += [(key + (sub,), msg) for sub, msg in sources.option_problems(t["source"]["kind"], t["source"])]
    for name, b in data["backends"].items():
        for var in b.get("env", {}):
            if not _ENV_NAME.match(var):
                found.append(
                    (
                        ("backends", name, "env", var),
                        f"{var!r} is not an environment variable name "
                        "(letters, digits and '_', not starting with a digit)",
                    )
                )
    return found


def require_native_tests(matrix: "Matrix") -> None:
    """The harness every build needs; checked before any cell, so a bad path is one line up front."""

    needed = ("CMakeLists.txt", f"{GATE_TEST}.cpp")
    missing = [n for n in needed if not (matrix.native_tests_dir / n).is_file()]
    if missing:
        what = "does not exist" if not matrix.native_tests_dir.is_dir() else f"has no {', '.join(missing)}"
        raise ConfigError(
            f"{matrix.path}:{_line_for(matrix.lines, ('native_tests',))}: native_tests: "
            f"{matrix.native_tests_dir} {what} (the gate test and the CMake harness live there)"
        )


def _deepest(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    while err.context:
        err = max(err.context, key=lambda e: len(e.absolute_path))
    return err


def _upstream(path: Path, lines: dict[tuple, int], name: str, u: Optional[dict]) -> Optional[Upstream]:
    if u is None:
        return None
    return Upstream(u.get("repo"), u.get("submit"), f"{path}:{_line_for(lines, ('targets', name, 'upstream'))}")


def _runners(b: dict) -> tuple[str, ...]:
    got = b.get("runs_on", "ubuntu-24.04")
    return (got,) if isinstance(got, str) else tuple(got)


def _resolve(path: Path, data: dict, lines: dict[tuple, int]) -> Matrix:
    root = path.parent
    targets = {
        name: Target(
            name,
            t["layout"],
            t.get("prefix", ""),
            Source(t["source"]["kind"], dict(t["source"]), f"targets.{name}.source", root),
            t.get("description", ""),
            _upstream(path, lines, name, t.get("upstream")),
        )
        for name, t in data["targets"].items()
    }
    backends = {
        name: Backend(
            name,
            tuple(b.get("cmake_flags", ())),
            dict(b.get("env", {})),
            tuple(b.get("tools", ())),
            float(b.get("timeout", 600)),
            _runners(b)[0],
            _runners(b) if len(_runners(b)) > 1 else (),
        )
        for name, b in data["backends"].items()
    }
    profiles = {}
    for pname, p in data["profiles"].items():
        for i, t in enumerate(p["targets"]):
            if t not in targets:
                raise ConfigError(
                    f"{path}:{_line_for(lines, ('profiles', pname, 'targets', i))}: "
                    f"profiles.{pname}.targets: unknown target {t!r}{_did_you_mean(t, targets)}"
                )
        for i, b in enumerate(p["backends"]):
            if b not in backends:
                raise ConfigError(
                    f"{path}:{_line_for(lines, ('profiles', pname, 'backends', i))}: "
                    f"profiles.{pname}.backends: unknown backend {b!r}{_did_you_mean(b, backends)}"
                )
        profiles[pname] = (tuple(p["targets"]), tuple(p["backends"]))
    if "default" not in profiles:
        raise ConfigError(f"{path}:{_line_for(lines, ('profiles',))}: profiles: missing required profile 'default'")
    return Matrix(
        path,
        root / data["series"]["path"],
        data["series"]["layout"],
        root / data.get("native_tests", "native_tests"),
        targets,
        backends,
        profiles,
        lines,
        (data.get("ci") or {}).get("repository", ""),
        data["series"].get("gate_approval", ""),
    )
