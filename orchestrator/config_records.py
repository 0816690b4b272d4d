"""matrix.yaml's records the registries use (a backend; the base of each source kind's options,
declared with its kind in sources/) and the value types they share, each with the words of its
error. A leaf: sources/ and backends/ use it without importing config.py, which composes them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Callable, Optional, TypeVar, Union

from pydantic import AfterValidator, ConfigDict, Field, PrivateAttr, Strict, model_validator
from pydantic_core import PydanticCustomError

from .model.values import matching
from .records import Record

# a value's form; what only code can say
SCHEMA_ERROR, VALUE_ERROR = ("matrix_schema", "matrix_value")
S = TypeVar("S", bound="Source")


def problem(kind: str, message: str) -> PydanticCustomError:
    """An error whose words are the message (VALUE_ERRORs are reported after every SCHEMA_ERROR)."""
    return PydanticCustomError(kind, "{message}", {"message": message})


def _inside(value: str) -> str:
    if re.search(r"(^/|(^|/)\.\.(/|$))", value):
        raise problem(
            SCHEMA_ERROR,
            f"{value!r} must be a relative path inside the tree (no '..', not absolute)",
        )
    return value


def _unique(items: tuple[Any, ...]) -> tuple[Any, ...]:
    if len(set(items)) != len(items):
        raise problem(SCHEMA_ERROR, f"{list(items)!r} has non-unique elements")
    return items


StrictText = Annotated[str, Strict()]
Str = Annotated[str, Strict(), Field(min_length=1)]
RELPATH = Annotated[str, Strict(), Field(min_length=1), AfterValidator(_inside)]
Unique = AfterValidator(_unique)
# POSIX: what a shell and execve accept
EnvName = Annotated[
    str,
    matching(
        r"[A-Za-z_][A-Za-z0-9_]*",
        "is not an environment variable name (letters, digits and '_', not starting with a digit)",
    ),
]
_CMAKE_D = r"-D[A-Za-z_][A-Za-z0-9_]*(:[A-Z]+)?=[^\n]*"  # -DNAME=VALUE or -DNAME:TYPE=VALUE
CMAKE_DEFINITION = Annotated[
    str, matching(_CMAKE_D, "is not a CMake definition (expected -DNAME=VALUE)")
]


def checked(problem_of: Callable[[str], Optional[str]], sep: str = " ") -> AfterValidator:
    """A string `problem_of` finds nothing wrong with; else
    "'VALUE'{sep}what is wrong" (a VALUE_ERROR)."""

    def check(value: str) -> str:
        why = problem_of(value)
        if why:
            raise problem(VALUE_ERROR, f"{value!r}{sep}{why}")
        return value

    return AfterValidator(check)


class MatrixRecord(Record):
    """A record of matrix.yaml: frozen once loaded; an
    unknown key is named with the keys allowed."""

    model_config = ConfigDict(frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        extra = [k for k in data if k not in cls.model_fields] if isinstance(data, dict) else []
        if extra:
            raise PydanticCustomError(
                "unknown_key", "unknown key", {"key": extra[0], "allowed": [*cls.model_fields]}
            )
        return data


class Named(MatrixRecord):
    """A record whose name is its key in matrix.yaml; elsewhere the name comes first, then the
    fields in order or by name: `Backend("cpu", ("-DGGML_NATIVE=OFF",), timeout=5)`."""

    _name: str = PrivateAttr("")

    def __init__(self, name: str = "", /, *values: Any, **fields: Any) -> None:
        super().__init__(**dict(zip(type(self).model_fields, values, strict=False)), **fields)
        self._name = name

    @property
    def name(self) -> str:
        return self._name


class Source(MatrixRecord):
    """The base of each source kind's options (sources/KIND.py declares its own): the options as
    matrix.yaml writes them, and where they came from (`key`, `base_dir`), set once loaded."""

    kind: str
    _key: str = PrivateAttr("")  # e.g. targets.ggml.source, for error messages
    # matrix.yaml's folder: a local source's relative path starts there
    _base_dir: Optional[Path] = PrivateAttr(None)

    @property
    def key(self) -> str:
        return self._key

    @property
    def base_dir(self) -> Optional[Path]:
        return self._base_dir

    def at(self: S, key: str, base_dir: Optional[Path] = None) -> S:
        """These options, declared at `key` of a matrix in `base_dir`."""
        out = self.model_copy()
        out._key, out._base_dir = key, base_dir
        return out

    @property
    def options(self) -> dict[str, Any]:
        """The keys matrix.yaml gave, as it gave them."""
        return {"kind": self.kind, **self.model_dump(mode="json", exclude_unset=True)}

    def __getitem__(self, name: str) -> Any:
        return self.options[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)


class Backend(Named):
    """matrix.yaml's `backends.NAME`."""

    cmake_flags: tuple[CMAKE_DEFINITION, ...] = ()
    env: dict[EnvName, StrictText] = {}
    tools: tuple[Str, ...] = ()
    timeout: Annotated[float, Strict(), Field(gt=0)] = 600.0
    # one runner (a label, or "self-hosted, linux, gpu"), or several: a leg each
    runs_on: Union[Str, Annotated[tuple[Str, ...], Field(min_length=1), Unique]] = "ubuntu-24.04"
    # the name first (mypy's pydantic plugin would make one of the fields alone)
    __init__ = Named.__init__

    def all_runners(self) -> tuple[str, ...]:
        return (self.runs_on,) if isinstance(self.runs_on, str) else self.runs_on
