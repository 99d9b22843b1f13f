"""Predicted all-to-all time of a lowered program (Basu et al. §2.1, §3.1.3), in link-times.

A link-time is the time one shard takes over one link (the unit of the LP's
``1/F``); a chunk is ``1/C`` of a shard.

* oneCCL and MPI path programs are turned back into schedule IR and priced by
  the IR cost model, :func:`a2a_compiler.chunk.predicted_time`: oneCCL steps
  are the schedule's time steps (sum over steps of the busiest link or
  host-NIC link); path programs run every route at once.
* MSCCL programs have no global steps: the executor moves data as soon as it
  arrives.  :func:`dataflow_performance` replays the verified messages as a
  dataflow over serial resources — each directed link, and with a host
  bandwidth each host's egress and ingress — every message starting when its
  data has arrived and its resources are free.  Every resource carries its
  load at its capacity, so the result is never below the LP optimum.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass

from ..chunk import LinkSchedule, PathSchedule, Route, Transfer, predicted_time
from ..fabric import Fabric


@dataclass(frozen=True)
class Performance:
    predicted_time: float              # link-times
    step_loads: tuple[float, ...]      # busiest link's load per step (shards / capacity)
    busiest: tuple[int, int]           # busiest link over the whole run
    busiest_load: float                # its total load (a lower bound on any schedule's time)


def _links(used, capacity):
    if capacity is not None:
        return tuple(sorted((u, v, c) for (u, v), c in capacity.items()))
    return tuple(sorted((u, v, 1.0) for u, v in used))


def _loads(steps, c, capacity):
    per_step, total = [], defaultdict(float)
    cap = (lambda e: 1.0) if capacity is None else capacity.__getitem__
    for step in steps:
        load = defaultdict(float)
        for u, v, k in step:
            load[(u, v)] += k / c
            total[(u, v)] += k / c
        per_step.append(max((x / cap(e) for e, x in load.items()), default=0.0))
    if not total:
        return tuple(per_step), (-1, -1), 0.0
    busiest = min(total, key=lambda e: (-total[e] / cap(e), e))
    return tuple(per_step), busiest, total[busiest] / cap(busiest)


def stepped_performance(moves, n_ranks: int, chunks_per_shard: int, fabric: Fabric, capacity=None) -> Performance:
    """The :class:`~a2a_compiler.verify.simulate.Move` s of a oneCCL program -> :class:`Performance`."""
    by_step: dict[int, dict] = defaultdict(lambda: defaultdict(list))
    for m in moves:
        by_step[m.step][(m.src, m.dst)].extend(m.labels)
    steps = tuple(tuple(Transfer(u, v, tuple(chs)) for (u, v), chs in sorted(by_step[t].items()))
                  for t in sorted(by_step))
    used = {(m.src, m.dst) for m in moves}
    sched = LinkSchedule(n_ranks, chunks_per_shard, steps, _links(used, capacity), "", fabric, "", 0.0)
    loads = _loads([[(tr.src, tr.dst, len(tr.chunks)) for tr in s] for s in steps], chunks_per_shard, capacity)
    return Performance(predicted_time(sched), *loads)


def routed_performance(program, fabric: Fabric, capacity=None) -> Performance:
    """An MPI path program -> :class:`Performance` (all routes concurrent)."""
    routes = tuple(Route(s.src, s.dst, s.nodes, s.route_id, s.chunks, s.layer) for s in program.sends)
    hops = [(u, v, len(s.chunks)) for s in program.sends for u, v in zip(s.nodes, s.nodes[1:])]
    sched = PathSchedule(program.nranks, program.chunks_per_shard, routes,
                         _links({(u, v) for u, v, _ in hops}, capacity), program.nnodes, "", fabric, "", 0.0)
    return Performance(predicted_time(sched), *_loads([hops], program.chunks_per_shard, capacity))


def dataflow_performance(moves, chunks_per_shard: int, fabric: Fabric, capacity=None) -> Performance:
    """The :class:`~a2a_compiler.verify.simulate.Move` s of an MSCCL program -> :class:`Performance`.

    ``step_loads`` holds one entry: the busiest link's total load.
    """
    c = chunks_per_shard
    cap = (lambda e: 1.0) if capacity is None else capacity.__getitem__
    hc = None if fabric.host_bw is None else fabric.host_capacity
    nic = fabric.forwarding == "nic"
    def needs(m):
        k = len(m.labels)
        busy = [((m.src, m.dst), k / (c * cap((m.src, m.dst))))]
        if hc is not None:
            k_out = sum(lab[0] == m.src for lab in m.labels) if nic else k
            k_in = sum(lab[1] == m.dst for lab in m.labels) if nic else k
            busy += [(("out", m.src), k_out / (c * hc)), (("in", m.dst), k_in / (c * hc))]
        return busy

    free: dict = defaultdict(float)
    total: dict = defaultdict(float)
    waiting = [len(m.after) for m in moves]
    successors = defaultdict(list)
    for i, m in enumerate(moves):
        total[(m.src, m.dst)] += len(m.labels) / c
        for a in m.after:
            successors[a].append(i)
    available = [i for i, m in enumerate(moves) if not m.after]
    events = [(0.0, -1)]  # (time, finishing move or -1 for a resource release)
    now = finished = 0.0
    while events:  # discrete-event simulation: a message starts once its data and resources are free
        now = events[0][0]
        while events and events[0][0] <= now:
            _, i = heapq.heappop(events)
            if i >= 0:
                finished = max(finished, now)
                for j in successors[i]:
                    waiting[j] -= 1
                    if not waiting[j]:
                        available.append(j)
        later = []
        for i in available:
            busy = needs(moves[i])
            if all(free[r] <= now for r, _ in busy):
                for r, d in busy:
                    free[r] = now + d
                    heapq.heappush(events, (now + d, -1))
                heapq.heappush(events, (now + max(d for _, d in busy), i))
            else:
                later.append(i)
        available = later
    if not total:
        return Performance(0.0, (), (-1, -1), 0.0)
    busiest = min(total, key=lambda e: (-total[e] / cap(e), e))
    return Performance(finished, (total[busiest] / cap(busiest),), busiest, total[busiest] / cap(busiest))
