"""Deadlock-free MCF: the all-to-all concurrent flow restricted to routes monotone in one of K channel orders.

The design source leaves open "how to generate all-to-all schedules that
optimize throughput while ensuring deadlock freedom" (Basu et al. §5.5).  Here
deadlock freedom is built into the LP instead of added afterwards.

**Layers.**  Layer ``l`` has a *channel order*: a key ``key[l, e]`` per directed
link ``e`` (:mod:`a2a_compiler.deadlock.orders`).  A route may use layer ``l``
only if the keys of its links increase strictly along it.  Every dependency
``a -> b`` the routes of layer ``l`` create then has ``key[l, a] < key[l, b]``,
so the channel dependency graph over (link, layer) is acyclic whatever the
weights (Dally & Seitz 1987): deadlock-free with ``K`` virtual layers by
construction, for *every* feasible point of the LP.

**LP (exact, link formulation per layer).**  The *transition graph* of layer
``l`` has a node per link and an arc ``e -> f`` wherever ``e`` ends where ``f``
starts, ``key[l, e] < key[l, f]`` and ``f`` does not turn straight back; it is
acyclic.  Flows are grouped by source (as in eqs. 6–9): for layer ``l`` and
source ``s``, *injection* arcs from ``s`` onto its out-links, the transition
arcs, and *ejection* arcs from every link into a host ``t != s``.  Rows:

* conservation at every (layer, source, link) node;
* demand: the ejections of pair ``(s, t)`` over all layers sum to 1;
* capacity: the flow entering link ``e`` over all layers and sources is at most
  ``U·cap_e``; with a host bandwidth, host egress / ingress at most ``U·hc``
  (the Fig. 2 host–NIC links: every byte a host relays under host forwarding,
  only what it sources / sinks under NIC forwarding).

Minimising ``U`` gives ``F = 1/U``, the best concurrent flow over all routes
monotone in one of the orders.  Each (layer, source) flow lives on an acyclic
graph, so it decomposes exactly into monotone walks; a walk that revisits a
node is shortcut at that node, which keeps the keys increasing (a subsequence
of an increasing sequence), so routes are simple paths of their layer.

**Certificates.**  ``F`` is recomputed from the weighted paths (primal).  For
any lengths ``l >= 0`` (the LP's capacity duals), weak duality of the
restricted path LP gives ``F <= sum_e c_e l_e / sum_{s != t} min_l dist_l(s,
t)``, where ``dist_l`` is the shortest *monotone* path in layer ``l`` (a
shortest path in its transition graph): :func:`restricted_dual_bound`.  That
bounds every routing the K orders allow, the gap to the unrestricted MCF
optimum (:func:`~a2a_compiler.solve.solve`) is the price of deadlock freedom
with these orders.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..deadlock.orders import Transitions, transitions
from ..errors import A2AError
from ..fabric import Fabric
from ..numeric import dot, snap
from ..topology.model import Topology
from .certificate import check_connected, decompose_flow
from .lp import INF, solve_lp
from .mcf import DEFAULT_SOLVER, pick_solver


@dataclass(frozen=True, eq=False)
class LayeredRoute:
    """One weighted route ``nodes`` of pair ``src -> dst`` in virtual ``layer``."""

    src: int
    dst: int
    nodes: tuple[int, ...]
    weight: float
    layer: int


@dataclass(frozen=True, eq=False)
class DeadlockFreeFlow:
    """The result of :func:`deadlock_free_mcf`.

    ``concurrent_flow`` is certified on ``routes`` (max load over capacity,
    host–NIC terms included); ``upper_bound`` bounds the optimum over all routes
    the orders allow (:func:`restricted_dual_bound`); ``lp_concurrent_flow`` is
    ``1/U`` of the LP.
    """

    routes: tuple[LayeredRoute, ...]
    concurrent_flow: float
    upper_bound: float
    lp_concurrent_flow: float
    layers_used: int
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    @property
    def a2a_time(self) -> float:
        """All-to-all time ``1/F`` of the routes, in link-times."""
        return math.inf if self.concurrent_flow <= 0 else 1.0 / self.concurrent_flow

    @property
    def bound_time(self) -> float:
        """Certified lower bound on the time of every routing monotone in the orders: ``1/upper_bound``."""
        return math.inf if self.upper_bound <= 0 else 1.0 / self.upper_bound


def _host_terms(fabric: Fabric):
    """``(hosted, nic)``: whether host rows exist and whether they count end points only (NIC forwarding)."""
    return fabric.host_bw is not None, fabric.forwarding == "nic"


def _reach(topology: Topology, trans: Transitions, sources: np.ndarray) -> np.ndarray:
    """``reach[i, e]``: link ``e`` lies on a monotone walk from host ``sources[i]`` (one BFS per source)."""
    E, nh = topology.n_links, topology.n_hosts
    inj = np.flatnonzero(topology.src < nh)                     # host -> link arcs, node E + host
    rows = np.concatenate([trans.first, E + topology.src[inj]])
    cols = np.concatenate([trans.second, inj])
    g = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(E + nh, E + nh))
    d = csgraph.shortest_path(g, directed=True, unweighted=True, indices=E + np.asarray(sources))
    return np.isfinite(d[:, :E])


def _coreach(g: sp.csr_array, targets: np.ndarray) -> np.ndarray:
    """Nodes reachable in ``g`` from any of ``targets`` (a multi-source BFS, frontier by frontier)."""
    seen = np.zeros(g.shape[0], bool)
    seen[targets] = True
    frontier = np.asarray(targets)
    while len(frontier):
        nxt = np.unique(sp.csr_array(g[frontier]).indices)
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        frontier = nxt
    return seen


@dataclass(frozen=True, eq=False)
class _Block:
    """Columns of one (layer, source): injection links, transition arcs, ejection links."""

    layer: int
    source: int
    inj: np.ndarray       # link ids
    tr: np.ndarray        # indices into the layer's Transitions
    ej: np.ndarray        # link ids (head a host != source)
    start: int            # first column


def build_lp(topology: Topology, fabric: Fabric, keys: np.ndarray):
    """``(c, A, lower, upper, blocks, trans, row layout)`` of the deadlock-free MCF LP (module docstring).

    Columns ``[U, blocks...]``; rows: capacity (links), host egress, host ingress
    (with a host bandwidth), demand per ordered pair, conservation per block link.
    """
    E, nh = topology.n_links, topology.n_hosts
    K = len(keys)
    hosted, nic = _host_terms(fabric)
    hc = fabric.host_capacity
    src, dst, cap = topology.src, topology.dst, topology.capacity
    trans = [transitions(topology, keys[l]) for l in range(K)]
    sources = np.arange(nh)
    blocks = []
    col = 1
    for l in range(K):
        reach = _reach(topology, trans[l], sources)
        useful = _coreach(sp.csr_array((np.ones(len(trans[l].first)), (trans[l].second, trans[l].first)),
                                       shape=(E, E)), np.flatnonzero(dst < nh))
        for s in range(nh):
            ok = reach[s] & useful
            inj = np.flatnonzero((src == s) & ok)
            tr = np.flatnonzero(ok[trans[l].first] & ok[trans[l].second])
            ej = np.flatnonzero(ok & (dst < nh) & (dst != s))
            blocks.append(_Block(l, s, inj, tr, ej, col))
            col += len(inj) + len(tr) + len(ej)
    n_col = col
    n_host_rows = 2 * nh if hosted else 0
    demand0 = E + n_host_rows
    pair_row = np.full(nh * nh, -1, dtype=np.int64)
    off = ~np.eye(nh, dtype=bool).ravel()
    pair_row[off] = demand0 + np.arange(nh * (nh - 1))
    cons0 = demand0 + nh * (nh - 1)
    rows, cols, vals = [np.arange(E)], [np.zeros(E, np.int64)], [-cap]
    if hosted:
        rows.append(E + np.arange(2 * nh))
        cols.append(np.zeros(2 * nh, np.int64))
        vals.append(np.full(2 * nh, -hc))
    n_cons = 0
    for b in blocks:
        t = trans[b.layer]
        c_inj = b.start + np.arange(len(b.inj))
        c_tr = b.start + len(b.inj) + np.arange(len(b.tr))
        c_ej = b.start + len(b.inj) + len(b.tr) + np.arange(len(b.ej))
        live = np.unique(np.concatenate([b.inj, t.first[b.tr], t.second[b.tr], b.ej]))
        node = np.full(E, -1, dtype=np.int64)
        node[live] = cons0 + n_cons + np.arange(len(live))
        n_cons += len(live)
        f1, f2 = t.first[b.tr], t.second[b.tr]
        # conservation: inflow (injection, transitions in) - outflow (transitions out, ejection) = 0
        rows += [node[b.inj], node[f2], node[f1], node[b.ej]]
        cols += [c_inj, c_tr, c_tr, c_ej]
        vals += [np.ones(len(b.inj)), np.ones(len(b.tr)), -np.ones(len(b.tr)), -np.ones(len(b.ej))]
        # capacity: the flow entering a link
        rows += [b.inj, f2]
        cols += [c_inj, c_tr]
        vals += [np.ones(len(b.inj)), np.ones(len(b.tr))]
        # demand
        rows.append(pair_row[b.source * nh + dst[b.ej]])
        cols.append(c_ej)
        vals.append(np.ones(len(b.ej)))
        if hosted:
            if nic:   # egress of the source, ingress of the destination
                rows += [E + np.full(len(b.inj), b.source), E + nh + dst[b.ej]]
                cols += [c_inj, c_ej]
                vals += [np.ones(len(b.inj)), np.ones(len(b.ej))]
            else:     # every hop: egress of its tail, ingress of its head (hosts only)
                for links, cc in ((b.inj, c_inj), (f2, c_tr)):
                    u, v = src[links], dst[links]
                    hu, hv = u < nh, v < nh
                    rows += [E + u[hu], E + nh + v[hv]]
                    cols += [cc[hu], cc[hv]]
                    vals += [np.ones(int(hu.sum())), np.ones(int(hv.sum()))]
    n_row = cons0 + n_cons
    A = sp.csc_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n_row, n_col))
    lower = np.concatenate([np.full(demand0, -INF), np.ones(nh * (nh - 1)), np.zeros(n_cons)])
    upper = np.concatenate([np.zeros(demand0), np.ones(nh * (nh - 1)), np.zeros(n_cons)])
    c = np.zeros(n_col)
    c[0] = 1.0
    return c, A, lower, upper, blocks, trans


def restricted_dual_bound(topology: Topology, fabric: Fabric, trans: list[Transitions], lengths: np.ndarray,
                          host_out: np.ndarray | None = None, host_in: np.ndarray | None = None) -> float:
    """Weak-duality bound on ``F`` over all routes monotone in one of the layers (module docstring).

    ``lengths`` on links, ``host_out`` / ``host_in`` on host egress / ingress
    (with a host bandwidth); any nonnegative values give a valid bound.
    """
    E, nh = topology.n_links, topology.n_hosts
    src, dst, cap = topology.src, topology.dst, topology.capacity
    hosted, nic = _host_terms(fabric)
    l = np.maximum(np.nan_to_num(np.asarray(lengths, dtype=float)), 0.0)
    ho = np.zeros(nh) if host_out is None or not hosted else np.maximum(np.nan_to_num(host_out), 0.0)
    hi = np.zeros(nh) if host_in is None or not hosted else np.maximum(np.nan_to_num(host_in), 0.0)
    top = max(float(l.max(initial=0.0)), float(ho.max(initial=0.0)), float(hi.max(initial=0.0)))
    if top <= 0:
        return math.inf
    l, ho, hi = l / top + 1e-12, ho / top, hi / top
    numerator = dot(cap, l) + (fabric.host_capacity * (ho.sum() + hi.sum()) if hosted else 0.0)
    # cost of entering link e: its length, plus host terms for every hop under host forwarding
    enter = l.copy()
    if hosted and not nic:
        enter += np.where(src < nh, ho[np.minimum(src, nh - 1)], 0.0) + np.where(dst < nh, hi[np.minimum(dst, nh - 1)], 0.0)
    best = np.full((nh, nh), np.inf)
    inj = np.flatnonzero(src < nh)
    into = np.flatnonzero(dst < nh)
    for t in trans:
        rows = np.concatenate([t.first, E + src[inj]])
        cols = np.concatenate([t.second, inj])
        g = sp.csr_array((enter[cols], (rows, cols)), shape=(E + nh, E + nh))
        d = csgraph.dijkstra(g, directed=True, indices=E + np.arange(nh))[:, :E]
        per = np.full((nh, nh), np.inf)
        np.minimum.at(per, (np.repeat(np.arange(nh), len(into)), np.tile(dst[into], nh)), d[:, into].ravel())
        best = np.minimum(best, per)
    if hosted and nic:
        best = best + ho[:, None] + hi[None, :]
    off = ~np.eye(nh, dtype=bool)
    total = float(best[off].sum())
    if not math.isfinite(total):
        return 0.0
    return numerator / total if total > 0 else math.inf


def _shortcut(nodes: list[int]) -> tuple[int, ...]:
    """The walk with every revisit cut out at the revisited node (keys stay increasing)."""
    out: list[int] = []
    where: dict[int, int] = {}
    for v in nodes:
        j = where.get(v)
        if j is not None:
            for w in out[j + 1:]:
                del where[w]
            del out[j + 1:]
        else:
            where[v] = len(out)
            out.append(v)
    return tuple(out)


def _decompose(topology: Topology, block: _Block, t: Transitions, x: np.ndarray) -> list[tuple[int, tuple, float]]:
    """Weighted node paths ``(dst, nodes, weight)`` of one (layer, source) block's flow ``x`` (its columns)."""
    E, nh = topology.n_links, topology.n_hosts
    ni, nt = len(block.inj), len(block.tr)
    # expanded graph: node d < nh is the sink of host d, node nh is the source, nh + 1 + e is link e
    a = np.concatenate([np.full(ni, nh), nh + 1 + t.first[block.tr], nh + 1 + block.ej])
    b = np.concatenate([nh + 1 + block.inj, nh + 1 + t.second[block.tr], topology.dst[block.ej]])
    flow = np.asarray(x, dtype=float)
    keep = flow > 0
    if not keep.any():
        return []
    g = Topology.from_links("transition graph", nh, np.stack([a[keep], b[keep]], 1), n_switches=1 + E,
                            undirected=False)
    order = np.searchsorted(g.src * g.n_nodes + g.dst, a[keep] * g.n_nodes + b[keep])
    f = np.zeros(g.n_links)
    f[order] = flow[keep]
    demand = np.zeros(g.n_nodes)
    np.add.at(demand, topology.dst[block.ej], flow[ni + nt:])
    routing = decompose_flow(g, nh, f, demand)
    out = []
    for i in range(routing.n_paths):
        links = routing.links[routing.ptr[i]:routing.ptr[i + 1]]
        chan = g.dst[links[:-1]] - nh - 1                     # the link nodes, in order
        nodes = [int(topology.src[chan[0]])] + topology.dst[chan].tolist()
        out.append((int(routing.commodity[i] % nh), _shortcut(nodes), float(routing.weight[i])))
    return out


