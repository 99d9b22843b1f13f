"""Fat-tree routing as OpenSM's ``ftree`` engine computes it (Zahavi et al. 2009; OpenSM 3.3 ``osm_ucast_ftree.c``).

Zahavi, Johnson, Kerbyson & Lang, "Optimized InfiniBand fat-tree routing for
shift all-to-all communication patterns", CCPE 2009; the algorithm ships as
OpenSM's ``ftree`` routing engine, and this module follows that code, per
port (cable), so that its tables equal the ones the subnet manager installs.

**The tree** (:class:`FatTree`, OpenSM's ``construct_fabric``).  Switches are
ranked by BFS from the switches that carry hosts, reversed, then ranked again
by BFS from the roots (rank 0); the leaves are the switches with hosts, at the
highest rank.  Each switch groups its cables by neighbour and direction (a
*port group*: up, down, or to a host), ports in port order.  Indexing
(Algorithm 1) is a BFS from the first leaf in GUID order: a neighbour met
going up (down) gets the current tuple ``(rank, d_1 .. d_L)`` with the rank
changed and digit ``rank`` (``rank + 1``) set to the lowest value no switch of
its rank has; groups are then sorted by their remote switch's tuple.  OpenSM's
topology check follows (the same number of up and down groups on every switch
of a rank, equal-sized up groups).  GUIDs come from the topology or the plan
of :func:`a2a_compiler.topology.ibnet.node_guids`.

**The tables** (:func:`route_exact`, OpenSM's ``fabric_route_to_cns``).
Destinations in tree order (leaves by tuple, a leaf's hosts by port), then, on
a leaf with fewer hosts than the fullest leaf, *dummy* destinations that are
routed and counted but get no entry (§3.2's place keepers).  For each:

* *ascent* (``fabric_route_downgoing_by_going_up``, Algorithm 4): at every
  switch the up groups are sorted by (routes counted down the group, remote
  tuple); the first is the main path, on its least used cable (counted);
  the upper switch points down to the current one.  The other up groups are
  secondary paths (not counted), each on the group's least used cable,
  setting switches that have no entry yet;
* *descent* (``fabric_route_upgoing_by_going_down``, Algorithm 3): at every
  switch reached, the down groups sorted by (routes counted up the group,
  remote tuple), except the one it came from: the lower switch gets an entry
  pointing up over the group's least used cable, unless it has one at least
  as short; a descent that reaches hosts counts one route up that cable.

**Fast path.**  On a tree of single cables whose leaves are all full, the
descent's choices are fixed by the ascent (Zahavi's Algorithm 3: a level-``i``
switch whose tuple digits below ``i`` are the destination's ascent choices
points up to the parent with digit ``i`` the ascent's choice at level ``i``),
so :func:`zahavi_tables` computes the tables level by level with numpy and
only the ascents (``levels - 1`` choices per destination) run in Python.  The
engine takes it where it applies; the tests check it against
:func:`route_exact` entry for entry.  Switch-LID entries are not part of
these tables (see :mod:`.opensm`).
"""

from __future__ import annotations

import sys
import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.ibnet import node_guids
from ..topology.model import Topology
from .tables import ForwardingTables, node_label

#: OpenSM's fat-tree ranks (levels) limits (``FAT_TREE_MIN_RANK`` / ``MAX_RANK``).
MIN_LEVELS, MAX_LEVELS = 2, 8
#: OpenSM's tuple length and its "unassigned" digit.
TUPLE_LEN, FREE = 8, 0xFF
#: No hop count yet (``OSM_NO_PATH``).
NO_PATH = 255


def _fail(topology: Topology, why: str) -> A2AError:
    return A2AError(f"ftree: {topology.spec} is not a fat tree OpenSM's ftree engine routes ({why}); "
                    "OpenSM would fall back to minhop here")


