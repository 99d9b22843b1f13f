"""Predicted all-to-all time of a lowered program (Basu et al. §2.1, §3.1.3), in link-times.

A link-time is the time one shard takes over one link (the unit of the LP's
``1/F``); a chunk is ``1/C`` of a shard.  Every number comes from the one cost
model, :mod:`a2a_compiler.chunk.cost`, applied to the messages the symbolic
execution found (:class:`~a2a_compiler.verify.simulate.Move`):

* oneCCL programs: stepped execution, one step per oneCCL step (they sync);
* MPI path programs: stepped execution, every route of a time step at once (one step
  unless the file has ``nsteps``);
* MSCCL programs and MSCCL++ plans: dataflow execution (the executors have no global steps;
  an MSCCL++ put follows the puts that brought its data and the threadblock's previous put).

An all-to-allv program (a demand) weighs each chunk as the schedule IR does
(:func:`a2a_compiler.chunk.ir.chunk_weights`): a path program's chunk of pair
``(s, d)`` is ``D[s, d]/C`` of a unit, a link program's chunks are all
``u = max D/T`` of a unit.

``compile`` reports exactly these numbers for the file it writes
(:func:`program_performance`), so compile and verify always agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..chunk.cost import CostModel, Message, dataflow_time, stepped_time
from ..fabric import Fabric


@dataclass(frozen=True)
class Performance:
    """Predicted time and loads of a program."""

    predicted_time: float              # link-times
    step_loads: tuple[float, ...]      # busiest resource's time per step (MSCCL: one entry, the whole run)
    busiest: tuple[int, int]           # busiest link over the whole run
    busiest_load: float                # its total load in shards / capacity (a lower bound on any time)


def _model(pairs, n_ranks: int, fabric: Fabric, capacity) -> CostModel:
    """The program's links: the topology's (``capacity`` dict) or, without one, the used pairs at capacity 1."""
    links = sorted((u, v, c) for (u, v), c in capacity.items()) if capacity is not None else \
        sorted((u, v, 1.0) for u, v in pairs)
    return CostModel.from_links(links, n_ranks, fabric)


def _busiest(model: CostModel, loads: np.ndarray, c: int) -> tuple[tuple[int, int], float]:
    """The link with the largest total load (shards / capacity), ties to the smallest (u, v)."""
    total = loads[:, :model.n_links].sum(axis=0) / (c * model.cap) if len(loads) else np.zeros(model.n_links)
    if not total.any():
        return (-1, -1), 0.0
    e = min(range(model.n_links), key=lambda i: (-total[i], int(model.src[i]), int(model.dst[i])))
    return (int(model.src[e]), int(model.dst[e])), float(total[e])


def _stepped(model: CostModel, hops, n_steps: int, c: int, weight=None) -> Performance:
    """``hops``: rows ``(step, u, v, origin, dest, chunks)``; ``weight[o, d]`` scales a chunk of pair
    ``(o, d)`` (an all-to-allv), else 1."""
    t, u, v, o, d, k = np.array(hops, dtype=np.int64).reshape(-1, 6).T
    counts = k if weight is None else k * np.asarray(weight)[o, d]
    loads = model.step_loads(t, model.link_index(u, v), u, v, o, d, n_steps, counts=counts)
    total, per_step = stepped_time(loads, model.capacity, c)
    return Performance(total, tuple(per_step.tolist()), *_busiest(model, loads, c))


def stepped_performance(moves, n_ranks: int, chunks_per_shard: int, fabric: Fabric, capacity=None,
                        unit: float | None = None, routes=None) -> Performance:
    """A oneCCL program's moves (``step`` set) -> stepped :class:`Performance`; ``unit``: the volume of
    one chunk of an all-to-allv layout (else ``1/chunks_per_shard``); ``routes`` as for
    :func:`dataflow_performance`."""
    steps = sorted({m.step for m in moves})
    index = {t: i for i, t in enumerate(steps)}
    path = {(m.src, m.dst): (routes or {}).get((m.src, m.dst), (m.src, m.dst)) for m in moves}
    hops = [(index[m.step], u, v, o, d, 1) for m in moves for u, v in zip(path[(m.src, m.dst)], path[(m.src, m.dst)][1:])
            for o, d, _ in m.labels]
    model = _model({e for p in path.values() for e in zip(p, p[1:])}, n_ranks, fabric, capacity)
    if unit is None:
        return _stepped(model, hops, len(steps), chunks_per_shard)
    return _stepped(model, hops, len(steps), 1, np.full((n_ranks, n_ranks), unit))


def routed_performance(program, fabric: Fabric, capacity=None) -> Performance:
    """An MPI path program -> :class:`Performance` (the routes of a time step concurrent, steps in turn); an
    all-to-allv program's chunks weigh their pair's volume."""
    hops = [(s.step, u, v, s.src, s.dst, len(s.chunks)) for s in program.sends for u, v in zip(s.nodes, s.nodes[1:])]
    model = _model({(h[1], h[2]) for h in hops}, program.nranks, fabric, capacity)
    return _stepped(model, hops, program.nsteps, program.chunks_per_shard, program.volumes)


def dataflow_performance(moves, chunks_per_shard: int, fabric: Fabric, capacity=None, n_ranks: int = 0,
                         unit: float | None = None, routes=None) -> Performance:
    """An MSCCL program's moves (``after`` set) -> dataflow :class:`Performance`; ``step_loads``
    holds one entry, the busiest link's total load; ``unit`` as in :func:`stepped_performance`.
    ``routes`` (:func:`~a2a_compiler.topology.switched.switch_routes`) gives the path of a move
    between hosts joined through a switch."""
    n_ranks = max([n_ranks] + [max(m.src, m.dst) + 1 for m in moves])
    routes = routes or {}
    path = {(m.src, m.dst): routes.get((m.src, m.dst), (m.src, m.dst)) for m in moves}
    model = _model({e for p in path.values() for e in zip(p, p[1:])}, n_ranks, fabric, capacity)
    messages = [Message(m.src, m.dst, tuple(lab[0] for lab in m.labels), tuple(lab[1] for lab in m.labels), m.after,
                        path[(m.src, m.dst)]) for m in moves]
    hops = [(0, u, v, o, d, 1) for m in moves for u, v in zip(path[(m.src, m.dst)], path[(m.src, m.dst)][1:])
            for o, d, _ in m.labels]
    if unit is None:
        loads = _stepped(model, hops, 1, chunks_per_shard) if hops else None
    else:
        loads = _stepped(model, hops, 1, 1, np.full((n_ranks, n_ranks), unit)) if hops else None
    busiest = (loads.busiest, loads.busiest_load) if loads else ((-1, -1), 0.0)
    return Performance(dataflow_time(messages, model, chunks_per_shard, unit), (busiest[1],) if loads else (),
                       *busiest)


def program_performance(program, fabric: Fabric, capacity=None, trace=None, demand=None,
                        layout=None, routes=None) -> Performance:
    """The predicted time of a lowered program, as ``a2a verify`` and ``compile`` report it.

    ``capacity``: ``{(u, v): cap}`` of the topology (default: used pairs at 1);
    ``trace``: the program's symbolic execution if already done (else it is run);
    ``demand``: the all-to-allv to price.  An MSCCL file or MSCCL++ plan in the demand's buffer
    ``layout`` (:func:`~a2a_compiler.chunk.counts.msccl_counts`; neither records it) has chunks of
    ``u = max D/T``; oneCCL and MPI path files that record volumes use theirs; a plain all-to-all
    file is priced under the demand with its routes and steps unchanged (one schedule reused for
    every batch): a path's chunks weigh their pair's volume (the runtime splits each pair's bytes
    over its routes), a link program's fixed-size chunks are padded to the largest pair's volume
    (``max D / C`` each).  ``routes``: paths through switches of link-program messages between
    hosts that no link joins.  The program must be valid (the cost model needs a complete schedule).
    """
    from dataclasses import replace

    from ..chunk.ir import link_chunk_volume
    from ..formats import MpiPathProgram, MscclppProgram, MscclProgram
    from . import simulate

    if isinstance(program, MpiPathProgram):
        if demand is not None and program.volumes is None:
            program = replace(program, volumes=tuple(map(tuple, demand.volumes.tolist())))
        return routed_performance(program, fabric, capacity)
    if isinstance(program, (MscclProgram, MscclppProgram)):
        plan = isinstance(program, MscclppProgram)
        n = program.nranks if plan else program.ngpus
        unit = None
        if layout is not None:
            unit = link_chunk_volume(demand.volumes, layout)
        elif demand is not None:
            unit = float(demand.volumes.max()) / (program.chunks_per_shard if plan else program.nchunksperloop // n)
        trace = trace or (simulate.simulate_mscclpp(program, launches=1, counts=layout) if plan
                          else simulate.simulate_msccl(program, layout))
        return dataflow_performance(trace.moves, trace.chunks_per_shard, fabric, capacity, n, unit, routes)
    trace = trace or simulate.simulate_oneccl(program)
    unit = None
    if program.chunk_counts is not None:
        unit = link_chunk_volume(np.array(program.volumes), program.counts())
    elif demand is not None:
        unit = float(demand.volumes.max()) / program.chunks_per_shard
    return stepped_performance(trace.moves, program.nranks, program.chunks_per_shard, fabric, capacity, unit, routes)
