"""Channel orders: deadlock freedom by construction, one acyclic order of the links per virtual layer.

A *channel order* gives every directed link ``e`` a key; a route is *monotone*
in it when the keys of its links increase strictly along the route.  The
dependencies ``a -> b`` of monotone routes all go from a smaller to a larger
key, so routes that are each monotone in the order of their layer can never
close a cycle of the channel dependency graph over (link, layer) (Dally &
Seitz 1987), whatever their weights.  :func:`transitions` lists the moves an
order allows; :func:`channel_orders` builds ``K`` orders by one of three
families, all deterministic:

============ ==================================================================
family       orders
============ ==================================================================
mcf          (default) the link MCF's own routes (MCF-extP, Basu et al.
             §3.2.1) packed into ``K`` layers, heaviest route first (weights
             snapped, ties by route index), each into the first layer whose
             dependencies stay acyclic (LASH's first fit, Skeie et al. 2002);
             each pair's heaviest route goes first; a pair none of whose
             routes fits gets the fewest-hop route monotone in the current
             order of some layer (lowest layer on a tie), else the first of
             its :data:`DETOURS` fewest-hop simple paths some layer takes;
             each layer's key is the topological order its acyclic
             dependencies keep (Pearce & Kelly 2006), started on a symmetric
             topology from the up*/down* order of the layer's root (as in
             ``updown``), so links no packed route constrains keep that
             order; on a digraph from link id order.  If a pair is still
             left without a route, layer 0 is seeded first with the routes
             of every pair through a BFS tree from node 0 (symmetric
             topologies).  Every packed route stays allowed, so the
             restricted MCF is at least as good as the routes that fit.
updown       up*/down* (Schroeder et al. 1991, Autonet) from ``K`` BFS roots:
             root 0 is node 0, each further root the node farthest (hops,
             both directions summed) from the roots chosen so far, lowest id
             on a tie.  Nodes are ranked by (distance, id) from the root; a
             link toward a lower rank is *up*, keyed by its head's rank
             descending, the others *down*, keyed after every up link by
             their head's rank: a route climbs, then descends.  On a digraph
             the up rank is the distance *to* the root, the down rank the
             distance *from* it (some pairs may then have no monotone route).
coordinate   tori and hypercubes: layer ``i`` corrects the dimensions in
             order (``i`` even) or reversed (``i`` odd), each dimension's
             ``+`` then ``-`` links, and cuts every ring at the dateline
             ``floor(i·k/K)``: within a ring the keys count positions from
             the dateline, so no route of layer ``i`` passes through it.
============ ==================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from itertools import islice

import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..numeric import snap
from ..topology.model import Topology
from .lash import LayerGraph

#: Simple paths (fewest hops first) tried for a pair no layer can take otherwise.
DETOURS = 64
#: Order families of :func:`channel_orders`.
FAMILIES = ("mcf", "updown", "coordinate")


@dataclass(frozen=True, eq=False)
class Transitions:
    """The moves one order allows: move ``i`` is link ``first[i]`` then link ``second[i]``."""

    first: np.ndarray
    second: np.ndarray


def transitions(topology: Topology, key: np.ndarray) -> Transitions:
    """Every move ``e -> f`` through a node with ``key[e] < key[f]`` that does not turn straight back."""
    n = topology.n_nodes
    by_head = np.argsort(topology.dst, kind="stable")          # in-links grouped by node
    in_ptr = np.searchsorted(topology.dst[by_head], np.arange(n + 1))
    out_ptr = np.searchsorted(topology.src, np.arange(n + 1))  # links are sorted by src
    indeg, outdeg = np.diff(in_ptr), np.diff(out_ptr)
    count = indeg * outdeg
    node = np.repeat(np.arange(n), count)
    local = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    e = by_head[in_ptr[node] + local // np.maximum(outdeg[node], 1)]
    f = out_ptr[node] + local % np.maximum(outdeg[node], 1)
    keep = (key[e] < key[f]) & (topology.dst[f] != topology.src[e])
    return Transitions(e[keep], f[keep])


def is_monotone(topology: Topology, nodes, key: np.ndarray) -> bool:
    """Do the keys of the links of route ``nodes`` increase strictly along it?"""
    links = [topology.link_index(int(u), int(v)) for u, v in zip(nodes, nodes[1:])]
    return bool(np.all(np.diff(key[links]) > 0))


@dataclass(frozen=True, eq=False)
class ChannelOrders:
    """``keys[l, e]``: the key of link ``e`` in layer ``l``'s order; ``info`` says how they were chosen."""

    family: str
    keys: np.ndarray
    info: dict = field(default_factory=dict)

    @property
    def layers(self) -> int:
        """Number of orders (virtual layers)."""
        return len(self.keys)


