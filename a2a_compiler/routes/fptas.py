"""FPTAS: Garg–Könemann maximum concurrent flow with Karakostas's per-source trees.

Garg & Könemann 1998 (§5, maximum concurrent flow) as sped up by Karakostas
2008 ("Faster approximation schemes for fractional multicommodity flow
problems", §3), the FPTAS of Basu et al. Fig. 7 / Fig. 8:

* link lengths start at ``δ / cap_e`` with ``δ = (m / (1 - ε))^(-1/ε)``
  (``m`` links);
* a *phase* routes every commodity's demand once.  Commodities are grouped by
  source: for source ``s``, a shortest-path tree under the current lengths
  carries the remaining demand of all its destinations at once, scaled down so
  that no tree link carries more than its capacity in one step; each link's
  length is multiplied by ``1 + ε · (flow on it) / cap_e``; repeat until the
  source's demand of the phase is routed (Karakostas: one tree per step for
  all commodities of a source instead of one path per commodity);
* the algorithm stops when ``D(l) = Σ_e cap_e · l_e >= 1``.  The flow, scaled to
  be feasible, is then within ``(1 - ε)^-3`` of optimal.

Demands are first scaled by the all-to-all time of the shortest-path routing
(an upper bound on the optimum), so the optimum of the scaled problem is at
least 1, as the phase count analysis needs; should it still exceed 2 after the
phases that would reach ``D >= 1`` at optimum 2, demands are doubled (Garg &
Könemann's doubling).

The dual side certifies the result at any moment: for the current lengths
``l``, weak duality gives ``F* <= D(l) / Σ_{s≠d} dist_l(s, d)`` (the same bound
as :func:`a2a_compiler.solve.certificate.dual_upper_bound`), so ``bound = 1/that``
is a certified lower bound on the optimal all-to-all time.  The run also stops
as soon as the primal flow is certified within ``ε`` (time ``<= bound / (1 - ε)``),
usually long before ``D >= 1``.  The per-source flows are decomposed into
weighted paths (:func:`a2a_compiler.solve.certificate.decompose_flow`).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..fabric import Fabric
from ..numeric import dot, shortest_path_tree
from ..solve.certificate import Routing, decompose_flow, solve_graph
from ..solve.mcf import finish
from ..topology.model import Topology
from .result import RouteSet

#: Default accuracy (Basu et al. Fig. 7 runs the FPTAS at ε = 0.05).
DEFAULT_EPS = 0.05
#: Certify (one all-sources Dijkstra) every this many phases.
CERTIFY_EVERY = 5


def _tree_flow(pred: np.ndarray, dist: np.ndarray, demand: np.ndarray) -> np.ndarray:
    """Flow into every node on its tree link when each node ``v`` sinks ``demand[v]`` (subtree sums)."""
    sub = demand.copy()
    for v in np.argsort(-dist, kind="stable").tolist():   # leaves first
        p = pred[v]
        if p >= 0:
            sub[p] += sub[v]
    return sub


#: The smallest log δ: δ stays far from underflow, with room for the lengths' δ / capacity.
MIN_LOG_DELTA = -650.0


def fptas(topology: Topology, fabric: Fabric | None = None, *, eps: float = DEFAULT_EPS, early_stop: bool = True,
          max_phases: int | None = None, progress=None) -> RouteSet:
    """Approximate max concurrent flow to within ``eps`` (module docstring); weighted paths per pair.

    ``lp_time`` is the all-to-all time of the returned fractional flow (before
    chunking), ``bound`` the best certified lower bound on the optimal time;
    ``info`` has the phase count, why the run stopped and the certified ratio.
    ``early_stop=False`` runs to Garg–Könemann's ``D(l) >= 1`` stopping rule.
    """
    if not (0 < eps < 1):
        raise A2AError(f"fptas: --eps must be in (0, 1), got {eps}")
    fabric, aug, _, _ = solve_graph(topology, fabric)
    g = aug.topology
    t0 = time.perf_counter()
    n, nh = g.n_nodes, g.n_hosts
    live = np.flatnonzero(g.capacity > 0)
    src, dst, cap = g.src[live], g.dst[live], g.capacity[live]
    m = len(live)
    key = src * n + dst

    def lengths_graph(l):
        return sp.csr_array((l, (src, dst)), shape=(n, n))

    # Shortest-path routing time: an upper bound T0 on the optimal time, so demands 1/T0 have optimum >= 1.
    trees = [shortest_path_tree(n, src, dst, np.ones(m), s) for s in range(nh)]
    dist0, hops = np.array([t[0] for t in trees]), np.array([t[1] for t in trees])
    load = np.zeros(m)
    sink = np.zeros(n)
    sink[:nh] = 1.0
    for s in range(nh):
        sink[s] = 0.0
        flow = _tree_flow(hops[s], dist0[s], sink)
        sink[s] = 1.0
        v = np.flatnonzero(hops[s] >= 0)
        np.add.at(load, np.searchsorted(key, hops[s][v] * n + v), flow[v])
    t_sp = float(np.max(load / cap))
    demand = 1.0 / t_sp

    log_delta = -math.log(m / (1 - eps)) / eps
    if log_delta < MIN_LOG_DELTA:  # δ would underflow: every length 0
        smallest = math.log(m) / -MIN_LOG_DELTA
        raise A2AError(f"fptas: --eps {eps:g} is too small for {m} links: the initial length "
                       f"δ = (m/(1-ε))^(-1/ε) = e^{log_delta:.0f} underflows; use --eps {smallest * 1.01:.2g} or more")
    delta = math.exp(log_delta)
    l = delta / cap
    log_scale = math.log(1 / delta) / math.log1p(eps)   # log_{1+ε}(1/δ): phases at optimum 1
    X = np.zeros((nh, m))                                # per-source flow on every link
    routed = 0.0                                         # flow per commodity so far (original units)
    best_bound, phases, stop = 0.0, 0, "D(l) >= 1"
    limit = max_phases if max_phases is not None else 10 * int(math.ceil(2 * log_scale))
    doubled_at = 2 * log_scale
    while True:
        for s in range(nh):
            remaining = demand
            sink[s] = 0.0
            while remaining > 1e-15 * demand:
                dist, pred = shortest_path_tree(n, src, dst, l, s)
                sub = _tree_flow(pred, dist, sink * remaining)
                v = np.flatnonzero((pred >= 0) & (sub > 0))           # tree links that carry flow
                e = np.searchsorted(key, pred[v] * n + v)
                f = sub[v]
                scale = min(1.0, float(np.min(cap[e] / f)))
                X[s, e] += scale * f
                l[e] *= 1 + eps * scale * f / cap[e]
                remaining -= scale * remaining
            sink[s] = 1.0
        phases += 1
        routed += demand
        D = dot(cap, l)
        if phases % CERTIFY_EVERY == 0 or D >= 1 or phases >= limit:
            alpha = float(csgraph.dijkstra(lengths_graph(l), indices=np.arange(nh))[:, :nh].sum())
            best_bound = max(best_bound, alpha / D)        # time >= Σ dist / D for any lengths
            time_now = float(np.max(X.sum(axis=0) / cap)) / routed
            if progress and phases % (10 * CERTIFY_EVERY) == 0:
                progress(f"fptas: phase {phases}, time {time_now:.6g}, certified bound {best_bound:.6g}")
            if early_stop and time_now <= best_bound / (1 - eps):
                stop = "certified within eps"
                break
        if D >= 1:
            break
        if phases >= limit:
            stop = "phase limit"
            break
        if phases >= doubled_at:                           # optimum of the scaled problem above 2
            demand *= 2
            doubled_at += log_scale
    t1 = time.perf_counter()
    # Decompose each source's flow into paths; every destination received `routed` units.
    delivered = np.zeros(n)
    delivered[:nh] = routed
    full = np.zeros(g.n_links)
    parts = []
    for s in range(nh):
        full[:] = 0.0
        full[live] = X[s]
        delivered[s] = 0.0
        parts.append(decompose_flow(g, s, full, delivered))
        delivered[s] = routed
    routing = Routing.concat(parts)
    timings = {"phases": t1 - t0, "decompose": time.perf_counter() - t1}
    ub_flow = 1.0 / best_bound if best_bound > 0 else math.inf
    info = {"eps": eps, "phases": phases, "stop": stop, "delta": delta, "shortest_path_time": t_sp}
    sol = finish("fptas", topology, fabric, aug, routing, ub_flow, timings, info, paths=True)
    info["certified_ratio"] = sol.a2a_time / best_bound if best_bound > 0 else None
    return RouteSet.from_solution("fptas", topology, sol, lp_time=sol.a2a_time,
                                  bound=best_bound if best_bound > 0 else None, info=info)
