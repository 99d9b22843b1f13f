"""Stage 5, lowering: schedule IR -> MSCCL, MSCCL++, oneCCL-style and MPI path programs (Basu et al. §4).

Each lowering builds the in-memory program of its format (:mod:`a2a_compiler.formats`);
the format's writer serialises it.  :mod:`.placement` assigns buffer slots to the
chunk moves of a link schedule, for both link lowerings.
"""

from __future__ import annotations

from ..formats.record import Record
from ..formats.xmlutil import safe_name


def program_name(schedule, name: str | None) -> str:
    """``name`` (if not empty) or ``<spec>-<method>``, as a safe ``name`` attribute; a switched topology's
    spec as the user wrote it (:func:`record_of`), not its hosts-through-switches graph's."""
    return safe_name(name or f"{schedule.info.get('switched', schedule.spec)}-{schedule.method}")


def record_of(schedule, volumes: bool = False, target: str | None = None) -> Record:
    """The :class:`~a2a_compiler.formats.record.Record` a lowered file carries: the schedule's spec, method,
    fabric, ``lp_time``, ``info["mcf_time"]`` and demand; on a switched topology (``info["switched"]``) the
    physical spec (its volumes too when ``volumes``: formats with no place of their own for them,
    MSCCL and MSCCL++); ``target``: the executor named for the file (MSCCL's ``--target``)."""
    d = schedule.demand
    demand = None  # what determines the file: the matrix up to scale (not the name it was read from)
    if d is not None:
        demand = {k: v for k, v in d.to_json_dict(max_ranks=d.n if volumes else 0).items() if k != "source"}
    spec = schedule.info.get("switched", schedule.spec)   # a switched topology's programs connect its hosts
    return Record(spec, schedule.method, schedule.fabric, schedule.lp_time, schedule.info.get("mcf_time"), demand,
                  target)


def demand_volumes(schedule) -> tuple[tuple[float, ...], ...] | None:
    """The schedule's demand volumes as the rows a program records (``None`` for the plain all-to-all)."""
    return None if schedule.demand is None else tuple(map(tuple, schedule.demand.volumes.tolist()))


from .mpi_paths import lower_mpi_paths  # noqa: E402  (after program_name, which they import)
from .msccl import lower_msccl  # noqa: E402
from .mscclpp import lower_mscclpp  # noqa: E402
from .oneccl import lower_oneccl  # noqa: E402

#: ``--emit`` name -> lowering function.
LOWERINGS = {"msccl": lower_msccl, "mscclpp": lower_mscclpp, "oneccl": lower_oneccl, "mpi": lower_mpi_paths}

__all__ = ["LOWERINGS", "lower_msccl", "lower_mscclpp", "lower_oneccl", "lower_mpi_paths", "program_name",
           "record_of"]
