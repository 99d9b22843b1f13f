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


#: Most characters / items of an input value an error message repeats (a route can have 400 000 hops).
ECHO_CHARS = 60
ECHO_ITEMS = 8


def echo(value: str) -> str:
    """``value`` quoted for an error message: whole when short, else its start and its length."""
    if len(value) <= ECHO_CHARS:
        return repr(value)
    return f"{value[:ECHO_CHARS]!r}... ({len(value)} characters)"


def echo_items(items, unit: str = "items", sep: str = " ") -> str:
    """A sequence for an error message, joined by ``sep``: whole when short, else its first items and its length."""
    shown = sep.join(map(str, items[:ECHO_ITEMS]))
    return shown if len(items) <= ECHO_ITEMS else f"{shown}{sep}... ({len(items)} {unit})"
