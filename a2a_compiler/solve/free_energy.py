"""Near-optimal dual link lengths without an LP: the free-energy smoothing of the MCF dual.

Weak duality of the maximum concurrent flow LP (Basu et al. eqs. 1–5) gives, for
every length vector ``l >= 0``,

    F* <= Σ_e c_e·l_e / Σ_{s≠t} D[s, t]·dist_l(s, t),

with equality at the optimal lengths (:func:`~.certificate.dual_upper_bound`).
The denominator is concave and piecewise linear in ``l``.  Replacing each distance
by its *free energy*

    φ_μ(s, t) = -μ·log Z[s, t],   Z = (I - W)⁻¹,   W[u, v] = Σ_{links e: u→v} exp(-l_e/μ),

the soft minimum over all walks from ``s`` to ``t`` (the free-energy distance of the
randomized-shortest-path framework: Saerens, Achbany, Fouss & Yen, Neural
Computation 21(8), 2009; Kivimäki, Shimbo & Saerens, Physica A 393, 2014), makes it
smooth: ``φ_μ <= dist`` and ``φ_μ -> dist`` as ``μ -> 0``.  Its gradient
``∂φ_μ(s, t)/∂l_e = Z[s, u]·w_e·Z[v, t] / Z[s, t]`` is the expected number of times
the Gibbs walk from ``s`` to ``t`` takes ``e``, so the gradient of the whole sum costs
one dense inverse and two ``n x n`` products.  :func:`free_energy_lengths`
maximises ``Σ D·φ_μ`` over ``Σ c·l = Σ c`` by L-BFGS for a decreasing ``μ`` and
returns the lengths whose exact (Dijkstra) bound is best.

These lengths only *seed* the restricted master LP of :mod:`.pricing`: nothing is
certified by them except the weak-duality bound they give, which is exact.  They
are snapped (:func:`~a2a_compiler.numeric.snap`), so the choices made from them are
the same wherever the lengths are; but the lengths themselves come from L-BFGS-B
and BLAS, which differ between SciPy releases and CPU kernels (measured in
docs/solver.md), which is why arc pricing is the default only where the alternative is slow
(:func:`~a2a_compiler.solve.decomp.choose_master`).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg
import scipy.optimize
from threadpoolctl import threadpool_limits

from ..numeric import snap
from ..progress import tick_of
from ..topology.model import Topology
from .certificate import dual_upper_bound

#: Smoothing levels, as fractions of the mean length (``Σ c·l = Σ c``), coarse to fine: each
#: level starts from the previous one's lengths.  Measured on jellyfish:1000,4,seed=1, the
#: bound's gap to F* after each level: 9e-4, 5e-4, 2e-4, 1.1e-4 (a fifth level, 0.02, reaches
#: 6e-5, but its seed arcs grew from 88 to 98 per source and the priced solve got slower: round 2
#: 425 s against 220 s).
MU_LEVELS = (0.2, 0.1, 0.05, 0.03)
#: L-BFGS iterations per level.
ITERATIONS = 60
#: BLAS threads for the dense algebra.  One is faster on the 2-core machine at every size measured
#: (jellyfish:256 1.4 s against 4.2 s with two; jellyfish:1000 38.9 s wall against 48.2 s wall and 94 s CPU).
BLAS_THREADS = 1
#: Lengths stay within ``exp(±THETA_BOUND)`` of each other's geometric scale: a floor that keeps
#: ``W``'s walk series convergent where the optimum leaves links idle (length 0).
THETA_BOUND = 3.0


def free_energy(graph: Topology, lengths: np.ndarray, mu: float, volumes: np.ndarray | None = None):
    """``(Σ_{s≠t} D[s,t]·φ_μ(s,t), its gradient in l)`` over the hosts of ``graph``, or ``None`` when the
    walk series diverges or underflows at these lengths (``μ`` too small for the distances)."""
    n, nh = graph.n_nodes, graph.n_hosts
    w = np.exp(-np.asarray(lengths, dtype=float) / mu)
    M = np.eye(n)
    np.subtract.at(M, (graph.src, graph.dst), w)
    with np.errstate(all="ignore"):
        Z = scipy.linalg.inv(M, overwrite_a=True, check_finite=False)
    hosts = Z[:nh, :nh]
    off = ~np.eye(nh, dtype=bool)
    if not (np.isfinite(Z).all() and (hosts[off] > 1e-290).all() and (Z >= -1e-12).all()):
        return None
    weight = np.ones((nh, nh)) if volumes is None else np.asarray(volumes, dtype=float)
    weight = np.where(off, weight, 0.0)
    value = -mu * float((weight * np.log(np.where(off, hosts, 1.0))).sum())
    Q = weight / hosts                          # Q[s, t] = D[s, t] / Z[s, t]
    P = Q @ Z[:, :nh].T                         # P[s, v] = Σ_t Q[s, t]·Z[v, t]
    grad = w * (Z[:nh].T @ P)[graph.src, graph.dst]
    return value, grad


def free_energy_lengths(graph: Topology, volumes: np.ndarray | None = None, *, demand=None,
                        mu_levels=MU_LEVELS, iterations: int = ITERATIONS, progress=None):
    """Link lengths that nearly minimise the weak-duality bound of the all-to-all(v) MCF on ``graph``.

    ``volumes`` (``n_hosts x n_hosts``, default 1 off the diagonal) weight the host pairs;
    ``demand`` is the same matrix as a :class:`~a2a_compiler.demand.Demand` for the exact bound.
    Returns ``(lengths, bound)``: snapped lengths normalised to ``Σ c·l = Σ c`` and their
    weak-duality bound on ``F*`` (exact Dijkstra, valid whatever the smoothing reached).
    Zero-capacity links get no length (they carry nothing).
    """
    with threadpool_limits(limits=BLAS_THREADS, user_api="blas"):
        return _free_energy_lengths(graph, volumes, demand, mu_levels, iterations, progress)


def _free_energy_lengths(graph, volumes, demand, mu_levels, iterations, progress):
    cap = np.asarray(graph.capacity, dtype=float)
    live = cap > 0
    total = float(cap.sum())
    tick = tick_of(progress)
    theta = np.zeros(graph.n_links)
    best = (dual_upper_bound(graph, np.ones(graph.n_links), demand), np.where(live, 1.0, 0.0))

    def lengths_of(th):
        e = np.where(live, np.exp(th - th.max()), 0.0)
        return total * e / float(cap @ e)

    for mu in mu_levels:
        def objective(th):
            l = lengths_of(th)
            out = free_energy(graph, np.where(live, l, np.inf), mu, volumes)
            if out is None:
                return np.inf, np.zeros_like(th)
            value, grad = out
            g = -grad / total
            return -value / total, np.where(live, l * (g - cap / total * float(g @ l)), 0.0)

        calls = [0]

        def report(_):
            calls[0] += 1
            if tick:
                tick(f"free-energy lengths: mu {mu:g}, iteration {calls[0]}")

        res = scipy.optimize.minimize(objective, theta, jac=True, method="L-BFGS-B", callback=report,
                                      bounds=[(-THETA_BOUND, THETA_BOUND)] * graph.n_links,
                                      options={"maxiter": iterations})
        if not np.isfinite(res.fun):
            break
        theta = res.x
        lengths = snap(lengths_of(theta))
        bound = dual_upper_bound(graph, lengths, demand)
        if progress:
            tick(f"free-energy lengths: mu {mu:g}: {res.nit} iterations, bound {bound:.9g}")
        if bound < best[0]:
            best = (bound, lengths)
    return best[1], best[0]
