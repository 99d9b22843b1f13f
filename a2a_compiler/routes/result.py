"""The routing engines' common result: weighted paths with virtual channels and layers."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..fabric import Fabric
from ..topology.model import Topology


@dataclass(frozen=True)
class RoutedPath:
    """Route of a fraction ``weight`` of shard ``src -> dst`` along ``nodes``.

    ``nodes`` are topology node ids from ``src`` to ``dst`` (switches included).
    ``vcs`` is ``None`` or one virtual channel per hop (``len(nodes) - 1``
    values); ``layer`` is the route's virtual layer (LASH/DFSSSP style, one
    channel class for the whole route).
    """

    src: int
    dst: int
    nodes: tuple[int, ...]
    weight: float
    layer: int = 0
    vcs: tuple[int, ...] | None = None


@dataclass(frozen=True, eq=False)
class RouteSet:
    """What an engine returns: the paths, and what it can say about them.

    ``lp_time`` is the all-to-all time of a relaxation when the engine has one;
    ``optimal`` / ``mip_gap`` are the proof status of an ILP engine.
    """

    algo: str
    topology: Topology
    fabric: Fabric
    paths: tuple[RoutedPath, ...]
    lp_time: float | None = None
    optimal: bool | None = None
    mip_gap: float | None = None
    timings: dict = field(default_factory=dict)
    info: dict = field(default_factory=dict)

    def link_loads(self) -> np.ndarray:
        """Load on every link of ``topology`` with unit demand per ordered host pair."""
        t = self.topology
        key = t.src * t.n_nodes + t.dst
        hops = [(u * t.n_nodes + v, p.weight) for p in self.paths for u, v in zip(p.nodes, p.nodes[1:])]
        if not hops:
            return np.zeros(t.n_links)
        k, w = np.array(hops).T
        return np.bincount(np.searchsorted(key, k.astype(np.int64)), weights=w, minlength=t.n_links)

    @property
    def alltoall_time(self) -> float:
        """Max link load over capacity (Basu et al. §5.3: the all-to-all time of the routes)."""
        loads = self.link_loads()
        return float(np.max(loads / self.topology.capacity)) if len(loads) else 0.0
