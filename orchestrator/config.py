"""matrix.yaml: load, validate and resolve into its pydantic records (declared once: here, and each
source kind's options with its kind in sources/), from which its JSON Schema comes too. Every error
is one line naming the file, the line and the key (from the YAML node marks)."""

from __future__ import annotations

import difflib
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Iterable, Literal, Optional, TypeVar, Union

import yaml
from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema

from . import backends, config_records, untrusted
from .config_records import Backend, MatrixRecord, Named, Str
from .errors import ConfigError
from .model.layout import LAYOUTS
from .model.values import WORDS, Name, matching
from .sources.git import GitSource
from .sources.local import LocalSource
from .sources.pypi_sdist import PypiSdist
from .sources.tarball import TarballSource

__all__ = [
    "Backend",
    "Matrix",
    "Target",
    "Upstream",
    "load_matrix",
    "require_native_tests",
    "schema",
]
R = TypeVar("R")
MAX_VALUES = 20_000  # YAML nodes after aliases are expanded: a real matrix has a few hundred
MAX_DEPTH = 32  # nesting levels: a real matrix has 6
_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")
_NAMES_ONLY: dict[str, Any] = {"additionalProperties": False}  # a key is a Name (patternProperties)
# pydantic's error types in matrix.yaml's words (_problems)
_KINDS = {
    "string": "a string",
    "float": "a number",
    "int": "a number",
    "bool": "a boolean",
    "dict": "an object",
}
_KINDS.update(model="an object", model_attributes="an object", list="an array", tuple="an array")
_SAID = {"union_tag_not_found": "missing required key 'kind'", "too_short": "must not be empty"}
_SAID.update(greater_than="expected a positive number, got {value!r}")
_REPO = r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+"  # OWNER/NAME
Repo = Annotated[
    str,
    matching(_REPO, "is not a GitHub repository (expected OWNER/NAME, e.g. ggml-org/llama.cpp)"),
]
if TYPE_CHECKING:
    Layout = str
    BackendName = str
else:
    Layout = Literal[tuple(sorted(LAYOUTS))]
    BackendName = Literal[tuple(backends.names())]  # the registry's names
# a source's options: the model of its kind, in the registry's order (sources/)
Options = Annotated[
    Union[PypiSdist, GitSource, LocalSource, TarballSource], Field(discriminator="kind")
]


class Upstream(MatrixRecord):
    """Where the change goes and how it is submitted; `api` only
    for a fork the user owns, so it names it."""

    repo: Optional[Repo] = None
    submit: Optional[Literal["manual", "api", "none"]] = None
    _where: str = PrivateAttr("")  # matrix.yaml:LINE of the `upstream:` key

    @property
    def where(self) -> str:
        return self._where

    @model_validator(mode="after")
    def _api_names_the_fork(self) -> "Upstream":
        if self.submit == "api" and not self.repo:
            raise config_records.problem(config_records.SCHEMA_ERROR, "missing required key 'repo'")
        return self


class Target(Named):
    """matrix.yaml's `targets.NAME`."""

    layout: Layout
    prefix: config_records.RELPATH = ""
    source: Options
    description: config_records.StrictText = ""
    upstream: Optional[Upstream] = None  # matrix.yaml's `upstream:`, when declared
    # the name first (mypy's pydantic plugin would make one of the fields alone)
    __init__ = Named.__init__


class Profile(MatrixRecord):
    targets: Annotated[tuple[Name, ...], Field(min_length=1), config_records.Unique]
    backends: Annotated[tuple[Str, ...], Field(min_length=1), config_records.Unique]

    # a profile is also its (targets, backends) pair
    def __getitem__(self, i: int) -> tuple[str, ...]:
        return (self.targets, self.backends)[i]

    def __eq__(self, other: object) -> bool:
        return (
            (self.targets, self.backends) == other
            if isinstance(other, tuple)
            else super().__eq__(other)
        )

    __hash__ = MatrixRecord.__hash__


# matrix.yaml's `queue:` key: the folder of the topics (patches/queue.yaml gives their order) and
# the layout every topic's series is written in. No docstring: it would become a description in
# the published schema.
class QueueConfig(MatrixRecord):
    model_config = ConfigDict(title="Queue")  # the schema's name for it, as published
    path: Str
    layout: Layout
    # the maintainers' approval of a new test file: the gate's own patch
    # (native_tests/<topic>/upstream-gate/) joins its topic's series
    gate_approval: Annotated[str, matching(r"https://\S+", "is not an https:// URL")] = ""


