"""Layered routing's common back end: per-layer tables -> weighted routes with virtual lanes.

FatPaths (Besta et al. 2020 §V) and the Slim Fly deployment (Blach et al. 2024
§4–5) route a host pair in each of ``L`` layers, each layer a destination-based
forwarding function (an InfiniBand LFT under one LID offset of the LMC
range).  :func:`layered_routes` traces every host pair in every layer, merges
the layers that give a pair the same path, splits the shard equally over the
layers (the static counterpart of the papers' per-flowlet layer choice) and,
decoupled from the layers as Blach et al. §5.2 do it, assigns the virtual
lanes by DFSSSP (:mod:`a2a_compiler.deadlock`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..deadlock import assign_layers
from ..errors import A2AError
from ..fabric import Fabric
from ..topology.metrics import require_table
from ..topology.model import Topology
from .diversity import route_diversity
from .lft import all_pairs
from .tables import ForwardingTables, from_next_nodes
from .opensm import DEFAULT_VLS, check_vls
from .routers import RouterView, host_tables


def router_segments(view: RouterView, nodes: np.ndarray) -> np.ndarray:
    """The router part of each padded path (its leaf hosts dropped), left-aligned and ``-1``-padded."""
    is_router = np.append(view.is_router, False)
    keep = is_router[nodes]
    out = np.full(nodes.shape, -1, dtype=np.int64)
    i, j = np.nonzero(keep)
    out[i, (np.cumsum(keep, 1) - 1)[i, j]] = nodes[i, j]
    return out[:, : int(keep.sum(1).max(initial=1))]


def segment_lanes(tables: ForwardingTables, view: RouterView, src: np.ndarray, dst: np.ndarray,
                  layer: np.ndarray | None = None, scheme: str = "dfsssp") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(lane per segment, segments, segment of each route)``: deadlock ``scheme`` run on the distinct router
    segments of the routes ``src[i] -> dst[i]`` (in ``layer[i]``) of ``tables``.

    A leaf host never forwards, so its cables close no cycle, and a route's
    router segment is fixed by its source's router, its destination and its
    layer (the tables are destination-based): one route of each such triple is
    traced (fattree:12,3's 2,984,256 routes are 248,832 triples).
    """
    nh = view.topology.n_hosts
    key = view.router_of[src].astype(np.int64) * nh + dst
    if layer is not None:
        key += layer.astype(np.int64) * (view.topology.n_nodes * nh)
    _, rep, of_key = np.unique(key, return_index=True, return_inverse=True)
    nodes, _ = tables.trace(src[rep], dst[rep], None if layer is None else layer[rep])
    segments, of_rep = np.unique(router_segments(view, nodes), axis=0, return_inverse=True)
    chains = [tuple(row[row >= 0].tolist()) for row in segments]
    return assign_layers(chains, scheme), segments, of_rep.reshape(-1)[of_key.reshape(-1)]


