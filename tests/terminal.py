"""What a terminal gives the commands it starts, for tests that send them Ctrl-C."""

import os
import signal
import time


def sigint_default() -> None:
    """Child preexec: a shell runs background jobs (and so, maybe, this test run) with SIGINT ignored, and
    an ignored SIGINT stays ignored (Python's rule, and a2a's); give the child the default disposition a
    terminal would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def session_ends(p, within: float = 30) -> None:
    """Every process of ``p``'s session (a solver child, the forkserver) is gone within ``within`` s."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(p.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("a process of the stopped solve is still running")


def stop(p, sig=signal.SIGINT, timeout: float = 120):
    """Send ``sig`` to the running command ``p``; ``(stdout, rest of stderr, seconds until it ended)``."""
    try:
        p.send_signal(sig)
        t0 = time.monotonic()
        stdout, rest = p.communicate(timeout=timeout)
        return stdout, rest, time.monotonic() - t0
    finally:
        p.kill()