CI_REPOSITORY_GONE = (
    "is gone: the scheduled workflows now run where the repository variable "
    "GGML_PATCH_SCHEDULE is 'true' (README: Adopting the CI); delete the key, then "
    "`ggml-patch ci-workflow`"
)


def _gone(value: Any) -> Any:
    raise config_records.problem(config_records.SCHEMA_ERROR, CI_REPOSITORY_GONE)


class Ci(MatrixRecord):
    # `ci.repository` named the one repository the schedules ran in: a fork had to edit it,
    # regenerate and commit. A repository variable opts in now; an old file is told so, once.
    repository: Annotated[Optional[str], AfterValidator(_gone)] = None


class Matrix(MatrixRecord):
    """matrix.yaml. Once loaded (`load_matrix`) it knows its file and the line of every key."""

    queue: QueueConfig
    native_tests: Str = "native_tests"
    ci: Ci = Ci()
    targets: Annotated[dict[Name, Target], Field(min_length=1, json_schema_extra=_NAMES_ONLY)]
    backends: Annotated[dict[BackendName, Backend], Field(min_length=1)]
    profiles: Annotated[dict[Name, Profile], Field(min_length=1, json_schema_extra=_NAMES_ONLY)]
    _path: Path = PrivateAttr(Path("matrix.yaml"))
    _lines: dict[tuple[Any, ...], int] = PrivateAttr(default_factory=dict)

    def located(self, path: Path, lines: dict[tuple[Any, ...], int]) -> "Matrix":
        """This matrix as read from `path`, its keys at `lines`: each target and
        backend named by its key, each source knows its key path and that
        relative paths start at the file's folder."""
        self._path, self._lines = path, lines
        for name, b in self.backends.items():
            b._name = name
        for name, t in self.targets.items():
            t._name, t.source._key, t.source._base_dir = name, f"targets.{name}.source", path.parent
            if t.upstream:
                t.upstream._where = f"{path}:{_line_for(lines, ('targets', name, 'upstream'))}"
        return self

    @property
    def path(self) -> Path:
        return self._path

    @property
    def lines(self) -> dict[tuple[Any, ...], int]:
        return self._lines

    @property
    def queue_dir(self) -> Path:
        return self.path.parent / self.queue.path

    @property
    def series_layout(self) -> str:
        return self.queue.layout

    def topic_dir(self, topic: str) -> Path:
        """patches/<topic>/: the topic's series, topic.yaml, cover.md, known limits."""
        return self.queue_dir / topic

    def topic_native_dir(self, topic: str) -> Path:
        """native_tests/<topic>/: the topic's mutants, competing fixes and upstream gate patch."""
        return self.native_tests_dir / topic

    @property
    def native_tests_dir(self) -> Path:
        return self.path.parent / self.native_tests

    def target(self, name: str) -> Target:
        return _named(self.path, "target", name, self.targets)

    def backend(self, name: str) -> Backend:
        return _named(self.path, "backend", name, self.backends)

    def cells(
        self,
        profile: str = "default",
        targets: Optional[list[str]] = None,
        backends: Optional[list[str]] = None,
    ) -> list[tuple[Target, Backend]]:
        """The (target, backend) cells of a profile, narrowed by --target/--backend."""
        p = _named(self.path, "profile", profile, self.profiles)
        return [
            (self.target(t), self.backend(b))
            for t in targets or p.targets
            for b in backends or p.backends
        ]


def _named(path: Path, what: str, name: str, known: dict[str, R]) -> R:
    if name not in known:
        raise ConfigError(
            f"{path}: unknown {what} {name!r}{_did_you_mean(name, known)} "
            f"({what}s: {', '.join(known)})"
        )
    return known[name]


class _MatrixSchema(GenerateJsonSchema):
    """The schema's definitions named as published (a record's class may be named otherwise)."""

    def normalize_name(self, name: str) -> str:
        return super().normalize_name(_SCHEMA_NAMES.get(name, name))


_SCHEMA_NAMES = {"QueueConfig": "Queue"}


def schema() -> dict[str, Any]:
    """matrix.yaml's JSON Schema, from the records."""
    return Matrix.model_json_schema(schema_generator=_MatrixSchema)