def fit_lanes(algo: str, tables: ForwardingTables, view: RouterView, src: np.ndarray, dst: np.ndarray,
              layer: np.ndarray, vls: int) -> tuple[np.ndarray, dict, np.ndarray, np.ndarray]:
    """A virtual lane per route (``-1``: dropped) within the fabric's ``vls`` data VLs, what the fit did, the
    router segments of the routes kept, and each route's segment (:func:`segment_lanes`).

    DFSSSP (:mod:`a2a_compiler.deadlock`) lanes the distinct router segments of
    the routes.  Where it needs more than ``vls`` lanes, layer 0's routes
    (minimal, every pair) are laned alone, the other layers' routes by DFSSSP
    on the lanes above them, and the routes that land past ``vls`` are dropped:
    their pairs keep their other layers.  Refused in one line when layer 0's
    routes alone need more.
    """
    lane_of, segments, of_route = segment_lanes(tables, view, src, dst, layer)
    chains = [tuple(row[row >= 0].tolist()) for row in segments]
    needed = int(lane_of.max(initial=0)) + 1
    if needed > vls:
        base = np.zeros(len(segments), dtype=bool)
        base[of_route[layer == 0]] = True
        first, rest = np.flatnonzero(base), np.flatnonzero(~base)
        lane_of[first] = assign_layers([chains[i] for i in first], "dfsssp")
        low = int(lane_of[first].max(initial=0)) + 1
        if low > vls:
            raise A2AError(f"{algo}: layer 0's minimal routes alone need {low} virtual lanes (DFSSSP), more than "
                           f"the fabric's {vls} data VLs (--vls)")
        lane_of[rest] = low + assign_layers([chains[i] for i in rest], "dfsssp")
        lane_of[lane_of >= vls] = -1
    lane = lane_of[of_route]
    return lane, {"vls": int(lane.max(initial=0)) + 1, "vls_needed": needed, "vls_limit": vls,
                  "routes_dropped": int((lane < 0).sum())}, segments[lane_of >= 0], of_route


def require_pair_arrays(topology: Topology, layers: int) -> None:
    """Refuse up front, with the estimate, a layered routing whose per-pair arrays would not fit: per routed
    pair its share and lane, its (layer, src, dst), segment key, sort and inverse, about 80 bytes."""
    require_table(topology, layers * topology.n_hosts * topology.n_hosts, 10, f"the {layers} layers' per-pair arrays")


def layered_routes(algo: str, view: RouterView, tables: list[np.ndarray], fabric: Fabric, *, timings: dict,
                   info: dict, vls: int = DEFAULT_VLS, progress=None) -> ForwardingTables:
    """Forwarding tables of every layer of router tables ``tables``, the pairs each layer routes, and the
    virtual lanes within ``vls`` data VLs (module docstring, :func:`fit_lanes`).

    ``info`` gains ``layers``, ``vls`` (virtual lanes used), ``vls_needed``
    (DFSSSP's lanes before fitting), ``vls_limit``, ``routes_dropped``,
    ``paths_per_pair`` (distinct routes per host pair, mean) and the disjoint
    path counts of :func:`~.diversity.route_diversity`.  No per-route object is
    built.
    """
    t = view.topology
    check_vls(vls)
    n_layers = len(tables)
    require_pair_arrays(t, n_layers)
    host = np.stack([host_tables(view, tab) for tab in tables])
    src, dst = all_pairs(t.n_hosts)
    rs, rd = view.router_of[src], view.router_of[dst]
    # a layer routes the pairs its tables connect (a FatPaths DAG layer only some); layer 0 routes all
    share = np.zeros((n_layers, t.n_hosts, t.n_hosts), dtype=bool)
    share[:, src, dst] = np.stack([(rs == rd) | (tab[rs, rd] >= 0) for tab in tables])
    ft = from_next_nodes(algo, t, fabric, host, share=share, timings=timings, info=dict(info))
    layer, s, d = np.nonzero(share)
    if progress:
        progress(f"{algo}: {len(s):,} routes in {n_layers} layers; virtual lanes by DFSSSP within {vls} VLs")
    lane, fit, segments, seg = fit_lanes(algo, ft, view, s, d, layer, vls)
    kept = lane >= 0
    share[layer[~kept], s[~kept], d[~kept]] = False
    lanes = np.zeros(share.shape, dtype=np.int16)
    lanes[layer[kept], s[kept], d[kept]] = lane[kept]
    # distinct routes per pair: a host pair's route is its router segment between the two hosts
    distinct = len(np.unique((s[kept] * t.n_hosts + d[kept]) * (int(seg.max(initial=0)) + 1) + seg[kept]))
    ft = dataclasses.replace(ft, share=share, lanes=lanes)
    ft.info.update(layers=n_layers, **fit, paths_per_pair=distinct / len(src),
                   **route_diversity(segments, view).summary())
    return ft
