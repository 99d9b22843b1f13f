"""Path-based MCF, pMCF (Basu et al. §3.1.4, eqs. 21–24).

One variable per candidate path (:mod:`a2a_compiler.solve.paths`).  Written, like
the link LPs, in per-unit-demand form: minimise ``U`` subject to
``sum_{p ∋ e} D_p·f_p <= U·cap_e`` and ``sum_{p ∈ P(s,d)} f_p = 1``; ``F = 1/U``
(``D_p`` the volume of the path's pair under a demand matrix, else 1; pairs of
volume 0 are left out and get a min-hop route).
With a restricted path set ``F`` is a lower bound on the MCF optimum; the
certificate (dual link lengths, weak duality) bounds the *true* MCF optimum, so
``gap`` measures what the path set loses.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..fabric import Fabric
from ..topology.model import Topology
from .certificate import Routing, commodity_volume, dual_upper_bound, path_dual_upper_bound, solve_graph
from .lp import INF, solve_lp
from .mcf import DEFAULT_SOLVER, finish, pick_solver
from .paths import DEFAULT_MAX_PATHS, candidate_paths, route_links
from .result import FlowSolution


def path_lp(routing: Routing, topology: Topology, n_commodities: int, path_volume: np.ndarray | None = None):
    """``(A, row_lower, row_upper)`` of the pMCF LP; columns ``[U, f_p...]``, rows links then commodities;
    ``path_volume[p]`` (default 1) is the volume of path ``p``'s commodity."""
    E, P = topology.n_links, routing.n_paths
    on = np.ones(len(routing.links)) if path_volume is None else np.asarray(path_volume)[routing.path_of_link()]
    cap = sp.csc_array((on, (routing.links, 1 + routing.path_of_link())), shape=(E, 1 + P))
    cap = cap + sp.csc_array((-topology.capacity, (np.arange(E), np.zeros(E, np.int64))), shape=(E, 1 + P))
    dem = sp.csc_array((np.ones(P), (routing.commodity, 1 + np.arange(P))), shape=(n_commodities, 1 + P))
    A = sp.vstack([cap, dem], format="csc")
    lower = np.concatenate([np.full(E, -INF), np.ones(n_commodities)])
    upper = np.concatenate([np.zeros(E), np.ones(n_commodities)])
    return A, lower, upper


def pmcf(topology: Topology, fabric: Fabric | None = None, *, paths: str = "disjoint",
         max_paths: int = DEFAULT_MAX_PATHS, solver: str = DEFAULT_SOLVER, progress=None, demand=None) -> FlowSolution:
    """Optimal weights on a candidate path set: ``paths`` is ``disjoint``, ``shortest`` or ``ksp:K``;
    ``demand`` weights each pair's paths by its volume."""
    fabric, aug, _, _ = solve_graph(topology, fabric)
    g = aug.topology
    nh = g.n_hosts
    t0 = time.perf_counter()
    sets = candidate_paths(topology, paths, max_paths)
    pairs = sorted(sets)
    volume = commodity_volume(demand, nh)
    if volume is not None:
        pairs = [(s, d) for s, d in pairs if volume[s * nh + d] > 0]
    commodity = [s * nh + d for s, d in pairs for _ in sets[(s, d)]]
    node_paths = [p for pair in pairs for p in sets[pair]]
    candidates = route_links(aug, topology, commodity, node_paths)
    t1 = time.perf_counter()
    if progress:
        progress(f"pMCF: {candidates.n_paths} candidate paths ({paths}) in {t1 - t0:.1f} s")
    # Commodity rows are indexed s*N+d; diagonal rows stay empty, so drop them by renumbering.
    pair_row = {s * nh + d: i for i, (s, d) in enumerate(pairs)}
    rows = np.array([pair_row[k] for k in candidates.commodity.tolist()], dtype=np.int64)
    A, lower, upper = path_lp(Routing(rows, candidates.weight, candidates.ptr, candidates.links), g, len(pairs),
                              None if volume is None else volume[candidates.commodity])
    c = np.zeros(A.shape[1])
    c[0] = 1.0
    res = solve_lp(c, A, lower, upper, solver=pick_solver(solver, A.nnz), inexact_ok=True)
    t2 = time.perf_counter()
    lengths = np.abs(res.row_dual[: g.n_links])
    ub = dual_upper_bound(g, lengths, demand)
    own = path_dual_upper_bound(g, candidates, lengths, volume)
    weights = np.maximum(res.x[1:], 0.0)
    routing = candidates.select(np.flatnonzero(weights > 1e-9 * weights.max()), weights)
    timings = {"paths": t1 - t0, "lp": res.seconds, "bound": time.perf_counter() - t2}
    info = {"solver": res.solver, "lp_status": res.status, "path_set": paths, "candidate_paths": int(candidates.n_paths),
            "lp_concurrent_flow": float(1 / res.x[0]), "path_lp_upper_bound": own}
    return finish("pmcf", topology, fabric, aug, routing, ub, timings, info, paths=True, demand=demand)
