"""Pins: a git target's branch, tag or HEAD replaced by one commit, so every job of a CI run works
on the same upstream commit even when the branch moves during the run.

`resolve-refs` asks each remote once (`git ls-remote`) and writes a PinsFile that `--pins FILE`
reads; `--pin TARGET=COMMIT` gives one by hand. A target the plan could not reach is recorded, not
fatal: its legs report `source unavailable` at once (no second try), the rest of the run goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Optional, Union

from pydantic import field_validator, model_validator
from pydantic_core import PydanticCustomError

from . import untrusted
from .config import Matrix
from .errors import ConfigError
from .model.values import Name, TextLine
from .records import Record, parse
from .sources import SourceUnreachable
from .sources.git import Pinned, ls_remote
from .urls import FULL_SHA, strip_credentials


class Pin(Record):
    """What a ref named when the plan asked (a bare commit id is accepted for a pin too)."""

    commit: str
    ref: Optional[TextLine] = None
    remote_ref: Optional[TextLine] = None
    url: Optional[TextLine] = None  # any git URL (a local path too), without its userinfo

    @model_validator(mode="before")
    @classmethod
    def _full_commit(cls, data: Any) -> Any:
        data = {"commit": data} if isinstance(data, str) else data
        if isinstance(data, dict) and not FULL_SHA.match(str(data.get("commit", ""))):
            raise PydanticCustomError("pin", 'expected a full 40-hex commit id ("commit")')
        return data


class Unreachable(Record):
    """A target whose remote the plan could not reach (down, gone or private), and why."""

    # declared first: the file keeps the order resolve-refs always wrote
    url: Optional[TextLine] = None
    ref: Optional[TextLine] = None
    reason: TextLine


class PinsFile(Record):
    """The file `resolve-refs` writes and `--pins` reads."""

    version: Literal[1] = 1
    pins: dict[Name, Pin]  # target -> its pin
    unreachable: Optional[dict[Name, Unreachable]] = None

    @field_validator("unreachable", mode="before")
    @classmethod
    def _reasons(cls, value: Any) -> Any:
        entries = value.values() if isinstance(value, dict) else [None]
        if not all(
            isinstance(v, Unreachable) or isinstance(v, dict) and "reason" in v for v in entries
        ):
            raise PydanticCustomError("pins", 'expected {TARGET: {"reason": TEXT}}')
        return value


def read_pins_file(path: Path) -> dict[str, Union[Pin, Unreachable]]:
    if not Path(path).exists():
        raise ConfigError(
            f"{path}: no such pins file (write one with `ggml-patch resolve-refs --out FILE`)"
        )
    data = parse(PinsFile, untrusted.read_text(path, "pins"), str(path), "a pins file")
    # a target both pinned and unreachable: the pin wins
    return {**(data.unreachable or {}), **data.pins}


def made_pins(path: Path) -> bool:
    """An existing --out file `resolve-refs` may
    replace: a pins file it wrote (with its version)."""
    try:
        return (
            "version"
            in parse(PinsFile, untrusted.read_text(path, "pins"), str(path), "").model_fields_set
        )
    except ConfigError:
        return False


def collect(
    pins_file: Optional[str], pin_args: Iterable[str]
) -> dict[str, Union[Pin, Unreachable]]:
    """--pins FILE, then each --pin TARGET=COMMIT (which wins)."""
    pins = read_pins_file(Path(pins_file)) if pins_file else {}
    for text in pin_args:
        target, sep, commit = text.partition("=")
        if not sep or not target or not FULL_SHA.match(commit):
            raise ConfigError(
                f"--pin {text!r}: expected TARGET=COMMIT with a full 40-hex commit id"
            )
        pins[target] = Pin(commit=commit)
    return pins


def pinned(matrix: Matrix, pins: Mapping[str, Union[Pin, Unreachable]]) -> Matrix:
    """The matrix with each pinned git target's ref replaced by its
    commit (matrix.yaml's kept as pinned_from)."""
    if not pins:
        return matrix
    targets = dict(matrix.targets)
    for name, pin in pins.items():
        t = matrix.target(name)  # one-line error for an unknown target
        if t.source.kind != "git":
            raise ConfigError(
                f"pin for {name!r}: its source is {t.source.kind}, already pinned by matrix.yaml; "
                "only git sources take a pin"
            )
        o = t.source.options
        # the plan could not reach it: its cells report that, without a retry
        if isinstance(pin, Unreachable):
            o["unreachable"] = pin.reason
        else:
            o.update(ref=pin.commit, pinned_from=o["ref"], pinned_ref=pin.remote_ref or "")
        targets[name] = t.model_copy(
            update={"source": Pinned(**o).at(t.source.key, t.source.base_dir)}
        )
    return matrix.model_copy(update={"targets": targets})


def git_targets(matrix: Matrix, profiles: Iterable[str], names: Iterable[str] = ()) -> list[str]:
    """The git targets of the given profiles (or just
    `names`), each once, in matrix.yaml's order."""
    wanted = list(names)
    for n in wanted:
        matrix.target(n)
    chosen = {t.name for p in profiles for t, _ in matrix.cells(p)}
    order = [t for t in matrix.targets if (t in wanted if wanted else t in chosen)]
    return [t for t in order if matrix.targets[t].source.kind == "git"]


def resolve_reachable(
    matrix: Matrix, names: list[str]
) -> tuple[dict[str, Pin], dict[str, Unreachable]]:
    """(pins of the targets that resolved, those that did not: a
    remote down, gone or private, a ref gone)."""
    out, gone = {}, {}
    for name in names:
        src = matrix.target(name).source
        url, ref = str(src["url"]), str(src["ref"])
        try:
            commit, remote_ref = ls_remote(url, ref, src.key)
        except (SourceUnreachable, ConfigError) as e:
            gone[name] = Unreachable(url=public_url(url), ref=ref, reason=str(e))
            continue
        out[name] = Pin(commit=commit, ref=ref, remote_ref=remote_ref, url=public_url(url))
    return out, gone


def public_url(url: str) -> str:
    """`url` without its userinfo (`https://user:secret@host/x` -> `https://host/x`, a '/' in the
    password included) and secret query parameters: a pins file is shared (a CI job output, an
    artifact) and names the remote, never its credentials. A local path stays as it is."""
    return strip_credentials(url)


def pins_json(
    pins: dict[str, Pin], unreachable: Optional[dict[str, Unreachable]] = None
) -> dict[str, Any]:
    return PinsFile(pins=pins, **({"unreachable": unreachable} if unreachable else {})).to_json()
