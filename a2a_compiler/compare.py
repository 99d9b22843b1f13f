"""Compare topologies by their optimal all-to-all time against the Theorem 1 bound (Basu et al. §5.4, Fig. 10).

For every topology the certified optimal concurrent flow ``F`` is solved
(:func:`a2a_compiler.solve.solve`, ``mcf-decomp`` by default); the all-to-all
time is ``1/F`` link-times for unit shards.  Theorem 1 bounds the time of *any*
d-regular topology on N nodes from below
(:func:`a2a_compiler.topology.metrics.thm1_lower_bound`, eq. 25), so
``ratio = time / bound`` says how far a topology is from the best conceivable
one of its size and degree: GenKautz graphs approach 1, tori do not.

>>> from a2a_compiler.compare import compare
>>> c = compare(["genkautz:64,4", "torus:8x8"])                 # doctest: +SKIP
>>> [(r.spec, round(r.ratio, 3)) for r in c.rows]              # doctest: +SKIP
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
    degree: int
    alltoall_time: float
    thm1_time: float | None
    gap: float
    method: str
    solve_seconds: float
    throughput_bound_GBps: float | None

    @property
    def ratio(self) -> float | None:
        """All-to-all time over the Theorem 1 bound (>= 1), ``None`` where the bound is undefined."""
        return None if self.thm1_time is None else self.alltoall_time / self.thm1_time

    def to_json_dict(self) -> dict:
        return {"spec": self.spec, "hosts": self.hosts, "degree": self.degree, "alltoall_time": self.alltoall_time,
                "thm1_time": self.thm1_time, "ratio": self.ratio, "gap": self.gap, "method": self.method,
                "solve_seconds": self.solve_seconds, "throughput_bound_GBps": self.throughput_bound_GBps}


@dataclass(frozen=True)
class Comparison:
    """Rows in the order given; :attr:`best` is the row with the smallest all-to-all time."""

    rows: tuple[ComparisonRow, ...]
    fabric: Fabric

    @property
    def best(self) -> ComparisonRow:
        return min(self.rows, key=lambda r: r.alltoall_time)

    def to_json_dict(self) -> dict:
        return {"fabric": self.fabric.to_json_dict(), "best": self.best.spec,
                "rows": [r.to_json_dict() for r in self.rows]}


def compare_row(topology: Topology, fabric: Fabric | None = None, method: str = "mcf-decomp",
                progress=None, **options) -> ComparisonRow:
    """Solve one topology and set its time beside its Theorem 1 bound."""
    from .solve import solve

    fabric = fabric or Fabric()
    sol = solve(topology, fabric, method, progress=progress, **options)
    degree = int(topology.out_degree()[: topology.n_hosts].max())
    tb = sol.throughput_bound()
    return ComparisonRow(topology.spec, topology.n_hosts, degree, sol.a2a_time, thm1_lower_bound(topology),
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
    """Bar chart of each topology's all-to-all time normalised by its Theorem 1 bound (Fig. 10, right),
    written atomically as PNG."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .files import atomic_write

    rows = comparison.rows
    fig, ax = plt.subplots(figsize=(max(4.0, 1.2 * len(rows) + 1.5), 3.6))
    values = [r.ratio if r.ratio is not None else math.nan for r in rows]
    colors = ["tab:blue" if r is comparison.best else "tab:gray" for r in rows]
    ax.bar(range(len(rows)), values, color=colors)
    for i, (r, v) in enumerate(zip(rows, values)):
        ax.text(i, 0 if math.isnan(v) else v, "no bound" if math.isnan(v) else f"{v:.3f}", ha="center",
                va="bottom", fontsize=8)
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="Theorem 1 bound")
    ax.set_xticks(range(len(rows)), [f"{r.spec}\nN={r.hosts}, d={r.degree}" for r in rows], fontsize=7)
    ax.set_ylabel("all-to-all time / Thm. 1 bound")
    ax.set_title("optimal all-to-all time relative to the Theorem 1 bound", fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    buf = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    atomic_write(path, buf.getvalue())