@dataclass(eq=False)
class FatTree:
    """OpenSM's view of a fat tree (module docstring).

    Switches are numbered ``0 .. S-1`` in GUID order (``node[s]`` their node
    ids).  A port group ``g`` belongs to switch ``owner[g]``, leads to node
    ``remote[g]`` (``remote_sw[g]`` its switch number, ``-1`` for a host) over
    the cables ``cables[g]`` (port order).  ``up[s]`` / ``down[s]`` list switch
    ``s``'s groups in OpenSM's order; ``leaves`` are the leaf array (tuple
    order), ``cns[i]`` the hosts of ``leaves[i]`` in port order.
    """

    topology: Topology
    node: np.ndarray
    rank: np.ndarray
    tuple_of: list
    owner: list
    remote: list
    remote_sw: list
    cables: list
    up: list
    down: list
    leaves: list
    cns: list
    max_cn: int

    @property
    def levels(self) -> int:
        return int(self.rank.max()) + 1


def _bfs_rank(adj: list[list[int]], sources) -> np.ndarray:
    rank = np.full(len(adj), -1, dtype=np.int64)
    queue = deque()
    for s in sources:
        if rank[s] < 0:
            rank[s] = 0
            queue.append(s)
    while queue:
        u = queue.popleft()
        for v in adj[u]:
            if rank[v] < 0:
                rank[v] = rank[u] + 1
                queue.append(v)
    return rank


def fat_tree(topology: Topology) -> FatTree:
    """OpenSM's ``construct_fabric``: ranks, port groups, indexing, leaf array and checks (module docstring)."""
    t, nh = topology, topology.n_hosts
    if t.n_switches < 2:
        raise _fail(t, f"it has {t.n_switches} switch(es)")
    guids = node_guids(t)
    node = nh + np.array(sorted(range(t.n_switches), key=lambda i: guids[nh + i]), dtype=np.int64)
    sw_of = np.full(t.n_nodes, -1, dtype=np.int64)
    sw_of[node] = np.arange(len(node))
    S = len(node)
    csrc, cdst = t.src[t.cable_link], t.dst[t.cable_link]
    port = t.cable_port
    host_cable = csrc < nh
    if np.any(cdst[host_cable] < nh):
        h = int(csrc[host_cable][np.argmax(cdst[host_cable] < nh)])
        raise _fail(t, f"host {t.names[h]} is cabled to a host")
    # switch adjacency in port order (OpenSM walks ports 1..n)
    order = np.lexsort((port, csrc))
    by_node = [[] for _ in range(t.n_nodes)]
    for c in order.tolist():
        by_node[csrc[c]].append(c)
    adj = [[int(sw_of[cdst[c]]) for c in by_node[node[s]] if cdst[c] >= nh] for s in range(S)]
    leafish = sorted({int(sw_of[cdst[c]]) for c in np.flatnonzero(host_cable).tolist()})
    if not leafish:
        raise _fail(t, "no host is cabled to a switch")
    dist = _bfs_rank(adj, leafish)
    if np.any(dist < 0):
        raise _fail(t, f"{node_label(t, int(node[np.argmax(dist < 0)]))} is not connected to the hosts' switches")
    rank = _bfs_rank(adj, np.flatnonzero(dist == dist.max()).tolist())     # re-ranked from the roots
    leaf_rank = int(rank.max())
    for s in leafish:
        if rank[s] != leaf_rank:
            raise _fail(t, f"hosts hang off {node_label(t, int(node[s]))} at rank {rank[s]}, while the leaf rank "
                           f"is {leaf_rank}")
    if not MIN_LEVELS <= leaf_rank + 1 <= MAX_LEVELS:
        raise _fail(t, f"it has {leaf_rank + 1} switch level(s); OpenSM's ftree needs {MIN_LEVELS}..{MAX_LEVELS}")
    # port groups per switch, ports in order; a host port is its own group
    owner, remote, remote_sw, cables = [], [], [], []
    up, down = [[] for _ in range(S)], [[] for _ in range(S)]
    for s in range(S):
        mine: dict[tuple[str, int], int] = {}
        for c in by_node[node[s]]:
            v = int(cdst[c])
            if v < nh:
                direction, r = "down", -1
            else:
                r = int(sw_of[v])
                direction = "up" if rank[r] < rank[s] else "down" if rank[r] > rank[s] else "same"
                if direction == "same":
                    raise _fail(t, f"{node_label(t, int(node[s]))} and {node_label(t, v)} are on one rank and "
                                   "cabled (sibling links are not routed here)")
            g = mine.get((direction, v))
            if g is None:
                g = mine[(direction, v)] = len(owner)
                owner.append(s)
                remote.append(v)
                remote_sw.append(r)
                cables.append([])
                (up if direction == "up" else down)[s].append(g)
            cables[g].append(int(c))
    is_leaf = np.zeros(S, dtype=bool)
    is_leaf[leafish] = True
    tuple_of = _index(t, S, rank, leaf_rank, is_leaf, up, down, remote_sw, node)
    _validate(t, S, rank, up, down, cables, node)
    at_leaf_rank = sorted((s for s in range(S) if rank[s] == leaf_rank), key=lambda s: tuple_of[s])
    real = [i for i, s in enumerate(at_leaf_rank) if is_leaf[s]]
    if real[0] >= real[-1]:
        raise _fail(t, "fewer than two leaf switches")
    leaves = at_leaf_rank[real[0]:real[-1] + 1]
    cns = [[remote[g] for g in down[s] if remote_sw[g] < 0] for s in leaves]
    return FatTree(t, node, rank, tuple_of, owner, remote, remote_sw, cables, up, down, leaves, cns,
                   max(len(c) for c in cns))


