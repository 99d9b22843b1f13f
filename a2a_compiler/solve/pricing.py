"""The master LP by arc pricing: a restricted master over the arcs an optimum uses, grown by reduced cost.

On a fabric without symmetry the master LP (Basu et al. eqs. 6–9) has one flow
column per (source, link).  Its optimum uses few of them: under the optimal link
lengths each source's flow lies on its shortest-path DAG, a spanning tree plus a
few arcs (17.5 per source on jellyfish:128,4, docs/solver.md), and the LP over
just those columns is ~20x cheaper than the full one.  :func:`priced_master_lp`
finds them by column generation (Dantzig & Wolfe 1960; for multicommodity flows
Ford & Fulkerson 1958, Jones, Lustig, Farvolden & Powell 1993):

1. *Seed.*  Near-optimal lengths come without an LP from the free-energy smoothing
   of the dual (:mod:`.free_energy`); each source starts with the arcs within
   :data:`SEED_SLACK` of its shortest-path DAG under them (:func:`seed_arcs`).
2. *Restricted master.*  The master LP over those columns (after HiGHS's presolve,
   which eliminates the tree flows: interior point, or PDLP above 2 million nonzeros)
   gives a feasible flow — its ``F`` is a lower bound — and duals.
3. *Pricing.*  Every column left out gets its reduced cost from the duals
   (``c - Aᵀy``, vectorised over all of them); those below ``-PRICE_TOL·U`` join
   the master, and 2–3 repeat until none is left or the gap closes.  While a round stays more than
   :data:`WIDEN_GAP` below the bound, the seed DAGs missed the optimum's arcs (the restricted duals
   then sit on one bottleneck and price in a few columns a round), so the next round also gets the
   arcs within twice the slack under the best lengths.

The default only for fabrics without symmetry whose plain master LP is large
(:func:`~.decomp.choose_master`): the seed comes from SciPy's L-BFGS-B, whose iterates differ
between SciPy releases (measured on jellyfish:128,4,seed=1: SciPy 1.15.3 and 1.17.1 seed 7 of
18 600 columns differently), so the optimum ``F`` and the bound agree everywhere but the flows
(and schedules compiled from them) may differ between SciPy releases; on one install the same
input gives the same bytes.

Certified as before: the capacity duals of each round and the seed lengths are
link lengths, and :func:`~.certificate.dual_upper_bound` turns the best into a
weak-duality bound; the split paths' ``F`` is recomputed by the caller.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..numeric import snap
from ..progress import tick_of
from ..topology.model import Topology
from .certificate import dual_upper_bound
from .free_energy import free_energy_lengths
from .lp import FIRST_ORDER, solve_lp
from .mcf import flow_lp, pick_solver

#: A source's seed arcs: ``dist(s, u) + l(u→v) <= dist(s, v) + SEED_SLACK·median(l)`` under the
#: free-energy lengths.  Measured on jellyfish:256,4,seed=1 (optimum F = 0.003559213), arcs per source
#: beyond a tree and the first restricted LP's F: slack 0.02 12.0 (F 0.003496503), 0.05 22.3
#: (0.003559206); jellyfish:1000,4,seed=1: slack 0.02 44.9 (1.7e-2 below the optimum), 0.03 63.4
#: (1.2e-4 below, LP 55 s), 0.05 88.1 (1.1e-4 below, LP 87 s).  (Arcs used by the Gibbs walks,
#: :func:`.free_energy.free_energy`'s gradient per source, did no better: at N=1000 96 arcs per source
#: and an LP of 180 s for 6e-5 below.)
SEED_SLACK = 0.05
#: A round whose F is more than this relative gap below the best bound widens the DAGs of the next
#: (the slack doubles, under the best lengths).  Measured on genkautz:256,4 minus 2 arcs (seed 1), whose
#: free-energy lengths range 0.03–4.1 medians: slack 0.05 leaves the first round 2.1e-1 below the bound
#: (an integer bottleneck load, 1/F = 301.5) and reduced costs alone then take 20 rounds and 107 s; slack
#: 0.1 and 0.2 reach the optimum F.  Jellyfish's first rounds are within 3e-4, below the threshold.
WIDEN_GAP = 1e-2
#: Columns whose reduced cost is below ``-PRICE_TOL·U`` are priced in.
PRICE_TOL = 1e-9
#: Stop once the restricted master's F is within this relative gap of the best dual bound: below
#: issue #22's 1e-6, with room for the split's repair of the LP solver's infeasibilities.
GAP = 8e-7
#: The restricted master LPs go to :func:`~.mcf.pick_solver` by their nonzeros, with HiGHS's presolve
#: (which removes the tree flows): IPX below 2 million, PDLP above.  Measured on the first restricted
#: master of jellyfish:1000,4,seed=1 (3.3 million nonzeros; 26 221 rows x 98 756 columns after presolve):
#: PDLP 20.4 s at tolerance 1e-8, 23.2 s at 1e-7, IPX 97 s (22 iterations of 4.4 s); on jellyfish:256 IPX
#: is faster (the second round 1.5 s against 5.5 s for PDLP's 19 720 iterations).  ``--solver hipo`` (HiPO,
#: the hipo extra) is not picked by size: on the punctured GenKautz(1000,4) its rounds take 62 and 452 s where
#: PDLP takes 133 and 643 s, but on jellyfish:1000's first round 72 s against PDLP's 20 s (docs/solver.md).
ROUND_SOLVERS = ("ipm", "hipo", "pdlp", "cupdlpx")
#: PDLP's relative tolerance in the rounds, and in those that follow a round within :data:`PDLP_CLOSE_GAP`
#: of the bound (the last ones): the split repairs PDLP's primal infeasibility at the cost of F.  Measured on
#: jellyfish:1000,4,seed=1, 5 rounds each: every round at 1e-8 662 s wall, certified gap 3.9e-7; at 1e-7
#: 492 s, but gap 1.6e-6 (the LP's F was within 2.3e-7 of the bound, the split's 1.4e-6 below it); 1e-7, then
#: 1e-8 in the last round 598 s and 619 s (gap 3.1e-7; the last round 198 s); 1e-7, then 3e-8 525 s (gap 5.1e-7;
#: the last round 135 s).
PDLP_TOLERANCE, PDLP_FINAL_TOLERANCE, PDLP_CLOSE_GAP = 1e-7, 3e-8, 1e-5


def round_options(solver: str, gap: float) -> dict:
    """HiGHS options of a restricted master LP solved by ``solver`` after a round that left ``gap``."""
    if solver not in FIRST_ORDER:
        return {"presolve": "on"}
    tol = PDLP_FINAL_TOLERANCE if gap <= PDLP_CLOSE_GAP else PDLP_TOLERANCE
    if solver == "cupdlpx":   # its own presolve (PSLP) removes the tree flows as HiGHS's does; not measured
        return {"presolve": True, "tolerance": tol}
    return {"presolve": "on", "pdlp_optimality_tolerance": tol, "primal_feasibility_tolerance": tol,
            "dual_feasibility_tolerance": tol}


#: Most pricing rounds (each solves one restricted master).
MAX_ROUNDS = 30
#: Values of the ``pricing`` option.
PRICING_MODES = ("auto", "off", "on")


def seed_arcs(graph: Topology, lengths: np.ndarray, slack: float = SEED_SLACK) -> np.ndarray:
    """``n_hosts x links`` mask of the columns the first restricted master LP gets (and a widened round,
    at a larger ``slack``): the links within ``slack·m`` of host ``s``'s shortest-path DAG under
    ``lengths``, ``m`` the median of the positive lengths (a round's capacity duals are mostly 0; every
    node keeps its shortest-path links, so the LP is feasible on a connected graph).  Links into the source and
    zero-capacity links are left out.  The lengths are snapped first, so sums along paths are exact
    and the comparison is the same on every machine."""
    live = graph.capacity > 0
    l = np.asarray(lengths, dtype=float)
    l = snap(l / float(np.median(l[live & (l > 0)])))
    n, nh = graph.n_nodes, graph.n_hosts
    adj = sp.csr_array((l[live], (graph.src[live], graph.dst[live])), shape=(n, n))
    dist = csgraph.dijkstra(adj, directed=True, indices=np.arange(nh))
    mask = dist[:, graph.src] + l[None, :] <= dist[:, graph.dst] + slack
    mask &= live[None, :] & (graph.dst[None, :] != np.arange(nh)[:, None])
    return mask


def priced_master_lp(graph: Topology, sinks, *, volumes: np.ndarray | None = None, demand=None, solver: str = "auto",
                     progress=None, label: str = "master LP"):
    """Minimise congestion ``U`` over :func:`~.mcf.flow_lp` with one source per host, in host order (the plain
    master LP: no symmetry), by arc pricing.

    Returns what :func:`~.mcf.solve_flow_lp` does, ``(U, flows n_hosts x E, link lengths, LPResult, build
    seconds)``; the lengths are those with the best weak-duality bound seen (seed or any round's
    capacity duals), the LPResult is the last restricted master's with the rounds' seconds and
    iterations summed.  ``volumes`` (``n_hosts x n_hosts``) and ``demand`` weight the pairs as the
    sinks do.  ``solver`` (``auto``, ``ipm`` or ``pdlp``) solves the restricted masters; ``auto`` picks by size
    (:func:`~.mcf.pick_solver`).  The last value returned is a dict of the rounds, columns and seed seconds.
    """
    tick = tick_of(progress)
    K, E = graph.n_hosts, graph.n_links
    t0 = time.perf_counter()
    lengths, bound = free_energy_lengths(graph, volumes, demand=demand, progress=progress)
    seed_seconds = time.perf_counter() - t0
    if progress:
        progress(f"{label}: free-energy lengths in {seed_seconds:.1f} s, bound {bound:.9g}")
    t0 = time.perf_counter()
    A, lower, upper = flow_lp(graph, np.arange(K), sinks)
    AT = sp.csr_array(A.T)
    mask = seed_arcs(graph, lengths)
    build = time.perf_counter() - t0
    c = np.zeros(A.shape[1])
    c[0] = 1.0
    seconds = iterations = 0
    gap, slack = np.inf, SEED_SLACK
    for rounds in range(1, MAX_ROUNDS + 1):
        cols = np.concatenate([[0], 1 + np.flatnonzero(mask.ravel())])
        if tick:
            tick(f"{label}: round {rounds}, {len(cols)} of {A.shape[1]} columns")
        restricted = A[:, cols]
        chosen = pick_solver(solver, restricted.nnz)
        res = solve_lp(c[cols], restricted, lower, upper, solver=chosen, options=round_options(chosen, gap),
                       inexact_ok=True, label=f"{label} round {rounds}", progress=progress)
        seconds += res.seconds
        iterations += res.iterations
        y = res.row_dual
        duals = np.abs(y[:E])
        b = dual_upper_bound(graph, duals, demand)
        if b < bound:
            bound, lengths = b, duals
        U = float(res.x[0])
        reduced = -(AT @ y)[1:].reshape(K, E)
        new = (reduced < -PRICE_TOL * U) & ~mask
        gap = bound * U - 1
        widened = ""
        if gap > WIDEN_GAP:
            slack *= 2
            new |= seed_arcs(graph, lengths, slack) & ~mask
            widened = f", DAGs widened to slack {slack:g}"
        if progress:
            progress(f"{label}: round {rounds} ({chosen}): {len(cols)} columns, F = {1 / U:.9g}, bound {bound:.9g} "
                     f"(gap {gap:.1e}), {int(new.sum())} columns priced in{widened}")
        if gap <= GAP or not new.any():
            break
        mask |= new
    x = np.zeros(A.shape[1])
    x[cols] = res.x
    flows = x[1:].reshape(K, E)
    res = replace(res, x=x, seconds=seconds, iterations=iterations)
    info = {"pricing_rounds": rounds, "priced_columns": int(len(cols)), "seed_seconds": seed_seconds}
    return U, flows, lengths, res, build, info
