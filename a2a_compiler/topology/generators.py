"""Topology generators, one documented function per family.

Definitions follow ``shared/reference/topologies.md`` exactly.  Every generator
returns a :class:`~a2a_compiler.topology.model.Topology` with unit capacities and
hosts numbered first.
"""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import SpecError
from .model import Topology


def _require(cond: bool, param: str, rule: str, spec: str) -> None:
    if not cond:
        raise SpecError(f"{spec}: parameter {param} {rule}")


def complete(n: int) -> Topology:
    """Complete graph K_n: every ordered pair of hosts is linked."""
    spec = f"complete:{n}"
    _require(n >= 2, "N", "must be >= 2", spec)
    i, j = np.triu_indices(n, 1)
    return Topology.from_links(spec, n, np.stack([i, j], 1))


def ring(n: int) -> Topology:
    """Bidirectional ring C_n (n >= 3)."""
    spec = f"ring:{n}"
    _require(n >= 3, "N", "must be >= 3", spec)
    i = np.arange(n)
    return Topology.from_links(spec, n, np.stack([i, (i + 1) % n], 1))


def complete_bipartite(n: int) -> Topology:
    """Complete bipartite K_{n,n}: hosts 0..n-1 on one side, n..2n-1 on the other."""
    spec = f"bipartite:{n}"
    _require(n >= 1, "n", "must be >= 1", spec)
    i, j = np.meshgrid(np.arange(n), np.arange(n, 2 * n), indexing="ij")
    return Topology.from_links(spec, 2 * n, np.stack([i.ravel(), j.ravel()], 1))


def _hypercube_pairs(d: int) -> np.ndarray:
    i = np.repeat(np.arange(2**d), d)
    bit = np.tile(np.arange(d), 2**d)
    j = i ^ (1 << bit)
    keep = i < j
    return np.stack([i[keep], j[keep]], 1)


def hypercube(d: int) -> Topology:
    """Hypercube Q_d: 2^d hosts, i ~ j iff popcount(i xor j) = 1."""
    spec = f"hypercube:{d}"
    _require(1 <= d <= 20, "d", "must be in 1..20", spec)
    return Topology.from_links(spec, 2**d, _hypercube_pairs(d), coords=[tuple((i >> b) & 1 for b in range(d)) for i in range(2**d)])


def twisted_hypercube(d: int) -> Topology:
    """Twisted d-cube: Q_d with links 0-1 and 2-3 replaced by 0-3 and 1-2.

    d-regular with diameter d-1 for d >= 3.
    """
    spec = f"twisted-hypercube:{d}"
    _require(3 <= d <= 20, "d", "must be in 3..20", spec)
    pairs = {tuple(p) for p in _hypercube_pairs(d).tolist()}
    pairs -= {(0, 1), (2, 3)}
    pairs |= {(0, 3), (1, 2)}
    return Topology.from_links(spec, 2**d, sorted(pairs))


def torus(dims: tuple[int, ...]) -> Topology:
    """Mixed-radix torus k1 x k2 x ...: neighbours differ by ±1 mod k_m in one dimension.

    A dimension of size 2 gives one cable (not two); a dimension of size 1 gives none.
    Node ids are row-major over the coordinates (last dimension fastest).
    """
    spec = "torus:" + "x".join(str(k) for k in dims)
    _require(len(dims) >= 1, "dims", "must list at least one dimension", spec)
    for m, k in enumerate(dims):
        _require(k >= 1, f"k{m + 1}", "must be >= 1", spec)
    n = int(np.prod(dims))
    _require(n >= 2, "dims", "must give at least 2 hosts", spec)
    coords = np.array(list(itertools.product(*[range(k) for k in dims])), dtype=np.int64)
    strides = np.array([int(np.prod(dims[m + 1:])) for m in range(len(dims))], dtype=np.int64)
    pairs = []
    for m, k in enumerate(dims):
        if k == 1:
            continue
        nxt = coords.copy()
        nxt[:, m] = (nxt[:, m] + 1) % k
        pairs.append(np.stack([coords @ strides, nxt @ strides], 1))
    return Topology.from_links(spec, n, np.concatenate(pairs) if pairs else np.zeros((0, 2)), coords=coords.tolist())


def petersen() -> Topology:
    """The Petersen graph (10 hosts, 3-regular, diameter 2)."""
    outer = [(i, (i + 1) % 5) for i in range(5)]
    spokes = [(i, i + 5) for i in range(5)]
    inner = [(5 + i, 5 + (i + 2) % 5) for i in range(5)]
    return Topology.from_links("petersen", 10, outer + spokes + inner)


def genkautz(n: int, d: int) -> Topology:
    """Generalized Kautz digraph GK(N, d) (Imase & Itoh 1983; Basu et al. §5.4).

    Arc i -> (-d*i - j) mod N for j = 1..d; self-loops dropped, so out-degree is d
    (d-1 at nodes that had a loop).  Directed: links are one-way.
    """
    spec = f"genkautz:{n},{d}"
    _require(n >= 2, "N", "must be >= 2", spec)
    _require(d >= 1, "d", "must be >= 1", spec)
    _require(d < n, "d", "must be < N", spec)
    i = np.repeat(np.arange(n), d)
    j = np.tile(np.arange(1, d + 1), n)
    return Topology.from_links(spec, n, np.stack([i, (-d * i - j) % n], 1), undirected=False)
