"""FatPaths layered routing (Besta et al., SC 2020, §V).

``n`` layers, each a set of router links with shortest-path routing inside
it, so a host pair gets up to ``n`` paths, minimal and non-minimal (§V-B).
Layer 1 (here layer 0) holds every link and the minimal paths.  The others:

* ``variant="random"`` — Random Uniform Edge Sampling (§V-B2): ``⌊ρ·|E|⌋``
  cables drawn uniformly, drawn again until the routers stay connected ("a
  small number of attempts delivers a connected network").  Listing 1 also
  orients each layer along a random router permutation to make it acyclic
  "if needed"; it is not needed here, since deadlock freedom comes from the
  virtual lanes assigned afterwards (as Blach et al. §5.2 do), and the
  orientation would leave each layer able to route only half of the pairs.
* ``variant="balanced"`` — minimising path overlap (§V-B3, Listing 2): for a
  random router permutation ``π`` per layer, router pairs ``u, v`` with
  ``π(u) < π(v)``, fewest paths placed first (ties random), each get the path
  of 2 .. D+1 hops, increasing in ``π``, with the least summed edge weight
  ``W``; its links join the layer, the chords between its routers are
  excluded, the sub-pairs closer than 2 hops leave the queue, and ``W`` grows
  by ``i·(len − 1 − i)`` on its ``i``-th link.  The layer is a DAG, so it
  routes only the pairs it connects; the others use the remaining layers.

Within a layer a router forwards along a shortest path, taking a random
first step where there are several (§V-C).  A pair's shard is split equally
over the layers that route it (the static form of FatPaths' flowlet load
balancing over layers, §III-B), identical paths merged; the virtual lanes
come from DFSSSP (:mod:`.layered`).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .layered import layered_routes, require_pair_arrays
from .opensm import DEFAULT_VLS
from .tables import ForwardingTables
from .routers import RouterView, minimal_tables, path_catalog, router_distances, router_view

#: Layer construction variants (§V-B2, §V-B3).
VARIANTS = ("random", "balanced")
#: Draws of a random layer before giving up on a connected one.
MAX_DRAWS = 100


def _connected(view: RouterView, allowed: np.ndarray) -> bool:
    t = view.topology
    use = view.link & allowed
    adj = sp.csr_array((np.ones(int(use.sum())), (t.src[use], t.dst[use])), shape=(t.n_nodes, t.n_nodes))
    _, label = csgraph.connected_components(adj, directed=True, connection="strong")
    return len(np.unique(label[view.routers])) == 1


def random_layer(view: RouterView, rho: float, rng: np.random.Generator) -> np.ndarray:
    """§V-B2: a connected layer of ``⌊ρ·|E|⌋`` cables drawn uniformly (a mask over the topology's links)."""
    t = view.topology
    cables = np.flatnonzero(view.link & (t.src < t.dst))
    keep = int(np.floor(rho * len(cables)))
    key = t.src * t.n_nodes + t.dst
    for _ in range(MAX_DRAWS):
        pick = cables[rng.choice(len(cables), size=keep, replace=False)]
        mask = np.zeros(t.n_links, dtype=bool)
        mask[pick] = True
        mask[np.searchsorted(key, t.dst[pick] * t.n_nodes + t.src[pick])] = True
        if _connected(view, mask):
            return mask
    raise A2AError(f"fatpaths: no connected layer of {keep} of the {len(cables)} cables in {MAX_DRAWS} draws; "
                   f"raise --rho (now {rho})")


def balanced_layers(view: RouterView, n: int, rng: np.random.Generator) -> list[np.ndarray]:
    """§V-B3, Listing 2: ``n`` acyclic layers built from paths that avoid each other (module docstring)."""
    t = view.topology
    routers = view.routers
    dist = router_distances(view)
    diameter = int(dist[np.ix_(routers, routers)].max())
    catalog = path_catalog(view, diameter + 1)
    pairs, n_pairs = catalog.pairs, len(catalog.pairs)
    weight = np.zeros(t.n_links)
    placed = np.zeros(n_pairs, dtype=np.int64)
    pair_of = np.full((t.n_nodes, t.n_nodes), -1, dtype=np.int64)
    pair_of[pairs[:, 0], pairs[:, 1]] = np.arange(n_pairs)
    key = t.src * t.n_nodes + t.dst
    layers = []
    for _ in range(n):
        pi = np.empty(t.n_nodes, dtype=np.int64)
        pi[routers] = rng.permutation(len(routers))
        open_pair = pi[pairs[:, 0]] < pi[pairs[:, 1]]
        excluded = np.zeros(t.n_links, dtype=bool)          # chords of placed paths (incidence_G = 0)
        layer = np.zeros(t.n_links, dtype=bool)
        order = rng.permutation(n_pairs)
        order = order[np.argsort(placed[order], kind="stable")]
        for k in order.tolist():
            if not open_pair[k]:
                continue
            rows = catalog.of(k)
            p, links, hops = catalog.nodes[rows], catalog.links[rows], catalog.hops[rows]
            on = links >= 0
            rank = np.where(p >= 0, pi[np.maximum(p, 0)], np.iinfo(np.int64).max)
            ok = (hops >= 2) & np.where(on, np.diff(rank, axis=1) > 0, True).all(1) & \
                ~np.where(on, excluded[np.where(on, links, 0)], False).any(1)
            if not ok.any():
                continue
            cost = np.where(on, weight[np.where(on, links, 0)], 0.0).sum(1)
            best = np.flatnonzero(ok)[np.argmin(np.where(ok, cost, np.inf)[ok])]
            h = int(hops[best])
            path, hop = p[best, : h + 1], links[best, :h]
            layer[hop] = True
            placed[k] += 1
            weight[hop] += np.arange(h) * (h - 1 - np.arange(h))
            i, j = np.triu_indices(h + 1, 2)                   # chords v_i -> v_j, j - i > 1
            chord = np.searchsorted(key, path[i] * t.n_nodes + path[j])
            real = (chord < len(key)) & (key[np.minimum(chord, len(key) - 1)] == path[i] * t.n_nodes + path[j])
            excluded[chord[real]] = True
            near = pair_of[path[:-1], path[1:]]                # sub-pairs one hop apart leave the queue
            open_pair[near[near >= 0]] = False
            open_pair[k] = False
        layers.append(layer)
    return layers


def fatpaths(topology: Topology, fabric: Fabric | None = None, *, layers: int = 4, rho: float = 0.6,
             variant: str = "random", seed: int = 0, vls: int = DEFAULT_VLS,
             progress=None) -> ForwardingTables:
    """FatPaths routing with ``layers`` layers (module docstring); ``rho``: fraction of cables per random layer;
    ``vls``: the fabric's data virtual lanes (:func:`~.layered.fit_lanes`)."""
    if variant not in VARIANTS:
        raise A2AError(f"fatpaths: unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if not 1 <= layers <= 128:
        raise A2AError(f"fatpaths: --layers must be in 1..128, got {layers}")
    if not 0 < rho <= 1:
        raise A2AError(f"fatpaths: --rho must be in (0, 1], got {rho}")
    require_pair_arrays(topology, layers)
    t0 = time.perf_counter()
    view = router_view(topology)
    rng = np.random.default_rng(seed)
    masks = [random_layer(view, rho, rng) for _ in range(layers - 1)] if variant == "random" else \
        balanced_layers(view, layers - 1, rng)
    tables = [minimal_tables(view, rng=rng)] + [minimal_tables(view, m, rng=rng) for m in masks]
    return layered_routes("fatpaths", view, tables, fabric or Fabric(), timings={"route": time.perf_counter() - t0},
                          info={"variant": variant, "rho": rho if variant == "random" else None, "seed": seed},
                          vls=vls, progress=progress)
