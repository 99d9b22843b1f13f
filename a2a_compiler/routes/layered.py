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
from ..fabric import Fabric
from .diversity import route_diversity
from .lft import all_pairs
from .tables import ForwardingTables, from_next_nodes
from .routers import RouterView, host_tables


def router_segments(view: RouterView, nodes: np.ndarray) -> np.ndarray:
    """The router part of each padded path (its leaf hosts dropped), left-aligned and ``-1``-padded."""
    is_router = np.append(view.is_router, False)
    keep = is_router[nodes]
    out = np.full(nodes.shape, -1, dtype=np.int64)
    i, j = np.nonzero(keep)
    out[i, (np.cumsum(keep, 1) - 1)[i, j]] = nodes[i, j]
    return out[:, : int(keep.sum(1).max(initial=1))]


def virtual_lanes(view: RouterView, nodes: np.ndarray, scheme: str = "dfsssp") -> tuple[np.ndarray, int]:
    """A virtual lane per path by ``scheme``, computed on the distinct router segments (a leaf host never
    forwards, so its links close no dependency cycle), and the number of lanes."""
    segments, of_path = np.unique(router_segments(view, nodes), axis=0, return_inverse=True)
    chains = [tuple(row[row >= 0].tolist()) for row in segments]
    lanes = assign_layers(chains, scheme)
    return lanes[of_path.reshape(-1)], int(lanes.max(initial=0)) + 1


def layered_routes(algo: str, view: RouterView, tables: list[np.ndarray], fabric: Fabric, *, timings: dict,
                   info: dict, progress=None) -> ForwardingTables:
    """Forwarding tables of every layer of router tables ``tables``, the pairs each layer routes, and the
    virtual lanes (module docstring).

    ``info`` gains ``layers``, ``vls`` (virtual lanes DFSSSP needs),
    ``paths_per_pair`` (distinct routes per host pair, mean) and the disjoint
    path counts of :func:`~.diversity.route_diversity`.
    """
    t = view.topology
    n_layers = len(tables)
    host = np.stack([host_tables(view, tab) for tab in tables])
    src, dst = all_pairs(t.n_hosts)
    rs, rd = view.router_of[src], view.router_of[dst]
    # a layer routes the pairs its tables connect (a FatPaths DAG layer only some); layer 0 routes all
    share = np.zeros((n_layers, t.n_hosts, t.n_hosts), dtype=bool)
    share[:, src, dst] = np.stack([(rs == rd) | (tab[rs, rd] >= 0) for tab in tables])
    ft = from_next_nodes(algo, t, fabric, host, share=share, timings=timings, info=dict(info))
    layer, s, d = np.nonzero(share)
    nodes, _ = ft.trace(s, d, layer)
    if progress:
        progress(f"{algo}: {len(s)} routes in {n_layers} layers; virtual lanes by DFSSSP")
    lane, n_lanes = virtual_lanes(view, nodes)
    lanes = np.zeros(share.shape, dtype=np.int64)
    lanes[layer, s, d] = lane
    ft = dataclasses.replace(ft, lanes=lanes)
    routes = ft.routes()
    diversity = route_diversity(routes, view)
    ft.info.update(layers=n_layers, vls=n_lanes, paths_per_pair=len(routes.paths) / len(src), **diversity.summary())
    return ft
