"""Options that apply only to some values of another option: one rule table per command, one check.

A rule ``{"steps": ("method", ("tsmcf",))}`` says ``--steps`` applies to
``--method tsmcf`` only.  :func:`refuse_inapplicable` refuses, in one line naming
every offending flag, the options that were given (not ``None``) where they do
not apply: ``a2a solve --method mcf --paths ksp:2 --steps 7`` is an error, not
a silently ignored request.  The command line (:func:`a2a_compiler.commands.common.applies_only`)
and the library (:func:`a2a_compiler.compile`) use the same check.
"""

from __future__ import annotations

from .errors import A2AError

#: dest -> (governing dest, the values of the governing option it applies to)
Rules = dict[str, tuple[str, tuple[str, ...]]]


def flag(dest: str) -> str:
    """The command-line flag of an option (``max_chunks`` -> ``--max-chunks``)."""
    return "--" + dest.replace("_", "-")


def refuse_inapplicable(values: dict, rules: Rules, flags: dict[str, str] | None = None) -> None:
    """Raise :class:`A2AError` if an option of ``rules`` has a value (not ``None``) in ``values`` while its
    governing option's value is not one it applies to.  ``flags`` names options whose flag is not
    :func:`flag` of their dest."""
    name = {**{d: flag(d) for d in values}, **(flags or {})}
    bad = [(dest, gov, allowed) for dest, (gov, allowed) in rules.items()
           if values.get(dest) is not None and values.get(gov) not in allowed]
    if not bad:
        return
    govs = dict.fromkeys(f"{name[gov]} {values.get(gov)}" for _, gov, _ in bad)
    which = ", ".join(name[d] for d, _, _ in bad)
    if len(bad) == 1:
        (_, gov, allowed), = bad
        raise A2AError(f"{which} does not apply to {' and '.join(govs)} (only to {name[gov]} {' / '.join(allowed)})")
    why = "; ".join(f"{name[d]}: {name[gov]} {' / '.join(allowed)}" for d, gov, allowed in bad)
    raise A2AError(f"{which} do not apply to {' and '.join(govs)} ({why})")
