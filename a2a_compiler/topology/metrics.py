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


#: Memory the streamed distance statistics may use for their bit arrays, in bytes.
BFS_MEMORY = 256 * 2**20
#: Most link visits (one per link, word of 64 sources and BFS level) the statistics may cost; beyond it
#: they are refused with the estimate (about 60 s on the 2-core development machine under load).
MAX_BFS_WORDS = 6e9


def distance_stats(topology: Topology, progress=None) -> DistanceStats:
    """Diameter and distance sum over hosts, streamed: no distance table is built.

    Sources are the attachment points (a Slim Fly with thousands of hosts costs
    one BFS per router), pairs weighted by how many hosts share each point.  The
    BFS runs from 64 sources per machine word at once, level by level, pulling
    each node's next frontier word from its in-links (bit-parallel multi-source
    BFS, Then et al., "The More the Merrier", VLDB 2014), in blocks of words that
    keep the bit arrays within :data:`BFS_MEMORY`; an estimate over
    :data:`MAX_BFS_WORDS` link visits is refused before any work.  ``progress``
    receives one line per block.
    """
    nh = topology.n_hosts
    if nh < 2:
        return DistanceStats(0.0, 0.0, 0)
    a, o = attachment(topology)
    points, inv = np.unique(a, return_inverse=True)
    count = np.bincount(inv).astype(float)
    off = np.bincount(inv, weights=o) / count            # offset is a property of the point
    n, P = topology.n_nodes, len(points)
    order = np.argsort(topology.dst, kind="stable")       # in-links of every node, contiguous
    in_src = topology.src[order]
    indptr = np.searchsorted(topology.dst[order], np.arange(n + 1))
    starts, has_in = np.minimum(indptr[:-1], max(len(in_src) - 1, 0)), np.diff(indptr) > 0
    words_total = -(-P // 64)
    per_word = 8 * (len(in_src) + 3 * n) + 64 * P      # gathered in-links, frontier/visited/next, unpacked bits
    W = int(max(1, min(words_total, BFS_MEMORY // per_word)))
    if 8 * per_word > MAX_TABLE_BYTES:
        require_table(topology, len(in_src) + 3 * n + 8 * P, 8, "one 64-source word of the streamed BFS")
    levels = _diameter_guess(topology)
    work = words_total * max(len(in_src), 1) * levels
    if work > MAX_BFS_WORDS:
        raise A2AError(f"{topology.spec}: the distance statistics need a BFS from each of {P} attachment points "
                       f"over {topology.n_links} links (about {work:.2g} link visits of 64 sources, over the limit "
                       f"{MAX_BFS_WORDS:.0g}: more than a minute); too large for 'a2a topo' "
                       f"(a2a_compiler.topology.metrics.MAX_BFS_WORDS)")
    diameter = float(np.where(count > 1, 2 * off, 0).max())   # distinct hosts sharing a point
    weighted = 0.0                                             # sum over p != q of count_p count_q d(p, q)
    groups = [(c, points[count == c]) for c in np.unique(count)]   # points by hosts per point (few values)
    leaf_points = points[off > 0]                                  # offsets are 0 (a host) or 1 (a switch)
    for b0 in range(0, P, 64 * W):
        block = np.arange(b0, min(P, b0 + 64 * W))
        w = -(-len(block) // 64)
        frontier = np.zeros((n, w), np.uint64)
        bit = np.arange(len(block))
        frontier[points[block], bit // 64] = np.left_shift(np.uint64(1), (bit % 64).astype(np.uint64))
        visited = frontier.copy()
        level = 0
        while True:
            level += 1
            nxt = np.bitwise_or.reduceat(frontier[in_src], starts, axis=0) if len(in_src) else np.zeros_like(frontier)
            nxt[~has_in] = 0
            nxt &= ~visited
            if not nxt.any():
                break
            visited |= nxt
            frontier = nxt
            reached_now = sum(c * _column_counts(nxt[g], len(block)) for c, g in groups)   # per source
            weighted += level * float(count[block] @ reached_now)
            hit = _column_counts(np.bitwise_or.reduce(nxt[points], axis=0)[None], len(block)) > 0
            far = _column_counts(np.bitwise_or.reduce(nxt[leaf_points], axis=0)[None], len(block)) > 0
            if hit.any():
                diameter = max(diameter, float((level + off[block] + far)[hit].max()))
        full = np.full(w, np.iinfo(np.uint64).max, np.uint64)
        full[-1] >>= np.uint64(64 * w - len(block))
        if not np.all(np.bitwise_and.reduce(visited[points], axis=0) == full):   # some point unreached
            return DistanceStats(np.inf, np.inf, nh * (nh - 1))
        if progress:
            progress(f"distances: BFS from {min(P, b0 + 64 * W)}/{P} attachment points")
    total = weighted + 2 * float((off * count).sum()) * (nh - 1)
    return DistanceStats(diameter, total, nh * (nh - 1))


def _column_counts(words: np.ndarray, width: int) -> np.ndarray:
    """For each of ``width`` bit columns of ``rows x ceil(width/64)`` uint64 words (bit ``j`` of word
    ``j // 64``), how many rows have it set."""
    if not len(words):
        return np.zeros(width, np.int64)
    bits = np.unpackbits(np.ascontiguousarray(words).view(np.uint8), axis=1, bitorder="little")[:, :width]
    return bits.sum(axis=0, dtype=np.int64)


def _diameter_guess(topology: Topology) -> int:
    """BFS levels to expect, for the work estimate: the eccentricity of node 0 plus one (at most twice the
    diameter), from one cheap single-source BFS."""
    d = csgraph.shortest_path(topology.adjacency("ones"), unweighted=True, indices=[0])[0]
    finite = d[np.isfinite(d)]
    return int(finite.max()) + 1 if len(finite) else 1


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
