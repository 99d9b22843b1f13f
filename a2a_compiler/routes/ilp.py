"""ILP-disjoint / ILP-shortest: the min-congestion single-path routing (Basu et al. §5.2–5.3).

For every host pair, choose exactly one path from a candidate set — maximal
link-disjoint paths (ILP-disjoint) or all shortest paths (ILP-shortest),
:mod:`a2a_compiler.solve.paths` — so that the maximum link load ``U`` is
minimal.  It is pMCF's path LP (eqs. 21–24, :func:`a2a_compiler.solve.pmcf.path_lp`)
with binary path variables:

    minimise U  s.t.  Σ_{p ∋ e} x_p <= U·cap_e  (every link e),
                      Σ_{p ∈ P(s,d)} x_p = 1    (every pair),   x_p ∈ {0, 1}.

Built as one sparse matrix and solved by HiGHS's branch and bound
(:func:`a2a_compiler.solve.lp.solve_mip`) under a time limit, from a greedy
least-loaded start.  When every capacity is 1, the max load is an integer
number of paths, so ``U`` is declared integer too, which lets the solver
round its bound up (the LP relaxation alone is fractional: 2.5 on K_{4,4}).
``eps`` is the tolerance variant of Fig. 9: stop once the incumbent is within
a relative ``eps`` of the bound.  NP-hard: the paper's ILP-disjoint is optimal
only up to N = 44 (Fig. 7).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import A2AError
from ..fabric import Fabric
from ..solve.certificate import Routing, solve_graph
from ..solve.lp import solve_mip
from ..solve.paths import DEFAULT_MAX_PATHS, candidate_paths, route_links
from ..solve.pmcf import path_lp
from ..topology.model import Topology
from .result import RoutedPath, RouteSet

#: Default branch-and-bound time limit (seconds).
DEFAULT_TIME_LIMIT = 60.0
#: HiGHS options for the ILP.  Interior point for the MIP's LPs: the root relaxation of
#: GenKautz(81,8) minus 40 arcs (46,738 binaries) was not solved by dual simplex in 90 s but by
#: IPM in 7 s (then within eps = 0.1 at once); GenKautz(64,4) proved optimal in 5.0 s instead
#: of 14.7 s (2-core development machine, shared with other jobs).
MIP_OPTIONS = {"mip_lp_solver": "ipm"}
#: A final relative gap at most this counts as proved optimal (HiGHS's absolute gap tolerance
#: leaves ~1e-7 on integral objectives).
PROVED_GAP = 1e-6


def greedy_start(routing: Routing, pair_of_path: np.ndarray, n_pairs: int, capacity: np.ndarray) -> np.ndarray:
    """One candidate per pair, pairs in order, each the one whose busiest link would be least loaded."""
    load = np.zeros(len(capacity))
    choice = np.full(n_pairs, -1, dtype=np.int64)
    starts = np.searchsorted(pair_of_path, np.arange(n_pairs + 1))
    for k in range(n_pairs):
        best = None
        for p in range(starts[k], starts[k + 1]):
            links = routing.links[routing.ptr[p]:routing.ptr[p + 1]]
            score = (float(np.max((load[links] + 1) / capacity[links])), len(links))
            if best is None or score < best[0]:
                best = (score, p)
        choice[k] = best[1]
        load[routing.links[routing.ptr[best[1]]:routing.ptr[best[1] + 1]]] += 1
    return choice


def ilp(topology: Topology, fabric: Fabric | None = None, *, paths: str = "disjoint",
        time_limit: float = DEFAULT_TIME_LIMIT, eps: float = 0.0, max_paths: int = DEFAULT_MAX_PATHS,
        progress=None) -> RouteSet:
    """The single-path ILP over candidate set ``paths`` (``disjoint`` or ``shortest``).

    ``optimal`` is True when HiGHS proved the incumbent optimal (a stop within
    ``eps > 0`` of the bound is not a proof: ``info["within_eps"]``); ``mip_gap``
    is the final relative gap and ``bound`` HiGHS's dual bound on the time of
    any single-path routing over the candidates.
    """
    algo = f"ilp-{paths}"
    if not (time_limit > 0):
        raise A2AError(f"{algo}: --time-limit must be positive, got {time_limit}")
    if not (0 <= eps < 1):
        raise A2AError(f"{algo}: --eps must be in [0, 1), got {eps}")
    fabric, aug, _, _ = solve_graph(topology, fabric)
    g = aug.topology
    t0 = time.perf_counter()
    sets = candidate_paths(topology, paths, max_paths)
    pairs = sorted(sets)
    pair_of_path = np.repeat(np.arange(len(pairs)), [len(sets[k]) for k in pairs])
    node_paths = [p for k in pairs for p in sets[k]]
    nh = g.n_hosts
    candidates = route_links(aug, topology, [s * nh + d for s, d in pairs for _ in sets[(s, d)]], node_paths)
    A, lower, upper = path_lp(Routing(pair_of_path, candidates.weight, candidates.ptr, candidates.links), g,
                              len(pairs))
    n_cols = A.shape[1]
    live = g.capacity > 0
    integrality = np.ones(n_cols, dtype=np.int32)
    integrality[0] = int(np.all(g.capacity[live] == 1.0))   # unit capacities: U is a path count
    c = np.zeros(n_cols)
    c[0] = 1.0
    choice = greedy_start(candidates, pair_of_path, len(pairs), g.capacity)
    start = np.zeros(n_cols)
    start[1 + choice] = 1.0
    loads = candidates.select(choice, np.ones(len(node_paths))).link_loads(g.n_links)
    start[0] = float(np.max(loads[live] / g.capacity[live]))
    col_upper = np.ones(n_cols)
    col_upper[0] = np.inf
    t1 = time.perf_counter()
    if progress:
        progress(f"{algo}: {len(node_paths)} candidate paths for {len(pairs)} pairs; greedy start {start[0]:.6g}; "
                 f"branch and bound for up to {time_limit:g} s")
    res = solve_mip(c, A, lower, upper, integrality, 0.0, col_upper, time_limit=time_limit, rel_gap=eps,
                    start=start, options=MIP_OPTIONS, progress=progress)
    chosen = np.zeros(len(pairs), dtype=np.int64)
    x = res.x[1:]
    for k in range(len(pairs)):   # the path with the largest value of each pair (binary up to tolerance)
        lo, hi = np.searchsorted(pair_of_path, [k, k + 1])
        chosen[k] = lo + int(np.argmax(x[lo:hi]))
    routed = tuple(RoutedPath(s, d, node_paths[p], 1.0) for (s, d), p in zip(pairs, chosen.tolist()))
    if progress:
        progress(f"{algo}: {res.status} after {res.seconds:.1f} s, {res.nodes} nodes: max load {res.objective:.6g}, "
                 f"bound {res.bound:.6g}, gap {res.gap:.3g}")
    return RouteSet(algo, topology, fabric, routed, optimal=bool(res.optimal and res.gap <= PROVED_GAP),
                    mip_gap=res.gap, bound=res.bound,
                    timings={"paths": t1 - t0, "mip": res.seconds},
                    info={"path_set": paths, "candidate_paths": len(node_paths), "mip_status": res.status,
                          "mip_objective": res.objective, "mip_nodes": res.nodes, "eps": eps,
                          "within_eps": bool(res.optimal),
                          "time_limit": time_limit, "greedy_start": float(start[0])})


def ilp_disjoint(topology: Topology, fabric: Fabric | None = None, **options) -> RouteSet:
    """:func:`ilp` over maximal link-disjoint candidate paths."""
    return ilp(topology, fabric, paths="disjoint", **options)


def ilp_shortest(topology: Topology, fabric: Fabric | None = None, **options) -> RouteSet:
    """:func:`ilp` over all shortest candidate paths."""
    return ilp(topology, fabric, paths="shortest", **options)
