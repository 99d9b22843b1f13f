"""Channel dependency graphs over (link, virtual channel) (Dally & Seitz 1987).

A *channel* is a directed link ``u -> v`` used in virtual channel ``vc``.  A
route that crosses channel ``a`` and then channel ``b`` makes ``a`` wait for
``b`` (a dependency ``a -> b``); with wormhole or credit-based flow control the
routes cannot deadlock if and only if the dependencies of all routes together
form no cycle (Dally & Seitz, Theorem 1, for routes fixed in advance).

A route's channels are its hops with its per-hop virtual channels: a route in
layer ``L`` (LASH, DFSSSP) uses ``L`` on every hop, a route with ``vcs`` (one per
hop, e.g. Slim Fly's VC-per-hop) uses those.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import echo_items

Channel = tuple[int, int, int]  # (u, v, vc)


@dataclass(frozen=True, eq=False)
class ChannelDependencyGraph:
    """``channels[i] = (u, v, vc)``; ``edges[i, j]`` counts the routes that cross ``i`` then ``j``."""

    channels: np.ndarray
    edges: sp.csr_array

    @property
    def n_dependencies(self) -> int:
        """Number of distinct dependencies ``a -> b`` (arcs of the graph)."""
        return int(self.edges.nnz)

    def find_cycle(self) -> list[Channel] | None:
        """A dependency cycle (channels in order, first not repeated), or ``None`` if acyclic.

        Strongly connected components find every cyclic part at once; the cycle
        reported is the shortest one through the smallest channel of the first
        cyclic component, so the answer is deterministic.
        """
        n = len(self.channels)
        if n == 0 or self.edges.nnz == 0:
            return None
        _, label = csgraph.connected_components(self.edges, directed=True, connection="strong")
        size = np.bincount(label)
        cyclic = np.flatnonzero(size[label] > 1)
        if not len(cyclic):
            return None
        start = int(cyclic[0])
        comp = label == label[start]
        indptr, indices = self.edges.indptr, self.edges.indices
        parent = {start: -1}
        queue = deque([start])
        while queue:                         # BFS inside the component until an arc returns to start
            u = queue.popleft()
            for v in indices[indptr[u]:indptr[u + 1]].tolist():
                if v == start:
                    cycle = [u]
                    while parent[cycle[-1]] != -1:
                        cycle.append(parent[cycle[-1]])
                    return [tuple(int(x) for x in self.channels[c]) for c in reversed(cycle)]
                if comp[v] and v not in parent:
                    parent[v] = u
                    queue.append(v)
        raise AssertionError("a strongly connected component without a cycle")  # pragma: no cover

    @property
    def acyclic(self) -> bool:
        """True when the routes cannot deadlock (Dally & Seitz)."""
        return self.find_cycle() is None


def channel_dependency_graph(paths: Sequence[Sequence[int]],
                             classes: Sequence[Sequence[int]]) -> ChannelDependencyGraph:
    """The dependency graph of routes ``paths`` (node sequences) with per-hop virtual channels ``classes``.

    ``classes[i]`` has one entry per hop of ``paths[i]``.
    """
    lengths = np.array([max(len(p) - 1, 0) for p in paths], dtype=np.int64)
    if not lengths.sum():
        return ChannelDependencyGraph(np.zeros((0, 3), np.int64), sp.csr_array((0, 0)))
    u = np.concatenate([np.asarray(p[:-1], dtype=np.int64) for p in paths])
    v = np.concatenate([np.asarray(p[1:], dtype=np.int64) for p in paths])
    vc = np.concatenate([np.asarray(c, dtype=np.int64) for c in classes])
    if len(vc) != len(u):
        raise ValueError("classes must give one virtual channel per hop")
    channels, hop_channel = np.unique(np.stack([u, v, vc], 1), axis=0, return_inverse=True)
    hop_channel = hop_channel.reshape(-1)
    path_of_hop = np.repeat(np.arange(len(paths)), lengths)
    follows = np.flatnonzero(path_of_hop[1:] == path_of_hop[:-1])   # hop i then hop i+1 of one route
    n = len(channels)
    edges = sp.csr_array((np.ones(len(follows)), (hop_channel[follows], hop_channel[follows + 1])), shape=(n, n))
    edges.sum_duplicates()
    return ChannelDependencyGraph(channels, edges)


def describe_cycle(cycle: list[Channel]) -> str:
    """``0->1 (vc 0) -> 1->2 (vc 0) -> 2->0 (vc 0) -> back to 0->1``."""
    hops = [f"{u}->{v} (vc {c})" for u, v, c in cycle]
    return f"{echo_items(hops, 'channels', ' -> ')} -> back to {cycle[0][0]}->{cycle[0][1]}"
