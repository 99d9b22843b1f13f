"""Routing baselines against MCF (Basu et al. §5.3 Figs. 8–9) and deadlock-free layers (§5.5).

* ``fig8``: GenKautz d=4 over N — every routing's all-to-all time (max link load,
  unit demand and capacity) normalised by the optimal link MCF, and a runtime
  panel (seconds to compute each routing; the link MCF solve for comparison).
* ``fig9``: GenKautz(81, 8) with random arcs disabled, ILP-disjoint at ε = 0.1.
* ``layers``: virtual layers LASH, LASH-sequential and DFSSSP need for the
  routes ``a2a routes`` writes, per topology and algorithm.

Each routing goes through :func:`a2a_compiler.routes.schedule.route_schedule`,
so the CSV has both the routes' own time (their weights, the paper's measure)
and the time of the chunked file.  The paper prints no numbers for Figs. 8–9,
only the claims in the ``paper`` column.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from a2a_compiler.errors import A2AError
from a2a_compiler.routes import route
from a2a_compiler.routes.schedule import chunk_routes, layer_schedule, route_schedule
from a2a_compiler.solve import solve
from a2a_compiler.topology.puncture import puncture
from a2a_compiler.topology.spec import from_spec

from ._common import figure, write_csv, write_png

ALGOS = ["sssp", "ewsp", "ilp-disjoint", "ilp-shortest", "pmcf-disjoint", "pmcf-shortest", "mcf-extp", "fptas"]
PAPER = {
    "sssp": "up to 1.6x worse than MCF", "ewsp": "similar to SSSP", "ilp-disjoint": "good but does not scale",
    "ilp-shortest": "good but does not scale", "pmcf-disjoint": "near optimal",
    "pmcf-shortest": "suboptimal on expanders", "mcf-extp": "optimal or near optimal",
    "fptas": "within (1-eps)^-3 by design", "mcf": "1 (reference)",
}
STYLE = {"sssp": ("tab:red", "o"), "ewsp": ("tab:orange", "s"), "ilp-disjoint": ("tab:purple", "^"),
         "ilp-shortest": ("tab:pink", "v"), "pmcf-disjoint": ("tab:green", "D"),
         "pmcf-shortest": ("tab:olive", "P"), "mcf-extp": ("tab:blue", "*"), "fptas": ("tab:gray", "x"),
         "mcf": ("black", "")}
#: Sweeps (full, quick): GenKautz sizes of Fig. 8; the topology and disabled-arc counts of Fig. 9.
FIG8_SIZES = ([16, 24, 32, 48, 64, 96, 128], [16, 32, 64])
FIG8_ILP_LIMIT = (300.0, 30.0)
FIG9_SPEC = "genkautz:81,8"
FIG9_REMOVED = ([0, 10, 20, 40, 60, 80], [0, 40])
FIG9_ILP_LIMIT = (300.0, 60.0)
HEADER = ["x", "algo", "mcf_time", "route_time", "file_time", "ratio", "ratio_file", "chunks", "chunks_exact",
          "optimal", "mip_gap", "seconds", "note", "paper"]


def _log(msg: str) -> None:
    import sys

    print(f"  {msg}", file=sys.stderr, flush=True)


def _measure(topology, x, algos, options, mcf_time, mcf_seconds) -> list[list]:
    """One CSV row per algorithm (and one for the MCF reference) on ``topology``."""
    rows = [[x, "mcf", mcf_time, mcf_time, mcf_time, 1.0, 1.0, None, None, None, None, mcf_seconds, "", PAPER["mcf"]]]
    for algo in algos:
        t0 = time.perf_counter()
        try:
            r = route_schedule(topology, algo, mcf_time=mcf_time, **options.get(algo, {}))
        except A2AError as exc:      # e.g. too many shortest paths: the paper's "as far as they finish"
            _log(f"{topology.spec} {algo}: {exc}")
            rows.append([x, algo, mcf_time, None, None, None, None, None, None, None, None,
                         time.perf_counter() - t0, str(exc), PAPER[algo]])
            continue
        rs = r.routes
        rows.append([x, algo, mcf_time, rs.alltoall_time, r.predicted_time, rs.alltoall_time / mcf_time,
                     r.predicted_time / mcf_time, r.schedule.chunks_per_shard, r.chunks_exact, rs.optimal, rs.mip_gap,
                     r.timings["route"], "", PAPER[algo]])
        _log(f"{topology.spec} {algo}: ratio {rs.alltoall_time / mcf_time:.4f} (file {r.predicted_time / mcf_time:.4f})"
             f" in {r.timings['route']:.1f} s" + ("" if rs.optimal is None else f", optimal {rs.optimal}"))
    return rows


def _mcf(topology) -> tuple[float, float]:
    t0 = time.perf_counter()
    return solve(topology, None, "mcf-decomp").a2a_time, time.perf_counter() - t0


def _plot_ratios(ax, rows, algos, xlabel, title):
    for algo in algos:
        pts = [(r[0], r[5], r[9]) for r in rows if r[1] == algo and r[5] is not None]
        if not pts:
            continue
        color, marker = STYLE[algo]
        xs, ys, opt = zip(*pts)
        ax.plot(xs, ys, color=color, marker=marker, label=algo, lw=1.2, ms=5)
        unproved = [(x, y) for x, y, o in pts if o is False]
        if unproved:   # ILP incumbents not proved optimal: hollow
            ax.plot(*zip(*unproved), ls="", marker=marker, ms=9, mfc="none", mec=color)
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("all-to-all time / link MCF")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)


def fig8(out_dir: Path, quick: bool) -> None:
    """GenKautz d=4: time / MCF for every routing over N, and the time to compute each."""
    sizes, limit = FIG8_SIZES[quick], FIG8_ILP_LIMIT[quick]
    options = {"ilp-disjoint": {"time_limit": limit}, "ilp-shortest": {"time_limit": limit},
               "fptas": {"eps": 0.05}}
    rows = []
    for n in sizes:
        topology = from_spec(f"genkautz:{n},4")
        mcf_time, mcf_seconds = _mcf(topology)
        rows += _measure(topology, n, ALGOS, options, mcf_time, mcf_seconds)
    write_csv(out_dir / "fig8.csv", HEADER, rows)
    fig, axes = figure(2, 1, width=5.6, height=4.0)
    _plot_ratios(axes[0][0], rows, ALGOS, "N (GenKautz, d = 4)", "Fig. 8: path schemes / link MCF")
    ax = axes[0][1]
    for algo in ["mcf"] + ALGOS:
        pts = [(r[0], r[11]) for r in rows if r[1] == algo and r[11] is not None and (r[5] is not None or algo == "mcf")]
        if pts:
            color, marker = STYLE[algo]
            ax.plot(*zip(*pts), color=color, marker=marker or "o", label="link MCF (mcf-decomp)" if algo == "mcf"
                    else algo, lw=1.2, ms=5, ls="--" if algo == "mcf" else "-")
    ax.set_yscale("log")
    ax.set_xlabel("N (GenKautz, d = 4)")
    ax.set_ylabel("seconds to compute")
    ax.set_title(f"runtime (ILP time limit {limit:g} s)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, ncol=2)
    write_png(fig, out_dir / "fig8.png")


def fig9(out_dir: Path, quick: bool) -> None:
    """GenKautz(81, 8) with K random arcs disabled (seed 0); ILP-disjoint with tolerance eps = 0.1."""
    removed = FIG9_REMOVED[quick]
    algos = ["sssp", "ewsp", "ilp-disjoint", "pmcf-disjoint", "pmcf-shortest", "mcf-extp", "fptas"]
    options = {"ilp-disjoint": {"eps": 0.1, "time_limit": FIG9_ILP_LIMIT[quick]}, "fptas": {"eps": 0.05}}
    rows = []
    base = from_spec(FIG9_SPEC)
    for k in removed:
        topology = puncture(base, remove_links=k, seed=0) if k else base
        mcf_time, mcf_seconds = _mcf(topology)
        rows += _measure(topology, k, algos, options, mcf_time, mcf_seconds)
    write_csv(out_dir / "fig9.csv", HEADER, rows)
    fig, axes = figure(1, 1, width=6.0, height=4.0)
    _plot_ratios(axes[0][0], rows, algos, f"arcs disabled (of {base.n_links}; seed 0)",
                 f"Fig. 9: {FIG9_SPEC}, ILP-disjoint at eps = 0.1")
    write_png(fig, out_dir / "fig9.png")


LAYER_CASES = [
    ("bipartite:4", ["sssp", "ewsp", "ilp-disjoint", "mcf-extp"]),
    ("hypercube:4", ["dor", "sssp", "ewsp", "mcf-extp", "fptas"]),
    ("torus:3x3x3", ["dor", "sssp", "ewsp", "ilp-disjoint", "mcf-extp", "pmcf-disjoint", "fptas"]),
    ("torus:4x4", ["dor", "sssp", "ewsp", "mcf-extp"]),
    ("genkautz:64,4", ["sssp", "ewsp", "ilp-disjoint", "mcf-extp", "pmcf-disjoint", "fptas"]),
]
SCHEMES = ["lash", "lash-seq", "dfsssp"]


def layers(out_dir: Path, quick: bool) -> None:
    """Virtual layers each deadlock scheme needs for the chunked routes of ``a2a routes``."""
    cases = LAYER_CASES[:3] if quick else LAYER_CASES
    rows = []
    for spec, algos in cases:
        topology = from_spec(spec)
        for algo in algos:
            schedule, _ = chunk_routes(route(topology, algo))
            counts = {s: int(max(r.layer for r in layer_schedule(schedule, s).routes)) + 1 for s in SCHEMES}
            rows.append([spec, algo, len(schedule.routes)] + [counts[s] for s in SCHEMES] + ["LASH-seq <= 4"])
            _log(f"{spec} {algo}: {counts}")
    write_csv(out_dir / "layers.csv", ["topology", "algo", "routes"] + SCHEMES + ["paper"], rows)
    fig, axes = figure(1, 1, width=8.0, height=3.8)
    ax = axes[0][0]
    labels = [f"{r[0].split(':')[0][:5]}:{r[0].split(':')[1]}\n{r[1]}" for r in rows]
    x = np.arange(len(rows))
    for i, s in enumerate(SCHEMES):
        ax.bar(x + (i - 1) * 0.27, [r[3 + i] for r in rows], 0.27, label=s)
    ax.axhline(4, color="black", lw=0.8, ls="--", label="paper: LASH-seq <= 4")
    ax.set_xticks(x, labels, fontsize=5.5, rotation=90)
    ax.set_ylabel("virtual layers")
    ax.set_title("deadlock-free layers for the routes of a2a routes")
    ax.legend(fontsize=7)
    write_png(fig, out_dir / "layers.png")


FIGURES = {
    "fig8": (fig8, "routing baselines / link MCF on GenKautz d=4 over N, and their runtime (Basu Fig. 8)"),
    "fig9": (fig9, "routing baselines / link MCF on GenKautz(81,8) with arcs disabled, ILP eps=0.1 (Fig. 9)"),
    "layers": (layers, "virtual layers needed by LASH, LASH-sequential and DFSSSP (Basu section 5.5)"),
}
