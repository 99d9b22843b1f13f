"""Candidate path sets for the path-based MCF (Basu et al. §3.1.4, §5.3).

Every function returns, for every ordered host pair ``(s, d)``, a list of simple
paths (tuples of base node ids) over the positive-capacity links of the *base*
topology; :func:`route_links` maps them onto the host–NIC augmented solve graph.

* :func:`disjoint_paths` — a maximal set of link-disjoint paths per pair (unit
  max-flow + path decomposition); at most the degree per pair (§3.1.4).
* :func:`all_shortest_paths` — every minimum-hop path, refused with a clear error
  when a pair has more than ``max_paths`` (tori explode, §3.1.4).
* :func:`k_shortest_paths` — the ``K`` shortest simple paths (Yen, via networkx).
"""

from __future__ import annotations

import re
from itertools import islice

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..fabric import Augmented
from ..topology.model import Topology
from .certificate import Routing

DEFAULT_MAX_PATHS = 1000
PathSets = dict  # (s, d) -> list[tuple[int, ...]]


def _live(topology: Topology) -> np.ndarray:
    return np.flatnonzero(topology.capacity > 0)


def _pairs(topology: Topology):
    nh = topology.n_hosts
    return [(s, d) for s in range(nh) for d in range(nh) if s != d]


def disjoint_paths(topology: Topology) -> PathSets:
    """Maximal link-disjoint ``s -> d`` paths for every host pair (unit-capacity max-flow).

    The max-flow (:func:`scipy.sparse.csgraph.maximum_flow`) is decomposed into
    paths by walking saturated links from ``s``; loops are cut out, so the
    paths are simple.
    """
    live = _live(topology)
    n = topology.n_nodes
    unit = sp.csr_array((np.ones(len(live), dtype=np.int32), (topology.src[live], topology.dst[live])), shape=(n, n))
    out = {}
    for s, d in _pairs(topology):
        flow = csgraph.maximum_flow(unit, s, d).flow.tocsr()
        flow.eliminate_zeros()
        succ: dict[int, list[int]] = {}
        rows = np.repeat(np.arange(n), np.diff(flow.indptr))
        for u, v, x in zip(rows.tolist(), flow.indices.tolist(), flow.data.tolist()):
            if x > 0:
                succ.setdefault(u, []).append(v)
        paths = []
        while succ.get(s):
            path, seen = [s], {s: 0}
            while path[-1] != d:
                v = succ[path[-1]].pop()
                if v in seen:  # a loop of the flow: cut it
                    for w in path[seen[v] + 1:]:
                        del seen[w]
                    del path[seen[v] + 1:]
                else:
                    seen[v] = len(path)
                    path.append(v)
            paths.append(tuple(path))
        out[(s, d)] = paths
    return out


def all_shortest_paths(topology: Topology, max_paths: int = DEFAULT_MAX_PATHS) -> PathSets:
    """Every minimum-hop ``s -> d`` path; :class:`A2AError` if a pair has more than ``max_paths``.

    Counts are computed first on the BFS DAG (no enumeration), so an exploding
    pair is reported without building its paths.
    """
    live = _live(topology)
    n, nh = topology.n_nodes, topology.n_hosts
    src, dst = topology.src[live], topology.dst[live]
    adj = sp.csr_array((np.ones(len(live)), (src, dst)), shape=(n, n))
    dist = csgraph.shortest_path(adj, unweighted=True, indices=np.arange(nh))
    out = {}
    for s in range(nh):
        ds = dist[s]
        on_dag = ds[src] + 1 == ds[dst]
        sigma = np.zeros(n)
        sigma[s] = 1.0
        dag_src, dag_dst = src[on_dag], dst[on_dag]
        for level in range(1, int(np.nanmax(np.where(np.isfinite(ds), ds, 0))) + 1):
            sel = ds[dag_dst] == level
            np.add.at(sigma, dag_dst[sel], sigma[dag_src[sel]])
        worst = max((d for d in range(nh) if d != s), key=lambda d: sigma[d])
        if sigma[worst] > max_paths:
            raise A2AError(
                f"shortest paths: host pair {topology.names[s]}->{topology.names[worst]} has "
                f"{sigma[worst]:.6g} shortest paths, more than --max-paths {max_paths}; "
                "use --paths disjoint or --paths ksp:K, or raise --max-paths"
            )
        preds: dict[int, list[int]] = {}
        for u, v in zip(dag_src.tolist(), dag_dst.tolist()):
            preds.setdefault(v, []).append(u)

        def back(v):
            if v == s:
                return [(s,)]
            return [p + (v,) for u in preds.get(v, []) for p in back(u)]

        for d in range(nh):
            if d != s:
                out[(s, d)] = back(d)
    return out


