"""What a terminal gives the commands it starts, for tests that send them Ctrl-C."""

import signal


def sigint_default() -> None:
    """Child preexec: a shell runs background jobs (and so, maybe, this test run) with SIGINT ignored, and
    an ignored SIGINT stays ignored (Python's rule, and a2a's); give the child the default disposition a
    terminal would."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
