"""Certified optimality for every flow method: a verified primal and a dual bound.

* **Primal (lower bound).**  Every method ends with a :class:`Routing` — weighted
  paths per commodity over the solve graph (the host–NIC augmented topology).
  Paths conserve flow exactly by construction; weights are normalised to one
  unit per commodity, and ``F = 1 / max_e load_e / cap_e`` is recomputed from the
  paths alone (:func:`certified_flow`).  A slightly infeasible LP primal (IPM
  without crossover, PDLP) is thereby repaired by scaling.
* **Dual (upper bound).**  For any link lengths ``l >= 0`` weak duality of the
  max-concurrent-flow LP (Basu et al. eqs. 1–5) gives
  ``F* <= sum_e c_e l_e / sum_{s != d} D[s, d]·dist_l(s, d)`` (:func:`dual_upper_bound`);
  the LP's capacity-row duals are near-optimal lengths.

**Demands.**  With a demand matrix ``D`` (:mod:`a2a_compiler.demand`) commodity
``k = s*N + d`` has volume ``volume[k] = D[s, d]`` (``None``: 1 everywhere).  Paths
stay *per unit*: a commodity's weights sum to 1, its share of its own volume;
loads weight each path by its commodity's volume.  A commodity of volume 0 gets a
min-hop route (:func:`fallback_routes`) that carries nothing, so a schedule has a
route for every pair whatever counts arrive at run time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError, DisconnectedError
from ..numeric import dot
from ..topology.model import Topology


@dataclass(frozen=True, eq=False)
class Routing:
    """Weighted paths as flat arrays: path ``i`` serves commodity ``commodity[i] = s*N + d``
    with weight ``weight[i]`` over links ``links[ptr[i]:ptr[i+1]]`` of the solve graph."""

    commodity: np.ndarray
    weight: np.ndarray
    ptr: np.ndarray
    links: np.ndarray

    @classmethod
    def concat(cls, parts) -> "Routing":
        """The paths of several routings, in order."""
        parts = list(parts)
        if not parts:
            return cls(np.zeros(0, np.int64), np.zeros(0), np.zeros(1, np.int64), np.zeros(0, np.int64))
        lengths = np.concatenate([np.diff(p.ptr) for p in parts])
        return cls(
            np.concatenate([p.commodity for p in parts]).astype(np.int64),
            np.concatenate([p.weight for p in parts]).astype(float),
            np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            np.concatenate([p.links for p in parts]).astype(np.int64),
        )

    @property
    def n_paths(self) -> int:
        """Number of paths."""
        return len(self.weight)

    def select(self, idx, weight=None) -> "Routing":
        """The paths ``idx`` (optionally with new weights for all paths)."""
        idx = np.asarray(idx, dtype=np.int64)
        lengths = np.diff(self.ptr)[idx]
        ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        pos = np.arange(ptr[-1]) - np.repeat(ptr[:-1], lengths) + np.repeat(self.ptr[idx], lengths)
        w = self.weight if weight is None else np.asarray(weight, dtype=float)
        return Routing(self.commodity[idx], w[idx], ptr, self.links[pos])

    def path_of_link(self) -> np.ndarray:
        """For every entry of ``links``, the index of its path."""
        return np.repeat(np.arange(self.n_paths), np.diff(self.ptr))

    def normalised(self, n_hosts: int) -> "Routing":
        """Scale weights so each commodity's paths sum to 1 (per unit demand).

        Raises :class:`A2AError` if some host pair has no path at all.
        """
        total = np.bincount(self.commodity, weights=self.weight, minlength=n_hosts * n_hosts)
        s, d = np.divmod(np.arange(n_hosts * n_hosts), n_hosts)
        missing = np.flatnonzero((s != d) & (total <= 0))
        if len(missing):
            k = int(missing[0])
            raise A2AError(f"no route carries flow from host {k // n_hosts} to host {k % n_hosts}")
        return Routing(self.commodity, self.weight / total[self.commodity], self.ptr, self.links)

    def link_loads(self, n_links: int, volume: np.ndarray | None = None) -> np.ndarray:
        """Total flow on each link of the solve graph; ``volume[k]`` scales commodity ``k``'s paths."""
        w = self.weight if volume is None else self.weight * volume[self.commodity]
        return np.bincount(self.links, weights=w[self.path_of_link()], minlength=n_links)

    def link_flow_matrix(self, n_hosts: int, link_origin: np.ndarray, n_base_links: int) -> sp.csr_array:
        """Per-commodity flows (rows ``s*N+d``) projected onto the base links.

        Solve-graph links with ``link_origin < 0`` (host–NIC links) are dropped.
        """
        rows = self.commodity[self.path_of_link()]
        cols = link_origin[self.links]
        keep = cols >= 0
        vals = self.weight[self.path_of_link()]
        m = sp.coo_array((vals[keep], (rows[keep], cols[keep])), shape=(n_hosts * n_hosts, n_base_links)).tocsr()
        m.sum_duplicates()
        return m

    def node_paths(self, topology: Topology, node_origin: np.ndarray):
        """Each path as a tuple of base node ids (augmentation nodes collapsed)."""
        out = []
        for i in range(self.n_paths):
            links = self.links[self.ptr[i]:self.ptr[i + 1]]
            nodes = node_origin[np.concatenate([topology.src[links[:1]], topology.dst[links]])]
            keep = np.concatenate([[True], nodes[1:] != nodes[:-1]])
            out.append(tuple(int(v) for v in nodes[keep]))
        return out


