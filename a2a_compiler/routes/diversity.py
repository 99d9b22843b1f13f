"""Path diversity (Besta et al. 2020, FatPaths §IV-B; Blach et al. 2024 §6.3).

Of a topology:

* **CDP** ``c_l(A, B)``: how many edge-disjoint paths of at most ``l`` hops join
  router sets ``A`` and ``B`` (§IV-B1).  Counted as the paper does, with a
  Ford–Fulkerson-style removal: take a shortest path of at most ``l`` hops,
  remove its cables, repeat until ``h^l(A) ∩ B = ∅`` (no residual edges, so a
  lower bound on the length-bounded maximum).
* **PI** ``I^l_{ac,bd} = c_l({a,c},{b}) + c_l({a,c},{d}) - c_l({a,c},{b,d})``
  (§IV-B2).  Table IV reports both as fractions of the network radix ``k'``.

Of emitted routes (what ``fatpaths`` and ``sf-layers`` report): a router pair's
**disjoint paths** are the most of its distinct router paths that pairwise
share no link (Blach et al. §6.3: "two paths are disjoint if they do not share
common links"); the **route interference** of two router pairs is the same
sum-minus-union as PI over their routes: the disjoint paths the two pairs
lose to each other.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from ..topology.model import Topology
from .routers import RouterView


# ------------------------------------------------------------ of a topology
def _cables(view: RouterView) -> list[set[int]]:
    """Router adjacency as sets (cables: a link in either direction)."""
    t = view.topology
    adj: list[set[int]] = [set() for _ in range(t.n_nodes)]
    for u, v in zip(t.src[view.link].tolist(), t.dst[view.link].tolist()):
        adj[u].add(v)
        adj[v].add(u)
    return adj


def _short_path(adj: list[set[int]], sources: set[int], targets: set[int], limit: int) -> list[int] | None:
    """A shortest path from ``sources`` to ``targets`` of at most ``limit`` hops (BFS), or ``None``."""
    parent = {s: -1 for s in sources}
    frontier = deque((s, 0) for s in sorted(sources))
    while frontier:
        u, depth = frontier.popleft()
        if u in targets:
            path = [u]
            while parent[path[-1]] != -1:
                path.append(parent[path[-1]])
            return path[::-1]
        if depth == limit:
            continue
        for v in sorted(adj[u]):
            if v not in parent:
                parent[v] = u
                frontier.append((v, depth + 1))
    return None


def cdp(view: RouterView, a, b, limit: int) -> int:
    """``c_l(A, B)``: edge-disjoint paths of at most ``limit`` hops between router sets ``a`` and ``b``."""
    adj = _cables(view)
    a, b = set(np.atleast_1d(a).tolist()), set(np.atleast_1d(b).tolist())
    if a & b:
        raise ValueError("CDP needs disjoint router sets")
    count = 0
    while (path := _short_path(adj, a, b, limit)) is not None:
        for u, v in zip(path, path[1:]):
            adj[u].discard(v)
            adj[v].discard(u)
        count += 1
    return count


def path_interference(view: RouterView, a: int, b: int, c: int, d: int, limit: int) -> int:
    """``I^l_{ac,bd}`` (FatPaths §IV-B2)."""
    return cdp(view, [a, c], [b], limit) + cdp(view, [a, c], [d], limit) - cdp(view, [a, c], [b, d], limit)


# --------------------------------------------------------- of emitted routes
def max_disjoint(paths: list[frozenset]) -> int:
    """Most of ``paths`` (sets of link ids) that pairwise share no link (exact branch and bound)."""
    paths = sorted(set(paths), key=len)
    n = len(paths)
    clash = [sum(1 << j for j in range(n) if j != i and paths[i] & paths[j]) for i in range(n)]
    best = 0

    def grow(i: int, allowed: int, size: int) -> None:
        nonlocal best
        best = max(best, size)
        if size + bin(allowed >> i).count("1") <= best:
            return
        for j in range(i, n):
            if allowed >> j & 1:
                grow(j + 1, allowed & ~clash[j] & ~(1 << j), size + 1)

    grow(0, (1 << n) - 1, 0)
    return best


def router_paths(segments: np.ndarray, view: RouterView) -> dict[tuple[int, int], list[frozenset]]:
    """Each ordered router pair's distinct router paths (as link-id sets), from the router segments of the
    routes (rows of router nodes, ``-1``-padded, as :func:`~.layered.router_segments` gives them)."""
    t = view.topology
    key = t.src * t.n_nodes + t.dst
    out: dict[tuple[int, int], set] = {}
    for row in np.unique(segments, axis=0):
        r = row[row >= 0]
        if len(r) < 2:
            continue
        hops = np.searchsorted(key, r[:-1] * t.n_nodes + r[1:])
        out.setdefault((int(r[0]), int(r[-1])), set()).add(frozenset(hops.tolist()))
    return {pair: sorted(s, key=sorted) for pair, s in sorted(out.items())}


@dataclass(frozen=True)
class RouteDiversity:
    """Disjoint route counts per ordered router pair, and route interference of sampled pair pairs."""

    pairs: np.ndarray          # (n, 2) router pairs
    paths: np.ndarray          # distinct router paths per pair
    disjoint: np.ndarray       # pairwise link-disjoint paths per pair
    interference: np.ndarray   # route interference of the sampled pairs of pairs

    def at_least(self, k: int) -> float:
        """Fraction of router pairs with ``>= k`` disjoint paths."""
        return float(np.mean(self.disjoint >= k)) if len(self.disjoint) else 0.0

    def summary(self) -> dict:
        return {
            "router_pairs": len(self.pairs),
            "paths_per_router_pair": float(self.paths.mean()) if len(self.paths) else 0.0,
            "disjoint_paths_mean": float(self.disjoint.mean()) if len(self.disjoint) else 0.0,
            "disjoint_paths_histogram": np.bincount(self.disjoint).tolist(),
            "pairs_with_3_disjoint": self.at_least(3),
            "route_interference_mean": float(self.interference.mean()) if len(self.interference) else 0.0,
            "route_interference_max": int(self.interference.max(initial=0)),
        }


def route_diversity(segments: np.ndarray, view: RouterView, samples: int = 1000, seed: int = 0) -> RouteDiversity:
    """Disjoint paths of every router pair's routes (their router ``segments``, :func:`router_paths`), and the
    interference of ``samples`` random pairs of them."""
    per_pair = router_paths(segments, view)
    pairs = list(per_pair)
    disjoint = np.array([max_disjoint(per_pair[p]) for p in pairs], dtype=np.int64)
    rng = np.random.default_rng(seed)
    pi = []
    if len(pairs) >= 2:
        for i, j in rng.integers(len(pairs), size=(samples, 2)).tolist():
            if i != j:
                pi.append(disjoint[i] + disjoint[j] - max_disjoint(per_pair[pairs[i]] + per_pair[pairs[j]]))
    return RouteDiversity(np.array(pairs, dtype=np.int64).reshape(-1, 2),
                          np.array([len(per_pair[p]) for p in pairs], dtype=np.int64), disjoint,
                          np.array(pi, dtype=np.int64))


def topology_diversity(topology: Topology, view: RouterView, limit: int, samples: int, seed: int = 0) -> dict:
    """Table IV's columns for ``topology``: CDP ``c_l`` (mean, 1% tail) and PI (mean, 99.9% tail) over
    ``samples`` random pairs / pairs of pairs of the routers that carry hosts, as fractions of their network
    radix ``k'`` (links to other routers; a fat tree's leaf switches and their up-links)."""
    routers = np.flatnonzero(view.hosts > 0)
    radix = int(np.bincount(topology.src[view.link], minlength=topology.n_nodes)[routers].max())
    rng = np.random.default_rng(seed)
    c, pi = [], []
    for _ in range(samples):
        a, b, cc, d = rng.choice(routers, size=4, replace=False).tolist()
        c.append(cdp(view, a, b, limit))
        pi.append(path_interference(view, a, b, cc, d, limit))
    c, pi = np.array(c) / radix, np.array(pi) / radix
    return {"limit": limit, "radix": radix, "samples": samples, "cdp_mean": float(c.mean()),
            "cdp_tail_1pct": float(np.quantile(c, 0.01)), "pi_mean": float(pi.mean()),
            "pi_tail_99_9pct": float(np.quantile(pi, 0.999))}
