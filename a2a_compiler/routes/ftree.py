"""Zahavi's fat-tree routing (OpenSM ``ftree``): congestion-free shift all-to-all.

Zahavi, Johnson, Kerbyson & Lang, "Optimized InfiniBand fat-tree routing for
shift all-to-all communication patterns", CCPE 2009.

* :func:`extract_tree` is §2's Algorithm 1: from a discovered topology, rank
  the switches, give every switch a tuple ``(r, S_{n-2} .. S_0)`` by BFS with
  "the lowest digit not causing an overlap", and check Definition 2 (linked
  switches differ in exactly the digit of the lower level).
* :func:`ftree_tables` is §3's Algorithms 2–4: destinations in tree order
  (leaf index ``I_S``, then port), each one spread up the tree by
  *assign-down-going-port-by-ascending* (the least used down port of the
  parents, ties to the lower port group), the rest of the tree pointed up by
  *assign-up-going-port-by-descending*.  Missing hosts of a partially
  populated tree are place keepers (§3.2): they are routed (their ports are
  counted) but get no table entry.

How Algorithm 3 unfolds.  With the up-going choices ``t_0 .. t_{n-2}`` of one
destination (the digit of the parent chosen at each level of its ascent), the
descent reaches exactly the switches at level ``i`` whose digits below ``i``
are ``t_0 .. t_{i-1}``, and points each at its parent with digit ``i`` set to
``t_i``; the ascent's own switches point down.  Inside a port group every
cable is the same link here (a link of capacity ``c``), so the descent's
choice of a port within a group has nothing to choose and its counters never
feed back into the ascent; the tables are therefore computed level by level
with numpy, and only the ascents (``n - 1`` choices per destination) run in
Python.  A port group's "least loaded port" is ``floor(count / c)``, the load
of its least used cable when the group is filled round robin.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .lft import all_pairs, routes_from_nodes, trace
from .result import RouteSet


@dataclass(frozen=True, eq=False)
class TreeOrder:
    """The var-ary-n-tree order of a topology (Zahavi et al. Def. 2, Algorithm 1).

    ``level[v]`` is switch ``v``'s level (0 = leaf; ``-1`` for hosts) and
    ``digits[v]`` its tuple ``S_0 .. S_{n-2}`` (``-1`` for hosts).  ``leaves``
    are the leaf switches in index order ``I_S``; ``slots[i, p]`` is the host
    on port ``p`` of leaf ``leaves[i]``, ``-1`` for a place keeper (a missing
    host of a partially populated tree).
    """

    topology: Topology
    levels: int
    level: np.ndarray
    digits: np.ndarray
    leaves: np.ndarray
    slots: np.ndarray


def _fail(topology: Topology, why: str) -> A2AError:
    return A2AError(f"ftree: {topology.spec} is not a var-ary-n-tree (Zahavi et al. Def. 2): {why}")


def _levels(topology: Topology) -> np.ndarray:
    """Switch levels by BFS from the leaves (switches with hosts); the paper assumes them given."""
    t, nh = topology, topology.n_hosts
    if not t.n_switches:
        raise A2AError(f"ftree: {t.spec} has no switches; fat-tree routing needs hosts on leaf switches")
    if not t.is_symmetric():
        raise _fail(t, "its links are not cables (some link has no reverse of equal capacity)")
    host_link = t.src < nh
    deg = np.bincount(t.src[host_link], minlength=nh)
    if np.any(deg != 1) or np.any(t.dst[host_link] < nh):
        h = int(np.flatnonzero((deg != 1) | np.isin(np.arange(nh), t.src[host_link & (t.dst < nh)]))[0])
        raise _fail(t, f"host {t.names[h]} is not attached to exactly one switch")
    sw = (t.src >= nh) & (t.dst >= nh)
    m = t.n_switches
    leaves = np.unique(t.dst[host_link]) - nh
    # one super node linked to every leaf: a single BFS gives every switch its level
    rows = np.concatenate([t.src[sw] - nh, np.full(len(leaves), m)])
    cols = np.concatenate([t.dst[sw] - nh, leaves])
    adj = sp.csr_array((np.ones(len(rows)), (rows, cols)), shape=(m + 1, m + 1))
    dist = csgraph.shortest_path(adj, unweighted=True, directed=False, indices=m)[:m] - 1
    if not np.all(np.isfinite(dist)):
        raise _fail(t, f"switch {t.names[nh + int(np.flatnonzero(~np.isfinite(dist))[0])]} is not connected to a leaf")
    level = np.concatenate([np.full(nh, -1), dist.astype(np.int64)])
    bad = sw & (np.abs(level[t.src] - level[t.dst]) != 1)
    if bad.any():
        e = int(np.flatnonzero(bad)[0])
        raise _fail(t, f"switches {t.names[t.src[e]]} and {t.names[t.dst[e]]} are linked but not on adjacent levels "
                       f"({level[t.src[e]]} and {level[t.dst[e]]})")
    return level


def extract_tree(topology: Topology) -> TreeOrder:
    """Zahavi et al. §2, Algorithm 1: tuples for every switch, leaves and host slots in tree order.

    BFS from the first leaf switch (tuple all zeros).  Crossing a link from
    level ``r`` up to ``r + 1`` may change digit ``i = r``, down to ``r - 1``
    digit ``i = r - 1``; an unlabelled switch gets the neighbour's tuple with
    digit ``i`` set to the lowest value that no switch of its level has yet.
    Definition 2 is then checked on every link.  Levels come from a BFS from
    the leaves (the paper assumes them known); the equal-port-group check of
    Algorithm 1 is left to :func:`ftree_tables`, which names any switch that
    lacks the link its routing needs, so partially populated trees pass.
    """
    t, nh = topology, topology.n_hosts
    level = _levels(t)
    n = int(level.max()) + 1
    nbrs = np.split(t.dst, np.searchsorted(t.src, np.arange(1, t.n_nodes)))
    digits = np.full((t.n_nodes, n - 1), -1, dtype=np.int64)
    labelled = np.zeros(t.n_nodes, dtype=bool)
    used: list[set] = [set() for _ in range(n)]
    start = int(t.dst[t.src < nh].min())
    digits[start], labelled[start] = 0, True
    used[0].add(tuple(digits[start]))
    queue = deque([start])
    while queue:
        u = queue.popleft()
        for v in nbrs[u].tolist():
            if v < nh or labelled[v]:
                continue
            i = min(level[u], level[v])
            cand = digits[u].copy()
            cand[i] = 0
            while tuple(cand) in used[level[v]]:
                cand[i] += 1
            digits[v], labelled[v] = cand, True
            used[level[v]].add(tuple(cand))
            queue.append(v)
    sw = (t.src >= nh) & (t.dst >= nh) & (t.src < t.dst)
    if n > 1:
        u, v = t.src[sw], t.dst[sw]
        i = np.minimum(level[u], level[v])
        differ = digits[u] != digits[v]
        differ[np.arange(len(i)), i] = False
        if differ.any():
            e = int(np.flatnonzero(differ.any(1))[0])
            raise _fail(t, f"linked switches {t.names[u[e]]} {tuple(digits[u[e]][::-1].tolist())} and "
                           f"{t.names[v[e]]} {tuple(digits[v[e]][::-1].tolist())} differ in more than digit {i[e]} "
                           "(a leaf switch without hosts cannot be ranked: levels come from the hosts)")
    # leaves in index order I_S = sum_i S_i P_i, P_i from the leaf level's digit ranges
    leaves = np.flatnonzero(level == 0)
    place = np.concatenate([[1], np.cumprod(digits[leaves].max(0, initial=0) + 1)])[:-1]
    leaves = leaves[np.argsort(digits[leaves] @ place, kind="stable")]
    rank = np.empty(t.n_nodes, dtype=np.int64)
    rank[leaves] = np.arange(len(leaves))
    host_leaf = rank[t.dst[t.src < nh]]                       # links sorted by src: host h's one link
    per_leaf = np.bincount(host_leaf, minlength=len(leaves))
    order = np.argsort(host_leaf, kind="stable")             # by leaf, then host id (the port order)
    port = np.empty(nh, dtype=np.int64)
    port[order] = np.arange(nh) - (np.cumsum(per_leaf) - per_leaf)[host_leaf[order]]
    slots = np.full((len(leaves), int(per_leaf.max())), -1, dtype=np.int64)
    slots[host_leaf, port] = np.arange(nh)
    return TreeOrder(t, n, level, digits, leaves, slots)


def _reverse_links(topology: Topology) -> np.ndarray:
    """Index of link ``v -> u`` for every link ``u -> v`` (the topology is made of cables)."""
    key = topology.src * topology.n_nodes + topology.dst
    return np.searchsorted(key, topology.dst * topology.n_nodes + topology.src)


def ftree_tables(order: TreeOrder) -> np.ndarray:
    """Zahavi et al. §3, Algorithms 2–4: the forwarding tables ``nxt[node, host]`` (module docstring).

    Algorithm 2 walks the destinations in tree order; for each, Algorithm 4
    climbs from its leaf, at every level taking the parent whose down port to
    the current switch is least used (ties: the lower port group, i.e. the
    parent's lower digit), and Algorithm 3 points every other switch the
    descent reaches up towards that ascent.
    """
    t, n, nh = order.topology, order.levels, order.topology.n_hosts
    level, digits = order.level, order.digits
    rev = _reverse_links(t)
    usage = np.zeros(t.n_links)
    up = (level[t.dst] == level[t.src] + 1) & (t.src >= nh)
    # per switch: its parents (by their digit at the switch's level) and their down links to it
    parents: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
    for u in np.unique(t.src[up]).tolist():
        e = np.flatnonzero(up & (t.src == u))
        e = e[np.argsort(digits[t.dst[e], level[u]], kind="stable")]
        parents[u] = (t.dst[e], rev[e], t.capacity[rev[e]])
    n_slots = order.slots.size
    chain = np.empty((n_slots, n), dtype=np.int64)
    ups = np.empty((n_slots, n - 1), dtype=np.int64)
    for k, leaf in enumerate(np.repeat(order.leaves, order.slots.shape[1]).tolist()):
        chain[k, 0] = c = leaf
        for j in range(n - 1):
            if c not in parents:
                raise _fail(t, f"switch {t.names[c]} on level {j} has no link up")
            above, down, cap = parents[c]
            i = int(np.argmin(np.floor(usage[down] / cap)))      # least used port; ties to the lower group
            usage[down[i]] += 1
            chain[k, j + 1] = c = int(above[i])
            ups[k, j] = digits[c, j]
    host = order.slots.reshape(-1)
    real = host >= 0
    chain_h = np.empty((nh, n), dtype=np.int64)
    ups_h = np.empty((nh, n - 1), dtype=np.int64)
    chain_h[host[real]], ups_h[host[real]] = chain[real], ups[real]

    nxt = np.full((t.n_nodes, nh), -1, dtype=np.int64)
    d = np.arange(nh)
    nxt[:nh] = chain_h[:, 0][:, None]                # a host sends to its leaf
    nxt[d, d] = -1
    nxt[chain_h[:, 0], d] = d                          # the ascent points down (Algorithm 4)
    for j in range(1, n):
        nxt[chain_h[:, j], d] = chain_h[:, j - 1]
    # Algorithm 3: level-i switches whose digits below i are the ascent's point up to digit t_i
    stride = np.concatenate([[1], np.cumprod(digits.max(0, initial=0) + 1)])
    code = np.where(level >= 0, digits @ stride[:-1], -1)
    lookup = np.full((n, int(stride[-1])), -1, dtype=np.int64)
    sw = np.flatnonzero(level >= 0)
    lookup[level[sw], code[sw]] = sw
    key = t.src * t.n_nodes + t.dst
    for i in range(n - 1):
        x = np.flatnonzero(level == i)
        low = stride[:i]
        mask = ((digits[x, :i] @ low)[:, None] == (ups_h[:, :i] @ low)[None, :]) & (x[:, None] != chain_h[None, :, i])
        parent = lookup[i + 1, code[x][:, None] + (ups_h[None, :, i] - digits[x, i][:, None]) * stride[i]]
        ok = np.isin(x[:, None] * t.n_nodes + parent, key) & (parent >= 0)
        if (mask & ~ok).any():
            a, b = np.argwhere(mask & ~ok)[0]
            raise _fail(t, f"switch {t.names[x[a]]} has no link to the level-{i + 1} switch with digit {i} = "
                           f"{ups_h[b, i]} that host {b}'s routing needs")
        rows, cols = np.nonzero(mask)
        nxt[x[rows], cols] = parent[rows, cols]
    return nxt


def ftree(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> RouteSet:
    """Route every ordered host pair along Zahavi's fat-tree tables (:func:`ftree_tables`).

    One minimal up/down path per pair, destination-based.  ``info`` records the
    tree's levels, leaves and host slots (more slots than hosts: a partially
    populated tree routed with place keepers).
    """
    t0 = time.perf_counter()
    order = extract_tree(topology)
    nxt = ftree_tables(order)
    src, dst = all_pairs(topology.n_hosts)
    nodes = trace(topology, nxt, src, dst, algo="ftree")
    return routes_from_nodes("ftree", topology, fabric or Fabric(), src, dst, nodes,
                             timings={"route": time.perf_counter() - t0},
                             info={"levels": order.levels, "leaves": len(order.leaves), "slots": order.slots.size})
