"""The signals that end a command early: SIGINT (Ctrl-C), SIGTERM (``kill``, a batch system's time
limit) and SIGHUP raise :class:`Interrupted`, a :class:`KeyboardInterrupt`, in the main thread, so every
``finally`` runs on the way out: solver children are stopped, testbeds and simulated fabrics torn down,
nothing half-written is left.  A signal ignored on entry (``nohup``'s SIGHUP, the SIGINT of a shell's
background job) stays ignored, as Python itself keeps an ignored SIGINT.

Python runs a handler between any two bytecodes, also inside a finaliser or a weakref callback, where it
swallows the exception ("Exception ignored in ...").  So the first signal is also kept as *pending*:
:func:`check` raises it again, and the points that commit a result call it (every output file, the end
of each command).  A signal within :data:`ECHO` seconds of the one before changes nothing: launchers
forward to every rank the signal they got themselves, and it must not break into the clean-up the first
one started; a later one (Ctrl-C pressed again) raises again.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

#: Signals that :func:`catch` turns into :class:`Interrupted`.
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(KeyboardInterrupt):
    """One of :data:`SIGNALS` arrived; the argument is its name."""


#: The name of the first signal :func:`catch` turned into :class:`Interrupted`, until the next :func:`catch`.
pending: str | None = None
#: Seconds after a signal in which another one is taken for its echo.
ECHO = 1.0
_last = -ECHO
_deferring = 0          # depth of :func:`deferred` blocks
_held: str | None = None  # a signal that arrived in one, raised when the outermost ends


def check() -> None:
    """In the main thread, raise :class:`Interrupted` if a signal arrived (its exception may have been swallowed)."""
    if pending is not None and threading.current_thread() is threading.main_thread():
        raise Interrupted(pending)


def _unraisable(hook):
    """``sys.unraisablehook`` that drops a swallowed :class:`Interrupted` (:func:`check` raises it again)."""
    def unraisable(info):
        if not isinstance(info.exc_value, Interrupted):
            hook(info)
    return unraisable


def catch() -> dict:
    """Make each of :data:`SIGNALS` not ignored raise :class:`Interrupted` (echoes excepted); returns what it
    replaced, for :func:`restore`.  Off the main thread (where Python cannot set handlers) nothing changes.
    A forked helper that inherits the handler (pyroute2 forks) just exits, with status 128 + the signal."""
    global pending
    if threading.current_thread() is not threading.main_thread():
        return {}
    owner = os.getpid()
    if not any(getattr(signal.getsignal(s), "a2a", False) for s in SIGNALS):  # the outermost catch
        pending = None

    def handler(signum, frame):
        global pending, _last, _held
        if os.getpid() != owner:
            os._exit(128 + signum)
        now = time.monotonic()
        if pending is not None and now - _last < ECHO:
            return
        name = signal.Signals(signum).name
        pending, _last = pending or name, now
        if _deferring:
            _held = name
            return
        raise Interrupted(name)

    handler.a2a = True
    old = {s: signal.signal(s, handler) for s in SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    old["unraisablehook"] = sys.unraisablehook
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    return old


def restore(old: dict) -> None:
    """Put back what :func:`catch` replaced (a handler set from C, which Python reports as ``None``, cannot be)."""
    for s, h in old.items():
        if s == "unraisablehook":
            sys.unraisablehook = h
        elif h is not None:
            signal.signal(s, h)


@contextlib.contextmanager
def deferred():
    """Hold the signals that arrive in the body, and raise the last one when it ends: for short work that an
    exception would leave broken, such as imports (a half-built module breaks the way out) and pyroute2's
    netlink calls (its event loop then spills asyncio tracebacks when it is closed)."""
    global _deferring, _held
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
    if not _deferring and _held is not None:
        name, _held = _held, None
        raise Interrupted(name)


@contextlib.contextmanager
def signals_raise():
    """:func:`catch` for the body of a ``with`` block."""
    old = catch()
    try:
        yield
    finally:
        restore(old)
