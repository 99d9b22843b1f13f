"""SSSP: congestion-aware single-path routing (Domke, Hoefler & Nagel 2011, §III).

The routing behind DFSSSP and OpenSM's ``sssp``/``dfsssp`` engines (first
described by Hoefler, Schneider & Lumsdaine 2008 as "SSSP"): destinations are
routed one after another, each by a shortest-path tree toward it computed with
Dijkstra on *link weights*, and after every destination each link's weight
grows by the number of routes it now carries.  Later trees therefore avoid the
links earlier ones loaded.  Weights start at ``P²`` (``P`` endpoints), as in
OpenSM, which makes hop count dominate: routes are (almost always) minimal and
the route counts choose among the shortest paths.  Basu et al.
§5.2–5.3 use it as the fast, general single-path baseline ("up to 1.6× worse
than MCF").
"""

from __future__ import annotations

import time

import numpy as np

from ..fabric import Fabric
from ..numeric import shortest_path_tree
from ..solve.certificate import check_connected
from ..topology.model import Topology
from .result import RoutedPath, RouteSet


def tree_paths(pred: np.ndarray, root: int, leaves, toward_root: bool) -> list[tuple[int, ...]]:
    """Node paths between ``root`` and each of ``leaves`` along a predecessor array.

    ``pred[v]`` is ``v``'s parent in a shortest-path tree rooted at ``root``
    (:func:`~a2a_compiler.numeric.shortest_path_tree`, ``-9999`` for none).  With
    ``toward_root`` the paths run leaf -> root (a tree on the reversed graph),
    otherwise root -> leaf.
    """
    out = []
    for v in leaves:
        nodes = [int(v)]
        while nodes[-1] != root:
            nodes.append(int(pred[nodes[-1]]))
        out.append(tuple(nodes) if toward_root else tuple(reversed(nodes)))
    return out


def sssp(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> RouteSet:
    """One route per host pair by congestion-weighted shortest-path trees (Domke et al. 2011).

    Link weights start at ``P²`` for ``P`` hosts.  For each destination host ``d`` in id order,
    Dijkstra on the reversed graph gives every node's next hop toward ``d``
    (a tree, as in an InfiniBand forwarding table; among equal-weight next hops the
    lowest node id, :func:`~a2a_compiler.numeric.shortest_path_tree`); each source host follows it,
    and every link on a route then gains weight 1 per route crossing it (OpenSM
    adds the number of routed endpoints behind each switch, the same count).
    Capacities are not used for the choice (links of capacity 0 are absent).
    """
    fabric = fabric or Fabric()
    check_connected(topology)
    t0 = time.perf_counter()
    n, nh = topology.n_nodes, topology.n_hosts
    live = np.flatnonzero(topology.capacity > 0)
    src, dst = topology.src[live], topology.dst[live]
    key = src * n + dst
    weight = np.full(len(live), float(nh) ** 2)
    paths = []
    for d in range(nh):
        _, pred = shortest_path_tree(n, src, dst, weight, d, toward_root=True)
        sources = [s for s in range(nh) if s != d]
        for s, nodes in zip(sources, tree_paths(pred, d, sources, toward_root=True)):
            paths.append(RoutedPath(s, d, nodes, 1.0))
            hops = np.asarray(nodes[:-1], dtype=np.int64) * n + np.asarray(nodes[1:], dtype=np.int64)
            weight[np.searchsorted(key, hops)] += 1.0
        if progress and nh >= 256 and (d + 1) % 64 == 0:
            progress(f"sssp: {d + 1}/{nh} destinations routed")
    return RouteSet("sssp", topology, fabric, tuple(paths), timings={"route": time.perf_counter() - t0},
                    info={"max_link_weight": float(weight.max(initial=0.0))})
