"""Hosts on routers: the router graph of a direct network and its minimal forwarding tables.

Slim Fly, Dragonfly and HyperX attach ``p`` hosts to every router (a *leaf
host* has one cable, to its router); with ``p = 0`` the routers are the hosts
(:mod:`a2a_compiler.topology.generators`).  Their routing engines (Besta &
Hoefler 2014 §IV, FatPaths, Blach et al. 2024) work on routers: a table
``nxt[r, t]`` gives router ``r``'s next router towards router ``t``, and every
host behind ``t`` is reached the same way (FatPaths §V-E: "all endpoints on
one router share the routes towards that router").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..topology.metrics import attachment
from ..topology.model import Topology
from .lft import hop_links


@dataclass(frozen=True, eq=False)
class RouterView:
    """A topology as routers with hosts attached.

    ``router_of[h]`` is host ``h``'s router (``h`` itself when routers are
    hosts), ``hosts[r]`` the number of hosts node ``r`` carries, ``is_router``
    marks the routers and ``link`` the router-to-router links.
    """

    topology: Topology
    router_of: np.ndarray
    hosts: np.ndarray
    is_router: np.ndarray
    link: np.ndarray

    @property
    def routers(self) -> np.ndarray:
        return np.flatnonzero(self.is_router)


def router_view(topology: Topology) -> RouterView:
    """Split ``topology`` into leaf hosts and routers (the attachment points of :mod:`..topology.metrics`)."""
    t = topology
    router_of, _ = attachment(t)
    is_router = np.zeros(t.n_nodes, dtype=bool)
    is_router[router_of] = True
    is_router[t.n_hosts:] = True
    link = is_router[t.src] & is_router[t.dst]
    return RouterView(t, router_of, np.bincount(router_of, minlength=t.n_nodes), is_router, link)


def router_distances(view: RouterView, allowed: np.ndarray | None = None) -> np.ndarray:
    """``dist[r, t]``: hops from node ``r`` to router ``t`` over router links (``allowed`` of them), float32;
    ``inf`` where ``t`` is not a router (only routers' columns are searched: 470 MB at slimfly:19's 10,830 nodes,
    not 940 MB twice)."""
    t = view.topology
    use = view.link if allowed is None else view.link & allowed
    adj = sp.csr_array((np.ones(int(use.sum())), (t.dst[use], t.src[use])), shape=(t.n_nodes, t.n_nodes))
    dist = np.full((t.n_nodes, t.n_nodes), np.inf, dtype=np.float32)
    routers = view.routers
    for k in range(0, len(routers), 256):                          # BFS over reversed links: distance *to* t
        dist[:, routers[k:k + 256]] = csgraph.shortest_path(adj, unweighted=True, indices=routers[k:k + 256]).T
    return dist


def minimal_tables(view: RouterView, allowed: np.ndarray | None = None, *, weight: np.ndarray | None = None,
                   rng: np.random.Generator | None = None) -> np.ndarray:
    """Router next hops ``nxt[r, t]`` along minimal paths (within the ``allowed`` links), ``-1`` for none.

    Towards each destination router, routers are settled nearest first; each
    picks, among its neighbours one hop closer, the one whose path to ``t`` has
    the least total ``weight`` (Blach et al. §4.3: link weights count the routes
    a link already carries) — or a uniformly random one with ``rng`` (FatPaths
    §V-C: "a random first step port, if there are multiple options").  After
    each destination the weights grow by the host pairs whose routes cross the
    link (``hosts[s] * hosts[t]`` for every source router ``s``), so later
    destinations avoid them.  ``weight`` (one value per link) is updated in
    place when given.
    """
    t = view.topology
    use = view.link if allowed is None else view.link & allowed
    dist = router_distances(view, allowed)
    weight = np.zeros(t.n_links) if weight is None else weight
    e = np.flatnonzero(use)
    u, v = t.src[e], t.dst[e]
    nxt = np.full((t.n_nodes, t.n_nodes), -1, dtype=np.int32)
    routers = view.routers
    for dest in routers.tolist():
        d = dist[:, dest]
        cost = np.zeros(t.n_nodes)
        via = np.full(t.n_nodes, -1, dtype=np.int64)             # link index of each router's next hop
        top = int(d[routers][np.isfinite(d[routers])].max(initial=0))
        for k in range(1, top + 1):
            cand = np.flatnonzero((d[u] == k) & (d[v] == k - 1))
            key = weight[e[cand]] + cost[v[cand]]
            # least path weight, ties to the lower router id; or a random candidate
            cand = cand[rng.permutation(len(cand)) if rng is not None else np.lexsort((v[cand], key))]
            pick = cand[np.unique(u[cand], return_index=True)[1]]  # each router's first candidate
            via[u[pick]] = e[pick]
            cost[u[pick]] = weight[e[pick]] + cost[v[pick]]
            nxt[u[pick], dest] = v[pick]
        # every source router's host pairs to ``dest`` cross its path: accumulate far to near
        flow = (view.hosts * view.hosts[dest]).astype(float)
        for k in range(top, 0, -1):
            at = routers[(d[routers] == k) & (via[routers] >= 0)]
            weight[via[at]] += flow[at]
            np.add.at(flow, t.dst[via[at]], flow[at])
    return nxt


def host_tables(view: RouterView, router_nxt: np.ndarray) -> np.ndarray:
    """Host-level tables ``nxt[node, host]`` from router-level ones: a router sends a host's traffic
    towards the host's router, and that router hands it to the host."""
    t = view.topology
    nxt = np.take(router_nxt.astype(np.int32, copy=False), view.router_of, axis=1)
    h = np.arange(t.n_hosts)
    leaf = view.router_of != h
    nxt[view.router_of[leaf], h[leaf]] = h[leaf]
    nxt[h[leaf]] = view.router_of[leaf][:, None]                  # a leaf host sends to its router
    nxt[h, h] = -1
    return nxt


