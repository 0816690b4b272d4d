"""Progress for long work: which cell, which step, how far the build is. Goes to stderr."""
from __future__ import annotations

import sys
import time
from typing import Optional

from rich.console import Console


class Reporter:
    def __init__(self, total_cells: int, console: Optional[Console] = None):
        self.console = console or Console(stderr=True, highlight=False)
        self.total = total_cells
        self.index = 0
        self.cell = ""
        self._step_t0 = 0.0
        self._last_pct = -1

    def start_cell(self, cell_id: str) -> None:
        self.index += 1
        self.cell = cell_id
        self.console.print(f"[bold]\\[{self.index}/{self.total}] {cell_id}[/bold]")

    def step(self, name: str, detail: str = "") -> None:
        self._step_t0 = time.monotonic()
        self._last_pct = -1
        self.console.print(f"  [{self.index}/{self.total}] {self.cell}: {name}" + (f" [dim]{detail}[/dim]" if detail else ""))

    def done(self, what: str) -> None:
        self.console.print(f"    {what} [dim]({time.monotonic() - self._step_t0:.1f} s)[/dim]")

    def build_progress(self, done: int, total: int) -> None:
        """Ninja's [done/total], shown every 10% (one line each, so logs stay readable)."""
        pct = done * 100 // max(total, 1)
        if pct // 10 != self._last_pct // 10 or done == total:
            self._last_pct = pct
            bar = "#" * (pct // 5) + "." * (20 - pct // 5)
            self.console.print(f"    [{bar}] {done}/{total} build steps", markup=False)

    def skip(self, reason: str) -> None:
        self.console.print(f"  [yellow]skipped:[/yellow] {reason}")

    def cell_result(self, status: str, reason: str) -> None:
        colour = {"passed": "green", "skipped": "yellow"}.get(status, "red")
        self.console.print(f"  [{colour}]{self.cell}: {status}[/{colour}] - {reason}")

    def error(self, message: str) -> None:
        print(f"ggml-patch: error: {message}", file=sys.stderr)
