"""OpenSM's original MinHop routing: Zahavi et al.'s baseline ("Original OpenSM", Table I).

Every switch routes each destination (in LID order, here host order) through
one of its min-hop ports, the one with the fewest destinations routed through
it so far; ties go to the lowest port.  The balancing is local to each switch
and knows nothing of the tree, so destinations that share a leaf can share an
up-link and shift stages congest (Zahavi et al. §4.1).  As in OpenSM, only
the hop counts and per-port counters decide, so the engine routes any
topology.  A link of capacity ``c`` (a port group of ``c`` cables) counts as
its least used cable, ``floor(count / c)``.

The counters of all switches evolve independently, so one numpy step per
destination routes it at every node at once.
"""

from __future__ import annotations

import time

import numpy as np
from scipy.sparse import csgraph

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .lft import all_pairs, routes_from_nodes, trace
from .result import RouteSet


def minhop_tables(topology: Topology) -> np.ndarray:
    """The forwarding tables ``nxt[node, host]`` MinHop fills (module docstring)."""
    t, nh = topology, topology.n_hosts
    # hops from every node to every host: BFS from each host over reversed links
    dist = csgraph.shortest_path(t.adjacency("ones").T, unweighted=True, indices=np.arange(nh)).T
    deg = t.out_degree()
    if np.any(deg == 0) or not np.all(np.isfinite(dist)):
        raise A2AError(f"minhop: {t.spec} is not connected")
    first = np.concatenate([[0], np.cumsum(deg)])[:-1]          # node u's ports: links first[u] .. (by neighbour)
    usage = np.zeros(t.n_links)
    nxt = np.full((t.n_nodes, nh), -1, dtype=np.int64)
    nodes, link_id = np.arange(t.n_nodes), np.arange(t.n_links)
    for d in range(nh):
        ok = dist[t.dst, d] == dist[t.src, d] - 1                # min-hop ports towards d
        load = np.where(ok, np.floor(usage / t.capacity), np.inf)
        least = np.minimum.reduceat(load, first)
        pick = np.minimum.reduceat(np.where(load == least[t.src], link_id, t.n_links), first)  # lowest port
        route = nodes != d
        usage[pick[route]] += 1
        nxt[route, d] = t.dst[pick[route]]
    return nxt


def minhop(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> RouteSet:
    """Route every ordered host pair along OpenSM MinHop's tables (:func:`minhop_tables`)."""
    t0 = time.perf_counter()
    nxt = minhop_tables(topology)
    src, dst = all_pairs(topology.n_hosts)
    nodes = trace(topology, nxt, src, dst, algo="minhop")
    return routes_from_nodes("minhop", topology, fabric or Fabric(), src, dst, nodes,
                             timings={"route": time.perf_counter() - t0})