def _index(t, S, rank, leaf_rank, is_leaf, up, down, remote_sw, node) -> list:
    """OpenSM's ``fabric_make_indexing``: tuples by BFS from the first leaf; groups sorted by remote tuple."""
    tuple_of: list = [None] * S
    taken: set = set()
    first = next(s for s in range(S) if is_leaf[s])
    start = [FREE] * TUPLE_LEN
    start[0] = int(rank[first])
    for i in range(1, leaf_rank + 1):
        start[i] = 0
    tuple_of[first] = tuple(start)
    taken.add(tuple_of[first])
    queue = deque([first])

    def new_tuple(frm, going_down: bool):
        temp = list(frm)
        if going_down:
            temp[0] += 1
            var = frm[0] + 1
        else:
            temp[0] -= 1
            var = frm[0]
        for i in range(FREE):
            temp[var] = i
            if tuple(temp) not in taken:
                return tuple(temp)
        raise _fail(t, "more than 255 switches in one direction")

    key = lambda g: tuple_of[remote_sw[g]]                                # noqa: E731
    while queue:
        s = queue.popleft()
        if rank[s] < leaf_rank:
            for g in down[s]:
                r = remote_sw[g]
                if r < 0 or tuple_of[r] is not None:
                    continue
                tuple_of[r] = new_tuple(tuple_of[s], True)
                taken.add(tuple_of[r])
                queue.append(r)
            down[s].sort(key=lambda g: tuple_of[remote_sw[g]] if remote_sw[g] >= 0 else (FREE,) * TUPLE_LEN)
        if rank[s] != 0:
            for g in up[s]:
                r = remote_sw[g]
                if tuple_of[r] is not None:
                    continue
                tuple_of[r] = new_tuple(tuple_of[s], False)
                taken.add(tuple_of[r])
                queue.append(r)
            up[s].sort(key=key)
    missing = [s for s in range(S) if tuple_of[s] is None]
    if missing:
        raise _fail(t, f"{node_label(t, int(node[missing[0]]))} gets no index (not reached from the first leaf)")
    return tuple_of


