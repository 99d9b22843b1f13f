"""Stage 4: chunked schedules (Basu et al. §4) and the schedule IR.

:func:`build_schedule` runs a solver and chunks its flows: ``tsmcf`` gives a
time-stepped :class:`LinkSchedule`, ``pmcf`` / ``mcf-extp`` a routed
:class:`PathSchedule`.  :func:`save_schedule` / :func:`load_schedule` read and
write the IR JSON (docs/formats.md, "Schedule IR JSON"); loading checks every
invariant (:func:`a2a_compiler.chunk.ir.validate`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from ..errors import A2AError
from ..fabric import Fabric
from ..files import atomic_write, read_json
from ..topology.model import Topology
from .chunking import chunk_link_schedule, chunk_path_schedule
from .ir import LinkSchedule, PathSchedule, Route, Schedule, Transfer, dumps, fidelity, from_json_dict, predicted_time

#: Methods :func:`build_schedule` accepts, and the schedule kind each yields.
SCHEDULE_METHODS = {"tsmcf": "link", "mcf-extp": "path", "pmcf": "path"}
#: Largest schedule file :func:`load_schedule` accepts (bytes).
MAX_SCHEDULE_BYTES = 512 * 1024 * 1024


def build_schedule(
    topology: Topology,
    fabric: Fabric,
    method: str,
    *,
    max_chunks: int = 16,
    min_fidelity: float | None = None,
    steps: int | None = None,
    solve_options: dict | None = None,
    program_time=None,
    progress=None,
    demand=None,
    search=None,
) -> Schedule:
    """Solve ``topology`` under ``fabric`` with ``method`` and chunk the flows (Basu et al. §3, §4).

    ``max_chunks`` caps chunks per shard; the smallest ``C`` reaching
    ``min_fidelity`` is used (default: the smallest reaching 0.97, else the best;
    an explicit ``min_fidelity`` that no ``C`` reaches is an error).  ``steps``
    fixes tsMCF's ``l_max``; ``solve_options`` go to the solver (e.g. pmcf's
    ``paths``); ``program_time(schedule)`` prices a candidate as the program that
    will be emitted from it (see :func:`~a2a_compiler.chunk.chunking.choose_chunks`);
    ``progress`` receives one-line messages; ``search`` (a
    :class:`~a2a_compiler.chunk.chunking.ChunkSearch`) restricts the chunk counts and
    receives what the search saw beyond its choice.

    The schedule's ``lp_time`` is the certified bound of the method's own LP
    (:attr:`~a2a_compiler.solve.FlowSolution.lp_time`) and ``info["mcf_time"]``
    the certified link-MCF optimum of the same fabric (§3.1.1), the best any
    method can do, so both ratios are <= 1 by construction.  ``demand`` (a
    :class:`~a2a_compiler.demand.Demand`) makes it an all-to-allv: both optima are
    ``1/F(D)`` and the chunks carry the volumes (:mod:`.chunking`).
    """
    if method not in SCHEDULE_METHODS:
        raise A2AError(f"unknown schedule method {method!r}; choose one of {', '.join(SCHEDULE_METHODS)}")
    if steps is not None and method != "tsmcf":
        raise A2AError(f"--steps applies to tsmcf only, not {method}")
    from ..solve import solve

    options = dict(solve_options or {})
    if method == "tsmcf" and steps is not None:
        options["steps"] = steps
    solution = solve(topology, fabric, method, progress=progress, demand=demand, **options)
    chunk = chunk_link_schedule if SCHEDULE_METHODS[method] == "link" else chunk_path_schedule
    schedule = chunk(topology, solution, max_chunks=max_chunks, min_fidelity=min_fidelity,
                     program_time=program_time, progress=progress, search=search)
    mcf_time = (solution.lp_time if method == "mcf-extp" else
                solve(topology, fabric, "mcf-decomp", demand=solution.demand).lp_time)
    extra = {"solve_options": {k: v for k, v in options.items() if k in PMCF_OPTIONS}} if method == "pmcf" else {}
    return replace(schedule, info={**schedule.info, "mcf_time": mcf_time, **extra})


#: pmcf's options that shape its LP (its candidate paths), recorded in the IR so
#: :func:`~a2a_compiler.compiler.recertify` can solve it again.
PMCF_OPTIONS = ("paths", "max_paths")


def save_schedule(schedule: Schedule, path) -> Path:
    """Write the IR JSON atomically; same schedule -> byte-identical file."""
    return atomic_write(path, dumps(schedule))


def load_schedule(path) -> Schedule:
    """Read and validate an IR JSON file; any problem raises :class:`FormatError`."""
    return from_json_dict(read_json(path, MAX_SCHEDULE_BYTES), str(path))


__all__ = [
    "build_schedule", "save_schedule", "load_schedule", "predicted_time", "fidelity",
    "LinkSchedule", "PathSchedule", "Transfer", "Route", "SCHEDULE_METHODS",
]