def channel_orders(topology: Topology, family: str, layers: int, *, fabric=None, progress=None) -> ChannelOrders:
    """``layers`` channel orders of ``family`` (module docstring); :class:`A2AError` for bad input."""
    if family not in FAMILIES:
        raise A2AError(f"unknown channel order family {family!r}; choose one of {', '.join(FAMILIES)}")
    if layers < 1:
        raise A2AError(f"--layers must be >= 1, got {layers}")
    if family == "updown":
        return updown_orders(topology, layers)
    if family == "coordinate":
        return coordinate_orders(topology, layers)
    return mcf_orders(topology, layers, fabric=fabric, progress=progress)


# ------------------------------------------------------------------ up*/down*
def _hops(topology: Topology) -> np.ndarray:
    n = topology.n_nodes
    live = topology.capacity > 0
    adj = sp.csr_array((np.ones(int(live.sum())), (topology.src[live], topology.dst[live])), shape=(n, n))
    return csgraph.shortest_path(adj, directed=True, unweighted=True)


def _rank(dist: np.ndarray) -> np.ndarray:
    """Position of every node when sorted by (distance, id)."""
    order = np.lexsort((np.arange(len(dist)), dist))
    rank = np.empty(len(dist), dtype=np.int64)
    rank[order] = np.arange(len(dist))
    return rank


def updown_roots(topology: Topology, layers: int) -> list[int]:
    """Node 0, then repeatedly the node farthest from the roots so far (hops both ways, lowest id on a tie)."""
    d = _hops(topology)
    d = np.where(np.isfinite(d), d, 0) + np.where(np.isfinite(d.T), d.T, 0)
    roots = [0]
    while len(roots) < min(layers, topology.n_nodes):
        far = d[roots].min(axis=0)
        far[roots] = -1
        roots.append(int(np.argmax(far)))
    while len(roots) < layers:               # more layers than nodes: repeat
        roots.append(roots[len(roots) % topology.n_nodes])
    return roots


def updown_key(topology: Topology, root: int, hops: np.ndarray | None = None) -> np.ndarray:
    """The up*/down* order from ``root`` (module docstring)."""
    d = _hops(topology) if hops is None else hops
    n = topology.n_nodes
    up_rank, down_rank = _rank(d[:, root]), _rank(d[root])
    src, dst = topology.src, topology.dst
    up = up_rank[dst] < up_rank[src]
    return np.where(up, n - 1 - up_rank[dst], n + down_rank[dst]).astype(float)


def updown_orders(topology: Topology, layers: int) -> ChannelOrders:
    """``layers`` up*/down* orders from the roots of :func:`updown_roots`."""
    hops = _hops(topology)
    roots = updown_roots(topology, layers)
    return ChannelOrders("updown", np.stack([updown_key(topology, r, hops) for r in roots]), {"roots": roots})


