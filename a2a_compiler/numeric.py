"""Floating-point rules for discrete choices: the same input gives the same output on any machine.

A compiled schedule is a chain of discrete choices made on LP output (which
path a chunk takes, which ``C`` is kept, which move the local search makes).
Two things made those choices machine-dependent:

* **BLAS.** ``a @ b`` on float vectors runs the BLAS kernel of the CPU
  (OpenBLAS picks Haswell, SkylakeX, ... at run time), and kernels sum in
  different orders.  Measured: the §5.2 torus compiled with
  ``--min-fidelity 0.99`` reached fidelity 0.9902 under the Haswell kernel
  and 0.9893 under SkylakeX, from the same LP solution, because one
  local-search move won a tie by the last bit of a dot product.  Decisions use
  :func:`dot` (exactly rounded, no BLAS) instead.
* **Noise on ties.** Quantities that are equal in exact arithmetic (symmetric
  paths, equal remainders) differ in their last bits.  LP output is snapped
  to a dyadic grid (:func:`snap`) before it is decomposed into paths, and
  comparisons that choose between candidates treat values within
  :data:`TIE` as equal and keep the lower index (:func:`better`).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

#: LP output is snapped to multiples of ``2**-SNAP_BITS`` (about 1.5e-11): far below every
#: threshold the passes use (1e-9 and up), far above the last-bit noise of the solvers.
SNAP_BITS = 36
#: Two values this close are a tie; a tie goes to the lower index.
TIE = 1e-12


def snap(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to the nearest multiple of ``2**-SNAP_BITS`` (a new array).

    Sums and differences of snapped values of moderate size are exact in
    float64, so a greedy decomposition subtracting them sees exact ties.
    """
    return np.ldexp(np.rint(np.ldexp(np.asarray(x, dtype=float), SNAP_BITS)), -SNAP_BITS)


def dot(a, b) -> float:
    """``Σ a_i·b_i`` exactly rounded (products, then :func:`math.fsum`): the same on every CPU."""
    return math.fsum(np.multiply(a, b, dtype=float).ravel().tolist())


def splitmix64(keys) -> np.ndarray:
    """The splitmix64 hash of integer ``keys`` (uint64 arithmetic, the same bits on every machine)."""
    with np.errstate(over="ignore"):
        z = np.asarray(keys, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def unit_uniforms(keys) -> np.ndarray:
    """Floats in ``[0, 1)``, multiples of ``2**-53``, from :func:`splitmix64` of ``keys``: a seeded
    random stream that is exact and the same everywhere (no library generator whose stream may change)."""
    return np.ldexp((splitmix64(keys) >> np.uint64(11)).astype(float), -53)


def generic_costs(n: int) -> np.ndarray:
    """``n`` costs in ``[1, 2)`` with no exact linear relations in practice: the splitmix64 hash of the
    column index.  (A multiplicative hash ``j·K mod 2**32`` is linear in ``j``: shifted paths then tie
    exactly, measured on the §5.2 torus, and the minimiser is no longer unique.)"""
    return 1.0 + unit_uniforms(np.arange(1, n + 1, dtype=np.uint64))


def better(key: tuple[float, ...], best: tuple[float, ...] | None) -> bool:
    """Is ``key`` lexicographically smaller than ``best`` by more than :data:`TIE` somewhere,
    equal within :data:`TIE` before that?  (``best`` None: yes.)  Candidates visited in index
    order therefore keep the lowest index among ties."""
    if best is None:
        return True
    for k, b in zip(key, best):
        if k < b - TIE:
            return True
        if k > b + TIE:
            return False
    return False


def shortest_path_tree(n: int, src: np.ndarray, dst: np.ndarray, length: np.ndarray, root: int,
                       toward_root: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(dist, pred)`` of a shortest-path tree rooted at ``root`` whose ties break canonically.

    ``scipy.sparse.csgraph.dijkstra``'s predecessors depend on its heap's order among
    equal distances, which changed between SciPy releases (measured: SSSP on K4,4 gave max
    link load 3 under SciPy 1.17 and 5 under 1.15).  Here the distances come from Dijkstra
    and the tree is chosen from them as a Dijkstra would whose heap settles nodes in order
    of (distance, *descending* node id): ``pred[v]`` is the first settled ``u`` with a link on
    a shortest path to ``v`` (``dist[u] + len(u->v)`` within :data:`TIE` relative of ``dist[v]``).
    Of the canonical rules measured on SSSP (lowest id, ascending settle order, hashed or
    rotated ids), only this one kept its balance on tori and hypercubes (torus:3x3x3: 9,
    the others 14-17).  With ``toward_root`` distances are *to* ``root`` and ``pred[v]`` is
    ``v``'s next hop.  Unreachable nodes and the root get ``pred = -9999`` (SciPy's convention).
    """
    a, b = (dst, src) if toward_root else (src, dst)          # search from root along a -> b
    length = np.asarray(length, dtype=float)
    dist = csgraph.dijkstra(sp.csr_array((length, (a, b)), shape=(n, n)), directed=True, indices=root)
    via = dist[a] + length
    tight = np.isfinite(via) & (via <= dist[b] * (1 + TIE) + TIE) & (b != root)
    settled = np.empty(n, dtype=np.int64)
    settled[np.lexsort((-np.arange(n), dist))] = np.arange(n)
    first = np.full(n, n, dtype=np.int64)
    np.minimum.at(first, b[tight], settled[a[tight]])
    pred = np.full(n, -9999, dtype=np.int64)
    reached = first < n
    pred[reached] = np.argsort(settled)[first[reached]]
    return dist, pred
