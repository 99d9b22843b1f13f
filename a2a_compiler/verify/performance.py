"""Predicted all-to-all time of a lowered program (Basu et al. §2.1 / §3.1.3 time model).

Times are in link-times: the time one shard takes over one link of bandwidth
``b`` (the unit of the LP's ``1/F``).  A chunk is ``1/C`` of a shard.

* Link (time-stepped) programs: moves are grouped by hop level (the ``t``-th
  hop of the data they carry, or the oneCCL step); a level takes as long as
  its busiest link — or host–NIC link, which every hop crosses at both ends
  under host forwarding — and the levels run one after another.
* Path programs: all routes run concurrently (NIC cut-through); the time is the
  busiest link's load, host links carrying only what a host sources or sinks.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Performance:
    predicted_time: float          # link-times
    bandwidth_time: float          # busiest link over the whole run (a lower bound on any schedule's time)
    level_times: tuple[float, ...]  # per level / step (link programs)
    busiest: tuple[int, int]       # busiest link overall


def _cap(capacity, u, v):
    return 1.0 if capacity is None else capacity.get((u, v), 1.0)


def stepped_time(moves, chunks_per_shard: int, capacity=None, host_capacity: float = math.inf) -> Performance:
    """Time of a store-and-forward program from its ``(level, src, dst, chunks)`` moves."""
    c = chunks_per_shard
    per_level: dict[int, dict] = defaultdict(lambda: defaultdict(float))
    total: dict = defaultdict(float)
    for level, u, v, cnt in moves:
        per_level[level][(u, v)] += cnt / c
        total[(u, v)] += cnt / c
    times = []
    for level in sorted(per_level):
        loads = per_level[level]
        t = max(load / _cap(capacity, u, v) for (u, v), load in loads.items())
        if math.isfinite(host_capacity):
            out, inn = defaultdict(float), defaultdict(float)
            for (u, v), load in loads.items():
                out[u] += load
                inn[v] += load
            t = max(t, max(out.values()) / host_capacity, max(inn.values()) / host_capacity)
        times.append(t)
    return _finish(times, total, capacity, sum(times))


def routed_time(program, capacity=None, host_capacity: float = math.inf) -> Performance:
    """Time of an MPI path program: concurrent routes, busiest link (NIC forwarding)."""
    c = program.chunks_per_shard
    total: dict = defaultdict(float)
    out, inn = defaultdict(float), defaultdict(float)
    for s in program.sends:
        share = len(s.chunks) / c
        for u, v in zip(s.nodes, s.nodes[1:]):
            total[(u, v)] += share
        out[s.src] += share
        inn[s.dst] += share
    t = max((load / _cap(capacity, u, v) for (u, v), load in total.items()), default=0.0)
    if math.isfinite(host_capacity) and out:
        t = max(t, max(out.values()) / host_capacity, max(inn.values()) / host_capacity)
    return _finish([t], total, capacity, t)


def _finish(times, total, capacity, predicted) -> Performance:
    if not total:
        return Performance(0.0, 0.0, tuple(times), (-1, -1))
    busiest = max(total, key=lambda e: (total[e] / _cap(capacity, *e), -e[0], -e[1]))
    return Performance(predicted, total[busiest] / _cap(capacity, *busiest), tuple(times), busiest)
