"""DFSSSP layer assignment: break channel-dependency cycles by moving routes up a layer.

Domke, Hoefler & Nagel 2011, "Deadlock-Free Oblivious Routing for Arbitrary
Topologies", §IV: all routes start in layer 0.  While layer ``i``'s channel
dependency graph has a cycle, the *weakest* dependency of the cycle (the one
induced by the fewest routes) is broken by moving every route that induces it
to layer ``i + 1``; when layer ``i`` is acyclic the same is done for layer
``i + 1``, until a layer needs no further split.  The routes are left as they
are (only their layer changes), so any routing — not only SSSP — can be made
deadlock-free this way.  (DFSSSP then spreads routes over spare layers for
balance; we keep the fewest layers and skip that step.)
"""

from __future__ import annotations

from typing import Sequence

import networkx as nx
import numpy as np

from ..errors import A2AError
from .lash import route_chains


def dfsssp(paths: Sequence[Sequence[int]], pairs: Sequence | None = None, max_layers: int | None = None) -> np.ndarray:
    """Layer of every route by DFSSSP's cycle breaking (module docstring).

    ``paths`` are node sequences; ``pairs`` is accepted for a common signature
    with :func:`~a2a_compiler.deadlock.lash.lash` (DFSSSP moves single routes).
    Raises :class:`A2AError` when more than ``max_layers`` layers are needed.
    """
    chains, _ = route_chains(paths)
    layer = np.zeros(len(paths), dtype=np.int64)
    current = list(range(len(paths)))
    i = 0
    while current:
        if max_layers is not None and i >= max_layers:
            raise A2AError(f"dfsssp: the routes need more than --max-layers {max_layers} virtual layers to be "
                           "deadlock-free; allow more layers or choose routes with fewer dependencies")
        g = nx.DiGraph()
        for r in current:
            for a, b in zip(chains[r], chains[r][1:]):
                if g.has_edge(a, b):
                    g[a][b]["routes"].append(r)
                else:
                    g.add_edge(a, b, routes=[r])
        moved: set[int] = set()
        while True:
            try:
                cycle = nx.find_cycle(g)
            except nx.NetworkXNoCycle:
                break
            a, b = min(cycle, key=lambda e: len(g[e[0]][e[1]]["routes"]))[:2]
            for r in list(g[a][b]["routes"]):
                moved.add(r)
                for x, y in zip(chains[r], chains[r][1:]):
                    routes = g[x][y]["routes"]
                    routes.remove(r)
                    if not routes:
                        g.remove_edge(x, y)
        current = sorted(moved)
        i += 1
        layer[current] = i
    return layer
