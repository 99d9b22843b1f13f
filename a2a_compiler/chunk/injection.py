"""Injection rate control for routed schedules: how many flows a NIC drives at once (Basu et al. §4, §5.5).

A routed (path) schedule runs every route at once, one flow per route (a
transport connection or queue pair).  The design source controls each
route's rate by *granular chunking*: every chunk is its own flow, so flows
sharing a link fairly give each route bandwidth in proportion to its chunks
(§4); but per-flow bandwidth fell as queue pairs multiplied (§5.5), and it
proposes time steps instead.  Two passes over a :class:`~.ir.PathSchedule`,
each usable alone:

* :func:`flow_per_chunk` — granular chunking: every chunk becomes a route of
  its own (same path and layer), so a NIC drives up to ``(N-1)·C`` flows.
* :func:`time_steps` — the routes are assigned whole to time steps so that in
  every step at most ``Q`` routes leave and at most ``Q`` arrive at every host;
  steps run one after another (a barrier between them), all routes of a step
  at once.  The schedule's time is then ``Σ_t max_r load_{t,r} / (C·cap_r)``
  (the stepped time of :mod:`.cost`).

**Step assignment** (deterministic list scheduling).  ``S0 = max_h
ceil(max(out_h, in_h) / Q)`` is the fewest steps that can hold the host with
the most routes.  For ``S = S0 .. S0 +`` :data:`EXTRA_STEPS` and two route
orders (heaviest first by the route's largest load on one resource, or by its
total load; ties by ``(src, dst, route_id)``): each route goes to the step,
among those with a free slot at its source and its destination, where its own
busiest resource is least loaded (lowest step on a tie; a route no step has
slots for opens a new step); then up to :data:`IMPROVE_PASSES` passes move
single routes to another step with free slots whenever that lowers the total
time.  The assignment with the lowest total time is kept (the first found on
a tie).  Measured on the 3×3×3 torus (NIC forwarding, MCF-extP at C = 4,
all routes at once 9.25 link-times): Q = 8 gives 9 steps and 11.5, Q = 4 17 steps and 13.5.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..errors import A2AError
from .ir import PathSchedule, cost_model

#: Local-search passes of :func:`time_steps` after each greedy assignment.
IMPROVE_PASSES = 4
#: :func:`time_steps` also tries up to this many steps more than the fewest possible.
EXTRA_STEPS = 3


def injection_control(schedule: PathSchedule, max_flows: int | None = None,
                      per_chunk: bool = False) -> PathSchedule:
    """:func:`flow_per_chunk` (if ``per_chunk``), then :func:`time_steps` (if ``max_flows``)."""
    if per_chunk:
        schedule = flow_per_chunk(schedule)
    return schedule if max_flows is None else time_steps(schedule, max_flows)


def flow_per_chunk(schedule: PathSchedule) -> PathSchedule:
    """Every chunk its own route (granular chunking, §4); route ids renumbered per pair, steps kept."""
    out, next_id = [], {}
    for r in sorted(schedule.routes, key=lambda r: (r.src, r.dst, r.route_id)):
        for k in r.chunks:
            rid = next_id.get((r.src, r.dst), 0)
            next_id[(r.src, r.dst)] = rid + 1
            out.append(dataclasses.replace(r, route_id=rid, chunks=(k,)))
    return dataclasses.replace(schedule, routes=tuple(out),
                               info={**schedule.info, "flows": "chunk"})


def _route_loads(schedule: PathSchedule):
    """Per route: the resources it uses (links, host ingress/egress) and its load on each, in time units."""
    model = cost_model(schedule)
    C = schedule.chunks_per_shard
    cap = model.capacity
    out = []
    for r in schedule.routes:
        u = np.asarray(r.nodes[:-1], dtype=np.int64)
        v = np.asarray(r.nodes[1:], dtype=np.int64)
        loads = model.step_loads(np.zeros(len(u), dtype=np.int64), model.link_index(u, v), u, v,
                                 np.full(len(u), r.src), np.full(len(u), r.dst), 1,
                                 counts=np.full(len(u), len(r.chunks)))[0]
        used = np.flatnonzero(loads)
        out.append((used, loads[used] / (C * cap[used])))
    return out, len(cap)


def _greedy(loads, R: int, src, dst, n: int, max_flows: int, steps: int, order) -> np.ndarray:
    """List scheduling: each route, in ``order``, into the step with a free slot at both ends where its own
    busiest resource is least loaded (lowest step on a tie); a route no step has slots for opens a step."""
    level = np.zeros((steps, R))
    out_used = np.zeros((steps, n), dtype=np.int64)
    in_used = np.zeros((steps, n), dtype=np.int64)
    step = np.full(len(loads), -1, dtype=np.int64)
    for i in order:
        used, w = loads[i]
        free = np.flatnonzero((out_used[:, src[i]] < max_flows) & (in_used[:, dst[i]] < max_flows))
        if not len(free):
            level = np.vstack([level, np.zeros(R)])
            out_used = np.vstack([out_used, np.zeros(n, dtype=np.int64)])
            in_used = np.vstack([in_used, np.zeros(n, dtype=np.int64)])
            free = np.array([len(level) - 1])
        reach = (level[free][:, used] + w).max(axis=1, initial=0.0)
        t = int(free[np.lexsort((free, reach))[0]])
        level[t, used] += w
        out_used[t, src[i]] += 1
        in_used[t, dst[i]] += 1
        step[i] = t
    return step


def _improve(loads, R: int, src, dst, n: int, max_flows: int, step: np.ndarray, order) -> np.ndarray:
    """Move single routes to another step with free slots while that lowers ``Σ_t max_r level``."""
    S = int(step.max()) + 1
    level = np.zeros((S, R))
    out_used = np.zeros((S, n), dtype=np.int64)
    in_used = np.zeros((S, n), dtype=np.int64)
    for i, (used, w) in enumerate(loads):
        level[step[i], used] += w
        out_used[step[i], src[i]] += 1
        in_used[step[i], dst[i]] += 1
    step = step.copy()
    for _ in range(IMPROVE_PASSES):
        moved = False
        for i in order:
            used, w = loads[i]
            t = step[i]
            before = level[t].max()
            level[t, used] -= w
            free = np.flatnonzero((out_used[:, src[i]] < max_flows) & (in_used[:, dst[i]] < max_flows))
            free = free[free != t]
            if len(free):
                top = level[free].max(axis=1)
                gain = (before - level[t].max()) - (np.maximum(top, (level[free][:, used] + w).max(axis=1)) - top)
                j = int(np.argmax(gain))
                if gain[j] > 1e-12 * max(before, 1.0):
                    out_used[t, src[i]] -= 1
                    in_used[t, dst[i]] -= 1
                    t = step[i] = int(free[j])
                    out_used[t, src[i]] += 1
                    in_used[t, dst[i]] += 1
                    moved = True
            level[t, used] += w
        if not moved:
            break
    return step


def _total(loads, R: int, step: np.ndarray) -> float:
    level = np.zeros((int(step.max()) + 1, R))
    for i, (used, w) in enumerate(loads):
        level[step[i], used] += w
    return float(level.max(axis=1).sum())


def time_steps(schedule: PathSchedule, max_flows: int) -> PathSchedule:
    """The routes of ``schedule`` in time steps with at most ``max_flows`` routes per host and direction
    (module docstring).  ``info`` gains ``max_flows``, ``steps`` and ``unstepped_time`` (all routes at once)."""
    if max_flows < 1:
        raise A2AError(f"--max-flows must be >= 1, got {max_flows}")
    routes = schedule.routes
    n = schedule.n_ranks
    loads, R = _route_loads(schedule)
    src = np.array([r.src for r in routes], dtype=np.int64)
    dst = np.array([r.dst for r in routes], dtype=np.int64)
    demand = max(int(np.bincount(src, minlength=n).max(initial=0)), int(np.bincount(dst, minlength=n).max(initial=0)))
    fewest = max(1, math.ceil(demand / max_flows))
    names = [(r.src, r.dst, r.route_id) for r in routes]
    orders = [sorted(range(len(routes)), key=lambda i: (-size(loads[i][1]), names[i])) for size in (np.max, np.sum)]
    best = None
    for steps in range(fewest, fewest + EXTRA_STEPS + 1):
        for order in orders:
            step = _improve(loads, R, src, dst, n, max_flows, _greedy(loads, R, src, dst, n, max_flows, steps, order),
                            order)
            used = np.unique(step)
            step = np.searchsorted(used, step)                   # steps left empty are dropped
            key = (_total(loads, R, step), len(used))
            if best is None or key[0] < best[0][0] - 1e-12 * key[0]:
                best = (key, step)
    (total, n_steps), step = best
    unstepped = np.zeros(R)
    for used, w in loads:
        unstepped[used] += w
    stepped = tuple(dataclasses.replace(r, step=int(t)) for r, t in zip(routes, step))
    info = {**schedule.info, "max_flows": max_flows, "steps": n_steps, "unstepped_time": float(unstepped.max())}
    return dataclasses.replace(schedule, routes=stepped, info=info)


__all__ = ["injection_control", "flow_per_chunk", "time_steps"]
