"""Solver scale and topology choice (Basu et al. §5.3 Fig. 7, §5.4 Fig. 10).

* ``fig7``: seconds to compute an all-to-all schedule on GenKautz d=4 against N
  for the link MCF (eqs. 1–5), MCF-decomp (master LP, eqs. 6–9, quotiented by
  the topology's automorphisms, with its certificate), the same without the
  symmetry quotient, pMCF over link-disjoint paths, and the routing engines
  ILP-disjoint (proved optimal) and FPTAS (ε = 0.05).  Each run is a fresh
  process with a timeout (``tools/bench_solve.py``'s runner), so a point is
  plotted only where the method finished.  The plot shows CPU seconds (the
  machine is shared; wall seconds, peak memory and the load average are in the
  CSV).  The paper's own numbers for Fig. 7 are the ones its text states.
* ``fig7-asym``: the same measurement for MCF-decomp on fabrics without any
  automorphism (Jellyfish d=4, GenKautz d=4 minus 2 random cables) beside
  GenKautz's quotient (issue #22).
* ``fig10``: left, GenKautz d=4's certified optimal all-to-all time over the
  Theorem 1 bound (eq. 25) against N; right, GenKautz, Xpander, Jellyfish and
  2-D tori of about the same N, each normalised by its own bound
  (:func:`a2a_compiler.compare.compare`; random families averaged over seeds).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from a2a_compiler.compare import compare
from a2a_compiler.progress import Progress

from ._common import figure, write_csv, write_png

# --------------------------------------------------------------------- Fig. 7
#: series -> (kind, options, sizes, quick sizes, colour, marker, label)
SERIES = {
    "mcf": ("ours", {"method": "mcf"}, [16, 24, 32, 48, 64, 100], [16, 24, 32],
            "tab:red", "s", "MCF original (eqs. 1-5)"),
    "mcf-decomp": ("ours", {"method": "mcf-decomp"}, [16, 32, 64, 128, 256, 500, 512, 1000],
                   [16, 32, 64, 128, 256, 1000], "tab:blue", "o", "MCF-decomp (symmetry quotient)"),
    "mcf-decomp-plain": ("ours", {"method": "mcf-decomp", "symmetry": "off"}, [16, 32, 64, 128, 256, 512],
                         [16, 32, 64, 128, 256], "tab:cyan", "o", "MCF-decomp, plain master LP"),
    "pmcf-disjoint": ("ours", {"method": "pmcf", "paths": "disjoint"}, [16, 32, 64, 128, 256],
                      [16, 32, 64], "tab:green", "D", "pMCF (disjoint paths)"),
    "ilp-disjoint": ("route", {"engine": "ilp-disjoint"}, [16, 24, 32, 44, 64, 96, 128], [16, 24],
                     "tab:purple", "^", "ILP-disjoint (proved optimal)"),
    "fptas": ("route", {"engine": "fptas", "eps": 0.05}, [16, 32, 64, 128, 256, 512], [16, 32, 64],
              "tab:gray", "x", "FPTAS (eps = 0.05)"),
}
#: Fig. 7 without symmetry: MCF-decomp on fabrics with no automorphism beside GenKautz's quotient
#: (issue #22); an options' ``spec`` is the fabric's template (default ``genkautz:{n},4``).
ASYM_SERIES = {
    "mcf-decomp": SERIES["mcf-decomp"][:2] + ([16, 32, 64, 128, 256], [16, 32, 64]) + SERIES["mcf-decomp"][4:],
    "jellyfish": ("ours", {"method": "mcf-decomp", "spec": "jellyfish:{n},4,seed=1"}, [16, 32, 64, 128, 256],
                  [16, 32, 64], "tab:orange", "v", "MCF-decomp, Jellyfish d = 4 (seed 1)"),
    "punctured": ("ours", {"method": "mcf-decomp", "remove_links": 2, "seed": 1}, [16, 32, 64, 128, 256],
                  [16, 32, 64], "tab:brown", "<", "MCF-decomp, GenKautz d = 4 minus 2 cables (seed 1)"),
    "jellyfish-priced": ("ours", {"method": "mcf-decomp", "pricing": "on", "spec": "jellyfish:{n},4,seed=1"},
                         [16, 32, 64, 128, 256, 512], [16, 32, 64], "tab:red", "v",
                         "MCF-decomp --pricing on, Jellyfish d = 4 (seed 1)"),
    "punctured-priced": ("ours", {"method": "mcf-decomp", "pricing": "on", "remove_links": 2, "seed": 1},
                         [16, 32, 64, 128, 256], [16, 32, 64], "tab:pink", "<",
                         "MCF-decomp --pricing on, GenKautz d = 4 minus 2 cables"),
}
#: What the paper's text states about Fig. 7 (it prints no table): (series, N, seconds or None, note).
PAPER_FIG7 = [
    ("mcf-decomp", 1000, 2400.0, "40 minutes at N = 1000, child LPs in parallel on N cores"),
    ("mcf", 100, None, "MCF-original finds no solution for N > 100 in reasonable time"),
    ("ilp-disjoint", 44, None, "ILP-disjoint generates optimal schedules only up to N = 44"),
    ("SCCL", 16, 1e4, "SCCL: no schedule for N = 16 within 10^4 s"),
    ("TACCL", 32, 1800.0, "TACCL: over 30 minutes for N = 32"),
]
#: Wall seconds each run may take (quick, full); the ILP's own time limit is this too.
FIG7_TIMEOUT = (240.0, 600.0)
FIG7_HEADER = ["series", "N", "wall_s", "cpu_s", "peak_rss_GB", "alltoall_time", "gap", "optimal", "symmetry_order",
               "status", "load", "paper_s", "paper"]


def _bench():
    """``tools/bench_solve.py``'s subprocess runner (tools/ is on sys.path under tools/reproduce.py)."""
    import bench_solve

    return bench_solve


