"""Slim Fly Valiant routing with per-hop virtual channels (Besta & Hoefler 2014, §IV-B and §IV-D).

VAL sends a packet from ``R_s`` to a random router ``R_r`` (neither ``R_s``
nor ``R_d``) and from there to ``R_d``, both legs minimal (§IV-B), so a route
has 2, 3 or 4 router hops (hosts of one router talk through it alone); hop ``k`` uses VC ``k`` (§IV-D: "for an n-hop path
we use VC k on hop k"), four VCs in all, and the channel dependencies are
acyclic because the VC grows along every route.

As static routes: one random intermediate per host pair (the paper draws one
per packet), from ``numpy.random.default_rng(seed)``.  A draw whose two legs
meet at a router other than ``R_r`` would visit that router twice (a loop a
route may not have) and is drawn again.  The legs follow the balanced minimal
tables of :mod:`.sf_min`.  UGAL (§IV-C) chooses between MIN and VAL per packet
from queue occupancy and has no static form (:mod:`.ugal`).
"""

from __future__ import annotations

import time

import numpy as np

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .lft import all_pairs, routes_from_nodes, trace
from .result import RouteSet
from .routers import RouterView, hop_channels, minimal_tables, router_view

#: Redraws of an intermediate router before giving up on a pair.
MAX_DRAWS = 1000


def _concat(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """Row-wise concatenation of two ``-1``-padded node matrices."""
    ln, rn = (left >= 0).sum(1), (right >= 0).sum(1)
    out = np.full((len(left), left.shape[1] + right.shape[1]), -1, dtype=np.int64)
    out[:, :left.shape[1]] = left
    i, j = np.nonzero(right >= 0)
    out[i, ln[i] + j] = right[i, j]
    return out[:, : int((ln + rn).max(initial=0))]


def _revisits(nodes: np.ndarray) -> np.ndarray:
    """Rows whose path visits a node twice."""
    s = np.sort(np.where(nodes >= 0, nodes, -np.arange(1, nodes.shape[1] + 1)), 1)
    return (np.diff(s, axis=1) == 0).any(1)


def valiant_paths(view: RouterView, router_nxt: np.ndarray, src: np.ndarray, dst: np.ndarray,
                  rng: np.random.Generator) -> np.ndarray:
    """Node matrix (``-1``-padded) of host routes ``src -> R_r -> dst``, one random intermediate each."""
    t = view.topology
    routers = view.routers
    if len(routers) < 3:
        raise A2AError(f"sf-val: {t.spec} has {len(routers)} routers; Valiant routing needs 3 or more")
    rs, rd = view.router_of[src], view.router_of[dst]
    head = np.where(rs != src, src, -1)[:, None]                   # a leaf host before its router
    tail = np.where(rd != dst, dst, -1)[:, None]
    local = rs == rd                                                # hosts of one router: s -> R -> d
    done: list[tuple[np.ndarray, np.ndarray]] = [(np.flatnonzero(local), np.concatenate(
        [head, rs[:, None], tail], 1)[local])]
    todo = np.flatnonzero(~local)
    for _ in range(MAX_DRAWS):
        mid = routers[rng.integers(len(routers), size=len(todo))]
        fresh = (mid != rs[todo]) & (mid != rd[todo])
        rows, mid = todo[fresh], mid[fresh]
        legs = _concat(trace(t, router_nxt, rs[rows], mid, algo="sf-val"),
                       trace(t, router_nxt, mid, rd[rows], algo="sf-val")[:, 1:])
        path = _concat(_concat(head[rows], legs), tail[rows])
        loop = _revisits(path)
        done.append((rows[~loop], path[~loop]))
        todo = np.concatenate([todo[~fresh], rows[loop]])
        if not len(todo):
            break
    else:
        raise A2AError(f"sf-val: no loop-free Valiant route for {len(todo)} host pairs in {MAX_DRAWS} draws")
    out = np.full((len(src), max(p.shape[1] for _, p in done)), -1, dtype=np.int64)
    for rows, path in done:
        out[rows, : path.shape[1]] = path
    return out


def sf_val(topology: Topology, fabric: Fabric | None = None, *, seed: int = 0, progress=None) -> RouteSet:
    """One Valiant route per host pair through a random intermediate router, VC ``k`` on router hop ``k``."""
    t0 = time.perf_counter()
    view = router_view(topology)
    src, dst = all_pairs(topology.n_hosts)
    nodes = valiant_paths(view, minimal_tables(view), src, dst, np.random.default_rng(seed))
    vcs = hop_channels(view, nodes)
    return routes_from_nodes("sf-val", topology, fabric or Fabric(), src, dst, nodes, vcs=vcs,
                             timings={"route": time.perf_counter() - t0},
                             info={"vcs": int(vcs.max(initial=0)) + 1, "seed": seed})
