"""Re-solving for a new demand matrix on the same fabric, warm-started (MoE: a new matrix every step).

The source-grouped master LP (Basu et al. eqs. 6–9, :func:`~a2a_compiler.solve.mcf.flow_lp`)
keeps its constraint matrix when the demand changes: only the right-hand sides of
the conservation rows (source ``s`` sinks ``D[s, u]`` at ``u``) move.  The last
optimal basis therefore stays dual feasible, and the dual simplex restarts from it
(a *hot start*) instead of solving from scratch.  :class:`Resolver` keeps one HiGHS
model per fabric and re-solves it for each new matrix; the result is certified
exactly like :func:`~a2a_compiler.solve.decomp.mcf_decomp`'s (routes split per
source, ``F`` recomputed from them, dual bound ``Σ c·l / Σ D·dist_l``).

The optimum ``F`` is the LP's, whatever the start; the optimal *vertex*, and so the
routes, may depend on the matrices solved before.  For byte-identical files use
:func:`~a2a_compiler.solve.solve` (``mcf-decomp``, canonical output); this is the
fast path for a runtime that re-routes every batch (tools/bench_resolve.py measures it).
"""

from __future__ import annotations

import time

import highspy
import numpy as np
import scipy.sparse as sp

from ..fabric import Fabric
from ..topology.model import Topology
from .certificate import dual_upper_bound, solve_graph
from .decomp import split_sources
from ..errors import A2AError
from .lp import INF, _pass_model, quiet_highs, run_highs
from .mcf import finish, flow_lp
from .result import FlowSolution


class Resolver:
    """The master LP of one topology and fabric, re-solved for each demand from the last basis.

    >>> r = Resolver(from_spec("torus:4x4x4"))                        # doctest: +SKIP
    >>> for D in batches: F = r.solve(D).concurrent_flow              # doctest: +SKIP
    """

    def __init__(self, topology: Topology, fabric: Fabric | None = None):
        self.topology = topology
        self.fabric, self.aug, _, _ = solve_graph(topology, fabric)
        g = self.aug.topology
        nh = g.n_hosts
        self.sources = np.arange(nh)
        k, u = np.divmod(np.arange(nh * nh), nh)
        off = k != u
        sinks = sp.coo_array((np.ones(int(off.sum())), (k[off], u[off])), shape=(nh, g.n_nodes))
        A, self._lower, self._upper = flow_lp(g, self.sources, sinks)
        self._rows = g.n_links + k[off] * (g.n_nodes - 1) + u[off] - (u[off] > k[off])   # row of (s, d)
        self._pairs = (k[off], u[off])
        c = np.zeros(A.shape[1])
        c[0] = 1.0
        self._h = quiet_highs()
        self._h.setOptionValue("solver", "simplex")
        self._h.setOptionValue("presolve", "off")          # keeps the basis between runs
        _pass_model(self._h, c, A, self._lower, self._upper, 0.0, INF, False)
        self.solves = 0

    def solve(self, demand, *, certify: bool = True, progress=None) -> FlowSolution:
        """The optimal all-to-allv flow for ``demand`` (a :class:`~a2a_compiler.demand.Demand`).

        ``certify=False`` returns right after the LP (``concurrent_flow = 1/U`` of the LP,
        no routes): the re-solve alone, for timing.
        """
        g = self.aug.topology
        t0 = time.perf_counter()
        rhs = np.asarray(demand.volumes)[self._pairs]
        self._h.changeRowsBounds(len(self._rows), self._rows.astype(np.int32), rhs, rhs)
        run_highs(self._h, label="warm re-solve", progress=progress)
        lp_seconds = time.perf_counter() - t0
        if self._h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            raise A2AError(f"warm re-solve finished with status {self._h.modelStatusToString(self._h.getModelStatus())}")
        info = self._h.getInfo()
        sol = self._h.getSolution()
        x = np.asarray(sol.col_value, dtype=float)
        iterations = int(info.simplex_iteration_count)
        self.solves += 1
        meta = {"solver": "simplex (warm)", "lp_status": "Optimal", "lp_iterations": iterations,
                "warm": self.solves > 1, "lp_concurrent_flow": float(1 / x[0])}
        if not certify:
            return FlowSolution("mcf-decomp", self.topology.spec, self.fabric, self.topology.n_hosts,
                                self.topology.n_links, float(1 / x[0]), float(1 / x[0]), "LP only",
                                {"lp": lp_seconds}, info=meta, demand=demand)
        t1 = time.perf_counter()
        duals = np.abs(np.asarray(sol.row_dual, dtype=float)[: g.n_links])
        ub = dual_upper_bound(g, duals, demand)
        flows = x[1:].reshape(len(self.sources), g.n_links)
        routing = split_sources(g, self.sources, flows, amounts=np.asarray(demand.volumes))
        timings = {"lp": lp_seconds, "split": time.perf_counter() - t1}
        return finish("mcf-decomp", self.topology, self.fabric, self.aug, routing, ub, timings, meta, demand=demand)


__all__ = ["Resolver"]
