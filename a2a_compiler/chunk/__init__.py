"""Stage 4: chunked schedules (Basu et al. §4) and the schedule IR.

:func:`build_schedule` runs a solver and chunks its flows: ``tsmcf`` gives a
time-stepped :class:`LinkSchedule`, ``pmcf`` / ``mcf-extp`` a routed
:class:`PathSchedule`.  :func:`save_schedule` / :func:`load_schedule` read and
write the IR JSON (docs/formats.md, "Schedule IR JSON"); loading checks every
invariant (:func:`a2a_compiler.chunk.ir.validate`).
"""

from __future__ import annotations

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
    steps: int | None = None,
    solve_options: dict | None = None,
    progress=None,
) -> Schedule:
    """Solve ``topology`` under ``fabric`` with ``method`` and chunk the flows.

    ``max_chunks`` caps chunks per shard (the smallest ``C`` reaching fidelity
    0.95 is used); ``steps`` fixes tsMCF's ``l_max``; ``solve_options`` go to
    the solver; ``progress`` receives one-line messages.
    """
    if method not in SCHEDULE_METHODS:
        raise A2AError(f"unknown schedule method {method!r}; choose one of {', '.join(SCHEDULE_METHODS)}")
    options = dict(solve_options or {})
    if progress is not None:
        options.setdefault("progress", progress)
    if method == "tsmcf":
        from ..solve.tsmcf import tsmcf

        solution = tsmcf(topology, fabric, steps=steps, **options)
        return chunk_link_schedule(topology, solution, max_chunks=max_chunks, progress=progress)
    if steps is not None:
        raise A2AError(f"--steps applies to tsmcf only, not {method}")
    from ..solve import solve

    solution = solve(topology, fabric, method=method, **options)
    return chunk_path_schedule(topology, solution, max_chunks=max_chunks, progress=progress)


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
