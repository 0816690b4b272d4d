"""Cancellation: one token shared by the cells of a run. Ctrl-C or SIGTERM arrive in the main
thread; the other cells stop at their next step or build line, as if interrupted there (their
compilers are killed and a reverted tree is put back on the way out)."""

from __future__ import annotations

import threading


class CancelToken(threading.Event):
    cancel = threading.Event.set

    def check(self) -> None:
        """Raise KeyboardInterrupt once the run is cancelled (the same unwinding as Ctrl-C)."""
        if self.is_set():
            raise KeyboardInterrupt
