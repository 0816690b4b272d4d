"""A results.json read back from disk (`bundle`, `merge-results`) is checked for the shape the
tool relies on before any of it is used: a malformed file is one line (exit 2), never a KeyError
deep inside. Target names are target names, so nothing built from them escapes its folder."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from ..errors import ConfigError

_NAME = {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z"}
_COMMIT = {"anyOf": [{"type": "string", "pattern": r"^[0-9a-f]{40}\Z"}, {"type": "null"}]}  # reaches git
_TEST = {"type": "object", "required": ["outcome"], "properties": {
    "outcome": {"type": "string"},
    "rows": {"type": ["array", "null"], "items": {"type": "object"}}}}
_CELL = {"type": "object", "required": ["cell", "target", "backend", "status", "exit_code", "reason", "timings"],
         "properties": {
    "cell": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*\Z"},
    "target": _NAME, "backend": _NAME, "layout": {"type": "string"}, "status": {"type": "string"},
    "reason": {"type": "string"}, "exit_code": {"type": "integer"}, "timings": {"type": "object"},
    "source": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
        "base_commit": _COMMIT, "upstream_commit": _COMMIT}}]},
    "patched_commit": _COMMIT,
    "training": {"type": ["object", "null"]}, "attribution": {"type": ["array", "null"]}}}
_RECORD = {"type": "object", "required": ["cell", "variant"], "properties": {
    "cell": {"type": "string"}, "variant": {"type": "string"}, "status": {"type": "string"},
    "build": {"type": "object"}, "tests": {"type": "object", "additionalProperties": _TEST},
    "verdict": {"type": ["string", "null"]}}}
SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["series", "profile", "cells", "records"], "properties": {
        "series": {"type": "object", "required": ["sha256"], "properties": {
            "sha256": {"type": "string"}, "layout": {"type": "string"}, "patches": {"type": "array"}}},
        "profile": {"type": "string"},
        "exit_code": {"type": "integer"},
        "cells": {"type": "array", "items": _CELL},
        "records": {"type": "array", "items": _RECORD}}}


def check_results(data: Any, path: Path) -> dict:
    """`data` (a parsed results.json) if it has the shape the tool wrote; else one line."""
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object; not a ggml-patch results.json")
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data))
    if err is not None:
        where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        what = err.message if len(err.message) <= 160 else err.message[:157] + "..."
        raise ConfigError(f"{path}: {where}: {what}; not a ggml-patch results.json (re-run `ggml-patch matrix`)")
    return data
