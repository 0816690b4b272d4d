"""Progress for long work (display only: cancelling a run is cancel.py's), on stderr. Cells may run
in parallel threads: each thread's cell and step live in thread-local state and every line names its
cell. On a terminal each cell's build is a live bar (ninja's
[done/total]); in CI logs a line every 10%."""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from .model.results import CellStatus
from .publish import plain
from .redact import redact

_COLOUR = {
    CellStatus.PASSED.value: "green",
    CellStatus.SKIPPED.value: "yellow",
    CellStatus.BUILD_ONLY.value: "cyan",
}


def safe(text: str) -> str:
    """A value for a progress line: no secret (the one redaction), no rich markup of its own,
    no control character (an escape sequence from a title would act on the terminal)."""
    return escape(redact(plain(str(text))))


class _Cell(threading.local):
    """The cell this thread works on: its place in the run,
    its name, its step's start, its build's bar."""

    index, name, t0, last_pct = 0, "", 0.0, -1
    task: Optional[TaskID] = None


class Reporter:
    def __init__(self, total_cells: int, console: Optional[Console] = None):
        self.console = console or Console(stderr=True, highlight=False)
        self.total = total_cells
        self._next = 0
        self._lock = threading.Lock()
        self._local = _Cell()
        self._bars: Optional[Progress] = None
        if self.console.is_terminal:
            columns = (
                TextColumn("    {task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
            )
            self._bars = Progress(*columns, console=self.console, transient=True)
        else:
            # a CI log: one line per message, never wrapped at 80 columns
            self.console.soft_wrap = True

    @property
    def _at(self) -> str:
        """The start of this thread's cell lines: its place in the run and its name."""
        return f"  [{self._local.index}/{self.total}] {safe(self._local.name)}"

    def phase(self, number: int, total: int, name: str, steps: list[str]) -> None:
        """A phase of the run starts: its steps run in every cell before the next phase."""
        self.console.print(
            f"[bold]phase {number}/{total}: {safe(name)}[/bold] "
            f"[dim]({safe(', '.join(steps))}, in every cell)[/dim]"
        )

    def start_cell(self, cell_id: str) -> int:
        """This thread's cell from now on, its header printed; its place in the run."""
        with self._lock:
            self._next += 1
            index = self._next
        self._enter(index, cell_id)
        self.console.print(f"[bold]\\[{index}/{self.total}] {safe(cell_id)}[/bold]")
        return index

    def resume_cell(self, index: int, cell_id: str, phase: str) -> None:
        """A cell started earlier goes on in `phase` (in this thread)."""
        self._enter(index, cell_id)
        self.console.print(
            f"[bold]\\[{index}/{self.total}] {safe(cell_id)}[/bold] [dim]({safe(phase)})[/dim]"
        )

    def carry(self) -> Callable[[], None]:
        """For a worker thread of this thread's cell: called there first, its lines are the
        cell's (each thread times its own steps)."""
        index, name = self._local.index, self._local.name
        return lambda: self._enter(index, name)

    def _enter(self, index: int, cell_id: str) -> None:
        self._local.index, self._local.name = index, cell_id
        self._local.task = None

    def step(self, name: str, detail: str = "") -> None:
        self._local.t0 = time.monotonic()
        self._local.last_pct = -1
        self.console.print(
            f"{self._at}: {safe(name)}" + (f" [dim]{safe(detail)}[/dim]" if detail else "")
        )

    def done(self, what: str) -> None:
        self._end_bar()
        took = time.monotonic() - (self._local.t0 or time.monotonic())
        self.console.print(f"    {safe(self._local.name)}: {safe(what)} [dim]({took:.1f} s)[/dim]")

    def build_progress(self, done: int, total: int) -> None:
        """Ninja's [done/total] for this thread's cell."""
        if self._bars is not None:
            with self._lock:
                if not self._bars.live.is_started:
                    self._bars.start()
                if self._local.task is None:
                    self._local.task = self._bars.add_task(self._local.name, total=total)
                self._bars.update(self._local.task, completed=done, total=total)
            return
        pct = done * 100 // max(total, 1)
        if pct // 10 != self._local.last_pct // 10 or done == total:
            self._local.last_pct = pct
            bar = "#" * (pct // 5) + "." * (20 - pct // 5)
            self.console.print(
                f"    {redact(self._local.name)}: [{bar}] {done}/{total} build steps", markup=False
            )

    def _end_bar(self) -> None:
        if self._bars is not None and self._local.task is not None:
            with self._lock:
                self._bars.remove_task(self._local.task)
                if not self._bars.tasks:
                    self._bars.stop()
            self._local.task = None

    def skip(self, reason: str) -> None:
        self.console.print(f"{self._at}: [yellow]skipped:[/yellow] {safe(reason)}")

    def verdict(self, text: str) -> None:
        """The cell's answer as soon as its control is judged (the mutants come after)."""
        self.console.print(f"  [bold]{safe(self._local.name)}: verdict:[/bold] {safe(text)}")

    def cell_result(self, status: str, reason: str, seconds: Optional[float] = None) -> None:
        self._end_bar()
        colour = _COLOUR.get(str(status), "red")
        took = f" [dim]({seconds:.1f} s)[/dim]" if seconds is not None else ""
        self.console.print(
            f"  [{colour}]{safe(self._local.name)}: "
            f"{safe(status)}[/{colour}] - {safe(reason)}{took}"
        )

    def cell_times(self, rows: list[tuple[str, str, float]]) -> None:
        """The end of the run: how long each cell took, in the order they ran."""
        for line in cell_time_lines(rows):
            self.console.print(safe(line))


def cell_time_lines(rows: list[tuple[str, str, float]]) -> list[str]:
    """The run's closing lines: each (cell, status, seconds)
    aligned, in the order they ran, then the total."""
    if not rows:
        return []
    width = max(len("all cells"), *(len(c) for c, _, _ in rows))
    lines = ["time per cell:"] + [f"  {c:<{width}}  {s:>7.1f} s  {status}" for c, status, s in rows]
    return lines + [f"  {'all cells':<{width}}  {sum(s for _, _, s in rows):>7.1f} s"]
