"""Abort the whole MPI job when a rank makes no progress for too long.

A dead rank or a schedule that deadlocks across ranks would otherwise leave
the others blocked forever in MPI.  The watchdog is a daemon thread: the main
thread calls :meth:`Watchdog.kick` after every completed operation; if no kick
comes within ``timeout`` seconds it prints one line and calls
``MPI_Abort`` (and, should that not return control to the launcher, exits the
process hard a few seconds later).
"""

from __future__ import annotations

import os
import sys
import threading
import time


class Watchdog:
    """``with Watchdog(seconds, comm, prog): ...``; ``seconds <= 0`` disables it."""

    EXIT_CODE = 124
    GRACE = 5.0

    def __init__(self, timeout: float, comm, prog: str):
        self.timeout, self.comm, self.prog = timeout, comm, prog
        self._deadline = time.monotonic() + timeout
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="a2a-watchdog", daemon=True)

    def __enter__(self):
        if self.timeout > 0:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        return False

    def kick(self) -> None:
        self._deadline = time.monotonic() + self.timeout

    def _watch(self) -> None:
        while not self._stop.wait(max(0.05, min(1.0, self._deadline - time.monotonic()))):
            if time.monotonic() >= self._deadline:
                print(f"{self.prog}: rank {self.comm.rank}: no progress for {self.timeout:g} s "
                      f"(a rank died or the schedule deadlocks); aborting the job", file=sys.stderr, flush=True)
                threading.Timer(self.GRACE, os._exit, (self.EXIT_CODE,)).start()
                self.comm.Abort(self.EXIT_CODE)
                return
