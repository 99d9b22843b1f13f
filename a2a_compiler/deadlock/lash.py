"""LASH and LASH-sequential: layered routing by first fit into acyclic layers.

* :func:`lash` — Skeie, Lysne & Theiss 2002, "Layered Shortest Path (LASH)
  Routing in Irregular System Area Networks": every source–destination pair is
  placed, in order, into the first virtual layer whose channel dependency graph
  stays acyclic with all of the pair's routes added; a new layer is opened when
  none does.  The layer is a property of the pair (an InfiniBand SL per pair).
* :func:`lash_sequential` — the design source's LASH-sequential (Basu et al.
  §5.5 names it as the variant needing the fewest layers — at most 4 over its
  algorithms and topologies — but does not define it).  Our precise definition:

  1. *sequential first fit*: the routes, not the pairs, are placed one at a
     time in route order, each into the first layer whose dependency graph
     stays acyclic with it (a new layer when none does); the routes of one
     multipath pair may therefore land in different layers;
  2. *compaction*: the routes of the highest layer are taken one at a time and
     each is moved into the lowest layer that stays acyclic with it; when the
     highest layer empties it is dropped and the next one is compacted, until
     a layer cannot be emptied;
  3. the same compaction is applied to LASH's pair-level layers, and the
     assignment with fewer layers is kept (the sequential one on a tie), so
     LASH-sequential never needs more layers than LASH.

Both keep each layer's dependencies with a topological order maintained
incrementally (Pearce & Kelly 2006), so testing a route costs a search of the
part of the order its new dependencies disturb, not of the whole graph.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import A2AError


class LayerGraph:
    """The channel dependencies of one virtual layer, kept acyclic.

    Channels are integers ``0..n-1``; a route is its chain of channels.
    ``succ[a][b]`` counts the routes in the layer that cross ``a`` then ``b``.
    """

    def __init__(self, n: int):
        self.succ: list[dict[int, int]] = [{} for _ in range(n)]
        self.pred: list[set[int]] = [set() for _ in range(n)]
        self.order = list(range(n))          # order[c] = position of channel c in a topological order
        self.routes = 0

    def _reaches(self, start: int, bound: int, forward: bool) -> list[int] | None:
        """Channels reachable from ``start`` within the disturbed window of the order.

        Forward search follows successors with position < ``bound`` and returns
        ``None`` if it meets position ``bound`` itself (the new arc closes a
        cycle); backward search follows predecessors with position > ``bound``.
        """
        seen, stack, found = {start}, [start], []
        while stack:
            w = stack.pop()
            found.append(w)
            for z in (self.succ[w] if forward else self.pred[w]):
                oz = self.order[z]
                if forward and oz == bound:
                    return None
                if z not in seen and (oz < bound if forward else oz > bound):
                    seen.add(z)
                    stack.append(z)
        return found

    def _add_arc(self, a: int, b: int) -> bool:
        if b in self.succ[a]:
            self.succ[a][b] += 1
            return True
        lo, hi = self.order[b], self.order[a]
        if lo < hi:                           # b precedes a: restore the order or find a cycle
            fwd = self._reaches(b, hi, forward=True)
            if fwd is None:
                return False
            back = self._reaches(a, lo, forward=False)
            moved = sorted(back, key=self.order.__getitem__) + sorted(fwd, key=self.order.__getitem__)
            for c, pos in zip(moved, sorted(self.order[c] for c in moved)):
                self.order[c] = pos
        self.succ[a][b] = 1
        self.pred[b].add(a)
        return True

    def _remove_arc(self, a: int, b: int) -> None:
        if self.succ[a][b] > 1:
            self.succ[a][b] -= 1
        else:
            del self.succ[a][b]
            self.pred[b].discard(a)

    def add(self, chains: Sequence[Sequence[int]]) -> bool:
        """Add all ``chains`` (routes) if the layer stays acyclic; otherwise change nothing."""
        added = []
        for chain in chains:
            for a, b in zip(chain, chain[1:]):
                if not self._add_arc(a, b):
                    for x, y in reversed(added):
                        self._remove_arc(x, y)
                    return False
                added.append((a, b))
        self.routes += len(chains)
        return True

    def remove(self, chain: Sequence[int]) -> None:
        """Take one route's dependencies out of the layer (its topological order stays valid)."""
        for a, b in zip(chain, chain[1:]):
            self._remove_arc(a, b)
        self.routes -= 1