def _log(msg: str) -> None:
    import sys

    print(f"  {msg}", file=sys.stderr, flush=True)


def fig7(out_dir: Path, quick: bool) -> None:
    """Solve time against N on GenKautz d=4, every method in its own process with a timeout."""
    _solve_times(out_dir, quick, "fig7", SERIES, PAPER_FIG7, "N (GenKautz, d = 4)",
                 "Fig. 7: time to compute the schedule; stars: the paper's stated points")


def fig7_asym(out_dir: Path, quick: bool) -> None:
    """Fig. 7 without symmetry: MCF-decomp on Jellyfish and on GenKautz minus 2 cables against N."""
    _solve_times(out_dir, quick, "fig7-asym", ASYM_SERIES, [], "N (d = 4)",
                 "Fig. 7 without symmetry: MCF-decomp, certified")


def _solve_times(out_dir: Path, quick: bool, stem: str, series: dict, paper_points: list, xlabel: str,
                 title: str) -> None:
    """Measure and plot every series of ``series`` (:data:`SERIES`' shape) into ``stem``.csv/.png."""
    bench = _bench()
    timeout = FIG7_TIMEOUT[not quick]
    rows = []
    for name, (kind, options, sizes, quick_sizes, *_style) in series.items():
        for n in quick_sizes if quick else sizes:
            opts = dict(options)
            spec = opts.pop("spec", "genkautz:{n},4").format(n=n)
            if name == "ilp-disjoint":
                opts["time_limit"] = timeout
            r = bench.measure(kind, spec, options=opts, timeout=timeout + 60, quiet=True)
            paper = next((p for p in paper_points if p[0] == name and p[1] == n), None)
            if "timeout" in r:
                rows.append([name, n, None, None, None, None, None, None, None, f"no result in {timeout:g} s",
                             r["load_before"], paper and paper[2], paper and paper[3]])
                _log(f"{stem} {name} N={n}: timeout")
                break                                       # larger N would not finish either
            solved = r.get("optimal") is not False          # an ILP not proved optimal did not finish
            rows.append([name, n, r["wall_s"], r["cpu_s"], r["peak_rss_GB"], r["alltoall_time"], r.get("gap"),
                         r.get("optimal"), (r.get("symmetry") or {}).get("order"),
                         "finished" if solved else "time limit, not proved optimal", r["load_before"],
                         paper and paper[2], paper and paper[3]])
            _log(f"{stem} {name} N={n}: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU, {r['peak_rss_GB']:.2f} GB")
            if not solved:
                break
    for name, n, seconds, note in paper_points:
        if not any(r[0] == name and r[1] == n for r in rows):
            rows.append([name, n, None, None, None, None, None, None, None, "paper only", None, seconds, note])
    write_csv(out_dir / f"{stem}.csv", FIG7_HEADER, rows)

    fig, axes = figure(1, 1, width=6.4, height=4.4)
    ax = axes[0][0]
    for name, (_, _, _, _, color, marker, label) in series.items():
        pts = [(r[1], r[3]) for r in rows if r[0] == name and r[3] is not None and r[9] == "finished"]
        if pts:
            ax.plot(*zip(*pts), color=color, marker=marker, label=label, lw=1.2, ms=5)
    for name, n, seconds, note in paper_points:
        color = series[name][4] if name in series else "black"
        if seconds is not None:
            ax.plot([n], [seconds], ls="", marker="*", ms=11, mfc="none", mec=color)
            ax.annotate(f"paper: {name}" + ("" if name in series else " (> this)"), (n, seconds), fontsize=6,
                        xytext=(-10, 6), textcoords="offset points")
        else:    # a largest N the paper's method reached: a dotted line
            ax.axvline(n, color=color, lw=0.8, ls=":")
            ax.annotate(f"paper: {name} limit", (n, 0.02), xycoords=("data", "axes fraction"), fontsize=6,
                        rotation=90, color=color, xytext=(2, 0), textcoords="offset points")
    ax.set_xlim(12, 1500)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("CPU seconds (this 2-core machine)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    write_png(fig, out_dir / f"{stem}.png")


# -------------------------------------------------------------------- Fig. 10
#: Right panel: sizes and the spec of each family at (about) that size.
FAMILIES = {
    "GenKautz": lambda n, seed: f"genkautz:{n},4",
    "Xpander": lambda n, seed: f"xpander:4,{round(n / 5)},seed={seed}",
    "Jellyfish": lambda n, seed: f"jellyfish:{n},4,seed={seed}",
    "2-D torus": lambda n, seed: f"torus:{math.isqrt(n)}x{math.isqrt(n)}",
}
RANDOM = ("Xpander", "Jellyfish")
#: Sweeps (quick, full): the left panel's N, the right panel's size classes, the random families' seeds.
FIG10_LEFT = ([16, 32, 64, 100, 128, 250], [16, 32, 64, 100, 128, 200, 250, 256, 400, 500, 1000])
FIG10_CLASSES = ([64, 100], [64, 100, 144, 256])
FIG10_SEEDS = ([1], [1, 2, 3])
FIG10_HEADER = ["panel", "family", "N_class", "spec", "hosts", "alltoall_time", "thm1_time", "ratio", "gap", "paper"]
PAPER_FIG10 = {
    "GenKautz": "close to the bound, ratio approaching 1 for large N",
    "Xpander": "GenKautz about 10% better",
    "Jellyfish": "GenKautz about 10% better",
    "2-D torus": "GenKautz about 2.4x lower latency for large N",
}


def fig10(out_dir: Path, quick: bool) -> None:
    """GenKautz d=4 against the Theorem 1 bound over N, and against expanders and 2-D tori."""
    left, classes, seeds = (sweep[not quick] for sweep in (FIG10_LEFT, FIG10_CLASSES, FIG10_SEEDS))
    rows = []
    progress = Progress(interval=10.0)
    for r in compare([f"genkautz:{n},4" for n in left], progress=progress).rows:
        rows.append(["left", "GenKautz", r.hosts, r.spec, r.hosts, r.lp_time, r.thm1_time, 1 / r.thm1_ratio, r.gap,
                     PAPER_FIG10["GenKautz"]])
    for n in classes:
        for family, spec_of in FAMILIES.items():
            specs = sorted({spec_of(n, s) for s in (seeds if family in RANDOM else [0])})
            for r in compare(specs, progress=progress).rows:
                rows.append(["right", family, n, r.spec, r.hosts, r.lp_time, r.thm1_time, 1 / r.thm1_ratio, r.gap,
                             PAPER_FIG10[family]])
    write_csv(out_dir / "fig10.csv", FIG10_HEADER, rows)

    fig, axes = figure(2, 1, width=5.0, height=3.8)
    ax = axes[0][0]
    pts = sorted((r[4], r[7]) for r in rows if r[0] == "left")
    ax.plot(*zip(*pts), color="tab:blue", marker="o", label="GenKautz d = 4")
    ax.axhline(1.0, color="black", lw=0.8, ls="--", label="Theorem 1 bound")
    ax.set_xscale("log")
    ns = [n for n, _ in pts]
    ticks = [n for i, n in enumerate(ns) if i == 0 or n > 1.1 * ns[i - 1]]      # no overlapping labels
    ax.set_xticks(ticks, [str(n) for n in ticks], fontsize=7)
    ax.minorticks_off()
    ax.set_xlabel("N")
    ax.set_ylabel("all-to-all time / Thm. 1 bound")
    ax.set_title("Fig. 10 (left): GenKautz vs the bound", fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax = axes[0][1]
    width = 0.8 / len(FAMILIES)
    for i, family in enumerate(FAMILIES):
        means = [np.mean([r[7] for r in rows if r[0] == "right" and r[1] == family and r[2] == n]) for n in classes]
        spread = [np.ptp([r[7] for r in rows if r[0] == "right" and r[1] == family and r[2] == n]) / 2
                  for n in classes]
        ax.bar(np.arange(len(classes)) + (i - (len(FAMILIES) - 1) / 2) * width, means, width, yerr=spread,
               label=family + (f" (mean of {len(seeds)} seeds)" if family in RANDOM and len(seeds) > 1 else ""))
    ax.axhline(1.0, color="black", lw=0.8, ls="--")
    ax.set_xticks(range(len(classes)), [f"N ~ {n}" for n in classes])
    ax.set_ylabel("all-to-all time / Thm. 1 bound")
    ax.set_title("Fig. 10 (right): d = 4 topologies", fontsize=9)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=7)
    write_png(fig, out_dir / "fig10.png")


FIGURES = {
    "fig7": (fig7, "solve time vs N on GenKautz d=4: MCF, MCF-decomp (+/- symmetry), pMCF, ILP-disjoint, FPTAS"),
    "fig7-asym": (fig7_asym, "Fig. 7 without symmetry: MCF-decomp on Jellyfish and GenKautz minus 2 cables vs N"),
    "fig10": (fig10, "GenKautz vs the Theorem 1 bound over N; GenKautz, Xpander, Jellyfish, 2-D torus"),
}