def _validate(t, S, rank, up, down, cables, node) -> None:
    """OpenSM's ``fabric_validate_topology``: one reference switch per rank (the first in GUID order)."""
    leaf_rank = int(rank.max())
    ref: dict[int, int] = {}
    for s in range(S):
        r = int(rank[s])
        if r not in ref:
            ref[r] = s
            continue
        a = ref[r]
        what = None
        if len(up[a]) != len(up[s]):
            what = f"{len(up[a])} and {len(up[s])} up port groups"
        elif r != leaf_rank and len(down[a]) != len(down[s]):
            what = f"{len(down[a])} and {len(down[s])} down port groups"
        elif up[a] and any(len(cables[g]) != len(cables[up[a][0]]) for g in up[s]):
            what = "up port groups of different sizes"
        elif r != leaf_rank and down[a] and down[s] and len(cables[down[s][0]]) != len(cables[down[a][0]]):
            what = "down port groups of different sizes"
        if what:
            raise _fail(t, f"{node_label(t, int(node[a]))} and {node_label(t, int(node[s]))} on rank {r} have {what}")


class Router:
    """OpenSM's ftree recursion over one tree, per cable (module docstring): its counters and the tables it
    fills.  :meth:`cns` is ``fabric_route_to_cns``; :meth:`switches` is ``fabric_route_to_switches`` (the
    switches' own LIDs, secondary paths only, uncounted), which continues from the counters the
    destinations left.
    """

    def __init__(self, tree: FatTree, c_down=None):
        t = tree.topology
        self.tree, self.t = tree, t
        self.rev = t.cable_reverse.tolist()
        self.up = [list(g) for g in tree.up]                  # sorted in place, as OpenSM does
        self.down = [list(g) for g in tree.down]
        self.rank = tree.rank.tolist()
        n_groups = len(tree.owner)
        self.c_up, self.c_down = [0] * t.n_cables, [0] * t.n_cables
        self.g_up, self.g_down = [0] * n_groups, [0] * n_groups
        if c_down is not None:                                # the ascents' counts, from the fast path
            self.c_down = [int(x) for x in c_down]
            self.g_down = [sum(self.c_down[c] for c in cabs) for cabs in tree.cables]
        self.changed = [False] * len(tree.node)
        self.lft = self.hops = None

    @staticmethod
    def _least(cabs, counter):
        best = cabs[0]
        for c in cabs[1:]:
            if counter[c] < counter[best]:
                best = c
        return best

    def descend(self, s, prev, col, h):                      # fabric_route_upgoing_by_going_down
        groups = self.down[s]
        if not groups:
            return False
        remote_sw, cables, tup = self.tree.remote_sw, self.tree.cables, self.tree.tuple_of
        lft, hops, c_up, g_up = self.lft, self.hops, self.c_up, self.g_up
        if self.changed[s]:
            groups.sort(key=lambda g: (g_up[g], tup[remote_sw[g]] if remote_sw[g] >= 0 else (-1,) * TUPLE_LEN))
            self.changed[s] = False
        created = False
        k = 0
        while k < len(groups):
            g = groups[k]
            k += 1
            r = remote_sw[g]
            if r < 0:
                created = True
                continue
            if r == prev:
                continue
            best = self._least(cables[g], c_up)
            lh = hops[r][col]
            if lh != NO_PATH and h + 1 >= lh:
                continue
            lft[r][col] = self.rev[best]
            hops[r][col] = h + 1
            routed = self.descend(r, -1, col, h + 1)
            created = created or routed
            if routed:
                c_up[best] += 1
                g_up[g] += 1
                self.changed[s] = True
        return created

    def ascend(self, s, prev, col, main, h):                 # fabric_route_downgoing_by_going_up
        created = self.descend(s, prev, col, h)
        if self.rank[s] == 0:
            return created
        remote_sw, cables, tup = self.tree.remote_sw, self.tree.cables, self.tree.tuple_of
        lft, hops, c_down, g_down = self.lft, self.hops, self.c_down, self.g_down
        groups = self.up[s]
        groups.sort(key=lambda g: (g_down[g], tup[remote_sw[g]]))
        i = 0
        if main:
            g = groups[0]
            best = self._least(cables[g], c_down)
            g_down[g] += 1
            c_down[best] += 1
            r = remote_sw[g]
            if lft[r][col] < 0 or h + 1 < hops[r][col]:
                lft[r][col] = self.rev[best]
                hops[r][col] = h + 1
            created = self.ascend(r, s, col, True, h + 1) or created
            i = 1
        while i < len(groups):
            g = groups[i]
            i += 1
            r = remote_sw[g]
            if lft[r][col] != -1 and h + 1 >= hops[r][col]:
                continue
            best = self._least(cables[g], c_down)
            lft[r][col] = self.rev[best]
            hops[r][col] = h + 1
            created = self.ascend(r, s, col, False, h + 1) or created
        return created

    def _run(self, body) -> None:
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 10_000))
        try:
            body()
        finally:
            sys.setrecursionlimit(limit)

    def cns(self) -> np.ndarray:
        """``fabric_route_to_cns``: the cable table ``(n_nodes, n_hosts)``."""
        tree, t = self.tree, self.t
        nh, S, dummy = t.n_hosts, len(tree.node), t.n_hosts
        self.lft = [[-1] * (nh + 1) for _ in range(S)]
        self.hops = [[NO_PATH] * (nh + 1) for _ in range(S)]

        def body():
            for leaf, hosts in zip(tree.leaves, tree.cns):
                for host in hosts:
                    g = next(g for g in self.down[leaf] if tree.remote[g] == host)
                    self.lft[leaf][host] = tree.cables[g][0]
                    self.hops[leaf][host] = 1
                    self.ascend(leaf, -1, host, True, 1)
                for _ in range(tree.max_cn - len(hosts)):
                    self.hops[leaf][dummy] = 1
                    self.ascend(leaf, -1, dummy, True, 1)
                    for s in range(S):
                        self.lft[s][dummy] = -1
                        self.hops[s][dummy] = NO_PATH

        self._run(body)
        table = np.full((t.n_nodes, nh), -1, dtype=np.int32)
        table[tree.node] = np.array(self.lft, dtype=np.int32)[:, :nh]
        _host_rows(t, table)
        return table

    def switches(self) -> np.ndarray:
        """``fabric_route_to_switches``: ``(S, S)`` cables each switch (GUID order) routes each switch's LID on;
        ``-1`` its own LID (port 0), ``-2`` no up/down path (OpenSM leaves it unset, e.g. root to root)."""
        S = len(self.tree.node)
        self.lft = [[-1] * S for _ in range(S)]
        self.hops = [[NO_PATH] * S for _ in range(S)]
        own = -3

        def body():
            for s in range(S):
                self.lft[s][s] = own
                self.hops[s][s] = 0
                self.ascend(s, -1, s, False, 0)

        self._run(body)
        out = np.array(self.lft, dtype=np.int64)
        return np.where(out == own, -1, np.where(out < 0, -2, out))


