"""A bundle's manifest.json is untrusted input (it comes from disk, maybe from someone else):
every field `pr` uses is validated before use. Commits are 40-hex ids, the target is a target
name (never '.', '..' or a path), file names stay inside the bundle folder, digests are sha256,
URLs are URLs. One line on the first problem (exit 2), before anything is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from ..errors import ConfigError
from ..urls import git_url_problem

_SHA1 = {"type": "string", "pattern": r"^[0-9a-f]{40}\Z"}
_SHA256 = {"type": "string", "pattern": r"^[0-9a-f]{64}\Z"}
_TARGET = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z"}
_FILE = r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z"  # a plain file name: no '/', no '..', no leading '-' or '.'

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["target", "files"],  # `pr` says itself when the base commits are missing
    "properties": {
        "target": _TARGET,
        "layout": {"type": "string", "pattern": r"^[A-Za-z0-9._-]+\Z"},
        "base": {
            "type": "object",
            "properties": {
                "snapshot_commit": _SHA1,
                "upstream_commit": {"anyOf": [_SHA1, {"type": "null"}]},
                "description": {"type": ["string", "null"]},
                "source": {"type": ["object", "null"]},
            },
        },
        "patched_commit": _SHA1,
        "series": {
            "type": "object",
            "properties": {
                "sha256": _SHA256,
                "patches": {"type": "array", "items": {"type": "string", "pattern": _FILE}},
            },
        },
        "files": {
            "type": "object",
            "minProperties": 1,
            "propertyNames": {"pattern": _FILE},
            "additionalProperties": _SHA256,
        },
    },
}

_WHAT = {
    "target": "a target name (letters, digits, '.', '_', '-'; not '.' or '..')",
    "snapshot_commit": "a full 40-hex commit id",
    "upstream_commit": "a full 40-hex commit id or null",
    "patched_commit": "a full 40-hex commit id",
    "files": "file names inside the bundle folder, each with its sha256",
}


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "(top level)"


def validate(man: Any, mpath: Path) -> dict:
    """`man` if every field is what `ggml-patch bundle` writes; else one line naming the field."""
    if not isinstance(man, dict):
        raise ConfigError(f"{mpath}: expected a JSON object; not a ggml-patch bundle manifest")
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(man))
    if err is not None:
        path = list(err.absolute_path)
        if err.validator == "propertyNames":
            path.append(err.instance)
        field = next((str(p) for p in reversed(path) if str(p) in _WHAT), None) or (str(path[0]) if path else "")
        want = _WHAT.get(field, err.message)
        if err.validator == "required":
            raise ConfigError(f"{mpath}: {_where(path)}: {err.message}; not a ggml-patch bundle manifest")
        raise ConfigError(
            f"{mpath}: {_where(path)}: {_short(err.instance)} is not {want}; "
            "refusing a tampered or foreign bundle (re-run `ggml-patch bundle`)"
        )
    source = (man.get("base") or {}).get("source") or {}
    url = source.get("url") if isinstance(source, dict) else None
    if url is not None:
        why = git_url_problem(url) if isinstance(url, str) else "expected a URL"
        if why:
            raise ConfigError(f"{mpath}: base.source.url: {_short(url)} {why}; refusing a tampered or foreign bundle")
    return man


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
