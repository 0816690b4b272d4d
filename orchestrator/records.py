"""The base of every record the tool reads or writes (results.json, the bundle manifest,
`status --json`, patches/known-limits.yaml, ...): a pydantic v2 model declared once, from
which serialisation, validation of untrusted input and the JSON Schema come. Untrusted input
is validated strictly (JSON types, no coercion), unknown keys are refused, and an error is
one line naming the key path (`error_line`)."""

from __future__ import annotations

import json
from typing import Any, Callable, ClassVar, Iterable, Optional, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, model_serializer

from .errors import ConfigError

R = TypeVar("R", bound=BaseModel)
_KINDS = dict(
    int="integer",
    float="number",
    bool="boolean",
    str="string",
    dict="object",
    list="array",
    model="object",
)
# (key path, error type, value) -> what, or None
Hint = Callable[[tuple[Any, ...], str, Any], Optional[str]]


class Record(BaseModel):
    """A record of a JSON document: unknown keys refused; `None` left out of the JSON unless the
    key is in `NULLS` (or `kept_nulls()` says so): today's files hold exactly those nulls. A field
    whose key is a Python keyword is declared under an alias (`from_` as "from") and written so."""

    model_config = ConfigDict(extra="forbid", ser_json_inf_nan="constants")

    NULLS: ClassVar[frozenset[str]] = frozenset()

    def kept_nulls(self) -> frozenset[str]:
        return self.NULLS

    @model_serializer(mode="wrap")
    def _without_none(self, handler: Any) -> dict[str, Any]:
        keep, fields = self.kept_nulls(), type(self).model_fields
        return {
            (fields[k].alias or k) if k in fields else k: v
            for k, v in handler(self).items()
            if v is not None or k in keep
        }

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data (what the document holds)."""
        return self.model_dump(mode="json")


def dotted(loc: Iterable[Any]) -> str:
    """A key path as the messages write it: cells[1].status."""
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        elif out:
            out += f".{p}"
        else:
            out += str(p)
    return out


def located(e: ValidationError, hint: Optional[Hint] = None) -> tuple[tuple[Any, ...], str]:
    """The first error as (key path, what is wrong): `hint` may word it for a key."""
    err = e.errors(include_url=False)[0]
    loc, kind, value = tuple(err["loc"]), err["type"], err.get("input")
    where = loc[:-1] if kind == "missing" else loc
    said = hint(loc, kind, value) if hint else None
    if said is not None:  # at the key itself (an unknown key's own line)
        return where, said
    if kind == "missing":
        return where, f"key {loc[-1]!r} missing"
    if kind == "extra_forbidden":
        return loc[:-1], f"unknown key {loc[-1]!r}"
    if kind in ("enum", "literal_error"):
        return where, f"{value!r} is not one of {err.get('ctx', {}).get('expected', '')}"
    if kind.endswith("_type") and kind.split("_")[0] in _KINDS:
        return where, f"expected {_KINDS[kind.split('_')[0]]}, got {type(value).__name__}"
    msg = err["msg"].removeprefix("Value error, ")
    return where, f"{msg[:1].lower()}{msg[1:]} (got {_shown(value)})"


def _shown(value: Any) -> str:
    """A value in an error line: its repr (control characters escaped), at most 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def error_line(e: ValidationError, hint: Optional[Hint] = None) -> str:
    """A pydantic error as one line: the key path, then what was expected and what was there."""
    loc, what = located(e, hint)
    at = dotted(loc)
    return f"{at}: {what}" if at else what


def parse(
    kind: type[R],
    data: Any,
    where: str,
    what: str,
    hint: Optional[Hint] = None,
    ours: bool = False,
) -> R:
    """A document's JSON data (or text) as `kind`, validated strictly;
    else one line naming `where` and the key. `ours`: data the tool made in this run (about to be
    written): free text is made safe (control characters shown) instead of refused."""
    if not isinstance(data, (str, bytes)):
        if not isinstance(data, dict):
            raise ConfigError(f"{where}: expected a JSON object; not {what}")
        try:
            data = json.dumps(data)
        except (RecursionError, ValueError):
            raise ConfigError(f"{where}: nested too deeply or not JSON data; not {what}") from None
    try:
        # context: the values' validators refuse (not repair) what breaks their rules
        context = {"untrusted": not ours}
        return kind.model_validate_json(data, strict=True, context=context)
    except ValidationError as e:
        raise ConfigError(f"{where}: {error_line(e, hint)}; not {what}") from None