def _load_with_lines(text: str, where: str) -> tuple[Any, dict[tuple[Any, ...], int]]:
    """The document as plain data, and the line of every key. Bounded: aliases may not expand to
    more than MAX_VALUES values (an alias bomb is refused at once, not expanded), keys are plain
    scalars, numbers are finite, nesting is limited by the interpreter's stack (one line if not)."""
    lines: dict[tuple[Any, ...], int] = {}
    seen: set[int] = set()  # the collections built: the same one again is an alias
    count, aliased = [0], [False]

    def refused(n: yaml.Node, what: str) -> ConfigError:
        return ConfigError(f"{where}:{n.start_mark.line + 1}: {what}")

    def build(n: yaml.Node, path: tuple[Any, ...]) -> Any:
        count[0] += 1
        at = _dotted(path)
        if isinstance(n, (yaml.MappingNode, yaml.SequenceNode)):
            aliased[0] = aliased[0] or id(n) in seen
            seen.add(id(n))
        if count[0] > MAX_VALUES:
            why = "YAML aliases expand to more than" if aliased[0] else "the file has more than"
            raise refused(
                n, f"{at}: {why} {MAX_VALUES} values (an alias bomb?); refused without expanding it"
            )
        lines.setdefault(path, n.start_mark.line + 1)
        if isinstance(n, (yaml.MappingNode, yaml.SequenceNode)) and n.tag not in _PLAIN_TAGS:
            # PyYAML's SafeLoader would refuse the tag; building collections here must too
            raise refused(
                n,
                f"invalid YAML: {at}: the tag {n.tag} is not "
                "allowed (plain mappings and lists only)",
            )
        if isinstance(n, yaml.MappingNode):
            out: dict[str, Any] = {}
            for k, v in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    kind = "sequence" if isinstance(k, yaml.SequenceNode) else "mapping"
                    raise refused(k, f"{at}: a YAML {kind} used as a key; keys are plain names")
                if k.value in out:
                    raise refused(k, f"{_dotted(path + (k.value,))}: duplicate key")
                lines[path + (k.value,)] = k.start_mark.line + 1
                out[k.value] = build(v, path + (k.value,))
            return out
        if isinstance(n, yaml.SequenceNode):
            return [build(v, path + (i,)) for i, v in enumerate(n.value)]
        try:
            value = yaml.SafeLoader("").construct_object(n, deep=True)
        except ValueError:  # a timestamp that is no date (2026-13-01): PyYAML's own ValueError
            raise refused(n, f"{at}: {n.value!r} is not a valid value (a date?)") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise refused(n, f"{at}: expected a finite number, got {n.value!r}")
        return value

    try:
        _check_depth(text, where)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        return (build(node, ()) if node is not None else None), lines
    except (
        yaml.YAMLError
    ) as e:  # invalid, or a tag SafeLoader does not construct (!!python/..., !custom)
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        why = " ".join(str(getattr(e, "problem", None) or str(e).splitlines()[0]).split())
        raise ConfigError(
            f"{where}{f':{mark.line + 1}' if mark else ''}: invalid YAML: {why}"
        ) from None
    except RecursionError:
        raise ConfigError(f"{where}: invalid YAML: nested too deeply") from None


def _check_depth(text: str, where: str) -> None:
    """Refuse deep nesting from the event stream, before composing: PyYAML's scanner is quadratic
    in flow nesting ("[[[[..." takes seconds) and its composer recursive."""
    depth = 0
    for ev in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(
                    f"{where}:{ev.start_mark.line + 1}: invalid YAML: nested too "
                    f"deeply (more than {MAX_DEPTH} levels)"
                )
        elif isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _dotted(path: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def _did_you_mean(word: str, choices: Iterable[Any]) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def _line_for(lines: dict[tuple[Any, ...], int], path: tuple[Any, ...]) -> int:
    while path and path not in lines:
        path = path[:-1]
    return lines.get(path, 1)


def load_matrix(path: str | Path) -> Matrix:
    path = Path(
        os.path.expanduser(str(path))
    ).absolute()  # every path below is absolute from here on

    if not path.exists():
        raise ConfigError(f"{path}: no such file (pass --matrix PATH)")
    text = untrusted.read_text(path, "matrix")
    data, lines = _load_with_lines(text, str(path))
    if data is None:
        raise ConfigError(
            f"{path}:1: the matrix is empty; expected keys queue, targets, backends, profiles"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}:1: expected a mapping at the top level, got {type(data).__name__}"
        )
    try:
        matrix = Matrix.model_validate(data).located(path, lines)
    except ValidationError as e:
        key, msg = min(
            _problems(e, data), key=lambda p: (p[0], _line_for(lines, p[1]), len(p[1]), p[2])
        )[3:]
        raise ConfigError(f"{path}:{_line_for(lines, key)}: {_dotted(key)}: {msg}") from None
    _check_profiles(matrix)
    return matrix


