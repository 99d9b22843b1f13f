"""The signals that end a command early: SIGINT (Ctrl-C), SIGTERM (``kill``, a batch system's time
limit) and SIGHUP raise :class:`Interrupted`, a :class:`KeyboardInterrupt`, in the main thread, so every
``finally`` runs on the way out: solver children are stopped, testbeds and simulated fabrics torn down,
nothing half-written is left.  A signal ignored on entry (``nohup``'s SIGHUP, the SIGINT of a shell's
background job) stays ignored, as Python itself keeps an ignored SIGINT.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading

#: Signals that :func:`catch` turns into :class:`Interrupted`.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """One of :data:`SIGNALS` arrived; the argument is its name."""


def catch() -> dict:
    """Make each of :data:`SIGNALS` not ignored raise :class:`Interrupted`; returns the handlers replaced, for
    :func:`restore`.  Off the main thread (where Python cannot set handlers) nothing changes.  A forked
    helper that inherits the handler (pyroute2 forks) just exits, with status 128 + the signal."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:
            os._exit(128 + signum)
        raise Interrupted(signal.Signals(signum).name)

    return {s: signal.signal(s, handler) for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}


def restore(old: dict) -> None:
    """Put back the handlers :func:`catch` replaced (one set from C, which Python reports as ``None``, cannot be)."""
    for s, h in old.items():
        if h is not None:
            signal.signal(s, h)


@contextlib.contextmanager
def signals_raise():
    """:func:`catch` for the body of a ``with`` block."""
    old = catch()
    try:
        yield
    finally:
        restore(old)
