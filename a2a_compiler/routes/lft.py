"""Destination-based forwarding tables (InfiniBand LFTs) and the paths they give.

An InfiniBand switch forwards by destination only: its *linear forwarding
table* maps a destination LID to an output port (Zahavi et al. 2009 §3.1;
Blach et al. 2024 §5).  Here a table set is an integer array
``nxt[node, host]``: the next node on the way from ``node`` to destination
host ``host`` (``-1``: no entry).  A layered routing (FatPaths, Blach et al.)
has one such array per layer, i.e. one LID offset of the LMC range.

:func:`trace` follows the tables from every source to every destination at
once (one numpy step per hop, never a Python loop over pairs);
:func:`routes_from_nodes` turns the traced node matrix into a
:class:`~.result.RouteSet`.
"""

from __future__ import annotations

import numpy as np

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .result import RoutedPath, RouteSet


def all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every ordered pair ``(s, d)``, ``s != d``, of ``0..n-1`` in row-major order."""
    s, d = np.divmod(np.arange(n * n, dtype=np.int64), n)
    keep = s != d
    return s[keep], d[keep]


def trace(topology: Topology, nxt: np.ndarray, src: np.ndarray, dst: np.ndarray, layer: np.ndarray | None = None,
          algo: str = "lft") -> np.ndarray:
    """Node sequences from ``src[i]`` to host ``dst[i]`` along ``nxt`` (padded with ``-1``).

    ``nxt`` is ``(n_nodes, n_hosts)``, or ``(n_layers, n_nodes, n_hosts)`` with
    pair ``i`` routed in table ``nxt[layer[i]]``.  Raises :class:`A2AError`
    naming the first pair that meets a missing entry or a forwarding loop.
    """
    nodes = [np.asarray(src, dtype=np.int64)]
    cur = nodes[0]
    dst = np.asarray(dst, dtype=np.int64)
    if nxt.ndim == 3:
        layer = np.asarray(layer, dtype=np.int64)
        nxt = nxt.reshape(-1, nxt.shape[2])
        row = layer * topology.n_nodes  # table row of node u in the pair's layer: row + u
    else:
        row = np.zeros(len(cur), dtype=np.int64)
    for _ in range(topology.n_nodes):
        live = cur != dst
        if not live.any():
            break
        step = np.full(len(cur), -1, dtype=np.int64)
        step[live] = nxt[row[live] + cur[live], dst[live]]
        missing = np.flatnonzero(live & (step < 0))
        if len(missing):
            i = int(missing[0])
            raise A2AError(f"{algo}: no forwarding entry at {topology.names[cur[i]]} for host {int(dst[i])} "
                           f"(route {int(src[i])}->{int(dst[i])})")
        cur = np.where(live, step, cur)
        nodes.append(np.where(live, step, -1))
    else:
        i = int(np.flatnonzero(cur != dst)[0])
        raise A2AError(f"{algo}: forwarding loop on the route {int(src[i])}->{int(dst[i])}")
    return np.stack(nodes, 1)


#: Largest ``n_nodes**2`` for which :func:`hop_links` uses a dense ``(u, v) -> link`` table.
_DENSE = 1 << 24


def hop_links(topology: Topology, nodes: np.ndarray) -> np.ndarray:
    """Link index of every hop of a padded node matrix (``-1`` past a path's end)."""
    t = topology
    u, v = nodes[:, :-1], nodes[:, 1:]
    hop = v >= 0
    want = np.where(hop, u * t.n_nodes + v, 0)
    key = t.src * t.n_nodes + t.dst
    if t.n_nodes**2 <= _DENSE:
        table = np.full(t.n_nodes**2, -1, dtype=np.int64)
        table[key] = np.arange(t.n_links)
        link = table[want]
        bad = hop & (link < 0)
    else:
        link = np.searchsorted(key, want)
        bad = hop & ((link >= len(key)) | (key[np.minimum(link, len(key) - 1)] != want))
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise A2AError(f"{t.spec}: hop {int(u[i, j])}->{int(v[i, j])} is not a link")
    return np.where(hop, link, -1)


def routes_from_nodes(algo: str, topology: Topology, fabric: Fabric, src: np.ndarray, dst: np.ndarray,
                      nodes: np.ndarray, *, weight=None, layer=None, vcs: np.ndarray | None = None,
                      routing_layer=None, **fields) -> RouteSet:
    """A :class:`RouteSet` of the padded node matrix ``nodes`` (one row per path).

    ``weight``, ``layer`` and ``routing_layer`` are scalars or one value per
    path (default 1, 0 and 0); ``vcs`` is a padded ``(n_paths, hops)`` matrix of
    per-hop virtual channels.
    """
    n = len(src)

    def each(value, default, dtype):
        return np.broadcast_to(np.asarray(default if value is None else value, dtype=dtype), (n,)).tolist()

    length = (nodes >= 0).sum(1).tolist()
    vrows = vcs.tolist() if vcs is not None else [None] * n
    paths = tuple(
        RoutedPath(s, d, tuple(r[:k]), w, lay, None if v is None else tuple(v[:k - 1]), rl)
        for s, d, r, k, w, lay, v, rl in zip(src.tolist(), dst.tolist(), nodes.tolist(), length,
                                              each(weight, 1.0, float), each(layer, 0, np.int64), vrows,
                                              each(routing_layer, 0, np.int64))
    )
    return RouteSet(algo, topology, fabric, paths, **fields)
