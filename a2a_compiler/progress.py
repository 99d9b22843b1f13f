"""Progress lines on stderr for long-running commands.

A :class:`Progress` is a callable: ``progress("master LP: 66300 rows ...")``
prints ``[   3.2 s] master LP: 66300 rows ...`` on stderr.  Library functions
take ``progress=None`` (silent) or any callable receiving one-line messages;
a :class:`Progress` adds

* elapsed time since the command started, on every line;
* :meth:`Progress.tick` for frequent updates (LP iterations from HiGHS's
  callbacks), printed at most once per ``interval`` seconds;
* ``delay``: lines arriving before ``delay`` seconds are held and only the
  latest is printed when the delay expires, so short commands stay silent.

Progress never writes to stdout, so ``--json`` output stays clean; commands
pass ``progress=None`` under ``--quiet``.
"""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    """One-line progress messages with elapsed time, on ``stream`` (stderr)."""

    def __init__(self, *, delay: float = 0.0, interval: float = 1.0, stream=None):
        self.t0 = time.perf_counter()
        self.delay, self.interval = delay, interval
        self.stream = stream
        self.pending: str | None = None
        self.last_tick = -float("inf")
        self.lock = threading.Lock()
        self.timer = None
        if delay > 0:
            self.timer = threading.Timer(delay, self.flush)
            self.timer.daemon = True
            self.timer.start()

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def _emit(self, msg: str) -> None:
        stream = self.stream or sys.stderr
        print(f"[{self.elapsed():7.1f} s] {msg}", file=stream, flush=True)

    def __call__(self, msg: str) -> None:
        with self.lock:
            if self.elapsed() < self.delay:
                self.pending = msg
            else:
                self._emit(msg)

    def tick(self, msg: str) -> None:
        """A frequent update: printed only if ``interval`` seconds passed since the last one."""
        now = self.elapsed()
        if now - self.last_tick >= self.interval:
            self.last_tick = now
            self(msg)

    def flush(self) -> None:
        """Print the message held back by ``delay``, if any."""
        with self.lock:
            if self.pending is not None:
                self._emit(self.pending)
                self.pending = None

    def close(self) -> None:
        """Stop the delay timer; held messages are dropped (the command finished quickly)."""
        if self.timer is not None:
            self.timer.cancel()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def tick_of(progress):
    """The rate-limited variant of ``progress`` (its ``tick`` if it has one), or ``None``."""
    if progress is None:
        return None
    return getattr(progress, "tick", progress)