def _problems(
    e: ValidationError, data: dict[str, Any]
) -> list[tuple[bool, tuple[Any, ...], bool, tuple[Any, ...], str]]:
    """Each error as (a value's problem, the key path it sorts by, a
    type's, the key path it names, what is wrong)."""
    out = []
    for err in e.errors(include_url=False):
        kind, value, ctx = err["type"], err.get("input"), err.get("ctx") or {}
        path = _document_path(err["loc"], data, kind == "missing")
        at = path
        if kind == "missing":
            at, msg = path[:-1], f"missing required key {path[-1]!r}"
        elif kind == "unknown_key":
            key, allowed = ctx["key"], list(ctx["allowed"])
            at = path + (key,)
            msg = f"unknown key{_did_you_mean(key, allowed)} (allowed: {', '.join(allowed)})"
        elif kind == "literal_error" and err["loc"][-1] == "[key]":  # a backend's name
            allowed = _choices(ctx["expected"])
            msg = (
                f"unknown name {value!r}{_did_you_mean(value, allowed)} "
                f"(expected one of {', '.join(allowed)})"
            )
        elif kind == "literal_error":
            msg = f"{value!r} is not one of {', '.join(_choices(ctx['expected']))}"
        elif kind == "union_tag_invalid":
            at, msg = (
                path + ("kind",),
                f"{value['kind']!r} is not one of {', '.join(_choices(ctx['expected_tags']))}",
            )
        elif kind in _SAID:
            msg = _SAID[kind].format(value=value)
        elif kind.removesuffix("_type") in _KINDS:
            msg = (
                f"expected {_KINDS[kind.removesuffix('_type')]}, "
                f"got {type(value).__name__} {value!r}"
            )
        elif kind == "string_pattern_mismatch":
            msg = f"{value!r} {WORDS[ctx['pattern']]}"
        else:  # SCHEMA_ERROR, VALUE_ERROR: the words are the type's
            msg = ctx.get("message", err["msg"])
        container = kind in ("missing", "unknown_key") or err["loc"][-1] == "[key]"
        # a value's problems after its form's; a type after
        # what the value is (one branch of a union)
        out.append(
            (
                kind == config_records.VALUE_ERROR,
                path[:-1] if container else path,
                kind.endswith("_type"),
                at,
                msg,
            )
        )
    return out


def _document_path(loc: tuple[Any, ...], data: Any, missing: bool) -> tuple[Any, ...]:
    """pydantic's error location as matrix.yaml's key path: without a union's tags and branches."""
    out: list[Any] = []
    for i, p in enumerate(loc):
        if out[-1:] == ["source"] and isinstance(data, dict) and p == data.get("kind"):
            continue  # the tag of the kind's model
        if (
            isinstance(data, dict)
            and p in data
            or isinstance(data, list)
            and isinstance(p, int)
            and p < len(data)
        ):
            out.append(p)
            data = data[p]
        elif missing and i == len(loc) - 1:
            out.append(p)
    return tuple(out)


def _choices(expected: str) -> list[str]:
    """pydantic's "'a', 'b' or 'c'" as [a, b, c]."""
    return re.findall(r"'([^']*)'", expected)


def _check_profiles(matrix: Matrix) -> None:
    """Every name a profile lists is a target or a backend; the profile `default` exists."""
    path, lines = matrix.path, matrix.lines
    for pname, p in matrix.profiles.items():
        for what, names, known in (
            ("target", p.targets, matrix.targets),
            ("backend", p.backends, matrix.backends),
        ):
            for i, name in enumerate(names):
                if name not in known:
                    raise ConfigError(
                        f"{path}:{_line_for(lines, ('profiles', pname, what + 's', i))}: "
                        f"profiles.{pname}.{what}s: unknown {what} "
                        f"{name!r}{_did_you_mean(name, known)}"
                    )
    if "default" not in matrix.profiles:
        raise ConfigError(
            f"{path}:{_line_for(lines, ('profiles',))}: "
            "profiles: missing required profile 'default'"
        )


def require_native_tests(matrix: "Matrix") -> None:
    """The harness every build needs; checked before any
    cell, so a bad path is one line up front."""
    missing = [
        n
        for n in ("CMakeLists.txt", "extra-programs.cmake")
        if not (matrix.native_tests_dir / n).is_file()
    ]
    if missing:
        what = (
            "does not exist"
            if not matrix.native_tests_dir.is_dir()
            else f"has no {', '.join(missing)}"
        )
        raise ConfigError(
            f"{matrix.path}:{_line_for(matrix.lines, ('native_tests',))}: native_tests: "
            f"{matrix.native_tests_dir} {what} (the gate test and the CMake harness live there)"
        )