# ----------------------------------------------------------------- coordinates
def _grid(topology: Topology) -> tuple[tuple[int, ...], np.ndarray]:
    """Ring sizes and node coordinates of a ``torus:`` or ``hypercube:`` topology."""
    from ..routes.dor import grid_dims

    try:
        dims = grid_dims(topology)
    except A2AError:
        raise A2AError(f"coordinate orders need a torus or a hypercube (torus:AxBx..., hypercube:D), not "
                       f"{topology.spec}; use --orders mcf or updown") from None
    ids = np.arange(topology.n_hosts)
    if topology.spec.startswith("hypercube:"):
        coords = (ids[:, None] >> np.arange(len(dims))) & 1
    else:
        strides = np.array([math.prod(dims[m + 1:]) for m in range(len(dims))], dtype=np.int64)
        coords = (ids[:, None] // strides) % np.array(dims)
    return dims, coords


def coordinate_key(topology: Topology, dim_order, datelines, dims, coords) -> np.ndarray:
    """Dimension-ordered key: phase ``(position of the dimension in dim_order, +/-)``, then the
    position of the link's tail counted from the ring's dateline in the link's direction."""
    cu, cv = coords[topology.src], coords[topology.dst]
    moved = cu != cv
    dim = np.argmax(moved, axis=1)
    rows = np.arange(topology.n_links)
    k = np.asarray(dims)[dim]
    step = (cv[rows, dim] - cu[rows, dim]) % k
    plus = (step == 1) & ((k > 2) | (cu[rows, dim] == 0))           # a 2-ring: 0 -> 1 is '+'
    a = np.asarray(datelines)[dim]
    p = cu[rows, dim]
    pos = np.where(plus, (p - a) % k, (a - p) % k)
    phase = 2 * np.argsort(dim_order)[dim] + (~plus)
    return (phase * max(dims) + pos).astype(float)


def coordinate_orders(topology: Topology, layers: int) -> ChannelOrders:
    """Layer ``i``: dimensions in order (even ``i``) or reversed (odd), datelines ``floor(i·k/K)``."""
    dims, coords = _grid(topology)
    D = len(dims)
    keys, info = [], []
    for i in range(layers):
        order = list(range(D)) if i % 2 == 0 else list(reversed(range(D)))
        lines = [i * k // layers for k in dims]
        keys.append(coordinate_key(topology, order, lines, dims, coords))
        info.append({"dimensions": order, "datelines": lines})
    return ChannelOrders("coordinate", np.stack(keys), {"layers": info})


# ---------------------------------------------------------------- MCF-guided
def _shortest_monotone(topology: Topology, key: np.ndarray, s: int, t: int) -> list[int] | None:
    """Links of a fewest-hop route ``s -> t`` monotone in ``key`` (lowest link ids on ties), or ``None``."""
    tr = transitions(topology, key)
    E = topology.n_links
    starts = np.flatnonzero(topology.src == s)
    g = sp.csr_array((np.ones(len(tr.first) + len(starts)),
                      (np.concatenate([tr.first, np.full(len(starts), E)]), np.concatenate([tr.second, starts]))),
                     shape=(E + 1, E + 1))
    dist, pred = csgraph.shortest_path(g, directed=True, unweighted=True, indices=E, return_predecessors=True)
    ends = np.flatnonzero(topology.dst == t)
    ends = ends[np.isfinite(dist[ends])]
    if not len(ends):
        return None
    e = int(ends[np.lexsort((ends, dist[ends]))[0]])
    links = [e]
    while pred[links[-1]] != E:
        links.append(int(pred[links[-1]]))
    return links[::-1]


def _tree_routes(topology: Topology, root: int) -> list[list[int]]:
    """Links of the route of every host pair through a BFS tree of a symmetric topology (up to the
    lowest common ancestor, then down): the seed that keeps every pair routable in one layer."""
    n, nh = topology.n_nodes, topology.n_hosts
    live = topology.capacity > 0
    adj = sp.csr_array((np.ones(int(live.sum())), (topology.src[live], topology.dst[live])), shape=(n, n))
    _, parent = csgraph.breadth_first_order(adj, root, directed=True, return_predecessors=True)

    def up(v):
        chain = [v]
        while chain[-1] != root:
            chain.append(int(parent[chain[-1]]))
        return chain

    chains = [up(v) for v in range(nh)]
    routes = []
    for s in range(nh):
        on_s = {v: i for i, v in enumerate(chains[s])}
        for t in range(nh):
            if s == t:
                continue
            down = chains[t]
            j = next(j for j, v in enumerate(down) if v in on_s)
            nodes = chains[s][:on_s[down[j]] + 1] + down[:j][::-1]
            routes.append([topology.link_index(u, v) for u, v in zip(nodes, nodes[1:])])
    return routes


def _pack(topology: Topology, layers: int, paths, weight: np.ndarray, seed: list[list[int]]):
    """First-fit packing (module docstring): ``(graphs, weight placed per layer)``, or
    ``(None, (s, t))`` with the first pair left without a monotone route."""
    E, nh = topology.n_links, topology.n_hosts
    graphs = [LayerGraph(E) for _ in range(layers)]
    if topology.is_symmetric():                 # start each layer from the up*/down* order of its root
        hops = _hops(topology)
        for g, root in zip(graphs, updown_roots(topology, layers)):
            g.order = _rank(updown_key(topology, root, hops)).tolist()
    for chain in seed:
        graphs[0].add([chain])
    chains = [[topology.link_index(u, v) for u, v in zip(p.nodes, p.nodes[1:])] for p in paths]
    pair = np.array([p.src * nh + p.dst for p in paths], dtype=np.int64)
    by_weight = np.lexsort((np.arange(len(weight)), -weight))
    heaviest = np.zeros(len(weight), dtype=bool)              # each pair's heaviest route leads
    first = np.unique(pair[by_weight], return_index=True)[1]
    heaviest[by_weight[first]] = True
    placed = np.zeros(layers)
    covered = np.zeros(nh * nh, dtype=bool)
    digraph = nx.DiGraph(list(zip(topology.src.tolist(), topology.dst.tolist())))
    for i in np.concatenate([by_weight[heaviest[by_weight]], by_weight[~heaviest[by_weight]]]).tolist():
        for layer, g in enumerate(graphs):
            if g.add([chains[i]]):
                placed[layer] += weight[i]
                covered[pair[i]] = True
                break
        else:
            if covered[pair[i]] or not heaviest[i]:
                continue
            s, t = divmod(int(pair[i]), nh)
            best = None
            for layer, g in enumerate(graphs):
                links = _shortest_monotone(topology, np.asarray(g.order, dtype=float), s, t)
                if links is not None and (best is None or len(links) < len(best[1])):
                    best = (layer, links)
            if best is None:
                for nodes in islice(nx.shortest_simple_paths(digraph, s, t), DETOURS):
                    chain = [topology.link_index(u, v) for u, v in zip(nodes, nodes[1:])]
                    if any(g.add([chain]) for g in graphs):
                        break
                else:
                    return None, (s, t)
            else:
                graphs[best[0]].add([best[1]])
            covered[pair[i]] = True
    return graphs, placed


def mcf_orders(topology: Topology, layers: int, *, fabric=None, progress=None) -> ChannelOrders:
    """Orders that keep as much of the link MCF's flow monotone as ``layers`` acyclic layers hold (module docstring)."""
    from ..solve import solve

    sol = solve(topology, fabric, "mcf-extp", progress=progress)
    weight = snap(np.array([p.weight for p in sol.paths]))
    graphs, placed = _pack(topology, layers, sol.paths, weight, [])
    seeded = graphs is None and topology.is_symmetric()
    if seeded:                                  # retry with every pair routable in layer 0 by a BFS tree
        graphs, placed = _pack(topology, layers, sol.paths, weight, _tree_routes(topology, 0))
    if graphs is None:
        s, t = placed
        raise A2AError(f"mcf orders: host pair {s}->{t} has no route monotone in any of {layers} layer(s) after "
                       f"packing the MCF routes; use more --layers")
    keys = np.stack([np.asarray(g.order, dtype=float) for g in graphs])
    info = {"mcf_time": sol.a2a_time, "mcf_bound_time": 1 / sol.upper_bound if sol.upper_bound > 0 else None,
            "mcf_routes": len(sol.paths), "mcf_flow_kept": float(placed.sum() / weight.sum()),
            "mcf_flow_per_layer": (placed / weight.sum()).tolist(), "tree_seed": seeded}
    return ChannelOrders("mcf", keys, info)