def commodity_volume(demand, n_hosts: int) -> np.ndarray | None:
    """``volume[s*N + d] = D[s, d]`` of a :class:`~a2a_compiler.demand.Demand` (``None``: uniform)."""
    return None if demand is None else np.asarray(demand.volumes, dtype=float).reshape(n_hosts * n_hosts)


def fallback_routes(topology: Topology, commodities) -> Routing:
    """A min-hop path (unit weight) for each commodity ``s*N + d``: the route of a pair of volume 0.

    Trees break distance ties canonically (:func:`~a2a_compiler.numeric.shortest_path_tree`).
    """
    from ..numeric import shortest_path_tree

    nh, n = topology.n_hosts, topology.n_nodes
    live = np.flatnonzero(topology.capacity > 0)
    key = topology.src * n + topology.dst
    commodity, ptr, links = [], [0], []
    for k in np.asarray(commodities, dtype=np.int64).tolist():
        s, d = divmod(k, nh)
        _, pred = shortest_path_tree(n, topology.src[live], topology.dst[live], np.ones(len(live)), s)
        nodes = [d]
        while nodes[-1] != s:
            nodes.append(int(pred[nodes[-1]]))
        nodes.reverse()
        hops = np.asarray(nodes[:-1], dtype=np.int64) * n + np.asarray(nodes[1:], dtype=np.int64)
        links.extend(np.searchsorted(key, hops).tolist())
        ptr.append(len(links))
        commodity.append(k)
    return Routing(np.asarray(commodity, dtype=np.int64), np.ones(len(commodity)), np.asarray(ptr, np.int64),
                   np.asarray(links, dtype=np.int64))


def with_fallback(routing: Routing, topology: Topology, volume: np.ndarray) -> Routing:
    """``routing`` plus :func:`fallback_routes` for every pair of volume 0 it does not route."""
    nh = topology.n_hosts
    have = np.bincount(routing.commodity, weights=routing.weight, minlength=nh * nh) > 0
    s, d = np.divmod(np.arange(nh * nh), nh)
    missing = np.flatnonzero((s != d) & (volume <= 0) & ~have)
    return routing if not len(missing) else Routing.concat([routing, fallback_routes(topology, missing)])


