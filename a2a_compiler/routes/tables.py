"""Destination-based routing as forwarding-table arrays: InfiniBand LFTs on cables.

An InfiniBand switch forwards by destination only: its *linear forwarding
table* maps a destination LID to an output port (Zahavi et al. 2009 §3.1).  A
:class:`ForwardingTables` holds every node's table as one integer array
``cable[layer, node, host]``: the directed cable (a port, see
:mod:`a2a_compiler.topology.model`) that ``node`` forwards traffic for
``host`` on, ``-1`` for none.  A layered routing (FatPaths, Blach et al.
2024) has one layer per LID offset of the LMC range; a host pair's shard is
split equally over the layers that route it (``share``).  Virtual lanes are
either one per (layer, source, destination) (``lanes``: an InfiniBand SL per
path, as DFSSSP and LASH assign them) or one per router hop (``hop_vc``: VC
``k`` on the ``k``-th router-to-router hop, Slim Fly minimal routing).

Everything is computed from the arrays, never from per-route objects:

* :meth:`ForwardingTables.trace` follows the tables from many sources at
  once (one numpy step per hop);
* :meth:`ForwardingTables.measure` traces the all-to-all stage block by stage
  block of the shift pattern (stage ``s``: pairs ``i -> (i + s) mod N``), so
  one pass gives each cable's all-to-all load (the all-to-all time through the
  cost model :mod:`a2a_compiler.chunk.cost`, resources per cable) and each
  stage's congestion (Zahavi et al. Table I), per cable;
* :meth:`ForwardingTables.dependencies` gives the channel dependency graph
  (:mod:`a2a_compiler.deadlock.cdg`) over (cable, virtual lane);
* :meth:`ForwardingTables.routes` turns the tables into a
  :class:`~.result.RouteSet` only where a consumer needs per-pair paths
  (MPI path files, deadlock layering) and the size allows.

Engines that route by next node (``nxt[node, host]``) pin a cable of each
port group with :func:`pin_cables`: per node, destinations in host order
take the group's cables round robin (the least used cable, ties to the lowest
port, as OpenSM counts paths per port).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

import numpy as np
import scipy.sparse as sp

from ..chunk.cost import CostModel, stepped_time
from ..deadlock.cdg import ChannelDependencyGraph, describe_cycle
from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .patterns import PatternCongestion
from .result import RoutedPath, RouteSet

#: Pair-hops traced at once (bounds the memory of :meth:`ForwardingTables.measure` and friends).
BLOCK_HOPS = 1 << 23
#: Most per-pair routes :meth:`ForwardingTables.routes` builds (Python objects: about 0.3 KB each).
MAX_ROUTES = 1_000_000


def node_label(topology: Topology, u: int) -> str:
    """A node as the fabric names it: its name, and its GUID when the topology has GUIDs."""
    kind = "host" if u < topology.n_hosts else "switch"
    guid = f" (guid 0x{topology.guids[u]:016x})" if topology.guids is not None else ""
    return f"{kind} {topology.names[u]}{guid}"


def pin_cables(topology: Topology, nxt: np.ndarray) -> np.ndarray:
    """Cable tables from next-node tables ``nxt[..., node, host]`` (``-1``: none), same shape, int32.

    Within a port group, node ``u``'s destinations (in host order, layer by
    layer) take the group's cables round robin in port order.  Raises
    :class:`A2AError` naming the node whose next hop is not a neighbour.
    Works through blocks of nodes (a link's entries are all in its source
    node's rows), so its temporaries stay near :data:`BLOCK_HOPS` entries.
    """
    t = topology
    shape = nxt.shape
    flat = nxt.reshape(-1, t.n_nodes, t.n_hosts)
    out = np.full(flat.shape, -1, dtype=np.int32)
    key = t.src * t.n_nodes + t.dst
    by_port = None if np.all(t.link_cables == 1) else _cables_by_port(t)
    step = max(1, BLOCK_HOPS // max(1, flat.shape[0] * t.n_hosts))
    for u0 in range(0, t.n_nodes, step):
        block = flat[:, u0:u0 + step]
        layer, u, d = np.nonzero(block >= 0)
        v = block[layer, u, d].astype(np.int64)
        u += u0
        want = u * t.n_nodes + v
        e = np.minimum(np.searchsorted(key, want), max(len(key) - 1, 0))
        bad = np.flatnonzero(key[e] != want) if len(key) else np.arange(len(want))
        if len(bad):
            i = int(bad[0])
            raise A2AError(f"{t.spec}: {node_label(t, int(u[i]))} forwards host {t.names[d[i]]} to "
                           f"{t.names[v[i]]}, which is not a neighbour")
        if by_port is None:
            out[layer, u, d] = t.cable_ptr[e]
            continue
        # rank of each entry among its link's entries (entries come in (layer, u, d) order)
        order = np.argsort(e, kind="stable")
        first = np.searchsorted(e[order], e[order])
        rank = np.empty(len(e), dtype=np.int64)
        rank[order] = np.arange(len(e)) - first
        out[layer, u, d] = by_port[t.cable_ptr[e] + rank % t.link_cables[e]]
    return out.reshape(shape)


def _cables_by_port(topology: Topology) -> np.ndarray:
    """``by_port[cable_ptr[e] + i]``: link ``e``'s cable with the ``i``-th lowest port."""
    t = topology
    order = np.lexsort((t.cable_port, t.cable_link))
    return order.astype(np.int64)


@dataclass(frozen=True, eq=False)
class Measurement:
    """What :meth:`ForwardingTables.measure` counts, per cable.

    ``loads[c]``: shards on directed cable ``c`` in the all-to-all (unit demand
    per ordered host pair); ``alltoall_time``: the cost model's time of one step
    carrying them (max load over cable capacity, host terms with a host
    bandwidth); ``shift``: the congestion of every shift stage; ``dependencies``:
    the channel dependency graph over (cable, virtual lane) of every route.
    """

    loads: np.ndarray
    alltoall_time: float
    shift: PatternCongestion
    dependencies: ChannelDependencyGraph


@dataclass(frozen=True, eq=False)
class ForwardingTables:
    """Forwarding tables of every node, per layer, on cables (module docstring).

    ``cable`` is ``(layers, n_nodes, n_hosts)`` int32.  ``share[l, s, d]`` says
    whether layer ``l`` carries pair ``s -> d`` (``None``: every layer carries
    every pair); ``lanes[l, s, d]`` is the pair's virtual lane (SL) in layer
    ``l`` (``None``: lane 0); ``hop_vc`` marks the routers of a VC-per-router-hop
    scheme (``None``: no such scheme).  ``switch_routes``, where the engine
    routes the switches' own LIDs its own way, computes ``(switches, switches)``
    cables on demand (``-1``: the switch itself, ``-2``: no path); otherwise the
    LFT dump routes them by MinHop's rule (:mod:`.opensm`).
    """

    algo: str
    topology: Topology
    fabric: Fabric
    cable: np.ndarray
    share: np.ndarray | None = None
    lanes: np.ndarray | None = None
    hop_vc: np.ndarray | None = None
    switch_routes: Callable[[], np.ndarray] | None = None
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    # ------------------------------------------------------------- basics
    @property
    def layers(self) -> int:
        """Number of layers (LID offsets)."""
        return self.cable.shape[0]

    @cached_property
    def _cable_dst(self) -> np.ndarray:
        return self.topology.dst[self.topology.cable_link]

    @cached_property
    def _flat(self) -> np.ndarray:
        return self.cable.reshape(-1)

    def next_node(self, layer: int = 0) -> np.ndarray:
        """``nxt[node, host]`` of one layer: the neighbour each node forwards to (``-1``: none)."""
        c = self.cable[layer]
        return np.where(c >= 0, self._cable_dst[np.maximum(c, 0)], -1)

    def weights(self) -> np.ndarray | None:
        """``(layers, N, N)`` fraction of each pair's shard per layer, or ``None`` (all layers equal)."""
        if self.share is None:
            return None
        count = self.share.sum(0)
        return np.where(self.share, 1.0 / np.maximum(count, 1), 0.0)

    # -------------------------------------------------------------- trace
    def trace(self, src, dst, layer=None) -> tuple[np.ndarray, np.ndarray]:
        """``(nodes, cables)``: the node sequence (``-1``-padded) and the cables (``-1``-padded) of every
        pair's route.  Raises :class:`A2AError` naming the node at a missing entry or on a forwarding loop
        (a route longer than the number of nodes)."""
        src = np.asarray(src, dtype=np.int64)
        hops = [(idx, c) for idx, c in self.walk(src, dst, layer)]
        cables = np.full((len(src), len(hops)), -1, dtype=np.int64)
        for h, (idx, c) in enumerate(hops):
            cables[idx, h] = c
        nodes = np.full((len(src), len(hops) + 1), -1, dtype=np.int64)
        nodes[:, 0] = src
        nodes[:, 1:] = np.where(cables >= 0, self._cable_dst[np.maximum(cables, 0)], -1)
        return nodes, cables

    def walk(self, src, dst, layer=None):
        """Yield ``(pairs, cables)`` hop by hop: the indices of the routes still under way and the cable each
        takes next (no path matrix is built; :meth:`trace` gives one).  Errors as :meth:`trace`."""
        t = self.topology
        n, nh = t.n_nodes, t.n_hosts
        big = self.cable.size >= 2**31
        dt = np.int64 if big else np.int32
        src = np.asarray(src, dtype=dt)
        dst = np.asarray(dst, dtype=dt)
        idx = np.arange(len(src), dtype=np.int64)
        cur = src
        col = dst if layer is None else (np.asarray(layer, dtype=dt) * (n * nh) + dst)
        cable_dst = self._cable_dst.astype(dt)
        live = cur != dst
        idx, cur, col, end = idx[live], cur[live], col[live], dst[live]
        for _ in range(n):
            if not len(idx):
                return
            c = self._flat[cur * nh + col]
            if np.any(c < 0):
                i = int(idx[np.argmax(c < 0)])
                raise A2AError(f"{self.algo}: {node_label(t, int(cur[np.argmax(c < 0)]))} has no entry for host "
                               f"{t.names[dst[i]]} (route {t.names[src[i]]} -> {t.names[dst[i]]})")
            yield idx, c
            cur = cable_dst[c]
            live = cur != end
            idx, cur, col, end = idx[live], cur[live], col[live], end[live]
        i = int(idx[0])
        raise A2AError(f"{self.algo}: forwarding loop on the route {t.names[src[i]]} -> {t.names[dst[i]]} "
                       f"(through {node_label(t, int(cur[0]))})")

    def _pairs_of_stages(self, first: int, last: int):
        """Every (src, dst, layer, weight, stage) of shift stages ``first .. last-1`` (stage ``s``: ``i -> i+s``)."""
        nh = self.topology.n_hosts
        s = np.repeat(np.arange(first, last), nh)
        src = np.tile(np.arange(nh), last - first)
        dst = (src + s) % nh
        w = self.weights()
        if w is None:
            L = self.layers
            if L == 1:
                return src, dst, None, None, s
            return (np.tile(src, L), np.tile(dst, L), np.repeat(np.arange(L), len(src)),
                    np.full(len(src) * L, 1.0 / L), np.tile(s, L))
        layer, k = np.nonzero(w[:, src, dst] > 0)
        return src[k], dst[k], layer, w[layer, src[k], dst[k]], s[k]

    def _full_pairs(self, first: int, last: int):
        """:meth:`_pairs_of_stages` with the layer and weight of every route spelled out."""
        src, dst, layer, w, stage = self._pairs_of_stages(first, last)
        if layer is None:
            layer, w = np.zeros(len(src), dtype=np.int64), np.ones(len(src))
        return src, dst, layer, w, stage

    def _stage_blocks(self):
        """Blocks of shift stages whose routes' hops fit :data:`BLOCK_HOPS`."""
        nh = self.topology.n_hosts
        hops = self.point_paths.shape[-1] + 1
        step = max(1, min(nh - 1, BLOCK_HOPS // max(nh * self.layers * hops, 1)))
        for first in range(1, nh, step):
            yield first, min(nh, first + step)

    @cached_property
    def _points(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(points, index, prefix)``: the attachment points (a leaf host's switch, or the host itself), each
        host's point index, and the cable from a leaf host to its switch (``-1``: the host is its own point)."""
        from ..topology.metrics import attachment

        t = self.topology
        a, o = attachment(t)
        points, index = np.unique(a, return_inverse=True)
        first = np.searchsorted(t.src[t.cable_link], np.arange(t.n_hosts))
        prefix = np.where(o == 1, np.minimum(first, max(t.n_cables - 1, 0)), -1)
        return points, index.reshape(-1), prefix

    @cached_property
    def point_paths(self) -> np.ndarray:
        """``(layers, points, hosts, hops)``: the cables of the route from every attachment point to every host
        (``-1``-padded).  A host's route is its cable to its switch, then its switch's path: every route is
        traced once per (switch, destination), not once per pair."""
        t = self.topology
        points, _, _ = self._points
        nh, P = t.n_hosts, len(points)
        src = np.repeat(points, nh)
        dst = np.tile(np.arange(nh), P)
        keep = np.flatnonzero(src != dst)
        per_layer = []
        for layer in range(self.layers):
            hops = list(self.walk(src[keep], dst[keep], np.full(len(keep), layer)))
            out = np.full((P * nh, max(len(hops), 1)), -1, dtype=np.int32)
            for h, (idx, c) in enumerate(hops):
                out[keep[idx], h] = c
            per_layer.append(out)
        width = max(x.shape[1] for x in per_layer)
        out = np.full((self.layers, P, nh, width), -1, dtype=np.int32)
        for layer, x in enumerate(per_layer):
            out[layer, :, :, :x.shape[1]] = x.reshape(P, nh, -1)
        return out

    def _routes_of(self, src, dst, layer) -> np.ndarray:
        """``(pairs, hops)`` cables of each pair's route (``-1``-padded) from :attr:`point_paths`."""
        _, index, prefix = self._points
        rest = self.point_paths[0 if layer is None else layer, index[src], dst]
        return np.concatenate([prefix[src][:, None], rest], 1)

    def _lanes_of(self, cab: np.ndarray, src, dst, layer) -> np.ndarray:
        """The virtual lane of every hop of ``cab`` (routes as :meth:`_routes_of` gives them)."""
        t = self.topology
        if self.hop_vc is not None:
            link = t.cable_link[np.maximum(cab, 0)]
            router_hop = (cab >= 0) & self.hop_vc[t.src[link]] & self.hop_vc[t.dst[link]]
            return np.where(router_hop, np.cumsum(router_hop, 1) - 1, 0)
        if self.lanes is None:
            return np.zeros(cab.shape, dtype=np.int64)
        lane = self.lanes[0 if layer is None else layer, src, dst]
        return np.broadcast_to(lane[:, None], cab.shape)

    def measure(self, progress=None) -> Measurement:
        """All-to-all loads and time, shift congestion and channel dependencies, per cable, in one pass over the
        shift stages (module docstring); ``progress`` gets a line per block of stages (rate-limited)."""
        from ..progress import tick_of

        tick = tick_of(progress)
        t = self.topology
        nh, nc = t.n_hosts, t.n_cables
        model = CostModel(t.src[t.cable_link], self._cable_dst, t.cable_capacity, nh, self.fabric)
        total = np.zeros(model.width)
        per_stage = np.zeros(max(nh - 1, 0))
        inv_cap = 1.0 / t.cable_capacity
        deps = _Dependencies(t, self.n_lanes)
        unit = bool(np.all(inv_cap == 1.0))
        _, index, prefix = self._points
        paths = self.point_paths
        padded = np.where(paths >= 0, paths, nc)              # padding hops count on a dummy cable nc, dropped
        pre_padded = np.where(prefix >= 0, prefix, nc)
        for first, last in self._stage_blocks():
            src, dst, layer, w, stage = self._pairs_of_stages(first, last)
            k = last - first
            rest = padded[0 if layer is None else layer, index[src], dst]
            pre = pre_padded[src]
            base = (stage - first).astype(np.int64) * (nc + 1)
            code = np.concatenate([(base[:, None] + rest).reshape(-1), base + pre])
            weight = None if w is None else np.concatenate([np.repeat(w, rest.shape[1]), w])
            load = np.bincount(code, weights=weight, minlength=k * (nc + 1)).reshape(k, nc + 1)[:, :nc]
            per_stage[first - 1:last - 1] = (load if unit else load * inv_cap).max(1, initial=0.0)
            total[:nc] += load.sum(0)
            if model.hosts_limited or self.lanes is not None:
                cab = np.concatenate([pre[:, None], rest], 1)
                cab[cab >= nc] = -1
            if model.hosts_limited:
                rows = np.nonzero(cab >= 0)[0]
                c = cab[cab >= 0].astype(np.int64)
                hops, res = model.hop_resources(c, model.src[c], model.dst[c], src[rows], dst[rows])
                extra = res >= nc
                total += np.bincount(res[extra], weights=None if w is None else w[rows][hops[extra]],
                                     minlength=model.width)
            if tick:
                tick(f"{self.algo}: shift stages {last - 1}/{nh - 1} traced per cable")
            if self.lanes is not None:                        # lanes per pair: every route's own dependencies
                deps.add(cab, self._lanes_of(cab, src, dst, layer))
        if self.lanes is None:                                # a route's lanes follow from its path alone
            self._path_dependencies(deps)
        time = stepped_time(total[None, :], model.capacity, 1)[0] if nh > 1 else 0.0
        return Measurement(total[:nc], time, PatternCongestion("shift", per_stage), deps.graph())

    def _path_dependencies(self, deps: "_Dependencies") -> None:
        """Dependencies of routes whose lanes depend on the path only: along every (switch, destination) path,
        and from each host's cable into its switch onto that switch's first cable towards every other host."""
        t = self.topology
        points, index, prefix = self._points
        paths = self.point_paths
        for layer in range(self.layers):
            P, nh, H = paths.shape[1:]
            flat = paths[layer].reshape(P * nh, H)
            for lo in range(0, len(flat), max(1, BLOCK_HOPS // max(H, 1))):
                part = flat[lo:lo + BLOCK_HOPS // max(H, 1)]
                deps.add(part, self._lanes_of(part, None, None, None))
            leaf = np.flatnonzero(prefix >= 0)                # hosts with a cable into their switch
            if not len(leaf):
                continue
            # each leaf host's cable into its switch, then any first cable of its switch's paths except the one
            # back to the host itself (no host sends to itself)
            nc = t.n_cables
            first = paths[layer, :, :, 0]
            mark = np.zeros(P * nc, dtype=bool)
            pt, d = np.nonzero(first >= 0)
            mark[pt * nc + first[pt, d]] = True
            pt, f = np.divmod(np.flatnonzero(mark), nc)
            count = np.bincount(pt, minlength=P)
            start = np.concatenate([[0], np.cumsum(count)])[:-1]
            n_of = count[index[leaf]]
            h = np.repeat(leaf, n_of)
            pos = np.arange(len(h)) - np.repeat(np.cumsum(n_of) - n_of, n_of) + np.repeat(start[index[leaf]], n_of)
            b = f[pos]
            keep = b != t.cable_reverse[prefix[h]]
            pair = np.stack([prefix[h][keep], b[keep]], 1)
            deps.add(pair, self._lanes_of(pair, None, None, None))

    # ----------------------------------------------------------- checking
    def validate(self) -> "ForwardingTables":
        """Refuse tables with a cable that does not leave its node, a missing entry or a loop (one line).

        Every node needs an entry for every other host in every layer that
        routes all pairs (``share`` None; layer 0 always); every entry must lead
        to its host without a loop.  Checked destination block by destination
        block, so it scales like the tables.
        """
        t = self.topology
        n, nh = t.n_nodes, t.n_hosts
        src_of = t.src[t.cable_link]
        L = self.layers
        for layer in range(L):
            tab = self.cable[layer]
            bad = (tab >= t.n_cables) | (tab < -1)
            if bad.any():
                u, d = np.argwhere(bad)[0]
                raise A2AError(f"{self.algo}: {node_label(t, int(u))} has an entry for host {t.names[d]} on a "
                               "cable that does not exist")
            full = self.share is None or layer == 0
            step = max(1, BLOCK_HOPS // (4 * n))
            for d0 in range(0, nh, step):
                d = np.arange(d0, min(nh, d0 + step))
                blk = tab[:, d].astype(np.int64)
                own = np.zeros(blk.shape, dtype=bool)
                own[d, np.arange(len(d))] = True
                wrong = (blk >= 0) & (src_of[np.maximum(blk, 0)] != np.arange(n)[:, None])
                if wrong.any():
                    u, j = np.argwhere(wrong)[0]
                    raise A2AError(f"{self.algo}: {node_label(t, int(u))} forwards host {t.names[d[j]]} on a port "
                                   "that is not its own")
                if own.any() and (blk[own] >= 0).any():
                    j = int(np.flatnonzero(blk[own] >= 0)[0])
                    raise A2AError(f"{self.algo}: host {t.names[d[j]]} forwards traffic for itself")
                if full and ((blk < 0) & ~own).any():
                    u, j = np.argwhere((blk < 0) & ~own)[0]
                    raise A2AError(f"{self.algo}: {node_label(t, int(u))} has no entry for host {t.names[d[j]]} "
                                   f"(layer {layer})" if L > 1 else
                                   f"{self.algo}: {node_label(t, int(u))} has no entry for host {t.names[d[j]]}")
                self._check_loops(layer, d, blk)
        return self

    def _check_loops(self, layer: int, d: np.ndarray, blk: np.ndarray) -> None:
        """Every entry of destination block ``d`` reaches its host.  Only nodes that are some entry's next hop
        can lie on a loop, so the next-node map is iterated on those alone (a few steps reach the host on any
        sensible fabric, then the steps double until every walk has covered all nodes); every other node's
        walk is its next hop's."""
        t = self.topology
        n = t.n_nodes
        cols = np.arange(len(d))
        nxt = np.where(blk >= 0, self._cable_dst[np.maximum(blk, 0)], n).astype(np.int32)   # dead end: node n
        nxt[d, cols] = d                                                   # a host is its own end
        hop = np.zeros(n + 1, dtype=bool)
        hop[nxt] = True
        hop[n] = True
        rows = np.flatnonzero(hop)
        pos = np.full(n + 1, -1, dtype=np.int32)
        pos[rows] = np.arange(len(rows), dtype=np.int32)
        sub = np.vstack([pos[nxt[rows[:-1]]], np.full((1, len(d)), pos[n], dtype=np.int32)])
        goal = pos[d][None, :]
        done = lambda c: np.all((c == goal) | (c == pos[n]))              # noqa: E731
        cur, walked = sub, 1
        while walked < 32 and not done(cur):
            cur = np.take_along_axis(sub, cur, 0)
            cur = np.take_along_axis(sub, cur, 0)
            walked += 2
        while walked <= n and not done(cur):
            cur, walked = np.take_along_axis(cur, cur, 0), 2 * walked
        end = np.take_along_axis(cur, pos[nxt], 0)
        looping = (end != goal) & (end != pos[n]) & (blk >= 0)
        if looping.any():
            u, j = np.argwhere(looping)[0]
            self._refuse_misdelivery(int(u), int(d[j]), nxt[:, j], layer)
            on_cycle = int(rows[end[u, j]])                   # the walk has covered all nodes: it is in the loop
            raise A2AError(f"{self.algo}: forwarding loop for host {t.names[d[j]]} through "
                           f"{node_label(t, on_cycle)}" + (f" (layer {layer})" if self.layers > 1 else ""))

    def _refuse_misdelivery(self, u: int, d: int, nxt: np.ndarray, layer: int) -> None:
        """On a fabric with switches, a walk for host ``d`` from ``u`` that enters another host was delivered
        to the wrong host port (then bounced back: a loop); name that, not the loop."""
        t = self.topology
        if t.n_nodes == t.n_hosts:
            return                                                 # hosts forward: no host port to miss
        for _ in range(t.n_nodes):
            v = int(nxt[u])
            if v in (d, t.n_nodes):                                # delivered, or a dead end
                return
            if v < t.n_hosts:
                raise A2AError(f"{self.algo}: {node_label(t, u)} delivers traffic for host {t.names[d]} to host "
                               f"{t.names[v]}, a host port that is not its destination (a misdelivery)"
                               + (f" (layer {layer})" if self.layers > 1 else ""))
            u = v

    # ----------------------------------------------------- virtual lanes
    def deadlock_cycle(self, measurement: Measurement | None = None) -> str | None:
        """``None`` if the routes cannot deadlock on their virtual lanes, else a cycle, described."""
        cycle = (measurement or self.measure()).dependencies.find_cycle()
        return None if cycle is None else describe_cycle(cycle)

    def _hop_lanes(self, nodes, src, dst, layer) -> np.ndarray:
        """The virtual lane of every hop of traced routes."""
        hops = nodes.shape[1] - 1
        if self.hop_vc is not None:
            is_router = np.append(self.hop_vc, False)
            u, v = nodes[:, :-1], nodes[:, 1:]
            router_hop = is_router[u] & is_router[v]
            return np.where(router_hop, np.cumsum(router_hop, 1) - 1, 0)
        if self.lanes is None:
            return np.zeros((len(src), hops), dtype=np.int64)
        return np.repeat(self.lanes[layer, src, dst][:, None], hops, 1).astype(np.int64)

    @property
    def n_lanes(self) -> int:
        """Virtual lanes the routes use."""
        if self.hop_vc is not None:
            return int(self.info.get("vcs", 1))
        return 1 if self.lanes is None else int(self.lanes.max(initial=0)) + 1

    # ------------------------------------------------------------- routes
    def n_routes(self) -> int:
        nh = self.topology.n_hosts
        return int(self.share.sum()) if self.share is not None else nh * (nh - 1) * self.layers

    def check_route_count(self, limit: int | None = None) -> None:
        """Refuse, in one line, to build more than ``limit`` (default :data:`MAX_ROUTES`) per-route objects."""
        limit = MAX_ROUTES if limit is None else limit
        need = self.n_routes()
        if need > limit:
            raise A2AError(f"{self.algo}: {self.topology.spec} has {need:,} routes, more than the {limit:,} "
                           "per-route objects a2a builds (MPI path files, deadlock schemes); the tables themselves "
                           "are measured and exported without them (a2a routes --json, --lft)")

    def routes(self, limit: int | None = None) -> RouteSet:
        """The per-pair routes as a :class:`RouteSet` (identical paths of a pair's layers merged, weights summed,
        the lowest layer kept); refused beyond ``limit`` routes with one line."""
        t = self.topology
        self.check_route_count(limit)
        src, dst, layer, w, _ = self._full_pairs(1, t.n_hosts)
        order = np.lexsort((layer, dst, src))
        src, dst, layer, w = src[order], dst[order], layer[order], w[order]
        nodes, cab = self.trace(src, dst, layer)
        vc = self._hop_lanes(nodes, src, dst, layer)
        pair = src * t.n_hosts + dst
        rows = np.concatenate([pair[:, None], nodes], 1)
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        weight = np.bincount(inverse.reshape(-1), weights=w, minlength=len(first))
        first_sorted = np.sort(first)
        weight = weight[np.argsort(first)]
        lane = self.lanes[layer, src, dst] if self.lanes is not None else np.zeros(len(src), np.int64)
        length = (nodes >= 0).sum(1)
        paths = tuple(
            RoutedPath(int(src[i]), int(dst[i]), tuple(nodes[i, :length[i]].tolist()), float(weight[k]),
                       int(lane[i]), tuple(vc[i, :length[i] - 1].tolist()) if self.hop_vc is not None else None,
                       int(layer[i]))
            for k, i in enumerate(first_sorted.tolist()))
        return RouteSet(self.algo, t, self.fabric, paths, timings=dict(self.timings), info=dict(self.info),
                        tables=self)


class _Dependencies:
    """Channel dependencies (cable ``a`` on lane ``x`` then cable ``b`` on lane ``y``) collected from route
    rows, marked in a boolean array over (a, x, b's port, y) while that fits, else as unique keys."""

    def __init__(self, topology: Topology, n_vc: int):
        self.t, self.v = topology, n_vc
        self.port = topology.cable_port
        self.n_port = int(self.port.max(initial=0)) + 1
        size = topology.n_cables * n_vc * self.n_port * n_vc
        self.seen = np.zeros(size, dtype=bool) if size <= 1 << 27 else None
        self.found: list[np.ndarray] = []

    def add(self, cab: np.ndarray, lane: np.ndarray) -> None:
        """Mark the dependencies of consecutive cables of every row of ``cab`` (``-1``: no hop)."""
        both = (cab[:, :-1] >= 0) & (cab[:, 1:] >= 0)
        a, b = cab[:, :-1][both].astype(np.int64), cab[:, 1:][both].astype(np.int64)
        v = self.v
        key = ((a * v + lane[:, :-1][both]) * self.n_port + self.port[b]) * v + lane[:, 1:][both]
        if self.seen is not None:
            self.seen[key] = True
        else:
            self.found.append(np.unique(key))

    def graph(self) -> ChannelDependencyGraph:
        t, v = self.t, self.v
        keys = np.flatnonzero(self.seen) if self.seen is not None else \
            np.unique(np.concatenate(self.found + [np.zeros(0, np.int64)]))
        rest, vb = np.divmod(keys, v)
        rest, pb = np.divmod(rest, self.n_port)
        a, va = np.divmod(rest, v)
        b = t.cable_of_port()[t.dst[t.cable_link[a]], pb]
        return _cdg(t, np.stack([a * v + va, b * v + vb], 1), v)


def _cdg(topology: Topology, deps: np.ndarray, n_vc: int) -> ChannelDependencyGraph:
    """A :class:`ChannelDependencyGraph` on channels (cable, lane) numbered ``cable * n_vc + lane``."""
    t = topology
    n = t.n_cables * n_vc
    cable, vc = np.divmod(np.arange(n), n_vc)
    link = t.cable_link[cable]
    channels = np.stack([t.src[link], t.dst[link], vc], 1)
    edges = sp.csr_array((np.ones(len(deps)), (deps[:, 0], deps[:, 1])), shape=(n, n))
    edges.sum_duplicates()
    return ChannelDependencyGraph(channels, edges)


def from_next_nodes(algo: str, topology: Topology, fabric: Fabric, nxt: np.ndarray, **fields) -> ForwardingTables:
    """:class:`ForwardingTables` of next-node tables ``nxt[(layer,) node, host]``, cables pinned by
    :func:`pin_cables`."""
    cable = pin_cables(topology, nxt if nxt.ndim == 3 else nxt[None])
    return ForwardingTables(algo, topology, fabric, cable, **fields)
