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

import dataclasses
import time

import numpy as np

from ..fabric import Fabric
from ..numeric import shortest_path_tree
from ..solve.certificate import check_connected
from ..topology.model import Topology
from .tables import ForwardingTables, from_next_nodes


def _subtree_counts(pred: np.ndarray, weight_of: np.ndarray, root: int) -> np.ndarray:
    """Per node, the sum of ``weight_of`` over the nodes whose path to ``root`` along ``pred`` passes it
    (itself included): the routes that leave it towards the root."""
    n = len(pred)
    reached = pred >= 0
    parent = np.where(reached, pred, np.arange(n))
    depth = np.zeros(n, dtype=np.int64)
    cur = np.arange(n)
    active = reached.copy()
    while active.any():                                  # hops to the root
        cur[active] = parent[cur[active]]
        depth[active] += 1
        active &= cur != root
    flow = np.where(reached, weight_of, 0.0).astype(float)
    for k in range(int(depth.max(initial=0)), 0, -1):
        at = np.flatnonzero(reached & (depth == k))
        np.add.at(flow, parent[at], flow[at])
    return flow


def sssp_tables(topology: Topology, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """Next-node tables ``nxt[node, host]`` of SSSP (module docstring) and the final link weights."""
    check_connected(topology)
    n, nh = topology.n_nodes, topology.n_hosts
    live = np.flatnonzero(topology.capacity > 0)
    src, dst = topology.src[live], topology.dst[live]
    key = src * n + dst
    weight = np.full(len(live), float(nh) ** 2)
    nxt = np.full((n, nh), -1, dtype=np.int32)
    source = (np.arange(n) < nh).astype(float)
    for d in range(nh):
        _, pred = shortest_path_tree(n, src, dst, weight, d, toward_root=True)
        nxt[:, d] = np.where(pred >= 0, pred, -1)
        w = source.copy()
        w[d] = 0.0
        flow = _subtree_counts(pred, w, d)
        on = np.flatnonzero((pred >= 0) & (flow > 0))
        weight[np.searchsorted(key, on * n + pred[on])] += flow[on]
        if progress and nh >= 256 and (d + 1) % 64 == 0:
            progress(f"sssp: {d + 1}/{nh} destinations routed")
    return nxt, weight


def sssp(topology: Topology, fabric: Fabric | None = None, *, opensm: bool = False,
         progress=None) -> ForwardingTables:
    """One route per host pair by congestion-weighted shortest-path trees (Domke et al. 2011).

    ``opensm=True`` computes what OpenSM's ``sssp`` engine installs instead
    (:func:`opensm_sssp_tables`).  Otherwise:

    Link weights start at ``P²`` for ``P`` hosts.  For each destination host ``d`` in id order,
    Dijkstra on the reversed graph gives every node's next hop toward ``d``
    (a tree, as in an InfiniBand forwarding table; ties broken canonically by
    :func:`~a2a_compiler.numeric.shortest_path_tree`); every link on a host's
    route then gains weight 1 per route crossing it.  Capacities are not used
    for the choice (links of capacity 0 are absent).
    """
    t0 = time.perf_counter()
    if opensm:
        table, to_switches = opensm_sssp_tables(topology)
        return ForwardingTables("sssp", topology, fabric or Fabric(), table[None],
                                switch_routes=lambda: to_switches, timings={"route": time.perf_counter() - t0},
                                info={"variant": "opensm"})
    nxt, weight = sssp_tables(topology, progress)
    return from_next_nodes("sssp", topology, fabric or Fabric(), nxt, timings={"route": time.perf_counter() - t0},
                           info={"max_link_weight": float(weight.max(initial=0.0))})


def dfsssp(topology: Topology, fabric: Fabric | None = None, *, opensm: bool = False,
           progress=None) -> ForwardingTables:
    """DFSSSP (Domke, Hoefler & Nagel 2011): the SSSP tables, each host pair's route given the virtual lane
    (an InfiniBand SL) that :func:`a2a_compiler.deadlock.dfsssp` assigns, so no lane's channel dependencies
    form a cycle.  ``info["vls"]`` is the number of lanes."""
    from ..topology.metrics import require_table
    from .layered import segment_lanes
    from .lft import all_pairs
    from .routers import router_view

    # per host pair: (src, dst), its segment key, sort and inverse, lane: about 48 bytes
    require_table(topology, topology.n_hosts * (topology.n_hosts - 1), 6, "DFSSSP's per-pair arrays")
    tables = sssp(topology, fabric, opensm=opensm, progress=progress)
    t0 = time.perf_counter()
    src, dst = all_pairs(topology.n_hosts)
    if progress:
        progress(f"dfsssp: virtual lanes by DFSSSP on the switch segments of {len(src):,} routes")
    lane_of, _, of_route = segment_lanes(tables, router_view(topology), src, dst)
    lane = lane_of[of_route]
    lanes = np.zeros((1, topology.n_hosts, topology.n_hosts), dtype=np.int16)
    lanes[0, src, dst] = lane
    timings = {"route": tables.timings["route"] + time.perf_counter() - t0}
    return dataclasses.replace(tables, algo="dfsssp", lanes=lanes, timings=timings,
                               info={**tables.info, "vls": int(lane.max(initial=0)) + 1})


# ------------------------------------------------------------ OpenSM's SSSP
class _Heap:
    """OpenSM's complib ``cl_heap`` (``cl_heap.c``): a ``d``-ary min-heap whose sift rules decide which of
    equal keys comes out first.  ``index[v]`` is the position of element ``v``."""

    def __init__(self, n: int, d: int = 4):
        self.d, self.key, self.item, self.index = d, [], [], [0] * n

    def _set(self, pos: int, key: int, item: int) -> None:
        self.key[pos], self.item[pos] = key, item
        self.index[item] = pos

    def _up(self, pos: int) -> None:
        if not pos:
            return
        key, item, d = self.key[pos], self.item[pos], self.d
        parent, swap, moved = pos, 0, False
        while True:
            child = parent
            parent = (child - 1) // d
            if key < self.key[parent]:
                self._set(child, self.key[parent], self.item[parent])
                swap, moved = parent, True
            else:
                break
            if parent <= 0:
                break
        if moved:
            self._set(swap, key, item)

    def _down(self, pos: int) -> None:
        key, item, d, size = self.key[pos], self.item[pos], self.d, len(self.key)
        parent, moved = pos, False
        while parent * d + 1 < size:
            first = swap = parent * d + 1
            for child in range(first + 1, min(first + d, size)):
                if self.key[child] <= self.key[swap]:
                    swap = child
            if key > self.key[swap]:
                self._set(parent, self.key[swap], self.item[swap])
                parent, moved = swap, True
            else:
                break
        if moved:
            self._set(parent, key, item)

    def insert(self, key: int, item: int) -> None:
        self.key.append(key)
        self.item.append(item)
        self.index[item] = len(self.key) - 1
        self._up(len(self.key) - 1)

    def modify(self, key: int, item: int) -> None:
        pos = self.index[item]
        old = self.key[pos]
        self.key[pos] = key
        if key < old:
            self._up(pos)
        elif key > old:
            self._down(pos)

    def extract(self):
        """``cl_heap_extract_root`` = ``cl_heap_delete(0)``: the last element moves to the root and sinks."""
        if not self.key:
            return None
        if len(self.key) == 1:
            self.key.pop()
            return self.item.pop()
        root = self.item[0]
        key, item = self.key.pop(), self.item.pop()
        self._set(0, key, item)
        self._down(0)
        return root


#: OpenSM's "infinite" distance (``INF`` in ``osm_ucast_dfsssp.c``).
_INF = 0x7FFFFFFF


def opensm_sssp_tables(topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """The cable table OpenSM 3.3's ``sssp`` engine computes (``osm_ucast_dfsssp.c``), per cable, and its
    ``(switches, switches)`` routes to the switches' own LIDs (``-1``: itself; node order).

    The graph is the switches, one link per cable, each of weight ``P²`` (``P``:
    CA ports plus switches).  Destinations come switch by switch (most hosts
    first, then GUID), each switch's hosts by port.  For each, Dijkstra runs
    from the destination's CA with OpenSM's 4-ary heap (its sift order breaks
    distance ties), every switch's entry is its cable towards its tree parent,
    and then every switch adds its weight -- its hosts *plus one for its own
    port 0* -- to each link on its tree path to the root.  Hosts must be CA
    ports cabled to switches.  The switches' own LIDs come last, switch by switch in
    the same order, Dijkstra from the switch, weights updated the same way.
    """
    from .minhop import destination_order
    from .opensm import require_infiniband
    from ..topology.ibnet import node_guids

    t, nh = topology, topology.n_hosts
    require_infiniband(t)
    guids = node_guids(t)
    sw_nodes = sorted(range(nh, t.n_nodes), key=lambda s: guids[s])
    vertex = {s: i + 1 for i, s in enumerate(sw_nodes)}          # vertex 0: the destination's CA
    csrc, cdst, port = t.src[t.cable_link], t.dst[t.cable_link], t.cable_port
    links = [[] for _ in range(len(sw_nodes) + 1)]               # per vertex: (cable, to vertex), port order
    for c in np.lexsort((port, csrc)).tolist():
        if csrc[c] >= nh and cdst[c] >= nh:
            links[vertex[int(csrc[c])]].append((c, vertex[int(cdst[c])]))
    hosts_on = np.bincount(csrc[(csrc >= nh) & (cdst < nh)], minlength=t.n_nodes)
    num_hca = [0] + [int(hosts_on[s]) + 1 for s in sw_nodes]
    P = nh + len(sw_nodes)
    weight = [P * P] * t.n_cables
    host_cable = {int(csrc[c]): int(c) for c in np.flatnonzero(csrc < nh)}
    V = len(sw_nodes) + 1

    def route(source: int, first: list):
        """Dijkstra from ``source`` (0: a CA, linked by ``first``), then OpenSM's weight update."""
        dist, used, done = [_INF] * V, [None] * V, [False] * V   # used[v]: (cable into v's parent, parent)
        heap = _Heap(V)
        for v in range(1, V):
            heap.insert(_INF, v)
        if source == 0:
            heap.insert(_INF, 0)
        dist[source] = 0
        heap.modify(0, source)
        while True:
            cur = heap.extract()
            if cur is None:
                break
            done[cur] = True
            out = first if cur == 0 else [(c, to, weight[c]) for c, to in links[cur]]
            for c, to, w in out:
                if not done[to] and dist[cur] + w < dist[to]:
                    used[to] = (c, cur)
                    dist[to] = dist[cur] + w
                    heap.modify(dist[to], to)
        for v in range(1, V):                                    # update_weights
            j = v
            while used[j] is not None:
                c, j = used[j]
                weight[c] += num_hca[v]
        return used

    table = np.full((t.n_nodes, nh), -1, dtype=np.int32)
    for d in destination_order(t).tolist():
        c0 = host_cable[d]
        used = route(0, [(c0, vertex[int(cdst[c0])], 1)])       # the CA's link, weight 1
        for v in range(1, V):
            if used[v] is not None:
                table[sw_nodes[v - 1], d] = t.cable_reverse[used[v][0]]
    # then the switches' own LIDs (port 0), most hosts first, then GUID
    to_sw = np.full((t.n_switches, t.n_switches), -2, dtype=np.int64)
    for s in sorted(sw_nodes, key=lambda s: -num_hca[vertex[s]]):
        used = route(vertex[s], [])
        to_sw[s - nh, s - nh] = -1
        for v in range(1, V):
            if used[v] is not None:
                to_sw[sw_nodes[v - 1] - nh, s - nh] = t.cable_reverse[used[v][0]]
    csrc_h = np.flatnonzero(csrc < nh)
    table[csrc[csrc_h]] = csrc_h[:, None]
    table[np.arange(nh), np.arange(nh)] = -1
    return table, to_sw