def solve_graph(topology: Topology, fabric):
    """The prologue of every flow solver: the fabric (default: unlimited hosts), the graph the
    LP runs on (:func:`a2a_compiler.fabric.augment`, Basu et al. §3.2.2 Fig. 2), checked
    connected, and the commodities ``(s, d)``, ``s != d``, in ``s·N + d`` order."""
    from ..fabric import Fabric, augment
    from ..topology.metrics import require_table

    require_table(topology, topology.n_hosts, topology.n_hosts, "the host-pair (commodity) table")
    fabric = fabric or Fabric()
    aug = augment(topology, fabric)
    check_connected(aug.topology)
    nh = aug.topology.n_hosts
    s, d = np.divmod(np.arange(nh * nh), nh)
    return fabric, aug, s[s != d], d[s != d]


def time_expanded_bound(topology: Topology, fabric, link_len: np.ndarray, in_len: np.ndarray | None,
                        out_len: np.ndarray | None, demand=None) -> float:
    """Certified lower bound on the tsMCF optimum ``Σ_t U_t`` (eqs. 15–20, §3.2.2) by weak duality.

    Any nonnegative lengths per step on links (``(L, E)``) and, with a host
    bandwidth, on host ingress / egress (``(L, N)``) are rescaled so that each
    step's capacity-weighted sum is 1.  A unit of commodity ``(s, d)`` then pays
    at least the shortest time-expanded path from ``s`` at layer 0 to ``d``
    (holding is free; host terms as the forwarding mode charges them), and the
    sum over commodities (each times its volume ``D[s, d]``, with a ``demand``) is at
    most ``Σ_t U_t``.
    """
    L, E = link_len.shape
    n, nh = topology.n_nodes, topology.n_hosts
    src, dst, cap = topology.src, topology.dst, topology.capacity
    limited = in_len is not None and fabric.host_bw is not None
    weight = (link_len * cap).sum(axis=1) + (fabric.host_capacity * (in_len + out_len).sum(axis=1) if limited else 0.0)
    scale = np.divide(1.0, weight, out=np.zeros(L), where=weight > 0)
    nic = fabric.forwarding == "nic"
    s = np.arange(nh)[:, None]
    reach = np.full((nh, n), np.inf)
    reach[np.arange(nh), np.arange(nh)] = 0.0
    dist = np.full((nh, n), np.inf)
    for t in range(L):
        hop = np.broadcast_to(link_len[t] * scale[t], (nh, E)).copy()
        if limited:
            out_t, in_t = out_len[t] * scale[t], in_len[t] * scale[t]
            hop += np.where(src < nh, out_t[np.minimum(src, nh - 1)], 0.0) * ((src == s) if nic else 1.0)
            if not nic:
                hop += np.where(dst < nh, in_t[np.minimum(dst, nh - 1)], 0.0)
        via = reach[:, src] + hop
        arrive = np.full((nh, n), np.inf)
        np.minimum.at(arrive, (np.broadcast_to(s, (nh, E)), np.broadcast_to(dst, (nh, E))), via)
        sunk = arrive.copy()
        if limited and nic:
            sunk[:, :nh] += in_t
        dist = np.minimum(dist, sunk)
        reach = np.minimum(reach, arrive)
    dist = dist[:, :nh]
    off = ~np.eye(nh, dtype=bool)
    if demand is None:
        return float(dist[off].sum())
    return dot(dist[off], np.asarray(demand.volumes)[off])


def check_connected(topology: Topology) -> None:
    """Raise unless every ordered host pair is joined by positive-capacity links."""
    if topology.n_hosts < 2:
        raise A2AError(f"{topology.spec}: all-to-all needs at least 2 hosts, got {topology.n_hosts}")
    pos = topology.capacity > 0
    adj = sp.csr_array((np.ones(int(pos.sum())), (topology.src[pos], topology.dst[pos])),
                       shape=(topology.n_nodes, topology.n_nodes))
    _, label = csgraph.connected_components(adj, directed=True, connection="strong")
    host_label = label[: topology.n_hosts]
    bad = np.flatnonzero(host_label != host_label[0])
    if len(bad):
        h = int(bad[0])
        reach = csgraph.breadth_first_order(adj, 0, directed=True, return_predecessors=False)
        s, d = (0, h) if h not in set(reach.tolist()) else (h, 0)
        raise DisconnectedError(
            f"{topology.spec}: host {topology.names[d]} is unreachable from host {topology.names[s]} "
            "(disconnected topology or zero-capacity links); no all-to-all flow exists"
        )


