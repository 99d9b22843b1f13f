"""Whole chunks per pair of an all-to-allv: a demand matrix (:class:`~a2a_compiler.demand.Demand`) rounded to
the chunk counts its schedules and programs carry (Basu et al. §4's chunking, per pair).

:func:`chunk_counts` rounds up (chunks of one size carry every pair); :func:`msccl_counts` rounds so every
row and column sums to MSCCL's fixed-size buffers.  The compiler lays programs out by them, and the verifier
and the runtime recompute them from the demand and the file.
"""

from __future__ import annotations

import numpy as np

from ..errors import A2AError
from ..numeric import snap


def chunk_counts(demand, per_unit: float, balanced_total: int | None = None) -> np.ndarray:
    """Integer chunks per pair ``T ≈ per_unit · volumes``, at least 1 wherever a volume is positive.

    Without ``balanced_total`` each entry is rounded up: chunks of ``1/per_unit`` then carry
    every pair.  ``balanced_total``: every row and column of ``T`` must sum to it (MSCCL's
    fixed-size buffers; :meth:`~a2a_compiler.demand.Demand.balanced` matrices only): a controlled rounding,
    each entry the floor or the ceiling of ``per_unit·D`` (Bacharach 1966), chosen by an LP whose
    optimal vertex is integral (a transportation polytope) and canonical; exact where
    ``per_unit·D`` is integral; :class:`A2AError` if no such rounding exists.
    """
    x = snap(demand.volumes * per_unit)
    if balanced_total is None:
        return np.ceil(x).astype(np.int64)
    return _controlled_rounding(x, np.floor(x), x > 0, int(balanced_total), demand.source)


def msccl_counts(demand, chunks_per_peer: int, fmt: str = "MSCCL") -> np.ndarray:
    """The chunk counts ``T`` of an MSCCL (MSCCL++) all-to-allv with ``chunks_per_peer = nchunksperloop / N``:
    every row and column sums to ``nchunksperloop`` (the fixed-size buffers), ``T ≈ D·N·c/(N-1)``
    (:func:`chunk_counts`; exact when that is integral); an unbalanced matrix is refused for the format
    ``fmt`` names (:meth:`~a2a_compiler.demand.Demand.require_balanced`)."""
    demand.require_balanced(fmt)
    n = demand.n
    return chunk_counts(demand, n * chunks_per_peer / (n - 1), n * chunks_per_peer)


def _controlled_rounding(x: np.ndarray, lo: np.ndarray, pos: np.ndarray, total: int, source: str) -> np.ndarray:
    """``T = floor(x) + y``, ``y`` 0/1, rows and columns summing to ``total``, ``T >= 1`` where ``x > 0``,
    minimising ``Σ|T - x|`` (``Σ (1 - 2·frac(x))·y``); the LP's vertices are integral."""
    import scipy.sparse as sp

    from ..solve.lp import solve_lp

    n = len(x)
    frac = x - lo
    up = (frac > 0) | (pos & (lo == 0))          # entries that may (or must) round up
    need = pos & (lo == 0)                        # positive entries below 1 chunk: must round up
    idx = np.flatnonzero(up.ravel())
    i, j = np.divmod(idx, n)
    A = sp.csc_array((np.ones(2 * len(idx)), (np.concatenate([i, n + j]), np.tile(np.arange(len(idx)), 2))),
                     shape=(2 * n, len(idx)))
    rhs = np.concatenate([total - lo.sum(axis=1), total - lo.sum(axis=0)])
    fail = A2AError(f"{source}: no whole-chunk matrix with every row and column summing to {total} chunks "
                    f"keeps the demand's proportions; try other chunk counts")
    if not len(idx):                              # exact: nothing to round
        if np.any(rhs != 0):
            raise fail
        return lo.astype(np.int64)
    cost = 1.0 - 2.0 * frac.ravel()[idx]
    try:
        res = solve_lp(cost, A, rhs, rhs, need.ravel()[idx].astype(float), 1.0, solver="simplex",
                       label="chunk counts")
    except A2AError:
        raise fail from None
    t = lo.copy().ravel()
    t[idx] += np.rint(res.x)
    return t.reshape(n, n).astype(np.int64)
