"""Stage 5, lowering: schedule IR -> MSCCL, oneCCL-style and MPI path programs (Basu et al. §4).

Each lowering builds the in-memory program of its format (:mod:`a2a_compiler.formats`);
the format's writer serialises it.  :mod:`.placement` assigns buffer slots to the
chunk moves of a link schedule, for both link lowerings.
"""

from __future__ import annotations

from ..formats.record import Record
from ..formats.xmlutil import safe_name


def program_name(schedule, name: str | None) -> str:
    """``name`` or ``<spec>-<method>``, as a safe ``name`` attribute."""
    return safe_name(name if name is not None else f"{schedule.spec}-{schedule.method}")


def record_of(schedule) -> Record:
    """The :class:`~a2a_compiler.formats.record.Record` a lowered file carries: the schedule's spec, method,
    fabric, ``lp_time`` and ``info["mcf_time"]``."""
    return Record(schedule.spec, schedule.method, schedule.fabric, schedule.lp_time, schedule.info.get("mcf_time"))


from .mpi_paths import lower_mpi_paths  # noqa: E402  (after program_name, which they import)
from .msccl import lower_msccl  # noqa: E402
from .oneccl import lower_oneccl  # noqa: E402

#: ``--emit`` name -> lowering function.
LOWERINGS = {"msccl": lower_msccl, "oneccl": lower_oneccl, "mpi": lower_mpi_paths}

__all__ = ["LOWERINGS", "lower_msccl", "lower_oneccl", "lower_mpi_paths", "program_name", "record_of"]
