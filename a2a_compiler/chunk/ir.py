"""Schedule IR: the single representation every lowering consumes (Basu et al. §2.2, §4).

A shard ``B[s][d]`` (what rank ``s`` sends rank ``d``) is split into
``chunks_per_shard = C`` equal chunks; chunk ``(origin, dest, index)`` is
``index``-th ``1/C`` of that shard.

* :class:`LinkSchedule` — time-stepped, store-and-forward (tsMCF): per step, a
  list of :class:`Transfer` over real links.  A node may only send a chunk it
  holds at the start of the step (it is the origin, or received it earlier).
* :class:`PathSchedule` — routed (pMCF / MCF-extP): per commodity, its chunks
  and the :class:`Route` each chunk takes.

Both carry the topology (``links``: directed host links with capacities, in link
units), the fabric, the method and the LP all-to-all time they came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..fabric import Fabric

Chunk = tuple[int, int, int]  # (origin, destination, index)


@dataclass(frozen=True)
class Transfer:
    """In one step, ``src`` sends ``chunks`` to its neighbour ``dst``."""

    src: int
    dst: int
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class Route:
    """Chunks ``chunks`` (indices into shard ``src->dst``) follow ``nodes``.

    ``nodes`` starts at ``src`` and ends at ``dst``; node ids are topology ids,
    so hosts (ids < n_ranks) are ranks and larger ids are switches.
    """

    src: int
    dst: int
    nodes: tuple[int, ...]
    route_id: int
    chunks: tuple[int, ...]
    layer: int = 0


@dataclass(frozen=True, eq=False)
class LinkSchedule:
    n_ranks: int
    chunks_per_shard: int
    steps: tuple[tuple[Transfer, ...], ...]
    links: tuple[tuple[int, int, float], ...]
    spec: str
    fabric: Fabric
    method: str
    lp_time: float
    info: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class PathSchedule:
    n_ranks: int
    chunks_per_shard: int
    routes: tuple[Route, ...]
    links: tuple[tuple[int, int, float], ...]
    n_nodes: int
    spec: str
    fabric: Fabric
    method: str
    lp_time: float
    info: dict = field(default_factory=dict)
