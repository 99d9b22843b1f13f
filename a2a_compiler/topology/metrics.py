"""Host-to-host distances and the two throughput bounds of Basu et al. 2024.

Distances are hop counts along directed links, through switches.  Router
topologies with many hosts are handled without a host x host BFS: a *leaf host*
(one cable, to a switch) is reached only through its switch, so the distance
between hosts h1 != h2 is ``D[a(h1), a(h2)] + o(h1) + o(h2)``, where ``a(h)`` is
the host's attachment point (its switch, or the host itself) and ``o(h)`` is 1
for a leaf host and 0 otherwise.  Only the attachment points need a BFS.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.sparse import csgraph

from ..errors import A2AError, DisconnectedError
from .model import Topology

#: Largest dense table (distances between hosts or attachment points, host-pair arrays) any stage
#: builds, in bytes: beyond it the all-to-all of the topology is refused before memory runs out.
MAX_TABLE_BYTES = 4 * 2**30


def require_table(topology: Topology, rows: int, cols: int, what: str) -> None:
    """Refuse a ``rows x cols`` table of 8-byte entries over :data:`MAX_TABLE_BYTES`, naming the limit."""
    need = 8 * rows * cols
    if need > MAX_TABLE_BYTES:
        raise A2AError(f"{topology.spec}: {what} would need {need / 2**30:.1f} GiB ({rows} x {cols}), over the "
                       f"{MAX_TABLE_BYTES / 2**30:.0f} GiB limit; an all-to-all of {topology.n_hosts} hosts "
                       f"is too large for this machine's tables (a2a_compiler.topology.metrics.MAX_TABLE_BYTES)")


def attachment(topology: Topology) -> tuple[np.ndarray, np.ndarray]:
    """``(a, o)``: each host's attachment point and its offset (see module doc)."""
    nh = topology.n_hosts
    a, o = np.arange(nh), np.zeros(nh, dtype=np.int64)
    out_deg, in_deg = topology.out_degree()[:nh], topology.in_degree()[:nh]
    first_out = np.searchsorted(topology.src, np.arange(nh))      # links sorted by src
    nbr = topology.dst[np.minimum(first_out, max(topology.n_links - 1, 0))] if topology.n_links else a
    cand = (out_deg == 1) & (in_deg == 1) & (nbr >= nh)
    # in-neighbour must be that same switch: the link nbr -> h exists
    src_of = np.full(nh, -1)
    into_host = topology.dst < nh
    src_of[topology.dst[into_host]] = topology.src[into_host]
    leaf = cand & (src_of == nbr)
    a[leaf], o[leaf] = nbr[leaf], 1
    return a, o


def _point_distances(topology: Topology):
    """Attachment points, host -> point index, offsets, and point-to-point hop distances."""
    a, o = attachment(topology)
    points, inv = np.unique(a, return_inverse=True)
    require_table(topology, len(points), topology.n_nodes, "the hop-distance table")
    d = csgraph.shortest_path(topology.adjacency("ones"), unweighted=True, indices=points)[:, points]
    return points, inv, o, d


def host_distances(topology: Topology) -> np.ndarray:
    """``n_hosts x n_hosts`` hop distances between hosts (``inf`` if unreachable)."""
    _, inv, o, d = _point_distances(topology)
    dist = d[np.ix_(inv, inv)] + o[:, None] + o[None, :]
    np.fill_diagonal(dist, 0)
    return dist


@dataclass(frozen=True)
class DistanceStats:
    """Distances over ordered pairs of distinct hosts."""

    diameter: float
    total: float          # sum of dist(s, d) over ordered host pairs s != d
    pairs: int            # number of ordered host pairs

    @property
    def mean(self) -> float:
        """Mean hop distance over ordered host pairs."""
        return self.total / self.pairs if self.pairs else 0.0


def distance_stats(topology: Topology) -> DistanceStats:
    """Diameter and distance sum over hosts, computed on attachment points only.

    Pairs are weighted by how many hosts share each point, so a Slim Fly with
    thousands of hosts costs one BFS per router.
    """
    nh = topology.n_hosts
    if nh < 2:
        return DistanceStats(0.0, 0.0, 0)
    _, inv, o, d = _point_distances(topology)
    count = np.bincount(inv)
    off = np.bincount(inv, weights=o) / count          # offset is a property of the point
    full = d + off[:, None] + off[None, :]
    np.fill_diagonal(full, 2 * off)                     # distinct hosts sharing a point
    weight = count[:, None] * count[None, :] - np.diag(count)
    present = weight > 0
    return DistanceStats(float(full[present].max()), float((full[present] * weight[present]).sum()), nh * (nh - 1))


def hosts_connected(topology: Topology) -> bool:
    """True when every host reaches every other host (hosts lie in one strongly connected component)."""
    _, labels = csgraph.connected_components(topology.adjacency("ones"), directed=True, connection="strong")
    return bool(np.all(labels[: topology.n_hosts] == labels[0]))


def require_connected(topology: Topology, why: str = "") -> None:
    """Raise :class:`DisconnectedError` unless every ordered host pair is connected."""
    if not hosts_connected(topology):
        raise DisconnectedError(f"{topology.spec} is disconnected{why}: some hosts cannot reach each other")


def distance_bound(topology: Topology, stats: DistanceStats | None = None) -> float:
    """Upper bound on the concurrent flow F (Basu et al. §3; known-values.md).

    A unit of (s, d) demand occupies at least dist(s, d) units of link capacity,
    so ``F <= sum of capacities / sum over ordered host pairs of dist(s, d)``
    (``|A| / Σ dist`` for unit capacities).  Tight on arc-transitive graphs.
    """
    stats = stats or distance_stats(topology)
    return float(topology.capacity.sum()) / stats.total


def arborescence_depth_sum(n: int, d: int) -> int:
    """Sum of node depths in a full d-ary arborescence on n nodes (levels 1, d, d^2, ...; last level partial)."""
    total, placed, level, width = 0, 1, 1, d
    while placed < n:
        take = min(width, n - placed)
        total += level * take
        placed += take
        level, width = level + 1, width * d
    return total


def thm1_lower_bound(topology: Topology) -> float | None:
    """Theorem 1 lower bound on the all-to-all time 1/F (Basu et al. §5.4, eq. 25).

    ``1/F >= (sum of depths of a full d-ary arborescence on N nodes) / d`` with
    d = the largest host out-degree.  Defined for switchless topologies with unit
    capacities (with fewer than d links at some nodes the bound stays valid);
    ``None`` otherwise.
    """
    if topology.n_switches or not np.all(topology.capacity == 1.0):
        return None
    d = int(topology.out_degree().max(initial=0))
    if d == 0 or topology.n_hosts < 2:
        return None
    return arborescence_depth_sum(topology.n_hosts, d) / d
