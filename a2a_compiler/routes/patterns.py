"""Communication patterns and the congestion routes give them (Zahavi et al. 2009 §1, §4.1).

A pattern is a sequence of stages, each a set of host pairs that communicate
at once.  The **shift** pattern has stages ``s = 1 .. N-1`` with
``P_s = {H_i -> H_(i+s) mod N}``; together they are the all-to-all, one pair
per ordered host pair.  The *congestion* of a stage is the largest number of
its routes that share one link (for a link of capacity ``c``, a port group of
``c`` cables, the number divided by ``c``); Table I reports its worst and its
average over the stages.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lft import hop_links
from .result import RouteSet

#: patterns ``a2a routes --pattern`` knows.
PATTERNS = ("shift",)

#: Largest ``stages x links`` block counted at once (bounds memory on 12-ary-3-trees).
_BLOCK = 1 << 22


@dataclass(frozen=True)
class PatternCongestion:
    """Congestion of every stage of a pattern; ``worst`` and ``average`` as in Zahavi et al. Table I."""

    pattern: str
    per_stage: np.ndarray

    @property
    def worst(self) -> float:
        return float(self.per_stage.max(initial=0.0))

    @property
    def average(self) -> float:
        return float(self.per_stage.mean()) if len(self.per_stage) else 0.0


def shift_congestion(n_hosts: int, capacity: np.ndarray, src: np.ndarray, dst: np.ndarray, links: np.ndarray,
                     weight: np.ndarray | None = None) -> PatternCongestion:
    """Congestion of the shift pattern for routes given as arrays.

    Route ``i`` runs ``src[i] -> dst[i]`` over the links ``links[i]`` (a row
    padded with ``-1``) and carries ``weight[i]`` (default 1) of its pair's
    shard; it belongs to stage ``(dst - src) mod N``.  Counted stage block by
    stage block with one ``bincount`` each, never per pair in Python.
    """
    n_links = len(capacity)
    stage = (np.asarray(dst) - np.asarray(src)) % n_hosts - 1          # 0 .. N-2
    hop = links >= 0
    hop_stage = np.broadcast_to(stage[:, None], links.shape)[hop]
    hop_link = links[hop]
    hop_weight = None if weight is None else np.broadcast_to(np.asarray(weight, float)[:, None], links.shape)[hop]
    per_stage = np.zeros(max(n_hosts - 1, 0))
    block = max(1, _BLOCK // max(n_links, 1))
    for first in range(0, n_hosts - 1, block):
        sel = (hop_stage >= first) & (hop_stage < first + block)
        rows = min(block, n_hosts - 1 - first)
        load = np.bincount((hop_stage[sel] - first) * n_links + hop_link[sel],
                           weights=None if hop_weight is None else hop_weight[sel], minlength=rows * n_links)
        per_stage[first:first + rows] = (load.reshape(rows, n_links) / capacity).max(1)
    return PatternCongestion("shift", per_stage)


def pattern_congestion(routes: RouteSet, pattern: str = "shift") -> PatternCongestion:
    """Congestion of ``pattern`` under the emitted ``routes`` (``a2a routes --pattern``); per cable when the
    routes were traced from forwarding tables (``routes.tables``), per link otherwise."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown pattern {pattern!r}; choose one of {', '.join(PATTERNS)}")
    if routes.tables is not None:
        return routes.tables.measure().shift
    t = routes.topology
    width = max((len(p.nodes) for p in routes.paths), default=1)
    nodes = np.full((len(routes.paths), width), -1, dtype=np.int64)
    for i, p in enumerate(routes.paths):
        nodes[i, :len(p.nodes)] = p.nodes
    src = np.array([p.src for p in routes.paths], dtype=np.int64)
    dst = np.array([p.dst for p in routes.paths], dtype=np.int64)
    weight = np.array([p.weight for p in routes.paths], dtype=float)
    return shift_congestion(t.n_hosts, t.capacity, src, dst, hop_links(t, nodes), weight)
