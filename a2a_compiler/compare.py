"""Compare topologies by their optimal all-to-all time against the Theorem 1 bound (Basu et al. §5.4, Fig. 10).

For every topology the certified optimal concurrent flow ``F`` is solved
(:func:`a2a_compiler.solve.solve`, ``mcf-decomp`` by default); the all-to-all
time is ``1/F`` link-times for unit shards (``lp_time``, certified).  Theorem 1
bounds the time of *any* d-regular topology on N nodes from below
(:func:`a2a_compiler.topology.metrics.thm1_lower_bound`, eq. 25), so
``thm1_ratio = bound / time`` (<= 1) says how close a topology comes to the best
conceivable one of its size and degree: GenKautz graphs approach 1, tori do not.
Rows are ranked by it, so topologies of different sizes compare fairly.

>>> from a2a_compiler.compare import compare
>>> c = compare(["genkautz:64,4", "torus:8x8"])                 # doctest: +SKIP
>>> [(r.spec, round(r.thm1_ratio, 3)) for r in c.rows]         # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .fabric import Fabric
from .topology.metrics import thm1_lower_bound
from .topology.model import Topology


@dataclass(frozen=True)
class ComparisonRow:
    """One topology: size, degree, certified optimal all-to-all time and its Theorem 1 bound."""

    spec: str
    hosts: int
    degree_max: int
    lp_time: float
    thm1_time: float | None
    gap: float
    method: str
    solve_seconds: float
    throughput_bound_GBps: float | None

    @property
    def thm1_ratio(self) -> float | None:
        """The Theorem 1 bound over the all-to-all time (<= 1; 1 = the best any topology with this N and
        degree can do), ``None`` where the bound is undefined."""
        return None if self.thm1_time is None else self.thm1_time / self.lp_time

    def to_json_dict(self) -> dict:
        return {"spec": self.spec, "hosts": self.hosts, "degree_max": self.degree_max, "lp_time": self.lp_time,
                "thm1_time": self.thm1_time, "thm1_ratio": self.thm1_ratio, "gap": self.gap, "method": self.method,
                "solve_seconds": self.solve_seconds, "throughput_bound_GBps": self.throughput_bound_GBps}


@dataclass(frozen=True)
class Comparison:
    """Rows in the order given, ranked by :attr:`ComparisonRow.thm1_ratio`: topologies of different
    sizes and degrees are compared by how close each comes to the Theorem 1 bound of its own N and
    degree, never by raw times (a larger N or a lower degree is slower for every topology)."""

    rows: tuple[ComparisonRow, ...]
    fabric: Fabric

    @property
    def ranked(self) -> list[ComparisonRow]:
        """Rows with a Theorem 1 bound, highest :attr:`~ComparisonRow.thm1_ratio` first (ties: given order)."""
        return sorted((r for r in self.rows if r.thm1_ratio is not None), key=lambda r: -r.thm1_ratio)

    @property
    def best(self) -> ComparisonRow | None:
        """The row closest to its Theorem 1 bound (``None`` when no row has one)."""
        return next(iter(self.ranked), None)

    def to_json_dict(self) -> dict:
        best = self.best
        rank = {id(r): i + 1 for i, r in enumerate(self.ranked)}
        return {"fabric": self.fabric.to_json_dict(), "best": None if best is None else best.spec,
                "rows": [{**r.to_json_dict(), "rank": rank.get(id(r))} for r in self.rows]}


def compare_row(topology: Topology, fabric: Fabric | None = None, method: str = "mcf-decomp",
                progress=None, **options) -> ComparisonRow:
    """Solve one topology and set its time beside its Theorem 1 bound."""
    from .solve import solve

    fabric = fabric or Fabric()
    sol = solve(topology, fabric, method, progress=progress, **options)
    degree = int(topology.out_degree()[: topology.n_hosts].max())
    tb = sol.throughput_bound()
    return ComparisonRow(topology.spec, topology.n_hosts, degree, sol.lp_time, thm1_lower_bound(topology),
                         sol.gap, method, sol.solve_seconds, None if tb is None else tb / 1e9)


def compare(topologies, fabric: Fabric | None = None, method: str = "mcf-decomp", progress=None,
            **options) -> Comparison:
    """:func:`compare_row` for each topology (a :class:`Topology` or a spec string), in order."""
    from .topology.spec import from_spec

    fabric = fabric or Fabric()
    rows = []
    for i, t in enumerate(topologies):
        topo = t if isinstance(t, Topology) else from_spec(str(t))
        if progress:
            progress(f"compare: {topo.spec} ({i + 1} of {len(topologies)})")
        rows.append(compare_row(topo, fabric, method, progress=progress, **options))
    return Comparison(tuple(rows), fabric)


def plot(comparison: Comparison, path) -> None:
    """Bar chart of each topology's Theorem 1 bound over its all-to-all time (thm1_ratio; Fig. 10, right,
    inverted so that higher is better), written atomically as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .files import write_png

    rows = comparison.rows
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 1.5), 3.6))
    values = [r.thm1_ratio if r.thm1_ratio is not None else math.nan for r in rows]
    colors = ["tab:blue" if r is comparison.best else "tab:gray" for r in rows]
    ax.bar(range(len(rows)), values, color=colors)
    for i, (r, v) in enumerate(zip(rows, values)):
        ax.text(i, 0 if math.isnan(v) else v, "no bound" if math.isnan(v) else f"{v:.3f}", ha="center",
                va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="Theorem 1 bound")
    ax.set_xticks(range(len(rows)), [f"{r.spec}\nN={r.hosts}, d={r.degree_max}" for r in rows], fontsize=7)
    ax.set_ylabel("Thm. 1 bound / all-to-all time")
    ax.set_title("optimal all-to-all time against the Theorem 1 bound of its N and degree", fontsize=9)
    ax.legend(fontsize=7, loc="lower left")
    write_png(fig, path)
