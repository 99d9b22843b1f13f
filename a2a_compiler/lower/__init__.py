"""Stage 5, lowering: schedule IR -> MSCCL, oneCCL-style and MPI path programs (Basu et al. §4).

Each lowering builds the in-memory program of its format (:mod:`a2a_compiler.formats`);
the format's writer serialises it.  :mod:`.placement` assigns buffer slots to the
chunk moves of a link schedule, for both link lowerings.
"""

from __future__ import annotations

from ..formats.xmlutil import safe_name


def program_name(schedule, name: str | None) -> str:
    """``name`` or ``<spec>-<method>``, as a safe ``name`` attribute."""
    return safe_name(name if name is not None else f"{schedule.spec}-{schedule.method}")


def demand_volumes(schedule) -> tuple[tuple[float, ...], ...] | None:
    """The schedule's demand volumes as the rows a program records (``None`` for the plain all-to-all)."""
    return None if schedule.demand is None else tuple(map(tuple, schedule.demand.volumes.tolist()))


from .mpi_paths import lower_mpi_paths  # noqa: E402  (after program_name, which they import)
from .msccl import lower_msccl  # noqa: E402
from .oneccl import lower_oneccl  # noqa: E402

#: ``--emit`` name -> lowering function.
LOWERINGS = {"msccl": lower_msccl, "oneccl": lower_oneccl, "mpi": lower_mpi_paths}

__all__ = ["LOWERINGS", "lower_msccl", "lower_oneccl", "lower_mpi_paths", "program_name"]
