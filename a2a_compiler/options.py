"""Options that apply only to some values of another option: one rule table per command, one check.

A rule ``{"steps": ("method", ("tsmcf",))}`` says ``--steps`` applies to
``--method tsmcf`` only; :data:`GIVEN` in place of the values says an option applies
only when the other is given (``--schedules`` needs ``--jobs``), and :data:`ABSENT` only
when it is not (``--method`` does not apply with ``--jobs``).  :func:`refuse_inapplicable`
refuses, in one line naming every offending flag, the options that were given (not
``None``) where they do not apply: ``a2a solve --method mcf --paths ksp:2 --steps 7`` is an
error, not a silently ignored request.  The command line
(:func:`a2a_compiler.commands.common.applies_only`) and the library (:func:`a2a_compiler.compile`)
use the same check.
"""

from __future__ import annotations

import argparse
import numbers

from .errors import A2AError

#: dest -> (governing dest, the values of the governing option it applies to)
Rules = dict[str, tuple[str, tuple[str, ...]]]
#: "applies whenever the governing option is given" / "... is not given".
GIVEN = ("<given>",)
ABSENT = (None,)


def flag(dest: str) -> str:
    """The command-line flag of an option (``max_chunks`` -> ``--max-chunks``)."""
    return "--" + dest.replace("_", "-")


def _applies(value, allowed) -> bool:
    return value is not None if allowed == GIVEN else value in allowed


def _why(gov: str, allowed) -> str:
    return f"only with {gov}" if allowed == GIVEN else f"not with {gov}" if allowed == ABSENT else \
        f"{gov} {' / '.join(allowed)}"


def refuse_inapplicable(values: dict, rules: Rules, flags: dict[str, str] | None = None,
                        defaults: dict | None = None) -> None:
    """Raise :class:`A2AError` if an option of ``rules`` has a value (not ``None``) in ``values`` while its
    governing option's value (``defaults``' when not given) is not one it applies to.  ``flags`` names
    options whose flag is not :func:`flag` of their dest."""
    name = {**{d: flag(d) for d in values}, **(flags or {})}
    defaults = defaults or {}

    def gov_value(gov):
        v = values.get(gov)
        return defaults.get(gov) if v is None else v

    bad = [(dest, gov, allowed) for dest, (gov, allowed) in rules.items()
           if values.get(dest) is not None and not _applies(gov_value(gov), allowed)]
    if not bad:
        return
    which = ", ".join(name[d] for d, _, _ in bad)

    def context(gov, allowed):   # the situation the options were given in
        return f"without {name[gov]}" if allowed == GIVEN else f"with {name[gov]}" if allowed == ABSENT else \
            f"to {name[gov]} {gov_value(gov)}"
    if len(bad) == 1:
        (_, gov, allowed), = bad
        if allowed == GIVEN:
            raise A2AError(f"{which} applies only with {name[gov]}")
        if allowed == ABSENT:
            raise A2AError(f"{which} does not apply with {name[gov]}")
        raise A2AError(f"{which} does not apply {context(gov, allowed)} (only to {_why(name[gov], allowed)})")
    govs = dict.fromkeys(context(gov, allowed) for _, gov, allowed in bad)
    why = "; ".join(f"{name[d]}: {_why(name[gov], allowed)}" for d, gov, allowed in bad)
    raise A2AError(f"{which} do not apply {' and '.join(govs)} ({why})")


# ------------------------------------------------------------- numbers
def int_at_least(minimum: int):
    """An argparse ``type`` accepting integers >= ``minimum`` with a clear message."""
    what = {0: "a non-negative integer", 1: "a positive integer"}.get(minimum, f"an integer >= {minimum}")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = minimum - 1
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
        return value
    return parse


def fraction(text: str) -> float:
    """An argparse ``type`` for a number in (0, 1], e.g. a fidelity target."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1], got {text!r}")
    return value


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def check_numbers(values: dict, types: dict) -> None:
    """The library's keywords checked as the command line checks its options: ``types`` maps a keyword to
    its option's argparse ``type`` (:func:`int_at_least`, :func:`fraction`); a value that is not a number
    (``max_chunks="four"``), or one the option refuses, is one :class:`A2AError` naming the flag."""
    for key, parse in types.items():
        value = values.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise A2AError(f"{flag(key)}: must be a number, got {value!r}")
        try:
            parse(str(value))
        except argparse.ArgumentTypeError as exc:
            raise A2AError(f"{flag(key)}: {exc}") from None


#: The failures ``--seed`` draws (:func:`a2a_compiler.topology.puncture.puncture`).
SEEDED = ("remove_links", "remove_nodes")


def refuse_unseeded(values: dict) -> None:
    """A ``seed`` given without a failure to draw is refused (it would be ignored)."""
    if values.get("seed") is not None and not any(values.get(k) for k in SEEDED):
        raise A2AError(f"--seed applies only with {' or '.join(map(flag, SEEDED))}: it seeds the failures they draw")
