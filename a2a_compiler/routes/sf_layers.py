"""Layered multipath routing of the Slim Fly deployment (Blach et al., NSDI 2024, §4.3 Algorithm 1, App. B.1).

* Layer 0 holds all links and the minimal paths, balanced: towards each
  destination a router takes the minimal next hop whose path carries the
  least weight so far (weights count the host pairs routed over a link).
* Each further layer ``l`` gets, for every ordered router pair in priority
  order (fewest almost-minimal paths so far first, random within a priority,
  App. B.1.2), one *almost-minimal* path: among the simple paths one hop
  longer than the pair's minimal ones, up to the diameter plus one (B.1.1:
  3 hops on a diameter-2 Slim Fly), the one that shares the fewest links with
  the pair's paths in earlier layers and then has the least link weight
  (B.1.3) — "the least overlap".  A path is valid only if it agrees with
  every next hop already set in the layer towards its destination (B.1.4), so
  each layer stays one forwarding tree per destination: an InfiniBand LFT
  under one LID offset of the LMC range (§5.1).  Inserting it fixes the
  layer's route of every router on it.
* A pair that gets no such path (its route was fixed by an earlier path, or
  none fits) keeps the fixed route or falls back to the minimal next hop
  (B.1.4).  Neighbours in a girth-5 Slim Fly (the Hoffman–Singleton graph)
  have no path of 2 or 3 hops besides their link; where a pair has no
  candidate up to diameter + 1 hops, paths of diameter + 2 hops are
  considered (B.1.1 allows "a range of valid lengths").

Deadlock freedom is decoupled from the layers (§5.2): the routes' virtual
lanes come from DFSSSP afterwards (:func:`~.layered.layered_routes`).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .layered import layered_routes, require_pair_arrays
from .opensm import DEFAULT_VLS
from .lft import hop_links, trace
from .tables import ForwardingTables
from .routers import RouterView, minimal_tables, path_catalog, router_distances, router_view


def _complete(nxt: np.ndarray, base: np.ndarray, routers: np.ndarray) -> None:
    """Give every router without a next hop in the layer its minimal (layer-0) one (App. B.1.4).

    Minimal next hops lead strictly closer and the layer's existing next hops
    lead to the destination, so no forwarding loop can form.
    """
    unset = (nxt < 0) & (base >= 0)
    nxt[unset] = base[unset]


def _router_routes(view: RouterView, nxt: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Router-level routes of ``pairs`` in one layer's tables (node matrix)."""
    return trace(view.topology, nxt, pairs[:, 0], pairs[:, 1], algo="sf-layers")


def sf_layer_tables(view: RouterView, n_layers: int, rng: np.random.Generator, progress=None) -> list[np.ndarray]:
    """Blach et al. Algorithm 1: the router tables ``nxt[r, t]`` of every layer (module docstring)."""
    t = view.topology
    dist = router_distances(view)
    routers = view.routers
    diameter = int(dist[np.ix_(routers, routers)].max())
    weight = np.zeros(t.n_links)
    base = minimal_tables(view, weight=weight)
    tables = [base]
    if n_layers == 1:
        return tables
    catalog = path_catalog(view, diameter + 2)
    pairs = catalog.pairs
    n_pairs = len(pairs)
    used = np.zeros((n_pairs, t.n_links), dtype=bool)           # links of each pair's routes so far
    pair_of = np.zeros((t.n_nodes, t.n_nodes), dtype=np.int64)
    pair_of[pairs[:, 0], pairs[:, 1]] = np.arange(n_pairs)

    def record(nxt: np.ndarray) -> np.ndarray:
        """Mark the links of every pair's route in ``nxt``; return which routes are non-minimal."""
        nodes = _router_routes(view, nxt, pairs)
        links = hop_links(t, nodes)
        i, j = np.nonzero(links >= 0)
        used[i, links[i, j]] = True
        return (links >= 0).sum(1) > dist[pairs[:, 0], pairs[:, 1]]

    record(base)
    placed = np.zeros(n_pairs, dtype=np.int64)
    hosts = view.hosts.astype(float)
    for layer in range(1, n_layers):
        if progress:
            progress(f"sf-layers: layer {layer} of {n_layers - 1} ({n_pairs} router pairs)")
        nxt = np.full((t.n_nodes, t.n_nodes), -1, dtype=np.int64)
        order = rng.permutation(n_pairs)
        order = order[np.argsort(placed[order], kind="stable")]
        for k in order.tolist():
            u, v = pairs[k]
            if nxt[u, v] >= 0:
                continue                                       # fixed by an earlier path of this layer
            rows = catalog.of(k)
            hops = catalog.hops[rows]
            near = dist[u, v]
            for tier in ((hops > near) & (hops <= diameter + 1), hops == diameter + 2):
                if not tier.any():
                    continue
                p, links, h = catalog.nodes[rows][tier], catalog.links[rows][tier], hops[tier]
                on = links >= 0
                ahead = nxt[np.where(on, p[:, :-1], 0), v]
                agree = np.where(on, (ahead < 0) | (ahead == p[:, 1:]), True).all(1)
                if not agree.any():
                    continue
                p, links, on, ahead = p[agree], links[agree], on[agree], ahead[agree]
                safe = np.where(on, links, 0)
                overlap = np.where(on, used[k, safe], False).sum(1)
                # routers the path newly fixes: their sub-route is wasted if it overlaps their own paths
                wasted = np.zeros(len(p), dtype=np.int64)
                for i in range(1, p.shape[1] - 1):
                    fixes = on[:, i] & (ahead[:, i] < 0)
                    sub = pair_of[np.where(fixes, p[:, i], u), v]
                    wasted += fixes & (np.where(on[:, i:], used[sub[:, None], safe[:, i:]], False)).any(1)
                load = np.where(on, weight[safe], 0.0).sum(1)
                best = int(np.lexsort((load, wasted, overlap))[0])
                n_hops = int(h[agree][best])
                path, hop, new = p[best, : n_hops + 1], links[best, :n_hops], ahead[best, :n_hops] < 0
                nxt[path[:-1][new], v] = path[1:][new]
                # App. B.1.3: each link gains the routes that now newly cross it
                weight[hop] += np.cumsum(hosts[path[:-1]] * new) * hosts[v]
                break
        _complete(nxt, base, routers)
        placed += record(nxt)
        tables.append(nxt)
    return tables


def sf_layers(topology: Topology, fabric: Fabric | None = None, *, layers: int = 4, seed: int = 0,
              vls: int = DEFAULT_VLS, progress=None) -> ForwardingTables:
    """Blach et al.'s layered routing with ``layers`` layers (LMC offsets); VLs by DFSSSP afterwards, within the
    fabric's ``vls`` data virtual lanes (:func:`~.layered.fit_lanes`)."""
    if not 1 <= layers <= 128:
        raise A2AError(f"sf-layers: --layers must be in 1..128 (InfiniBand LMC allows 2^7 addresses), got {layers}")
    require_pair_arrays(topology, layers)
    t0 = time.perf_counter()
    view = router_view(topology)
    tables = sf_layer_tables(view, layers, np.random.default_rng(seed), progress)
    return layered_routes("sf-layers", view, tables, fabric or Fabric(),
                          timings={"route": time.perf_counter() - t0}, info={"seed": seed}, vls=vls, progress=progress)
