"""Lowering a routed schedule to an MPI path program (Basu et al. §4 "Path-based Schedules");
the format is :mod:`a2a_compiler.formats.mpi_paths`."""

from __future__ import annotations

from ..chunk.ir import PathSchedule, path_steps
from ..formats.mpi_paths import MpiPathProgram, PathSend
from . import demand_volumes, program_name, record_of


def lower_mpi_paths(schedule: PathSchedule, name: str | None = None) -> MpiPathProgram:
    """Lower a routed schedule to the MPI path format (Basu et al. §4 "Path-based Schedules").

    One ``send`` per route, grouped by source and ordered by (dst, route_id);
    route ids, layers, per-hop virtual channels, time steps and node sequences are kept as the earlier
    passes chose them; an all-to-allv schedule's demand volumes go into the file (each rank's row).
    """
    sends = tuple(PathSend(r.src, r.dst, r.route_id, r.layer, tuple(r.nodes), tuple(sorted(r.chunks)), r.vcs, r.step)
                  for r in sorted(schedule.routes, key=lambda r: (r.src, r.dst, r.route_id)))
    return MpiPathProgram(program_name(schedule, name), schedule.n_ranks, schedule.n_nodes,
                          schedule.chunks_per_shard, sends, record_of(schedule), demand_volumes(schedule),
                          path_steps(schedule))
