"""GitHub Actions annotations (`::error file=...,line=...,title=...::message`) for the cells that
did not pass, so a failed or skipped cell shows on the run's page, not only in its log.

Pure: results and the matrix in, workflow-command lines out; `commands/matrix.py` prints them when
GITHUB_ACTIONS is set. Each points at the target's line in matrix.yaml.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

LEVELS = {"failed": "error", "error": "error", "skipped": "warning", "build-only": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def repo_path(path: Path, workspace: Optional[str]) -> str:
    """The matrix file as the repository names it (annotations take paths relative to its root)."""
    p = Path(path)
    if workspace and p.is_absolute():
        try:
            return p.relative_to(Path(workspace).resolve()).as_posix()
        except ValueError:
            pass
    return p.as_posix()


def cell_annotations(results, matrix, workspace: Optional[str] = None) -> list[str]:
    """`results`: the run's Results (report/model.py) or its results.json dict."""
    if hasattr(results, "to_dict"):
        results = results.to_dict()
    out = []
    file = repo_path(matrix.path, workspace if workspace is not None else os.environ.get("GITHUB_WORKSPACE"))
    for cell in results.get("cells", []):
        level = LEVELS.get(cell.get("status"))
        if not level:
            continue
        target = cell.get("target") or cell["cell"].rpartition("/")[0]
        line = matrix.lines.get(("targets", target))
        title = f"ggml-patch {cell['cell']}: {cell['status']}"
        props = (
            [f"file={escape_property(file)}"] + ([f"line={line}"] if line else []) + [f"title={escape_property(title)}"]
        )
        out.append(f"::{level} {','.join(props)}::{escape_data(cell.get('reason') or cell['status'])}")
    return out
