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

import numpy as np

from ..errors import A2AError
from .lash import route_chains


def dfsssp(paths: Sequence[Sequence[int]], pairs: Sequence | None = None, max_layers: int | None = None) -> np.ndarray:
    """Layer of every route by DFSSSP's cycle breaking (module docstring).

    ``paths`` are node sequences; ``pairs`` is accepted for a common signature
    with :func:`~a2a_compiler.deadlock.lash.lash` (DFSSSP moves single routes).
    Raises :class:`A2AError` when more than ``max_layers`` layers are needed.
    """
    chains, n = route_chains(paths)
    layer = np.zeros(len(paths), dtype=np.int64)
    current = list(range(len(paths)))
    i = 0
    while current:
        if max_layers is not None and i >= max_layers:
            raise A2AError(f"dfsssp: the routes need more than --max-layers {max_layers} virtual layers to be "
                           "deadlock-free; allow more layers or choose routes with fewer dependencies")
        current = sorted(_break_cycles(chains, current, n))
        i += 1
        layer[current] = i
    return layer


def _break_cycles(chains: list[list[int]], routes: list[int], n: int) -> set[int]:
    """The routes to move up a layer so that the dependencies of the others are acyclic.

    One depth-first search over the channel dependency graph of ``routes``
    (channels ``0..n-1``): a dependency back to a channel on the search path
    closes a cycle, whose weakest dependency (fewest routes; the first on the
    cycle among equals) loses all its routes at once; the search path is cut
    back to before the first dependency that vanished and goes on.  Removing
    dependencies creates no cycle, so finished channels stay finished and each
    dependency is searched about once (networkx's ``find_cycle`` from scratch
    per cycle took 407 s on slimfly:7).
    """
    succ: list[dict[int, set[int]]] = [{} for _ in range(n)]
    for r in routes:
        c = chains[r]
        for a, b in zip(c, c[1:]):
            succ[a].setdefault(b, set()).add(r)
    moved: set[int] = set()

    def drop(r: int) -> None:
        moved.add(r)
        c = chains[r]
        for a, b in zip(c, c[1:]):
            on = succ[a].get(b)
            if on is not None:
                on.discard(r)
                if not on:
                    del succ[a][b]

    state = bytearray(n)                      # 0 new, 1 on the search path, 2 finished
    for root in range(n):
        if state[root]:
            continue
        path, todo, where = [root], [list(succ[root])[::-1]], {root: 0}
        state[root] = 1
        while path:
            u = path[-1]
            nxt = todo[-1]
            while nxt and nxt[-1] not in succ[u]:
                nxt.pop()                     # vanished since listed
            if not nxt:
                state[u] = 2
                path.pop()
                todo.pop()
                del where[u]
                continue
            v = nxt[-1]
            if state[v] == 0:
                state[v] = 1
                where[v] = len(path)
                path.append(v)
                todo.append(list(succ[v])[::-1])
                continue
            if state[v] == 2:
                nxt.pop()
                continue
            ring = path[where[v]:] + [v]          # a cycle: v .. u, v
            a, b = min(zip(ring, ring[1:]), key=lambda e: len(succ[e[0]][e[1]]))
            for r in list(succ[a][b]):
                drop(r)
            cut = next((k for k in range(len(path) - 1) if path[k + 1] not in succ[path[k]]), None)
            if cut is not None:                   # the path's dependency k -> k+1 vanished: back to node k
                for w in path[cut + 1:]:
                    state[w] = 0
                    del where[w]
                del path[cut + 1:], todo[cut + 1:]
    return moved