def route_exact(tree: FatTree) -> tuple[np.ndarray, Router]:
    """OpenSM's ``fabric_route_to_cns``, per cable: the cable table ``(n_nodes, n_hosts)`` (module docstring),
    and the router, whose counters :meth:`Router.switches` continues from."""
    router = Router(tree)
    return router.cns(), router


def _host_rows(t: Topology, table: np.ndarray) -> None:
    """A host (a CA port, one cable) sends everything on its cable."""
    nh = t.n_hosts
    csrc = t.src[t.cable_link]
    host_cable = np.flatnonzero(csrc < nh)
    table[csrc[host_cable]] = host_cable[:, None]
    table[np.arange(nh), np.arange(nh)] = -1


# ------------------------------------------------------------------ fast path
def fast_path_applies(tree: FatTree) -> bool:
    """Two or three switch levels, single cables, every leaf full, and tuples that obey Zahavi's Def. 2."""
    t = tree.topology
    if tree.levels > 3 or np.any(t.link_cables != 1) or any(len(c) != tree.max_cn for c in tree.cns):
        return False
    level, digits = _levels_and_digits(tree)
    sw = (t.src >= t.n_hosts) & (t.dst >= t.n_hosts)
    u, v = t.src[sw], t.dst[sw]
    i = np.minimum(level[u], level[v])
    differ = digits[u] != digits[v]
    differ[np.arange(len(i)), i] = False
    return not differ.any()


