"""User-facing errors.

Every problem caused by the user's input (a bad spec, an infeasible fabric, a
malformed file) raises :class:`A2AError`.  The CLI prints its message and exits
nonzero without a traceback; anything else is a bug and keeps its traceback.
"""


class A2AError(Exception):
    """A problem with the user's input, reported as a one-line message."""


class SpecError(A2AError):
    """An unknown topology family or a parameter that breaks its family's rule."""


class DisconnectedError(A2AError):
    """The (possibly punctured) topology does not connect every pair of hosts."""


class FormatError(A2AError):
    """A malformed or hostile input file (topology, solution, schedule, XML)."""
