"""Routes -> chunked MPI path schedule, with layers and the numbers ``a2a routes`` reports.

Passes, each usable alone:

1. :func:`chunk_routes` — a :class:`RouteSet` becomes a
   :class:`~a2a_compiler.chunk.PathSchedule`: every shard is split into ``C``
   equal chunks.  ``C`` is the least common multiple of the weights'
   denominators (for equal splits over ``k`` paths, of the path counts ``k``)
   when that is at most ``max_chunks``: the file then carries the weights
   exactly (the highest-common-factor rule of Basu et al. §4).  Otherwise the
   cap makes the splits inexact.  The weights of a flow optimisation (an engine
   with an LP relaxation: pMCF, MCF-extP, FPTAS) are then chunked as ``a2a
   compile`` chunks them (:func:`a2a_compiler.chunk.chunking.choose_chunks`):
   rounded by largest remainder and rebalanced (chunks move between a pair's
   paths while that lowers the predicted time) for every ``C`` of
   :func:`~a2a_compiler.chunk.chunking.chunk_candidates` up to ``max_chunks``,
   keeping the smallest ``C`` whose fidelity (relaxation time / predicted time)
   reaches compile's target :data:`~a2a_compiler.chunk.chunking.FIDELITY_TARGET`,
   else the fastest: each ``C`` costs a local search (about 1 s on
   GenKautz(64,4)), and a finer grid is not always better -- the search can
   stall on one (K4,4: 2.5156 at ``C = 64``, 2.5 at ``C = 4``).  The splits of a routing rule (EwSP,
   FatPaths, ...) are only rounded, ``C = max_chunks``: rebalancing would turn
   them into another routing.
2. :func:`layer_schedule` — virtual layers by a deadlock scheme
   (:mod:`a2a_compiler.deadlock`) for the routes actually written.
3. :func:`route_schedule` — the whole chain from a topology to a
   :class:`RoutedSchedule`: the XML bytes, and every time *recomputed from
   those bytes* through the cost model (:func:`a2a_compiler.chunk.predicted_time`
   via :func:`a2a_compiler.verify.performance.routed_performance`).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..chunk import PathSchedule, Route
from ..chunk.cost import ratio
from ..chunk.chunking import choose_chunks, largest_remainder, path_resources
from ..chunk.ir import path_steps
from ..deadlock import assign_layers, find_deadlock
from ..errors import A2AError
from ..fabric import Fabric
from ..formats.mpi_paths import mpi_paths_to_xml, parse_mpi_paths
from ..lower import check_name
from ..lower.mpi_paths import lower_mpi_paths
from ..topology.model import Topology
from ..verify.performance import routed_performance
from ..verify.topology_check import link_capacities
from . import route
from .result import RouteSet

#: Default cap on chunks per shard for ``a2a routes``.
DEFAULT_MAX_CHUNKS = 64
#: A weight within this of a fraction with denominator <= max_chunks is that fraction.
RATIONAL_TOL = 1e-9


def exact_chunks(routes: RouteSet, max_chunks: int) -> int | None:
    """Smallest ``C <= max_chunks`` with every path weight a multiple of ``1/C``, or ``None``."""
    C = 1
    for w in np.unique(routes.weights).tolist():          # a few distinct weights (345,156 paths of weight 1)
        q = Fraction(w).limit_denominator(max_chunks)
        if abs(float(q) - w) > RATIONAL_TOL:
            return None
        C = math.lcm(C, q.denominator)
        if C > max_chunks:
            return None
    return C


def chunk_routes(routes: RouteSet, max_chunks: int = DEFAULT_MAX_CHUNKS, progress=None,
                 min_fidelity: float | None = None) -> tuple[PathSchedule, bool]:
    """Chunk ``routes`` (module docstring, pass 1); returns the schedule and whether the split is exact.

    Layers and per-hop virtual channels (``vcs``) travel with their routes; a path that
    receives no chunk is left out.  ``lp_time`` of the schedule is the engine's
    relaxation (:attr:`RouteSet.lp_time`, ``None`` for a routing without one); ``min_fidelity``
    replaces the fidelity target of the ``C`` search (none reaching it is an error).
    """
    if max_chunks < 1:
        raise A2AError(f"--max-chunks must be >= 1, got {max_chunks}")
    topo = routes.topology
    C = exact_chunks(routes, max_chunks)
    pairs: dict[tuple[int, int], list] = {}
    for p in routes.paths:
        pairs.setdefault((p.src, p.dst), []).append(p)
    pairs = dict(sorted(pairs.items()))
    weights = [np.array([p.weight for p in plist]) for plist in pairs.values()]

    def build(C: int, rounded: list) -> PathSchedule:
        out = []
        for ((s, d), plist), counts in zip(pairs.items(), rounded):
            i = rid = 0
            for p, k in zip(plist, counts.tolist()):
                if k:
                    out.append(Route(s, d, p.nodes, rid, tuple(range(i, i + k)), p.layer, p.vcs))
                    i += k
                    rid += 1
        return PathSchedule(topo.n_hosts, C, tuple(out), _links(topo), topo.n_nodes, topo.spec, routes.fabric,
                            routes.algo, routes.lp_time, demand=routes.demand)

    def split(C: int) -> list:              # a pair's only path takes all C chunks
        return [np.array([C]) if len(w) == 1 else largest_remainder(w, C) for w in weights]

    if C is not None:                       # exactly w·C chunks on every path
        return build(C, split(C)), True
    if routes.lp_time is None:              # a routing rule's splits, only rounded
        return build(max_chunks, split(max_chunks)), False
    cands = {sd: [(p.weight, p.nodes) for p in plist] for sd, plist in pairs.items()}
    res, paths = path_resources(topo, routes.fabric, cands)
    shape = None
    if routes.demand is not None:           # each chunk weighs its pair's volume, as in a2a compile
        weight = [float(routes.demand.volumes[s, d]) for s, d in cands]

        def shape(C):
            return [C] * len(cands), weight, C
    return choose_chunks(res, paths, cands, routes.lp_time, build, max_chunks=max_chunks, progress=progress,
                         shape=shape, min_fidelity=min_fidelity), False


def _links(topology: Topology) -> tuple[tuple[int, int, float], ...]:
    return tuple((int(u), int(v), float(c)) for u, v, c in zip(topology.src, topology.dst, topology.capacity))


def layer_schedule(schedule: PathSchedule, scheme: str, max_layers: int | None = None) -> PathSchedule:
    """The schedule with every route's layer set by deadlock ``scheme`` (LASH keeps a pair in one layer);
    per-hop virtual channels the engine chose are replaced."""
    layers = assign_layers([r.nodes for r in schedule.routes], scheme,
                           pairs=[(r.src, r.dst) for r in schedule.routes], max_layers=max_layers)
    return dataclasses.replace(schedule, routes=tuple(dataclasses.replace(r, layer=int(k), vcs=None)
                                                      for r, k in zip(schedule.routes, layers)))


@dataclass(frozen=True, eq=False)
class RoutedSchedule:
    """What ``a2a routes`` produces: the routes, the chunked schedule, the file, and its numbers.

    ``predicted_time`` is recomputed from ``xml`` (the file as written) by the
    project's cost model; ``mcf_time`` is the certified optimal link-MCF time
    ``1/F`` of the topology under the fabric; the file records both LP times.
    """

    routes: RouteSet
    schedule: PathSchedule
    xml: bytes
    predicted_time: float
    chunks_exact: bool
    layers: int
    deadlock_free: bool
    deadlock_cycle: str | None
    deadlock: str | None
    mcf_time: float | None
    timings: dict

    def summary(self) -> dict:
        """The ``--json`` object of ``a2a routes`` (docs/json.md)."""
        rs, sch = self.routes, self.schedule
        n = rs.topology.n_hosts   # routes the file carries per pair (at C = 1 one, whatever the paths were)
        per_pair = np.bincount(np.fromiter((r.src * n + r.dst for r in sch.routes), np.int64, len(sch.routes)),
                               minlength=n * n)
        return {
            "algo": rs.algo,
            "spec": rs.topology.spec,
            "fabric": rs.fabric.to_json_dict(),
            "hosts": rs.topology.n_hosts,
            "predicted_time": self.predicted_time,
            "route_time": rs.alltoall_time,
            "lp_time": rs.lp_time,
            "bound": rs.bound,
            "mcf_time": self.mcf_time,
            "fidelity": None if rs.lp_time is None else ratio(rs.lp_time, self.predicted_time),
            "mcf_ratio": None if self.mcf_time is None else ratio(self.mcf_time, self.predicted_time),
            "optimal": rs.optimal,
            "mip_gap": rs.mip_gap,
            "layers": self.layers,
            "deadlock_free": self.deadlock_free,
            "deadlock": self.deadlock,
            "chunks_per_shard": sch.chunks_per_shard,
            "chunks_exact": self.chunks_exact,
            "routes": len(sch.routes),
            "steps": path_steps(sch),
            "max_flows": sch.info.get("max_flows"),
            "max_paths_per_pair": int(per_pair.max(initial=0)),
            "seconds": float(sum(self.timings.values())),
            "timings": dict(self.timings),
            "info": dict(rs.info),
            **({} if rs.demand is None else {"demand": rs.demand.to_json_dict(max_ranks=0)}),
        }


def route_schedule(topology: Topology, algo: str, fabric: Fabric | None = None, *, deadlock: str | None = None,
                   max_layers: int | None = None, max_chunks: int = DEFAULT_MAX_CHUNKS, mcf_time: float | None = None,
                   max_flows: int | None = None, flow_per_chunk: bool = False, name: str | None = None,
                   progress=None, demand=None, routes: RouteSet | None = None, mcf: bool = True,
                   min_fidelity: float | None = None, **options) -> RoutedSchedule:
    """Route, chunk, layer, lower and price: the library entry point behind ``a2a routes``.

    ``options`` go to the engine (e.g. ``time_limit=``, ``eps=``); ``mcf_time``
    skips the link-MCF solve when the caller knows it, ``mcf=False`` skips it (``mcf_time`` None:
    the file records none); ``max_flows`` and
    ``flow_per_chunk`` control injection (:mod:`a2a_compiler.chunk.injection`); ``demand`` makes it an
    all-to-allv (:func:`~a2a_compiler.routes.route`; the file records the volumes,
    every time is the all-to-allv's); ``routes`` skips the engine (routes the
    caller already has, e.g. traced from tables).  Raises :class:`A2AError` for
    bad input, an engine failure or too many layers.
    """
    check_name(name)
    fabric = fabric or Fabric()
    timings = {}
    t0 = time.perf_counter()
    if routes is None:
        routes = route(topology, algo, fabric, progress=progress, demand=demand, **options)
    t1 = time.perf_counter()
    timings["route"] = t1 - t0
    if progress:
        progress(f"{algo}: {len(routes.paths)} paths in {t1 - t0:.2f} s, all-to-all time {routes.alltoall_time:.6g}")
    schedule, exact = chunk_routes(routes, max_chunks, progress, min_fidelity)
    t2 = time.perf_counter()
    timings["chunk"] = t2 - t1
    if deadlock is not None:
        schedule = layer_schedule(schedule, deadlock, max_layers)
        timings["layers"] = time.perf_counter() - t2
    if max_flows is not None or flow_per_chunk:
        from ..chunk.injection import injection_control

        schedule = injection_control(schedule, max_flows, flow_per_chunk)
    if mcf_time is None and mcf:
        from ..solve import solve

        t3 = time.perf_counter()
        if progress:
            progress(f"link-MCF reference: an LP of {topology.n_hosts * topology.n_links:,} columns")
        mcf_time = solve(topology, fabric, "mcf-decomp", demand=routes.demand, progress=progress).lp_time
        timings["mcf"] = time.perf_counter() - t3
    schedule = dataclasses.replace(schedule, info={**schedule.info, "mcf_time": mcf_time})
    xml = mpi_paths_to_xml(lower_mpi_paths(schedule, name))
    program = parse_mpi_paths(xml, f"<{algo} routes>")
    perf = routed_performance(program, fabric, link_capacities(topology))
    classes = [s.channels for s in program.sends]
    cycle = find_deadlock([s.nodes for s in program.sends], classes)
    layers = 1 + max((max(c, default=0) for c in classes), default=0)
    if max_layers is not None and layers > max_layers:
        raise A2AError(f"{algo}: the routes use {layers} virtual layers, more than --max-layers {max_layers}; "
                       "choose a --deadlock scheme")
    return RoutedSchedule(routes, schedule, xml, perf.predicted_time, exact, layers, cycle is None, cycle, deadlock,
                          mcf_time, timings)
