"""Known limits: what the series knowingly leaves as it is, kept by the contributor as data in
patches/known-limits.yaml and carried into the bundle's evidence (PR_BODY.md's "Additional
information", manifest.json). Not in ISSUE.md: that is the reproduction only.

    limits:
      - id: opt-i-advances-on-eval          # a slug: lowercase letters, digits, '-'
        file: ggml/src/ggml-opt.cpp         # in the series' (llama.cpp) layout
        function: ggml_opt_eval
        what: one line, ASCII
        status: not changed by this series  # the only status a known limit has
        confirmed: one line, ASCII: how it was seen

Validated on load: a malformed file is one line naming the file, the line and the key (exit 2).
Pure apart from reading the file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional

import jsonschema

from ..errors import ConfigError

FILE = "known-limits.yaml"
STATUS = "not changed by this series"
_LINE = {"type": "string", "pattern": r"^[\x20-\x7e]+\Z"}  # one line of printable ASCII
_KEYS = ("id", "file", "function", "what", "status", "confirmed")
SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["limits"],
    "additionalProperties": False,
    "properties": {
        "limits": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": list(_KEYS),
                "additionalProperties": False,
                "properties": {
                    "id": {"type": "string", "pattern": r"^[a-z0-9][a-z0-9-]*\Z"},
                    "file": {
                        "type": "string",
                        "pattern": r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*\Z",
                        "not": {"pattern": r"(^|/)\.\.(/|$)"},
                    },
                    "function": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*\Z"},
                    "what": _LINE,
                    "status": {"enum": [STATUS]},
                    "confirmed": _LINE,
                },
            },
        }
    },
}


@dataclass(frozen=True)
class KnownLimit:
    id: str
    file: str
    function: str
    what: str
    status: str
    confirmed: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _message(err: jsonschema.ValidationError) -> tuple[tuple, str]:
    path = tuple(err.absolute_path)
    v = err.validator
    if v == "additionalProperties":
        allowed = list(err.schema.get("properties", {}))
        extra = [k for k in err.instance if k not in allowed]
        return path + (extra[0] if extra else "?",), f"unknown key (allowed: {', '.join(allowed)})"
    if v == "required":
        missing = next((k for k in err.validator_value if k not in err.instance), "?")
        return path, f"key {missing!r} missing"
    if v == "enum":
        return path, f"{err.instance!r} is not {STATUS!r} (a limit this series changes is not a known limit)"
    if v == "type":
        return path, f"expected {err.validator_value}, got {type(err.instance).__name__}"
    if v == "minItems":
        return path, "must not be empty (delete the file when there is no known limit)"
    key = path[-1] if path else ""
    if v == "pattern" and err.validator_value == _LINE["pattern"]:
        return path, "must be one line of printable ASCII (llama.cpp's AGENTS.md: ASCII only)"
    expected = {
        "id": "a slug (lowercase letters, digits, '-')",
        "file": "a relative path in the series' layout",
        "function": "a C identifier",
    }.get(str(key), "a valid value")
    return path, f"{err.instance!r} is not {expected}"


def parse_known_limits(where: str, text: str) -> tuple[KnownLimit, ...]:
    """The file's limits, validated; one ConfigError line (file:line: key: what is wrong) when not."""
    from ..config import _line_for, _load_with_lines

    data, lines = _load_with_lines(text, where)
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))
    if err is not None:
        path, what = _message(err)
        dotted = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in path).replace(".[", "[")
        raise ConfigError(f"{where}:{_line_for(lines, path)}: {dotted or '(top level)'}: {what}")
    seen: dict[str, int] = {}
    for i, item in enumerate(data["limits"]):
        if item["id"] in seen:
            raise ConfigError(
                f"{where}:{_line_for(lines, ('limits', i, 'id'))}: limits[{i}].id: {item['id']!r} "
                f"is also limits[{seen[item['id']]}]'s id"
            )
        seen[item["id"]] = i
    return tuple(KnownLimit(**{k: item[k] for k in _KEYS}) for item in data["limits"])


def load_known_limits(series_dir: Path) -> tuple[KnownLimit, ...]:
    """patches/known-limits.yaml beside the series; none when the file is not there."""
    path = Path(series_dir) / FILE
    from .. import untrusted

    text = untrusted.read_optional(path, "known-limits", root=series_dir)
    if text is None:
        return ()
    return parse_known_limits(f"{Path(series_dir).name}/{FILE}", text)


def table(limits: tuple[KnownLimit, ...]) -> list[str]:
    """The limits as a Markdown table (ASCII, as the file holds them)."""
    if not limits:
        return []
    out = ["| id | file | function | what | status | confirmed |", "|---|---|---|---|---|---|"]
    for k in limits:
        cells = [k.id, f"`{k.file}`", f"`{k.function}`", k.what, k.status, k.confirmed]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return out


def as_json(limits: Optional[tuple[KnownLimit, ...]]) -> list[dict[str, str]]:
    return [k.to_json() for k in limits or ()]
