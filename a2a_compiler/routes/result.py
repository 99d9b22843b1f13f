"""The routing engines' common result: weighted paths with virtual channels and layers."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from ..chunk.cost import CostModel, stepped_time
from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology

#: Tolerance on "the weights of a host pair sum to 1".
WEIGHT_TOL = 1e-6


@dataclass(frozen=True)
class RoutedPath:
    """Route of a fraction ``weight`` of shard ``src -> dst`` along ``nodes``.

    ``nodes`` are topology node ids from ``src`` to ``dst`` (switches included).
    ``vcs`` is ``None`` or one virtual channel per hop (``len(nodes) - 1``
    values); ``layer`` is the route's virtual layer (LASH/DFSSSP style, one
    channel class for the whole route).  ``routing_layer`` is, for a layered
    routing (FatPaths, Blach et al. 2024), the layer whose forwarding tables
    carry the route (its LID offset in the LMC range); it is independent of
    the deadlock ``layer``.
    """

    src: int
    dst: int
    nodes: tuple[int, ...]
    weight: float
    layer: int = 0
    vcs: tuple[int, ...] | None = None
    routing_layer: int = 0

    @property
    def channels(self) -> tuple[int, ...]:
        """The virtual channel of every hop: ``vcs``, or ``layer`` on every hop."""
        return self.vcs if self.vcs is not None else (self.layer,) * (len(self.nodes) - 1)


@dataclass(frozen=True, eq=False)
class RouteSet:
    """What an engine returns: the paths, and what it can say about them.

    ``lp_time`` is the all-to-all time of a relaxation when the engine has one
    (the path LP of pMCF, the link MCF of MCF-extP, the fractional flow of the
    FPTAS); ``bound`` a certified lower bound on the time of the problem the
    engine solves (the MIP dual bound of an ILP, the dual bound of the FPTAS);
    ``optimal`` / ``mip_gap`` are the proof status of an ILP engine.
    ``tables`` is the :class:`~.tables.ForwardingTables` the paths were traced
    from, for a destination-based engine (its numbers count per cable).
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
    bound: float | None = None
    tables: object = None
    demand: object = None   # an all-to-allv's Demand: times weigh each pair by its volume

    # ------------------------------------------------------------ flat arrays
    @cached_property
    def _hops(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(link, path)`` of every hop in path order, and each path's hop count.

        A hop that is not a link of ``topology`` gets link index ``-1``.
        """
        t = self.topology
        lengths = np.array([max(len(p.nodes) - 1, 0) for p in self.paths], dtype=np.int64)
        if not lengths.sum():
            return np.zeros(0, np.int64), np.zeros(0, np.int64), lengths
        u = np.concatenate([np.asarray(p.nodes[:-1], dtype=np.int64) for p in self.paths])
        v = np.concatenate([np.asarray(p.nodes[1:], dtype=np.int64) for p in self.paths])
        ok = (u >= 0) & (u < t.n_nodes) & (v >= 0) & (v < t.n_nodes)
        key = t.src * t.n_nodes + t.dst
        want = u * t.n_nodes + v
        link = np.full(len(want), -1, dtype=np.int64)
        if len(key):
            idx = np.minimum(np.searchsorted(key, want), len(key) - 1)
            found = ok & (key[idx] == want)
            link[found] = idx[found]
        path = np.repeat(np.arange(len(self.paths)), lengths)
        return link, path, lengths

    @property
    def weights(self) -> np.ndarray:
        """Each path's weight (its fraction of the pair's shard), in path order."""
        return np.array([p.weight for p in self.paths], dtype=float)

    def link_loads(self) -> np.ndarray:
        """Load on every link of ``topology`` with unit demand per ordered host pair."""
        link, path, _ = self._hops
        return np.bincount(link, weights=self.weights[path], minlength=self.topology.n_links)

    @property
    def alltoall_time(self) -> float:
        """All-to-all time of the weighted routes: max load over capacity (Basu et al. §5.3).

        Priced by the project's cost model (:mod:`a2a_compiler.chunk.cost`, one
        step, fractional loads), so with a host bandwidth the host–NIC ingress
        and egress count as in every other predicted time; with a ``demand`` each
        pair ships its volume.
        """
        link, path, _ = self._hops
        if not len(link):
            return 0.0
        model = CostModel.from_topology(self.topology, self.fabric)
        t = self.topology
        ends = np.array([(p.src, p.dst) for p in self.paths], dtype=np.int64)[path]
        counts = self.weights[path]
        if self.demand is not None:
            counts = counts * self.demand.volumes[ends[:, 0], ends[:, 1]]
        loads = model.step_loads(np.zeros(len(link), dtype=np.int64), link, t.src[link], t.dst[link], ends[:, 0],
                                 ends[:, 1], 1, counts=counts)
        return stepped_time(loads, model.capacity, 1)[0]

    @property
    def layers(self) -> int:
        """Number of virtual channels the routes use (largest layer or vc + 1)."""
        return 1 + max((max(p.channels, default=0) for p in self.paths), default=0)

    def paths_per_pair(self) -> np.ndarray:
        """``N x N`` count of paths of every host pair."""
        n = self.topology.n_hosts
        counts = np.zeros(n * n, dtype=np.int64)
        np.add.at(counts, [p.src * n + p.dst for p in self.paths], 1)
        return counts.reshape(n, n)

    # ------------------------------------------------------------- invariants
    def validate(self) -> "RouteSet":
        """Check what every consumer relies on; raise :class:`A2AError` naming the first bad path.

        Every path runs from its ``src`` host to its ``dst`` host over links of
        the topology without repeating a node, has a positive weight, a layer
        ``>= 0`` and (if any) one non-negative vc per hop; the weights of every
        ordered host pair ``s != d`` sum to 1.
        """
        t = self.topology
        n = t.n_hosts
        link, path, lengths = self._hops
        for i, p in enumerate(self.paths):
            name = f"{self.algo}: path {i} ({p.src}->{p.dst}, nodes {list(p.nodes)})"
            if not (0 <= p.src < n and 0 <= p.dst < n and p.src != p.dst):
                raise A2AError(f"{name}: src and dst must be distinct hosts 0..{n - 1}")
            if len(p.nodes) < 2 or p.nodes[0] != p.src or p.nodes[-1] != p.dst:
                raise A2AError(f"{name}: must run from {p.src} to {p.dst}")
            if len(set(p.nodes)) != len(p.nodes):
                raise A2AError(f"{name}: visits a node twice")
            if not (p.weight > 0 and np.isfinite(p.weight)):
                raise A2AError(f"{name}: weight {p.weight!r} must be positive")
            if p.layer < 0 or (p.vcs is not None and (len(p.vcs) != lengths[i] or min(p.vcs) < 0)):
                raise A2AError(f"{name}: layer must be >= 0 and vcs one channel >= 0 per hop")
        bad = np.flatnonzero(link < 0)
        if len(bad):
            p = self.paths[path[bad[0]]]
            raise A2AError(f"{self.algo}: path {p.src}->{p.dst} {list(p.nodes)} uses a hop that is not a "
                           f"link of {t.spec}")
        total = np.zeros(n * n)
        np.add.at(total, [p.src * n + p.dst for p in self.paths], self.weights)
        s, d = np.divmod(np.arange(n * n), n)
        wrong = np.flatnonzero((s != d) & (np.abs(total - 1) > WEIGHT_TOL))
        if len(wrong):
            k = int(wrong[0])
            raise A2AError(f"{self.algo}: the paths of host pair {k // n}->{k % n} carry {total[k]:.9g} "
                           "of its shard, not 1")
        return self

    # ----------------------------------------------------------- conversions
    @classmethod
    def from_solution(cls, algo: str, topology: Topology, solution, **fields) -> "RouteSet":
        """The weighted paths of a path-carrying :class:`~a2a_compiler.solve.FlowSolution`.

        ``lp_time`` defaults to the solution's :attr:`~a2a_compiler.solve.FlowSolution.lp_time`, the
        certified lower bound on its own LP's time (as ``a2a compile`` records it, so fidelities stay
        <= 1), ``bound`` to its certified lower bound ``1/upper_bound`` on the optimal (link MCF) time.
        """
        paths = tuple(RoutedPath(p.src, p.dst, tuple(p.nodes), p.weight) for p in solution.paths)
        fields.setdefault("lp_time", solution.lp_time)
        fields.setdefault("bound", 1.0 / solution.upper_bound if solution.upper_bound > 0 else None)
        fields.setdefault("timings", dict(solution.timings))
        fields.setdefault("info", dict(solution.info))
        fields.setdefault("demand", solution.demand)
        return cls(algo, topology, solution.fabric, paths, **fields)
