"""Link-based maximum concurrent multicommodity flow (Basu et al. §3.1.1, eqs. 1–5).

The exact reference: one flow variable per (commodity, link).  Conservation and
demand are written compactly (as the paper notes) as one block matrix — the
node–link incidence matrix times each commodity's link-flow vector against the
demand matrix scaled by ``F`` — and handed to HiGHS in one call.  Host–NIC
bottlenecks are handled by solving on :func:`a2a_compiler.fabric.augment`'s graph.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from ..fabric import Fabric
from ..topology.model import Topology
from .certificate import (Routing, certified_flow, commodity_volume, conservation_error, decompose_commodities,
                          dual_upper_bound, solve_graph, with_fallback)
from .first_order import solve_certified
from .gpu import unavailable
from .lp import FIRST_ORDER, INF, solve_lp
from .result import FlowSolution
from .symmetry import Symmetry

#: Default solver choice for the flow LPs: see :func:`pick_solver`.
DEFAULT_SOLVER = "auto"
#: Above this many nonzeros ``auto`` switches from IPM to PDLP.  Measured on the
#: plain GenKautz d=4 master LP (no symmetry): N=256 (0.8M nonzeros) ipm 31 s,
#: pdlp 25 s; N=512 (3.1M) ipm 445 s, pdlp 239 s; N=64: simplex 3.6 s, ipm 0.33 s, pdlp 0.5 s.
PDLP_ABOVE_NNZ = 2_000_000


def pick_solver(solver: str, nnz: int, progress=None, label: str = "LP") -> str:
    """Resolve ``"auto"`` for a flow LP: interior point (certified gap ~1e-8) up to
    :data:`PDLP_ABOVE_NNZ` nonzeros; above, a first-order solver certified by :mod:`.first_order`'s
    schedule: cuPDLPx when it imports and a CUDA device answers (:func:`.gpu.unavailable`), else PDLP,
    with one ``progress`` line saying why not on the GPU."""
    if solver != "auto":
        return solver
    if nnz <= PDLP_ABOVE_NNZ:
        return "ipm"
    why = unavailable()
    if why is None:
        return "cupdlpx"
    if progress:
        progress(f"{label}: not on a GPU ({why}); solving with pdlp")
    return "pdlp"


def flow_lp(topology: Topology, sources: np.ndarray, sinks, capacity: np.ndarray | None = None,
            symmetry: Symmetry | None = None):
    """Constraint matrix of the concurrent-flow LP in per-unit-demand form.

    Commodity ``k`` leaves ``sources[k]`` and delivers ``sinks[k, u]`` units to node
    ``u`` (``sinks`` is a sparse ``K x n_nodes`` array).  Columns are
    ``[U, f_0, ..., f_{K-1}]`` with ``f_k`` the commodity's link flows; rows are

    * capacity rows ``sum_k f_{k,e} - U·cap_e <= 0`` (eq. 2 / 7), one per link, or
      with ``symmetry`` one per link orbit, where ``f_{k,e}`` counts
      ``link_mult[e]`` times in the row of its orbit (the quotient LP of
      :mod:`~a2a_compiler.solve.symmetry`; ``sources`` are then the orbit
      representatives), then
    * ``K·(n-1)`` conservation rows, for every node ``u != sources[k]``: the
      compact incidence form ``in_u(f_k) - out_u(f_k) = sinks[k, u]`` (eqs. 3–4 / 8;
      the source's own row is implied and omitted).

    Minimising ``U`` is the max-concurrent-flow LP (eqs. 1–5 / 6–9) rescaled by
    ``f -> f/F``: ``F = 1/U``.  Fixed right-hand sides instead of a column ``F``
    touching every conservation row keep the LP sparse; interior-point time drops
    about 5x (tools/bench_solve.py).  Returns ``(A, row_lower, row_upper)``.
    """
    n, E = topology.n_nodes, topology.n_links
    sources = np.asarray(sources, dtype=np.int64)
    K = len(sources)
    cap = topology.capacity if capacity is None else np.asarray(capacity, dtype=float)
    if symmetry is None:
        link_row, mult, row_cap = np.arange(E), np.ones(E), cap
    else:
        link_row, mult, row_cap = symmetry.link_class, symmetry.link_mult, cap[symmetry.class_link]
    C = len(row_cap)
    rb = np.concatenate([topology.dst, topology.src])
    cb = np.concatenate([np.arange(E), np.arange(E)])
    vb = np.concatenate([np.ones(E), -np.ones(E)])
    k = np.repeat(np.arange(K), len(rb))
    r = np.tile(rb, K)
    s = sources[k]
    keep = r != s
    rows = [(C + k * (n - 1) + r - (r > s))[keep], np.arange(C), np.tile(link_row, K)]
    cols = [(1 + k * E + np.tile(cb, K))[keep], np.zeros(C, np.int64), 1 + np.arange(K * E)]
    vals = [np.tile(vb, K)[keep], -row_cap, np.tile(mult, K)]
    A = sp.csc_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                     shape=(C + K * (n - 1), 1 + K * E))
    sinks = sp.coo_array(sinks)
    ks, us = sinks.row.astype(np.int64), sinks.col.astype(np.int64)
    rhs = np.zeros(K * (n - 1))
    np.add.at(rhs, ks * (n - 1) + us - (us > sources[ks]), sinks.data)
    lower = np.concatenate([np.full(C, -INF), rhs])
    upper = np.concatenate([np.zeros(C), rhs])
    return A, lower, upper


def solve_flow_lp(topology: Topology, sources: np.ndarray, sinks, *, solver: str, progress=None,
                  symmetry: Symmetry | None = None, label: str = "LP", certify=None):
    """Minimise congestion ``U`` over :func:`flow_lp` (``solver`` via :func:`pick_solver`).

    Returns ``(U, flows K x E, dual link lengths, LPResult, build seconds, certificate)``; the
    solver actually used is ``LPResult.solver``.  With ``symmetry`` the lengths
    are its orbit duals spread over the links (:meth:`Symmetry.lengths`).  A first-order solver
    (:data:`~.lp.FIRST_ORDER`) with ``certify`` (``(flows, lengths) -> (F, bound, routing)``) runs
    :func:`~.first_order.solve_certified`'s tolerance schedule, and ``certificate`` is its
    ``(routing, bound, info)``; otherwise ``None``.
    """
    t0 = time.perf_counter()
    A, lower, upper = flow_lp(topology, sources, sinks, symmetry=symmetry)
    build = time.perf_counter() - t0
    solver = pick_solver(solver, A.nnz, progress, label)
    if progress:
        progress(f"{label}: {A.shape[0]} rows, {A.shape[1]} columns, {A.nnz} nonzeros; solving with {solver}")
    c = np.zeros(A.shape[1])
    c[0] = 1.0
    E = topology.n_links
    C = E if symmetry is None else symmetry.n_classes

    def solve_at(tolerance=None, start=None):
        res = solve_lp(c, A, lower, upper, solver=solver, inexact_ok=True, tolerance=tolerance, start=start,
                       label=label, progress=progress)
        if progress:
            on_gpu = f", {res.device_seconds:.1f} s on the GPU" if res.device_seconds is not None else ""
            progress(f"{label}: solved in {res.seconds:.1f} s{on_gpu} ({res.iterations} iterations), "
                     f"F = {1 / res.x[0]:.9g}")
        flows = res.x[1:].reshape(len(sources), E)
        duals = res.row_dual[:C]
        lengths = np.abs(duals) if symmetry is None else symmetry.lengths(duals)
        return res.x[0], flows, lengths, res, build

    if certify is not None and solver in FIRST_ORDER:
        return solve_certified(solve_at, certify, progress=progress, label=label)
    return *solve_at(), None


def certify_routing(routing: Routing, graph: Topology, demand=None) -> tuple[Routing, float]:
    """The primal certificate of a routing on the solve graph: pairs of volume 0 given a min-hop route, every
    pair's weights normalised to its demand, and ``F`` recomputed from the paths against every capacity."""
    volume = commodity_volume(demand, graph.n_hosts)
    if volume is not None:
        routing = with_fallback(routing, graph, volume)
    routing = routing.normalised(graph.n_hosts)
    F, _ = certified_flow(routing, graph, volume)
    return routing, F


def lp_info(res, certified: dict) -> dict:
    """What a solve's JSON says of a first-order LP: the schedule's ``certified`` info and the GPU seconds."""
    gpu = {} if res.device_seconds is None else {"lp_device_seconds": res.device_seconds}
    return {**certified, **gpu}


def finish(method: str, base: Topology, fabric: Fabric, aug, routing: Routing, upper_bound: float,
           timings: dict, info: dict, paths: bool = False, demand=None) -> FlowSolution:
    """Normalise a routing, certify its ``F`` on the solve graph, project flows to the base links.

    The certificate is numeric: loads are recomputed from the paths against every
    capacity of the solve graph (host–NIC links included), each commodity weighted
    by its volume under ``demand`` (pairs of volume 0 get a min-hop route first), and
    the projected flows are checked for conservation.
    """
    t0 = time.perf_counter()
    g = aug.topology
    routing, F = certify_routing(routing, g, demand)
    flows = routing.link_flow_matrix(g.n_hosts, aug.link_origin, base.n_links)
    error = conservation_error(flows, base)
    if error > 1e-9:  # paths conserve by construction: this would be a bug, not bad input
        raise RuntimeError(f"{method}: per-commodity flows violate conservation by {error:.3g}")
    weighted = ()
    if paths:
        from .result import WeightedPath

        weighted = tuple(
            WeightedPath(int(k) // g.n_hosts, int(k) % g.n_hosts, nodes, float(w))
            for k, w, nodes in zip(routing.commodity, routing.weight, routing.node_paths(g, aug.node_origin))
        )
    timings = {**timings, "certify": time.perf_counter() - t0}
    if F * (1 - 1e-9) <= upper_bound < F:
        upper_bound = F  # rounding in the bound's arithmetic; the certificate holds to 1e-9
    return FlowSolution(
        method=method, spec=base.spec, fabric=fabric, n_hosts=base.n_hosts, n_links=base.n_links,
        concurrent_flow=float(F), upper_bound=float(upper_bound),
        status="optimal" if info.get("lp_status", "Optimal") == "Optimal" else "certified (inexact LP)",
        timings=timings, link_flows=flows, paths=weighted, info={**info, "conservation_error": error}, demand=demand,
    )


def mcf(topology: Topology, fabric: Fabric | None = None, *, solver: str = DEFAULT_SOLVER,
        progress=None, demand=None) -> FlowSolution:
    """Optimal all-to-all concurrent flow by the per-commodity link LP (eqs. 1–5).

    ``N(N-1)·|E|`` variables: the exact reference for small and medium ``N``.
    Each commodity's LP flow is cleaned by :func:`decompose_flow`, so the reported
    ``F`` is certified on the returned flows and ``upper_bound`` comes from the duals.
    With a ``demand`` (:class:`~a2a_compiler.demand.Demand`) commodity ``(s, d)``
    sinks ``D[s, d]`` (pairs of volume 0 are left out of the LP).
    """
    fabric, aug, s, d = solve_graph(topology, fabric)
    g = aug.topology
    amount = np.ones(len(s))
    if demand is not None:
        amount = demand.of_pairs(s, d)
        s, d, amount = s[amount > 0], d[amount > 0], amount[amount > 0]
    sinks = sp.coo_array((amount, (np.arange(len(s)), d)), shape=(len(s), g.n_nodes))

    def certify(flows, lengths):
        routing = decompose_commodities(g, s, d, flows, amount)
        return certify_routing(routing, g, demand)[1], dual_upper_bound(g, lengths, demand), routing

    U, flows, lengths, res, build, cert = solve_flow_lp(g, s, sinks, solver=solver, progress=progress,
                                                       certify=certify)
    t0 = time.perf_counter()
    if cert is None:
        ub = dual_upper_bound(g, lengths, demand)
        routing, more = decompose_commodities(g, s, d, flows, amount), {}
    else:
        routing, ub, more = cert
        more = dict(more)
    timings = {"build": build, "lp": res.seconds,
               "decompose": more.pop("certify_seconds", 0.0) + time.perf_counter() - t0}
    info = {"solver": res.solver, "lp_status": res.status, "lp_rows": int(len(res.row_value)),
            "lp_columns": int(len(res.x)), "lp_concurrent_flow": float(1 / U), **lp_info(res, more)}
    return finish("mcf", topology, fabric, aug, routing, ub, timings, info, demand=demand)