def deadlock_free_mcf(topology: Topology, fabric: Fabric | None, keys: np.ndarray, *, solver: str = DEFAULT_SOLVER,
                      progress=None) -> DeadlockFreeFlow:
    """The best all-to-all concurrent flow over routes monotone in one of the channel orders ``keys`` (``K x E``).

    Raises :class:`A2AError` when some host pair has no monotone route in any
    layer (the orders disconnect it).
    """
    fabric = fabric or Fabric()
    check_connected(topology)
    keys = np.asarray(keys, dtype=float).reshape(-1, topology.n_links)
    nh = topology.n_hosts
    check_size(topology, len(keys))
    t0 = time.perf_counter()
    c, A, lower, upper, blocks, trans = build_lp(topology, fabric, keys)
    E = topology.n_links
    hosted = fabric.host_bw is not None
    demand0 = E + (2 * nh if hosted else 0)
    empty = np.flatnonzero(np.diff(sp.csr_array(A).indptr)[demand0:demand0 + nh * (nh - 1)] == 0)
    if len(empty):
        k = int(empty[0])
        s, t = divmod(k, nh - 1)
        t += t >= s
        raise A2AError(f"mcf-df: no route from host {s} to host {t} is monotone in any of the {len(keys)} channel "
                       "orders; use more layers or other orders")
    t1 = time.perf_counter()
    solver = pick_solver(solver, A.nnz)
    if progress:
        progress(f"mcf-df: LP with {A.shape[0]} rows, {A.shape[1]} columns, {A.nnz} nonzeros over {len(keys)} "
                 f"layer(s); solving with {solver}")
    res = solve_lp(c, A, lower, upper, solver=solver, inexact_ok=True, label="mcf-df LP", progress=progress)
    t2 = time.perf_counter()
    duals = np.abs(res.row_dual)
    ub = restricted_dual_bound(topology, fabric, trans, duals[:E],
                               duals[E:E + nh] if hosted else None, duals[E + nh:E + 2 * nh] if hosted else None)
    ub = min(ub, restricted_dual_bound(topology, fabric, trans, np.ones(E)))
    if hosted:
        ub = min(ub, fabric.host_capacity / (nh - 1))   # every host sources N-1 shards
    t3 = time.perf_counter()
    x = snap(np.maximum(res.x, 0.0))
    merged: dict[tuple[int, int, tuple], list] = {}
    for b in blocks:
        n = len(b.inj) + len(b.tr) + len(b.ej)
        for d, nodes, w in _decompose(topology, b, trans[b.layer], x[b.start:b.start + n]):
            key = (b.source, d, nodes)
            if key in merged:
                merged[key][0] += w
            else:
                merged[key] = [w, b.layer]       # blocks run layer-major: the lowest layer first
    total = np.zeros(nh * nh)
    for (s, d, _), (w, _) in merged.items():
        total[s * nh + d] += w
    routes = tuple(LayeredRoute(s, d, nodes, w / total[s * nh + d], layer)
                   for (s, d, nodes), (w, layer) in sorted(merged.items(), key=lambda kv: (kv[0][0], kv[0][1])))
    t4 = time.perf_counter()
    F = _certified(topology, fabric, routes)
    if F * (1 - 1e-9) <= ub < F:
        ub = F
    timings = {"build": t1 - t0, "lp": res.seconds, "bound": t3 - t2, "decompose": t4 - t3}
    info = {"solver": res.solver, "lp_status": res.status, "lp_rows": int(A.shape[0]), "lp_columns": int(A.shape[1]),
            "lp_nonzeros": int(A.nnz), "transitions": [int(len(t.first)) for t in trans]}
    return DeadlockFreeFlow(routes, F, ub, float(1 / res.x[0]), 1 + max((r.layer for r in routes), default=0),
                            timings, info)


