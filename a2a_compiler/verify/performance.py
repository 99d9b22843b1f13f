"""Predicted all-to-all time of a lowered program (Basu et al. §2.1, §3.1.3), in link-times.

A link-time is the time one shard takes over one link (the unit of the LP's
``1/F``); a chunk is ``1/C`` of a shard.

* oneCCL and MPI path programs are turned back into schedule IR and priced by
  the IR cost model, :func:`a2a_compiler.chunk.predicted_time`: oneCCL steps
  are the schedule's time steps (sum over steps of the busiest link or
  host-NIC link); path programs run every route at once.
* MSCCL programs have no global steps: the executor moves data as soon as it
  arrives.  :func:`dataflow_performance` replays the verified messages as a
  fluid dataflow sharing each directed link and, with a host bandwidth, each
  host's egress and ingress.  No resource ever exceeds its capacity, so the
  result is never below the LP optimum.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np

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

    Fluid dataflow: a message starts once the messages it follows (its data's
    arrivals, its connection's previous message) are done, and runs at its
    link's speed scaled down by the most overloaded resource it uses — each
    directed link and, with a host bandwidth, the sending host's egress and the
    receiving host's ingress (all hops under host forwarding; only sourced /
    sunk chunks under NIC forwarding).  ``step_loads`` holds one entry: the
    busiest link's total load.
    """
    c = chunks_per_shard
    cap = (lambda e: 1.0) if capacity is None else capacity.__getitem__
    hc = None if fabric.host_bw is None else fabric.host_capacity
    nic = fabric.forwarding == "nic"
    m_count = len(moves)
    if not m_count:
        return Performance(0.0, (), (-1, -1), 0.0)
    resources: dict = {}
    res = np.full((m_count, 3), -1, dtype=np.int64)
    weight = np.zeros((m_count, 3))
    speed = np.empty(m_count)      # shards per link-time when unshared
    volume = np.empty(m_count)     # shards
    total: dict = defaultdict(float)
    for i, m in enumerate(moves):
        k = len(m.labels)
        link = (m.src, m.dst)
        volume[i], speed[i] = k / c, cap(link)
        total[link] += k / c
        uses = [(link, cap(link), 1.0)]
        if hc is not None and k:
            k_out = sum(lab[0] == m.src for lab in m.labels) if nic else k
            k_in = sum(lab[1] == m.dst for lab in m.labels) if nic else k
            uses += [(("out", m.src), hc, k_out / k), (("in", m.dst), hc, k_in / k)]
        for j, (key, capacity_r, w) in enumerate(uses):
            res[i, j] = resources.setdefault(key, (len(resources), capacity_r))[0]
            weight[i, j] = w
    res_cap = np.array([cr for _, cr in sorted(resources.values())])
    waiting = np.array([len(m.after) for m in moves])
    successors = defaultdict(list)
    for i, m in enumerate(moves):
        for a in m.after:
            successors[a].append(i)
    remaining = volume.copy()
    active = [i for i in range(m_count) if not waiting[i]]
    now = 0.0
    while active:
        act = np.array(active)
        r, w = res[act], weight[act] * speed[act, None]
        valid = r >= 0
        load = np.bincount(r[valid], weights=w[valid], minlength=len(res_cap))
        over = np.maximum(load / res_cap, 1.0)
        rate = speed[act] / np.where(valid, over[np.maximum(r, 0)], 1.0).max(axis=1)
        dt = float(np.min(remaining[act] / rate))
        now += dt
        remaining[act] -= rate * dt
        finished = act[remaining[act] <= 1e-12 * np.maximum(volume[act], 1.0)]
        finished = finished if len(finished) else act[[int(np.argmin(remaining[act] / rate))]]
        remaining[finished] = 0.0
        done = set(finished.tolist())
        active = [i for i in active if i not in done]
        for i in sorted(done):
            for j in successors[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    active.append(j)
    busiest = min(total, key=lambda e: (-total[e] / cap(e), e))
    return Performance(now, (total[busiest] / cap(busiest),), busiest, total[busiest] / cap(busiest))