def route_chains(paths: Sequence[Sequence[int]]) -> tuple[list[list[int]], int]:
    """Each route's hops as link ids ``0..n-1`` (numbered in order of first use), and ``n``."""
    ids: dict[tuple[int, int], int] = {}
    chains = [[ids.setdefault((int(u), int(v)), len(ids)) for u, v in zip(p, p[1:])] for p in paths]
    return chains, len(ids)


def _too_many(scheme: str, max_layers: int) -> A2AError:
    return A2AError(f"{scheme}: the routes need more than --max-layers {max_layers} virtual layers to be "
                    "deadlock-free; allow more layers or choose routes with fewer dependencies")


def _first_fit(layers: list[LayerGraph], n: int, chains, scheme: str, max_layers: int | None) -> int:
    """Index of the first layer that takes ``chains`` (opening one if needed), or -1 if an empty one cannot."""
    for i, g in enumerate(layers):
        if g.add(chains):
            return i
    g = LayerGraph(n)
    if not g.add(chains):
        return -1
    if max_layers is not None and len(layers) >= max_layers:
        raise _too_many(scheme, max_layers)
    layers.append(g)
    return len(layers) - 1


def _first_fit_groups(chains, n, groups, max_layers, scheme):
    """First fit of every group of routes, in order; a group that closes a cycle on its own goes route by route."""
    layer = np.zeros(len(chains), dtype=np.int64)
    layers: list[LayerGraph] = []
    for members in groups:
        at = _first_fit(layers, n, [chains[i] for i in members], scheme, max_layers)
        if at >= 0:
            layer[members] = at
        else:
            for i in members:
                layer[i] = _first_fit(layers, n, [chains[i]], scheme, max_layers)
    return layer, layers


def _pair_groups(n_routes: int, pairs) -> list[list[int]]:
    groups: dict = {}
    for i, key in enumerate(pairs if pairs is not None else range(n_routes)):
        groups.setdefault(key, []).append(i)
    return list(groups.values())


def _compact(layer: np.ndarray, layers: list[LayerGraph], chains) -> np.ndarray:
    """Empty the highest layer route by route into the lowest layer that takes each; repeat while it empties."""
    layer = layer.copy()
    while len(layers) > 1:
        top = len(layers) - 1
        for i in np.flatnonzero(layer == top).tolist():
            layers[top].remove(chains[i])
            for j in range(top):
                if layers[j].add([chains[i]]):
                    layer[i] = j
                    break
            else:
                layers[top].add([chains[i]])
        if layers[top].routes:
            break
        layers.pop()
    return layer


def lash(paths: Sequence[Sequence[int]], pairs: Sequence | None = None, max_layers: int | None = None) -> np.ndarray:
    """Layer of every route by LASH (Skeie et al. 2002): pairs first-fit into acyclic layers.

    ``paths`` are node sequences; ``pairs[i]`` names the source–destination pair
    of route ``i`` (routes of one pair share a layer; default: every route is its
    own pair), and pairs are placed in order of first appearance.  Raises
    :class:`A2AError` when more than ``max_layers`` layers are needed.
    """
    chains, n = route_chains(paths)
    return _first_fit_groups(chains, n, _pair_groups(len(paths), pairs), max_layers, "lash")[0]


def lash_sequential(paths: Sequence[Sequence[int]], pairs: Sequence | None = None,
                    max_layers: int | None = None) -> np.ndarray:
    """Layer of every route by LASH-sequential (module docstring): routes one at a time, then compaction.

    Never uses more layers than :func:`lash` on the same input.  ``max_layers``
    applies to the result.
    """
    chains, n = route_chains(paths)
    best = None
    for groups in ([[i] for i in range(len(paths))], _pair_groups(len(paths), pairs)):
        layer, layers = _first_fit_groups(chains, n, groups, None, "lash-seq")
        layer = _compact(layer, layers, chains)
        if best is None or layer.max(initial=0) < best.max(initial=0):
            best = layer
    if max_layers is not None and best.max(initial=0) + 1 > max_layers:
        raise _too_many("lash-seq", max_layers)
    return best