def _levels_and_digits(tree: FatTree) -> tuple[np.ndarray, np.ndarray]:
    """Zahavi's level (0 = leaf) and digits ``S_0 .. S_{n-2}`` of every node from OpenSM's tuples
    (digit ``i`` is tuple position ``L - i``); hosts get ``-1``."""
    t = tree.topology
    L = tree.levels - 1
    level = np.full(t.n_nodes, -1, dtype=np.int64)
    digits = np.full((t.n_nodes, L), -1, dtype=np.int64)
    level[tree.node] = L - tree.rank
    digits[tree.node] = np.array(tree.tuple_of, dtype=np.int64)[:, L:0:-1]
    return level, digits


def zahavi_tables(tree: FatTree) -> np.ndarray:
    """The fast path: the switches' cable table ``(n_nodes, n_hosts)`` of a 2- or 3-level tree of single
    cables, vectorised per level (host rows left empty).

    Only the ascents run per destination (the least counted up cable, ties to
    the lower tuple).  Then, for destination ``d`` on leaf ``l`` with ascent
    choices ``t``: a switch whose subtree holds ``d`` points down to the child
    towards ``l``; a leaf points up to its parent with digit 0 = ``t_0``; a
    middle switch ``(y_0, y_1)`` outside ``d``'s pod points up to the root
    ``(y_0, t_1)`` if ``y_0 = t_0`` (Algorithm 3), else to ``(y_0, p)``, where
    ``p`` is the root that the pod switch ``(y_0, l_1)`` would climb to next
    (its least counted up cable at that moment): OpenSM reaches those switches
    through that pod switch's secondary path first.
    """
    t, nh, n = tree.topology, tree.topology.n_hosts, tree.levels
    level, digits = _levels_and_digits(tree)
    sw_of = np.full(t.n_nodes, -1, dtype=np.int64)
    sw_of[tree.node] = np.arange(len(tree.node))
    parents = [(np.array([tree.remote[g] for g in tree.up[s]], dtype=np.int64),
                np.array([tree.cables[g][0] for g in tree.up[s]], dtype=np.int64)) for s in range(len(tree.node))]
    stride = np.concatenate([[1], np.cumprod(digits.max(0, initial=0) + 1)])
    code = np.where(level >= 0, digits @ stride[:-1], -1)
    lookup = np.full((n, int(stride[-1])), -1, dtype=np.int64)
    sw = np.flatnonzero(level >= 0)
    lookup[level[sw], code[sw]] = sw
    usage = np.zeros(t.n_cables, dtype=np.int64)
    leaf_of = np.empty(nh, dtype=np.int64)
    ups = np.empty((nh, n - 1), dtype=np.int64)
    width0 = int(stride[1])                                   # values of digit 0
    pref = np.zeros((nh, width0), dtype=np.int64)             # n = 3: the root digit each pod switch climbs to
    if n == 3:
        pod = [np.array([lookup[1, y + c1 * stride[1]] for y in range(width0)]) for c1 in range(int(stride[2] // stride[1]))]
        up_cab = {s: parents[sw_of[s]] for s in np.flatnonzero(level == 1).tolist()}
    for leaf, hosts in zip(tree.leaves, tree.cns):
        first = int(tree.node[leaf])
        for host in hosts:
            leaf_of[host] = c = first
            if n == 3:
                for y, q in enumerate(pod[digits[first, 1]].tolist()):
                    if q >= 0:
                        above, cab = up_cab[q]
                        pref[host, y] = digits[above[int(np.argmin(usage[cab]))], 1]
            for j in range(n - 1):
                above, cab = parents[sw_of[c]]
                i = int(np.argmin(usage[cab]))               # least counted group; ties to the lower tuple
                usage[cab[i]] += 1
                c = int(above[i])
                ups[host, j] = digits[c, j]
    table = np.full((t.n_nodes, nh), -1, dtype=np.int32)
    key = t.src * t.n_nodes + t.dst
    dl = digits[leaf_of]                                      # (nh, n-1): the destination leaf's digits
    hosts = np.arange(nh)
    for i in range(n):
        x = np.flatnonzero(level == i)
        X = digits[x][:, None, :]                             # (switches, 1, digits)
        cone = (X[:, :, i:] == dl[None, :, i:]).all(2)        # the switch's subtree holds the destination
        if i == 0:
            target = np.where(cone, -2, lookup[1, (code[x][:, None] + (ups[None, :, 0] - X[:, :, 0]) * stride[0])])
        else:
            down = lookup[i - 1, code[x][:, None] + (dl[None, :, i - 1] - X[:, :, i - 1]) * stride[i - 1]]
            if i == n - 1:
                target = down
            else:                                             # n = 3, i = 1: middle switches
                mine = X[:, :, 0] == ups[None, :, 0]
                root = np.where(mine, ups[None, :, 1], pref[hosts[None, :], X[:, :, 0]])
                target = np.where(cone, down, lookup[2, code[x][:, None] + (root - X[:, :, 1]) * stride[1]])
        target = np.where(target == -2, hosts[None, :], target)
        want = x[:, None] * t.n_nodes + target
        link = np.minimum(np.searchsorted(key, want), len(key) - 1)
        bad = (target < 0) | (key[link] != want)
        if bad.any():
            a, b = np.argwhere(bad)[0]
            raise _fail(t, f"{node_label(t, int(x[a]))} has no cable to the switch that host {t.names[b]}'s "
                           "routing needs")
        table[x] = t.cable_ptr[link]                          # single cables: the link's cable
    return table, usage


def ftree_tables(topology: Topology, *, exact: bool | None = None) -> tuple[np.ndarray, FatTree, bool]:
    """The cable table of OpenSM's ftree engine, the tree, and whether the fast path computed it.

    ``exact=None`` takes the fast path where it applies; ``True`` always runs
    :func:`route_exact`; ``False`` insists on the fast path.
    """
    table, tree, fast, _ = _tables(topology, exact)
    return table, tree, fast


def _tables(topology: Topology, exact: bool | None):
    tree = fat_tree(topology)
    fast = fast_path_applies(tree) if exact is None else not exact
    if fast:
        if not fast_path_applies(tree):
            raise _fail(topology, "the fast path needs single cables and full leaves")
        table, usage = zahavi_tables(tree)
        _host_rows(topology, table)
        return table, tree, True, lambda: Router(tree, c_down=usage).switches()
    table, router = route_exact(tree)
    return table, tree, False, router.switches


def ftree(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> ForwardingTables:
    """OpenSM's ftree tables of ``topology`` (module docstring): one minimal up/down route per pair.

    ``info`` records the tree's levels, leaves, the largest leaf (hosts routed,
    with place keepers elsewhere) and whether the fast path computed the tables.
    The switches' own LIDs are routed on demand (``switch_routes``, for the
    LFT dump), as OpenSM's ``fabric_route_to_switches``.
    """
    t0 = time.perf_counter()
    table, tree, fast, switches = _tables(topology, None)
    return ForwardingTables("ftree", topology, fabric or Fabric(), table[None],
                            switch_routes=_in_switch_order(tree, switches),
                            timings={"route": time.perf_counter() - t0},
                            info={"levels": tree.levels, "leaves": len(tree.leaves), "max_hosts_per_leaf": tree.max_cn,
                                  "fast_path": fast})


def _in_switch_order(tree: FatTree, switches):
    """``switches()`` (in GUID order) re-indexed by switch node order ``n_hosts ..``."""
    def routes() -> np.ndarray:
        sw = switches()
        order = np.argsort(tree.node)                         # node order -> GUID-order index
        return sw[np.ix_(order, order)] if len(order) else sw
    return routes
