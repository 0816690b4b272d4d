"""Known limits: what the series knowingly leaves as it is
(patches/known-limits.yaml), carried into the bundle's PR_BODY.md ("Additional
information") and manifest.json; not ISSUE.md (the reproduction only).

    limits:
      - id: opt-i-advances-on-eval          # a slug: lowercase letters, digits, '-'
        file: ggml/src/ggml-opt.cpp         # in the series' (llama.cpp) layout
        function: ggml_opt_eval
        what: one line, ASCII
        status: not changed by this series  # the only status a known limit has
        confirmed: one line, ASCII: how it was seen

A malformed file is one line naming the file, the line and the key (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, Field, StringConstraints, ValidationError

from .. import publish, untrusted
from ..config import _line_for, _load_with_lines
from ..errors import ConfigError
from ..records import Hint, R, Record, dotted, located

FILE = "known-limits.yaml"
STATUS = "not changed by this series"


def _no_parent(path: str) -> str:
    if ".." in path.split("/"):
        raise ValueError("a path out of the series' layout")
    return path


Line = Annotated[str, StringConstraints(pattern=r"^[\x20-\x7e]+$")]  # one line of printable ASCII
_EXPECTED = {
    "id": "a slug (lowercase letters, digits, '-')",
    "file": "a relative path in the series' layout",
    "function": "a C identifier",
}


class KnownLimit(Record):
    id: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*$")]
    file: Annotated[
        str,
        StringConstraints(pattern=r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$"),
        AfterValidator(_no_parent),
    ]
    function: Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
    what: Line
    status: Literal["not changed by this series"]
    confirmed: Line


class KnownLimits(Record):
    """patches/known-limits.yaml."""

    limits: list[KnownLimit] = Field(min_length=1)


def _hint(loc: tuple[Any, ...], kind: str, value: Any) -> Optional[str]:
    key = loc[-1] if loc else ""
    if kind == "extra_forbidden":
        fields = KnownLimits.model_fields if len(loc) == 1 else KnownLimit.model_fields
        return f"unknown key (allowed: {', '.join(fields)})"
    if kind == "literal_error":
        return f"{value!r} is not {STATUS!r} (a limit this series changes is not a known limit)"
    if kind == "too_short":
        return "must not be empty (delete the file when there is no known limit)"
    if kind in ("string_pattern_mismatch", "value_error") and key in ("what", "confirmed"):
        return "must be one line of printable ASCII (llama.cpp's AGENTS.md: ASCII only)"
    if kind in ("string_pattern_mismatch", "value_error"):
        return f"{value!r} is not {_EXPECTED.get(str(key), 'a valid value')}"
    return None


def parse_yaml(
    kind: type[R], where: str, text: str, hint: Hint
) -> tuple[R, dict[tuple[Any, ...], int]]:
    """A YAML file of patches/ as `kind` (strictly) and each key's line;
    else one ConfigError (file:line: key: why)."""
    data, lines = _load_with_lines(text, where)
    try:
        return kind.model_validate(data, strict=True), lines
    except ValidationError as e:
        path, what = located(e, hint)
        raise ConfigError(
            f"{where}:{_line_for(lines, path)}: {dotted(path) or '(top level)'}: {what}"
        ) from None


def read_yaml(series_dir: Path, file: str, what: str) -> Optional[tuple[str, str]]:
    """(where, text) of a file beside the series; None when it is not there."""
    text = untrusted.read_optional(Path(series_dir) / file, what, root=series_dir)
    shown = f"{Path(series_dir).parent.name}/{Path(series_dir).name}/{file}"  # patches/<topic>/...
    return None if text is None else (shown, text)


def parse_known_limits(where: str, text: str) -> tuple[KnownLimit, ...]:
    """The file's limits, validated; one ConfigError line
    (file:line: key: what is wrong) when not."""
    doc, lines = parse_yaml(KnownLimits, where, text, _hint)
    seen: dict[str, int] = {}
    for i, item in enumerate(doc.limits):
        if item.id in seen:
            raise ConfigError(
                f"{where}:{_line_for(lines, ('limits', i, 'id'))}: limits[{i}].id: {item.id!r} "
                f"is also limits[{seen[item.id]}]'s id"
            )
        seen[item.id] = i
    return tuple(doc.limits)


def load_known_limits(series_dir: Path) -> tuple[KnownLimit, ...]:
    """patches/known-limits.yaml beside the series; none when the file is not there."""
    found = read_yaml(series_dir, FILE, "known-limits")
    return parse_known_limits(*found) if found else ()


def table(limits: tuple[KnownLimit, ...]) -> list[str]:
    """The limits as a Markdown table (ASCII, as the file holds them)."""
    if not limits:
        return []
    out = ["| id | file | function | what | status | confirmed |", "|---|---|---|---|---|---|"]
    for k in limits:
        # every value inert in its cell (publish): the file holds data, not Markdown
        cells = [
            publish.cell(k.id),
            publish.code(k.file, in_table=True),
            publish.code(k.function, in_table=True),
            publish.cell(k.what, 2_000),
            publish.cell(k.status),
            publish.cell(k.confirmed),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return out


def as_json(limits: Optional[tuple[KnownLimit, ...]]) -> list[dict[str, Any]]:
    return [k.to_json() for k in limits or ()]