def hop_channels(view: RouterView, nodes: np.ndarray) -> np.ndarray:
    """Per-hop virtual channels ``k`` on the ``k``-th router-to-router hop, 0 on host links (Besta & Hoefler
    §IV-D: VC ``k`` on hop ``k``; a host never forwards, so its links close no dependency cycle)."""
    u, v = nodes[:, :-1], nodes[:, 1:]
    is_router = np.append(view.is_router, False)                   # index -1 (padding) is no router
    router_hop = is_router[u] & is_router[v]
    return np.where(router_hop, np.cumsum(router_hop, 1) - 1, 0)


#: Most walks :func:`path_catalog` expands (bounds memory on large, high-radix networks).
MAX_WALKS = 8_000_000


@dataclass(frozen=True, eq=False)
class PathCatalog:
    """Every simple router path of 1..``max_hops`` hops, grouped by ordered router pair.

    Rows ``ptr[k] .. ptr[k+1]`` of ``nodes`` (``-1``-padded) and ``links`` are
    the paths from ``pairs[k, 0]`` to ``pairs[k, 1]``, shortest first.
    """

    nodes: np.ndarray
    links: np.ndarray
    hops: np.ndarray
    pairs: np.ndarray
    ptr: np.ndarray

    def of(self, k: int) -> slice:
        return slice(int(self.ptr[k]), int(self.ptr[k + 1]))


def path_catalog(view: RouterView, max_hops: int) -> PathCatalog:
    """All simple paths of at most ``max_hops`` router hops, by vectorised expansion of walks."""
    t = view.topology
    e = np.flatnonzero(view.link)                       # sorted by src already
    deg = np.bincount(t.src[e], minlength=t.n_nodes)
    first = np.concatenate([[0], np.cumsum(deg)])[:-1]
    walks = view.routers[:, None]
    found = []
    for h in range(1, max_hops + 1):
        last = walks[:, -1]
        if int(deg[last].sum()) > MAX_WALKS:
            raise A2AError(f"{t.spec}: more than {MAX_WALKS} router paths of {h} hops to enumerate; "
                           "use a smaller network or fewer layers")
        row = np.repeat(np.arange(len(walks)), deg[last])
        k = np.arange(len(row)) - np.repeat(np.cumsum(deg[last]) - deg[last], deg[last])
        step = t.dst[e[first[last[row]] + k]]
        walks = np.concatenate([walks[row], step[:, None]], 1)
        walks = walks[(walks[:, :-1] != step[:, None]).all(1)]         # simple: no router twice
        found.append(np.pad(walks, ((0, 0), (0, max_hops - h)), constant_values=-1))
    nodes = np.concatenate(found)
    hops = np.repeat(np.arange(1, max_hops + 1), [len(f) for f in found])
    end = nodes[np.arange(len(nodes)), hops]
    key = nodes[:, 0] * t.n_nodes + end
    order = np.lexsort((hops, key))
    nodes, hops, key = nodes[order], hops[order], key[order]
    pair_key, start = np.unique(key, return_index=True)
    return PathCatalog(nodes, hop_links(t, nodes), hops, np.stack(np.divmod(pair_key, t.n_nodes), 1),
                       np.append(start, len(nodes)))
