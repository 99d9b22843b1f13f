"""DOR: dimension-order routing on tori and hypercubes (Dally & Seitz 1987; Basu et al. §5.2).

A route corrects the coordinates one dimension at a time, first dimension
first, taking the shorter way around each ring (ties, an offset of exactly
``k/2`` in a ring of even size ``k``, go the ``+`` way); on a hypercube this is
e-cube routing, lowest bit first.  Bandwidth-optimal on the 3×3×3 torus of the
paper's testbed, undefined on anything else (including punctured tori).
"""

from __future__ import annotations

import dataclasses
import re
import time

import numpy as np

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .routers import host_tables, router_view
from .tables import ForwardingTables, from_next_nodes


def grid_dims(topology: Topology) -> tuple[int, ...]:
    """The ring sizes of a ``torus:AxBx...`` or ``hypercube:D`` topology (a hypercube is ``2x2x...``).

    Anything else, a punctured torus included, raises :class:`A2AError`.
    """
    spec = topology.spec
    m = re.fullmatch(r"torus:(\d+(?:x\d+)*)(?:,p=\d+)?", spec)
    h = re.fullmatch(r"hypercube:(\d+)", spec)
    if m:
        return tuple(int(k) for k in m.group(1).split("x"))
    if h:
        return (2,) * int(h.group(1))
    raise A2AError(f"dor: dimension-order routing needs a torus or a hypercube (torus:AxBx...[,p=P], hypercube:D), "
                   f"not {spec}")


def dor_tables(coords: np.ndarray, dims: tuple[int, ...], strides: np.ndarray) -> np.ndarray:
    """Next-node tables ``nxt[node, host]``: correct the first dimension that differs, the shorter way round
    (``+`` on a tie)."""
    n = len(coords)
    cur, goal = coords[:, None, :], coords[None, :, :]
    k = np.array(dims)
    off = (goal - cur) % k
    differ = off != 0
    m = np.argmax(differ, axis=2)                                   # the first dimension that differs
    o = np.take_along_axis(off, m[..., None], 2)[..., 0]
    step = np.where(o <= k[m] // 2, 1, -1)
    c = np.take_along_axis(np.broadcast_to(cur, off.shape), m[..., None], 2)[..., 0]
    nxt = np.arange(n)[:, None] + ((c + step) % k[m] - c) * strides[m]
    return np.where(differ.any(2), nxt, -1)


def dor(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> ForwardingTables:
    """Dimension-ordered tables.

    On a fabric with switches (InfiniBand: ``torus:...,p=P``, ``ibnet:``) the
    dimensions are the switches' port order, as OpenSM's ``dor`` engine reads
    them (:func:`~.minhop.minhop_tables` with ``dor=True``): ``torus:...,p=P``
    numbers each switch's ports per dimension, ``+`` then ``-``, so this is
    dimension 0 first, the shorter way (``+`` on a tie).  On ``torus:...`` and
    ``hypercube:D`` whose nodes are the hosts, routes follow the coordinates:
    torus nodes row-major (as the generator numbers them), hypercube ids as bit
    vectors with bit ``b`` the coordinate of dimension ``b`` (e-cube, lowest bit
    first).
    """
    fabric = fabric or Fabric()
    t0 = time.perf_counter()
    if topology.n_switches:
        from .minhop import minhop_tables
        from .opensm import switch_entries

        tables = ForwardingTables("dor", topology, fabric, minhop_tables(topology, dor=True)[None],
                                  timings={"route": time.perf_counter() - t0}, info={"rule": "opensm port order"})
        return dataclasses.replace(tables, switch_routes=lambda: switch_entries(tables, dor=True))
    dims = grid_dims(topology)
    view = router_view(topology)
    routers = view.routers
    n = len(routers)
    ids = np.arange(n)
    if topology.spec.startswith("hypercube:"):
        coords = (ids[:, None] >> np.arange(len(dims))) & 1
        strides = 1 << np.arange(len(dims))
    else:
        strides = np.array([int(np.prod(dims[m + 1:])) for m in range(len(dims))], dtype=np.int64)
        coords = (ids[:, None] // strides) % np.array(dims)
    local = dor_tables(coords, dims, np.asarray(strides))          # router index -> router index
    nxt = np.full((topology.n_nodes, topology.n_nodes), -1, dtype=np.int64)
    nxt[np.ix_(routers, routers)] = np.where(local >= 0, routers[np.maximum(local, 0)], -1)
    return from_next_nodes("dor", topology, fabric, host_tables(view, nxt),
                           timings={"route": time.perf_counter() - t0}, info={"dims": list(dims)})
