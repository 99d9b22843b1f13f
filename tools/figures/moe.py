"""Mixture-of-experts all-to-allv study: expert-popularity skew from none to strong (issue #19).

An expert-parallel MoE layer sends rank ``d`` the tokens its router gave ``d``'s
experts; the demand matrices here are :func:`a2a_compiler.demand.zipf_demand`
(8 ranks, 2 experts each, 4096 tokens per rank, top-2, expert popularity
``∝ (1 + r)^-alpha``, seeded expert placement), from ``alpha = 0`` (no skew,
sampling noise only) to ``alpha = 2`` (one expert takes most tokens).  Four ways
to run each matrix:

* ``demand-aware``: MCF-extP compiled for the matrix (``a2a compile --demand``);
* ``uniform reused``: the plain all-to-all MCF-extP schedule, its routes
  unchanged, every pair's bytes split over them (one schedule for every batch);
* ``SSSP``: the fabric's default routes (one destination-based path per pair);
* ``native``: ``MPI_Alltoallv`` on those default routes.

``moe-model`` prices all four by the cost model (no root needed) for several
topologies and seeds; ``moe`` measures them on the emulated testbed
(bipartite:4, NIC forwarding, 20 Mbit/s, 1 MiB per unit of demand), with the
bound ``1/F(D)``, byte checks and link bytes against prediction.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

from a2a_compiler.compiler import compile as compile_schedule
from a2a_compiler.demand import zipf_demand
from a2a_compiler.fabric import Fabric
from a2a_compiler.routes import route
from a2a_compiler.solve import solve
from a2a_compiler.topology.spec import from_spec
from a2a_compiler.verify.performance import program_performance
from a2a_compiler.verify.topology_check import link_capacities

from ._common import figure, write_csv, write_png

REPO = Path(__file__).resolve().parents[2]
#: Expert-popularity skews, none to strong.
ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0)
#: Model sweep: topologies (NIC forwarding, unlimited hosts) and expert placements (seeds).
MODEL_SPECS = ("bipartite:4", "hypercube:3", "torus:3x3x3")
SEEDS = (1, 2, 3)
#: The testbed of the acceptance: bipartite:4, NIC forwarding, 20 Mbit/s links, 1 MiB per unit of demand.
BENCH = ("bipartite:4", Fabric(link_bw=20e6 / 8, forwarding="nic"), 1 << 20)
LABELS = ("demand-aware", "uniform reused", "SSSP", "native")
MODEL_CSV = ["topology", "alpha", "seed", "receive_skew", "bound_time", "demand_aware_time", "uniform_reused_time",
             "sssp_time", "fraction_demand_aware", "fraction_uniform_reused", "fraction_sssp", "sssp_over_ours"]
BENCH_CSV = ["alpha", "seed", "label", "size_bytes", "time_s", "measured_MBps", "predicted_MBps", "bound_MBps",
             "fraction_of_bound", "ratio_to_native", "verified", "routes_followed", "busiest_meas_over_pred",
             "cpu_busy"]


def _log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


def _demand(n: int, alpha: float, seed: int):
    return zipf_demand(n, alpha, seed=seed)


def model_row(spec: str, alpha: float, seed: int, fabric: Fabric | None = None) -> list:
    """The four ways priced by the cost model for one matrix: times in link-times and fractions of the bound."""
    topo = from_spec(spec)
    fabric = fabric or Fabric(forwarding="nic")
    demand = _demand(topo.n_hosts, alpha, seed)
    bound = solve(topo, fabric, "mcf-decomp", demand=demand).lp_time
    ours = compile_schedule(topo, "mpi", fabric=fabric, demand=demand)
    caps = link_capacities(topo)
    reused = ours.uniform_reused_time
    sssp = route(topo, "sssp", fabric, demand=demand).alltoall_time
    mine = program_performance(ours.program, fabric, caps).predicted_time
    return [spec, alpha, seed, demand.stats()["receive_skew"], bound, mine, reused, sssp, bound / mine,
            bound / reused, bound / sssp, sssp / mine]


def moe_model(out_dir: Path, quick: bool) -> None:
    specs, seeds = (MODEL_SPECS[:1], SEEDS[:1]) if quick else (MODEL_SPECS, SEEDS)
    rows = []
    for spec in specs:
        for alpha in ALPHAS:
            for seed in seeds:
                rows.append(model_row(spec, alpha, seed))
                _log(f"{spec} alpha {alpha:g} seed {seed}: " + ", ".join(
                    f"{k} {v:.3f}" for k, v in zip(("ours", "reused", "sssp"), rows[-1][8:11])))
    write_csv(out_dir / "moe-model.csv", MODEL_CSV, rows)
    fig, axes = figure(ncols=len(specs), width=3.8, height=3.3)
    for ax, spec in zip(axes[0], specs):
        mine = [r for r in rows if r[0] == spec]
        for col, label in ((8, "demand-aware"), (9, "uniform reused"), (10, "SSSP")):
            mean = [statistics.mean(r[col] for r in mine if r[1] == a) for a in ALPHAS]
            lo = [min(r[col] for r in mine if r[1] == a) for a in ALPHAS]
            hi = [max(r[col] for r in mine if r[1] == a) for a in ALPHAS]
            line, = ax.plot(ALPHAS, mean, "o-", ms=3, label=label)
            ax.fill_between(ALPHAS, lo, hi, color=line.get_color(), alpha=0.15, lw=0)
        ax.set_ylim(0, 1.05)
        ax.set_title(f"{spec} (model, {len(seeds)} placement(s))", fontsize=9)
        ax.set_xlabel("expert-popularity skew alpha", fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylabel("1/F(D) / predicted time", fontsize=8)
    axes[0][-1].legend(fontsize=7, loc="lower left")
    fig.suptitle("MoE all-to-allv, cost model: fraction of the demand's MCF bound", fontsize=9)
    write_png(fig, out_dir / "moe-model.png")


def moe(out_dir: Path, quick: bool) -> None:
    from runtimes.testbed.bench import bench

    spec, fabric, size = BENCH
    topo = from_spec(spec)
    work = out_dir / "moe-schedules"
    work.mkdir(exist_ok=True)
    uniform = REPO / "schedules" / "bipartite-4-mcf-extp.mpi.xml"
    alphas, iters = ((0.0, 1.0, 2.0), 2) if quick else (ALPHAS, 10)
    rows = []
    for alpha in alphas:
        demand = _demand(topo.n_hosts, alpha, SEEDS[0])
        csv = work / f"zipf-{alpha:g}.csv"
        csv.write_text(demand.to_csv())
        aware = work / f"moe-{alpha:g}.mpi.xml"
        cmd = [sys.executable, "-m", "a2a_compiler", "compile", spec, "--emit", "mpi", "--forwarding", "nic",
               "--link-bw", "20Mbps", "--demand", str(csv), "-q", "-o", str(aware)]
        p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
        if p.returncode not in (0, 1):  # 1: written below the default fidelity target (warned)
            raise SystemExit(f"reproduce: {' '.join(cmd[2:])} failed: {p.stderr.strip()}")
        _log(f"alpha {alpha:g}: bench {aware.name}, {uniform.name} reused, sssp, native (1 MiB per unit)")
        result = bench(topo, fabric, [aware, uniform], native=True, default_routes=True, sizes=[size],
                       iters=iters, warmup=1, demand=demand)
        for w in result.warnings + result.failed:
            _log(f"warning: {w}")
        native = {r["size_bytes"]: r["algbw_GBps"] for r in result.results if r["item"] == "native"}
        for r, label in zip(result.results, LABELS):
            bl = r["busiest_link"]
            rows.append([alpha, SEEDS[0], label, r["size_bytes"], r["time_median_s"], r["algbw_GBps"] * 1e3,
                         r["predicted_algbw_GBps"] * 1e3, r["throughput_bound_GBps"] * 1e3, r["bound_fraction"],
                         r["algbw_GBps"] / native[r["size_bytes"]], r["verified"], r["routes_followed"],
                         bl["measured"] / max(bl["predicted"], 1), r["cpu"]["busy_fraction"]])
    write_csv(out_dir / "moe.csv", BENCH_CSV, rows)
    fig, axes = figure(ncols=2, width=4.2, height=3.3)
    for ax, col, ylabel in ((axes[0][0], 8, "measured throughput / MCF bound 1/F(D)"),
                            (axes[0][1], 9, "measured throughput / native MPI_Alltoallv")):
        for label in LABELS:
            pts = [(r[0], r[col]) for r in rows if r[2] == label]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-", ms=3, label=label)
        ax.set_xlabel("expert-popularity skew alpha", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
    axes[0][0].set_ylim(0, 1.05)
    axes[0][1].axhline(1.5, color="k", ls=":", lw=1)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle("MoE all-to-allv on the testbed: bipartite:4, NIC forwarding, 20 Mbit/s, 1 MiB per unit", fontsize=9)
    write_png(fig, out_dir / "moe.png")


FIGURES = {
    "moe-model": (moe_model, "MoE all-to-allv, cost model: demand-aware vs uniform reused vs SSSP over skew"),
    "moe": (moe, "MoE all-to-allv on the testbed (root): bipartite:4 NIC, skew none -> strong, vs MPI_Alltoallv"),
}
