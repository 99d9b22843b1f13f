"""MCF-extP: link-based MCF, then widest-path extraction (Basu et al. §3.2.1).

For each commodity ``(s, d)`` the positive link flows of an optimal link-based
solution form a subgraph ``G_{s,d}``; :func:`widest_paths` repeatedly takes the
widest (maximum-bottleneck) ``s -> d`` path — Dijkstra with ``min`` for ``+`` and
``max`` for ``min`` — and subtracts its width, until less than ``tol`` of the
unit demand remains.  :func:`mcf_extp` runs this for every commodity (in
parallel per source), renormalises each commodity's weights to 1 and reports
the concurrent flow the extracted paths alone achieve, ``F_paths = 1/max_e
load_e/cap_e`` — at most the MCF optimum, often equal to it.
"""

from __future__ import annotations

import heapq
import time

import numpy as np
import scipy.sparse as sp

from ..fabric import Fabric, augment
from ..numeric import snap
from ..topology.model import Topology
from .certificate import Routing
from .decomp import map_chunks, source_chunks
from .mcf import finish
from .paths import route_links
from .result import FlowSolution

DEFAULT_TOL = 1e-6


def widest_paths(topology: Topology, links: np.ndarray, flows: np.ndarray, source: int, target: int,
                 tol: float = DEFAULT_TOL) -> list[tuple[tuple[int, ...], float]]:
    """Greedy widest-path decomposition of one commodity's flow (§3.2.1 steps 1–4).

    ``links``/``flows`` are the commodity's positive link flows on ``topology``.
    Returns ``[(node path, width), ...]`` in decreasing width; stops when the
    widest remaining ``source -> target`` path is narrower than ``tol``.
    """
    rest = dict(zip(links.tolist(), flows.tolist()))
    out: dict[int, list[tuple[int, int]]] = {}
    for e in rest:
        out.setdefault(int(topology.src[e]), []).append((int(topology.dst[e]), e))
    found = []
    while True:
        width = {source: np.inf}
        pred: dict[int, int] = {}
        heap = [(-np.inf, source)]
        done = set()
        while heap:
            w, u = heapq.heappop(heap)
            if u in done:
                continue
            done.add(u)
            if u == target:
                break
            for v, e in out.get(u, ()):
                b = min(-w, rest[e])
                if b > width.get(v, 0.0) and v not in done:
                    width[v] = b
                    pred[v] = e
                    heapq.heappush(heap, (-b, v))
        b = width.get(target, 0.0) if target in done else 0.0
        if b < tol:
            return found
        path, v = [target], target
        while v != source:
            e = pred[v]
            rest[e] -= b
            v = int(topology.src[e])
            path.append(v)
        found.append((tuple(reversed(path)), float(b)))


def _extract_chunk(topology: Topology, sources: np.ndarray, block: sp.csr_array, tol: float):
    """Widest paths of every commodity of ``sources``; ``block`` holds their flow rows ``(s*N+d)``."""
    nh = topology.n_hosts
    commodity, node_paths, weights = [], [], []
    for i, s in enumerate(sources.tolist()):
        for d in range(nh):
            if d == s:
                continue
            r = i * nh + d
            lo, hi = block.indptr[r], block.indptr[r + 1]
            for nodes, w in widest_paths(topology, block.indices[lo:hi], snap(block.data[lo:hi]), s, d, tol):
                commodity.append(s * nh + d)
                node_paths.append(nodes)
                weights.append(w)
    return commodity, node_paths, weights


def mcf_extp(topology: Topology, fabric: Fabric | None = None, *, base: str = "mcf-decomp", tol: float = DEFAULT_TOL,
             workers: int = 1, mpi: bool = False, progress=None, demand=None, **base_options) -> FlowSolution:
    """Solve the link MCF with ``base`` (default ``mcf-decomp``), then extract widest paths.

    ``concurrent_flow`` is ``F_paths`` of the extracted, renormalised paths on the
    solve graph (host–NIC links included; under ``demand`` each pair weighted by its
    volume); ``upper_bound`` is the base solution's certificate for the true MCF optimum.
    """
    from . import solve

    fabric = fabric or Fabric()
    if base == "mcf-decomp":
        base_options = {"workers": workers, "mpi": mpi, **base_options}
    sol = solve(topology, fabric, base, progress=progress, demand=demand, **base_options)
    t0 = time.perf_counter()
    nh = topology.n_hosts
    flows = sp.csr_array(sol.link_flows)
    chunks = source_chunks(nh, workers, mpi)
    args = [(c, flows[c[0] * nh:(c[-1] + 1) * nh], tol) for c in chunks]
    parts = map_chunks(topology, _extract_chunk, args, workers=workers, mpi=mpi, progress=progress,
                       label="widest-path extraction")
    commodity = [k for p in parts for k in p[0]]
    node_paths = [q for p in parts for q in p[1]]
    weights = np.array([w for p in parts for w in p[2]])
    aug = augment(topology, fabric)
    routing = route_links(aug, topology, commodity, node_paths)
    routing = Routing(routing.commodity, weights, routing.ptr, routing.links)
    extracted = np.bincount(routing.commodity, weights=weights, minlength=nh * nh)
    s, d = np.divmod(np.arange(nh * nh), nh)
    timings = {**{f"base_{k}": v for k, v in sol.timings.items()}, "extract": time.perf_counter() - t0}
    info = {"base": base, "base_concurrent_flow": sol.concurrent_flow, "tol": tol, "workers": workers, "mpi": mpi,
            "lp_status": sol.info.get("lp_status", "Optimal"),
            "min_extracted_fraction": float(extracted[s != d].min()), **{f"base_{k}": v for k, v in sol.info.items()}}
    return finish("mcf-extp", topology, fabric, aug, routing, sol.upper_bound, timings, info, paths=True,
                  demand=demand)
