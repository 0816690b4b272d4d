"""The results model: what a run records (results.json).

Pure. The typed model (cells, variant records, test records, device rows) grows here; the run
scheduler, the report writers, merging and the bundle all read and write through it.
"""
from __future__ import annotations

from ..errors import ExitCode


def overall_exit_code(cells: list[dict]) -> ExitCode:
    """The run's exit code: the lowest non-zero cell exit code (0 when every cell is fine)."""
    codes = [c["exit_code"] for c in cells if c["exit_code"]]
    return ExitCode(min(codes)) if codes else ExitCode.OK