def certified_flow(routing: Routing, topology: Topology, volume: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """``(F, loads)`` achieved by a *normalised* routing on ``topology``'s capacities (commodity ``k``
    shipping ``volume[k]``, default 1)."""
    loads = routing.link_loads(topology.n_links, volume)
    cap = topology.capacity
    if np.any((cap <= 0) & (loads > 0)):
        return 0.0, loads
    pos = cap > 0
    util = float(np.max(loads[pos] / cap[pos])) if pos.any() else 0.0
    return (math.inf if util <= 0 else 1.0 / util), loads


def conservation_error(flows: sp.csr_array, topology: Topology) -> float:
    """Largest violation of per-unit flow conservation by per-commodity link flows (rows ``s*N+d``).

    Commodity ``s -> d`` must leave ``s`` with net 1, arrive at ``d`` with net 1 and
    pass every other node; computed numerically from the flows themselves.
    """
    nh = topology.n_hosts
    net = sp.csr_array(flows @ topology.incidence().T)
    s, d = np.divmod(np.arange(nh * nh), nh)
    off = np.flatnonzero(s != d)
    want = sp.csr_array((np.concatenate([-np.ones(len(off)), np.ones(len(off))]),
                         (np.concatenate([off, off]), np.concatenate([s[off], d[off]]))), shape=net.shape)
    diff = net - want
    return float(np.abs(diff.data).max(initial=0.0))


def path_dual_upper_bound(topology: Topology, routing: Routing, lengths: np.ndarray,
                          volume: np.ndarray | None = None) -> float:
    """Weak-duality bound on the path-restricted LP (pMCF, eqs. 21–24): for lengths ``l >= 0``,
    ``F_paths <= sum_e c_e l_e / sum_k volume_k·min_{p in P_k} l(p)`` over the candidate paths ``routing``.

    Unlike :func:`dual_upper_bound` (which bounds the unrestricted MCF), this bounds
    the optimum over the given candidates, whatever the solver's accuracy.
    """
    l = np.maximum(np.nan_to_num(np.asarray(lengths, dtype=float)), 0.0)
    cost = np.bincount(routing.path_of_link(), weights=l[routing.links], minlength=routing.n_paths)
    best = {}
    for k, c in zip(routing.commodity.tolist(), cost.tolist()):
        best[k] = min(best.get(k, math.inf), c)
    total = sum(best.values()) if volume is None else math.fsum(volume[k] * c for k, c in best.items())
    return dot(topology.capacity, l) / total if total > 0 else math.inf


def dual_upper_bound(topology: Topology, lengths: np.ndarray, demand=None) -> float:
    """Weak-duality bound ``min_l sum_e c_e l_e / sum_{s!=d} D[s, d]·dist_l(s, d)`` (``D = 1`` without ``demand``).

    Evaluated for the given lengths ``l >= 0`` (the LP's capacity duals) and for
    unit lengths (the distance bound), whichever is smaller.  Zero lengths are
    lifted by a negligible ``1e-12·max(l)`` so Dijkstra sees every link;
    zero-capacity links get a huge length (they cost nothing in the numerator).
    Any ``l >= 0`` gives a valid bound, so the result is a certificate whatever
    the LP solver's accuracy.
    """
    n, nh = topology.n_nodes, topology.n_hosts
    cap = topology.capacity
    best = math.inf
    for l in (np.asarray(lengths, dtype=float), np.ones(topology.n_links)):
        l = np.maximum(np.nan_to_num(l), 0.0)
        top = float(l.max()) if len(l) else 0.0
        if top <= 0:
            continue
        l = l / top + 1e-12
        l[cap <= 0] = 1e9
        adj = sp.csr_array((l, (topology.src, topology.dst)), shape=(n, n))
        dist = csgraph.dijkstra(adj, directed=True, indices=np.arange(nh))[:, :nh]
        total = float(dist.sum()) if demand is None else dot(dist, demand.volumes)
        if math.isfinite(total) and total > 0:
            best = min(best, dot(cap, l) / total)
    return best


def decompose_flow(topology: Topology, source: int, flow: np.ndarray, demand: np.ndarray,
                   tol: float = 1e-9) -> Routing:
    """Exact path decomposition of one source's flow (cycles cancelled on the way).

    ``flow`` is the source's flow on every link of ``topology`` and ``demand[v]``
    the amount to deliver to node ``v``.  For each destination, repeatedly trace
    back from it along positive in-links to ``source``, cancelling any cycle met,
    and peel off the bottleneck — the classic decomposition (Ahuja, Magnanti &
    Orlin §3.5): every step zeroes a link or satisfies a demand, so there are at
    most ``links + destinations`` paths and the result conserves flow exactly.
    Flow surplus allowed by the paper's inequality conservation (eqs. 3, 8) and
    solver noise below ``tol·max(flow)`` is left behind.  Path ``commodity`` is
    ``source*N + destination``.
    """
    n, nh = topology.n_nodes, topology.n_hosts
    flow = np.asarray(flow, dtype=float)
    demand = np.asarray(demand, dtype=float)
    eps = tol * max(float(flow.max(initial=0.0)), float(demand.max(initial=0.0)))
    pos = np.flatnonzero(flow > eps)
    order = pos[np.argsort(topology.dst[pos], kind="stable")]
    starts = np.searchsorted(topology.dst[order], np.arange(n + 1)).tolist()
    in_links, tail, f = order.tolist(), topology.src.tolist(), flow.tolist()
    cursor = starts[:-1]
    dests, weights, ptr, links = [], [], [0], []
    for d in np.flatnonzero(demand > eps).tolist():
        need = float(demand[d])
        while need > eps:
            nodes, trace, where, v = [d], [], {d: 0}, d
            while v != source:
                i, end = cursor[v], starts[v + 1]
                while i < end and f[in_links[i]] <= eps:
                    i += 1
                cursor[v] = i
                if i == end:              # v has no inflow left: drop the noise leading out of it
                    if not trace:
                        break
                    f[trace.pop()] = 0.0
                    del where[nodes.pop()]
                    v = nodes[-1]
                    continue
                e = in_links[i]
                u = tail[e]
                j = where.get(u)
                if j is not None:         # cycle u -> nodes[-1] -> ... -> u: cancel it
                    cycle = trace[j:] + [e]
                    m = min(f[c] for c in cycle)
                    for c in cycle:
                        f[c] -= m
                    for w in nodes[j + 1:]:
                        del where[w]
                    del nodes[j + 1:], trace[j:]
                    v = u
                    continue
                where[u] = len(nodes)
                nodes.append(u)
                trace.append(e)
                v = u
            if v != source:
                break                     # destination unreachable within the flow: stop
            b = min(need, min(f[e] for e in trace))
            for e in trace:
                f[e] -= b
            need -= b
            dests.append(d)
            weights.append(b)
            links.extend(reversed(trace))
            ptr.append(len(links))
    return Routing(source * nh + np.asarray(dests, dtype=np.int64), np.asarray(weights, dtype=float),
                   np.asarray(ptr, dtype=np.int64), np.asarray(links, dtype=np.int64))


def decompose_commodities(topology: Topology, sources, dests, flows: np.ndarray, amounts=None) -> Routing:
    """:func:`decompose_flow` of per-commodity flows ``flows[k]`` (``amounts[k]``, default 1, from
    ``sources[k]`` to ``dests[k]``)."""
    demand = np.zeros(topology.n_nodes)
    amounts = np.ones(len(flows)) if amounts is None else np.asarray(amounts, dtype=float)
    parts = []
    for s, d, f, a in zip(np.asarray(sources).tolist(), np.asarray(dests).tolist(), flows, amounts.tolist()):
        demand[d] = a
        parts.append(decompose_flow(topology, s, f, demand))
        demand[d] = 0.0
    return Routing.concat(parts)