def k_shortest_paths(topology: Topology, k: int) -> PathSets:
    """The ``k`` shortest simple ``s -> d`` paths by hop count (:func:`networkx.shortest_simple_paths`)."""
    if k < 1:
        raise A2AError(f"--paths ksp:K needs K >= 1, got {k}")
    live = _live(topology)
    g = nx.DiGraph()
    g.add_nodes_from(range(topology.n_nodes))
    g.add_edges_from(zip(topology.src[live].tolist(), topology.dst[live].tolist()))
    return {(s, d): [tuple(p) for p in islice(nx.shortest_simple_paths(g, s, d), k)] for s, d in _pairs(topology)}


def candidate_paths(topology: Topology, kind: str = "disjoint", max_paths: int = DEFAULT_MAX_PATHS) -> PathSets:
    """Dispatch ``--paths``: ``disjoint``, ``shortest`` or ``ksp:K``."""
    if kind == "disjoint":
        return disjoint_paths(topology)
    if kind == "shortest":
        return all_shortest_paths(topology, max_paths)
    m = re.fullmatch(r"ksp:(\d+)", kind)
    if m:
        return k_shortest_paths(topology, int(m.group(1)))
    raise A2AError(f"--paths must be disjoint, shortest or ksp:K (e.g. ksp:4), got {kind!r}")


def route_links(aug: Augmented, base: Topology, commodity, node_paths) -> Routing:
    """Map base node paths onto the augmented solve graph (zero weights).

    Each base link becomes its augmented copy; host–NIC links are inserted where
    the path leaves its source, enters its destination and — with host
    forwarding — is relayed through an intermediate host (Fig. 2).
    """
    g = aug.topology
    na = g.n_nodes
    base_key = base.src * base.n_nodes + base.dst
    aug_key = g.src * na + g.dst
    base_to_aug = np.empty(base.n_links, dtype=np.int64)
    mask = aug.link_origin >= 0
    base_to_aug[aug.link_origin[mask]] = np.flatnonzero(mask)
    ptr, links = [0], []
    for nodes in node_paths:
        nodes = np.asarray(nodes, dtype=np.int64)
        a = base_to_aug[np.searchsorted(base_key, nodes[:-1] * base.n_nodes + nodes[1:])]
        x, y = g.src[a], g.dst[a]
        seq = []
        if x[0] != nodes[0]:
            seq.append((nodes[0], x[0]))
        for i in range(len(a)):
            if i and y[i - 1] != x[i]:
                h = aug.node_origin[y[i - 1]]
                seq += [(y[i - 1], h), (h, x[i])]
            seq.append((x[i], y[i]))
        if y[-1] != nodes[-1]:
            seq.append((y[-1], nodes[-1]))
        keys = np.array([u * na + v for u, v in seq], dtype=np.int64)
        links.extend(np.searchsorted(aug_key, keys).tolist())
        ptr.append(len(links))
    commodity = np.asarray(commodity, dtype=np.int64)
    return Routing(commodity, np.zeros(len(commodity)), np.asarray(ptr, np.int64), np.asarray(links, np.int64))