def check_size(topology: Topology, layers: int) -> None:
    """Refuse an LP that cannot fit: about 3 nonzeros per column, at most ``layers·N·(T + 2E)`` columns
    (``T`` the moves through nodes), at :data:`~a2a_compiler.solve.LP_BYTES_PER_NONZERO` each, against
    :data:`~a2a_compiler.solve.MAX_LP_BYTES` (the rule of every flow LP)."""
    from . import LP_BYTES_PER_NONZERO, MAX_LP_BYTES

    moves = int(np.dot(topology.in_degree().astype(float), topology.out_degree().astype(float)))
    nnz = 3.0 * layers * topology.n_hosts * (moves + 2 * topology.n_links)
    need = nnz * LP_BYTES_PER_NONZERO
    if need > MAX_LP_BYTES:
        raise A2AError(f"{topology.spec}: the mcf-df LP with {layers} layer(s) would have about {nnz:.1e} nonzeros "
                       f"({topology.n_hosts} sources x {moves} moves through nodes per layer) and need about "
                       f"{need / 2**30:.0f} GiB, over the {MAX_LP_BYTES / 2**30:.0f} GiB limit "
                       "(a2a_compiler.solve.MAX_LP_BYTES); use fewer layers or a smaller topology")


def _certified(topology: Topology, fabric: Fabric, routes) -> float:
    """``F`` of weighted routes by the project's cost model (links and host–NIC terms)."""
    from ..routes.result import RoutedPath, RouteSet

    rs = RouteSet("mcf-df", topology, fabric, tuple(RoutedPath(r.src, r.dst, r.nodes, r.weight, r.layer)
                                                     for r in routes))
    t = rs.alltoall_time
    return math.inf if t <= 0 else 1.0 / t
