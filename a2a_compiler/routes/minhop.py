"""OpenSM's MinHop routing (``osm_ucast_mgr.c``, ``osm_switch_recommend_path``): Zahavi's baseline.

Every switch routes each destination through one of its min-hop ports (a
port is a cable), the one with the fewest destinations routed through it so
far; ties go to the lowest port number.  The destinations come in OpenSM's
order: the switches by the number of hosts cabled to them (most first, then
by GUID), each switch's hosts by port.  The counters of all switches evolve
independently, so one numpy step per destination routes it at every node at
once.  A port group of parallel cables is balanced cable by cable, as OpenSM
counts paths per port.  As in OpenSM only hop counts and per-port counters
decide, so the engine routes any topology (Zahavi et al. 2009 §4.1 explains
why it congests shift stages on fat trees).
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.ibnet import node_guids
from ..topology.metrics import attachment
from ..topology.model import Topology
from .tables import ForwardingTables


def destination_order(topology: Topology) -> np.ndarray:
    """OpenSM's port order list: hosts by their switch (most hosts first, then switch GUID), then by the switch's
    port; hosts not cabled to a switch last, by GUID."""
    t, nh = topology, topology.n_hosts
    guids = node_guids(t)
    csrc, cdst = t.src[t.cable_link], t.dst[t.cable_link]
    down = np.flatnonzero((csrc >= nh) & (cdst < nh))         # switch -> host cables
    count = np.bincount(csrc[down], minlength=t.n_nodes)
    seen = np.zeros(nh, dtype=bool)
    order = []
    switches = sorted(range(nh, t.n_nodes), key=lambda s: (-count[s], guids[s]))
    by_switch = {s: [] for s in switches}
    for c in down[np.argsort(t.cable_port[down], kind="stable")].tolist():
        by_switch[int(csrc[c])].append(int(cdst[c]))
    for s in switches:
        for h in by_switch[s]:
            if not seen[h]:
                seen[h] = True
                order.append(h)
    rest = sorted(np.flatnonzero(~seen).tolist(), key=lambda h: guids[h])
    return np.array(order + rest, dtype=np.int64)


def hop_distances(topology: Topology) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(D, point, offset)``: hops ``D[u, k]`` from every node to attachment point ``k`` and each host's point
    and offset, so that the distance from ``u != h`` to host ``h`` is ``D[u, point[h]] + offset[h]``."""
    t = topology
    a, o = attachment(t)
    points, inv = np.unique(a, return_inverse=True)
    rev = sp.csr_array((np.ones(t.n_links), (t.dst, t.src)), shape=(t.n_nodes, t.n_nodes))
    D = csgraph.shortest_path(rev, unweighted=True, indices=points).T
    return D, inv.reshape(-1), o


def minhop_tables(topology: Topology, dor: bool = False) -> np.ndarray:
    """The cable table ``(n_nodes, n_hosts)`` MinHop fills (module docstring).

    ``dor=True`` is OpenSM's ``dor`` engine (the same code path with its
    dimension-order flag): among a switch's min-hop ports the first, in port
    order, fixes the neighbour; the least used of the ports to that neighbour
    (ties to the lowest) is taken.  On a torus cabled in dimension order (ports
    ``+``, ``-`` per dimension) this corrects the lowest dimension first.
    """
    t, nh = topology, topology.n_hosts
    D, point, offset = hop_distances(t)
    deg = np.bincount(t.src[t.cable_link], minlength=t.n_nodes)
    if np.any(deg == 0) or not np.all(np.isfinite(D)):
        raise A2AError(f"minhop: {t.spec} is not connected")
    # cables in (node, port) order: each node's ports are one segment
    perm = np.lexsort((t.cable_port, t.src[t.cable_link]))
    u = t.src[t.cable_link][perm]
    v = t.dst[t.cable_link][perm]
    first = np.concatenate([[0], np.cumsum(deg)])[:-1]
    pos = np.arange(t.n_cables)
    count = np.zeros(t.n_cables)
    table = np.full((t.n_nodes, nh), -1, dtype=np.int32)
    nodes = np.arange(t.n_nodes)
    for d in destination_order(t).tolist():
        dist = D[:, point[d]] + offset[d]
        dist[d] = 0
        ok = dist[v] == dist[u] - 1                             # min-hop ports towards d
        if dor:                                                 # only the ports to the first port's neighbour
            lead = np.minimum.reduceat(np.where(ok, pos, t.n_cables), first)
            ok &= v == v[np.minimum(lead, t.n_cables - 1)][u]
        load = np.where(ok, count, np.inf)
        least = np.minimum.reduceat(load, first)
        pick = np.minimum.reduceat(np.where(load == least[u], pos, t.n_cables), first)   # lowest port
        route = nodes != d
        count[pick[route]] += 1
        table[route, d] = perm[pick[route]]
    return table


def minhop(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> ForwardingTables:
    """OpenSM MinHop's tables of ``topology`` (:func:`minhop_tables`)."""
    t0 = time.perf_counter()
    table = minhop_tables(topology)
    return ForwardingTables("minhop", topology, fabric or Fabric(), table[None],
                            timings={"route": time.perf_counter() - t0})
