"""GitHub Actions annotations (`::error file=...,line=...,title=...::message`) for the cells that
did not pass, so a failed or skipped cell shows on the run's page, not only in its log.

Pure; `commands/matrix.py` prints them when GITHUB_ACTIONS is set.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from ..config import Matrix
    from ..model.results import Results

LEVELS = {"failed": "error", "error": "error", "skipped": "warning", "build-only": "notice"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def repo_path(path: Path, workspace: Optional[str]) -> str:
    """The matrix file as the repository names it (annotations take paths relative to its root)."""
    p, root = Path(path), Path(workspace).resolve() if workspace else None
    return (
        p.relative_to(root) if root and p.is_absolute() and p.is_relative_to(root) else p
    ).as_posix()


def cell_annotations(
    results: Results, matrix: Matrix, workspace: Optional[str] = None
) -> list[str]:
    """One workflow command per cell that did not pass, on the matrix file's line of its target."""
    out = []
    file = repo_path(
        matrix.path, workspace if workspace is not None else os.environ.get("GITHUB_WORKSPACE")
    )
    for cell in results.cells:
        level = LEVELS.get(cell.status.value)
        if not level:
            continue
        line = matrix.lines.get(("targets", cell.target))
        title = escape_property(f"ggml-patch {cell.cell}: {cell.status}")
        props = [
            f"file={escape_property(file)}",
            *([f"line={line}"] if line else []),
            f"title={title}",
        ]
        out.append(f"::{level} {','.join(props)}::{escape_data(cell.reason or str(cell.status))}")
    return out
