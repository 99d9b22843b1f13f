"""The supporting papers' routing systems, ours beside theirs.

* ``zahavi-table1``: Zahavi et al. 2009 Table I — shift all-to-all congestion
  (worst and average over the N-1 stages) of ftree and OpenSM MinHop on every
  row the topology specs express, counted per cable (a port of a group of
  parallel cables), as the routes pin them.
* ``fatpaths-table4``: Besta et al. 2020 Table IV — CDP and PI of each
  topology family at distance d' (fractions of k'), at sizes this machine
  handles, beside the disjoint paths and interference of the routes that
  ``fatpaths`` (4 layers, both variants) and, on Slim Fly, ``sf-layers`` emit.
* ``sf5-alltoall``: slimfly:5 (50 routers, 200 hosts), all-to-all: MCF-extP
  against sf-min, sf-val, fatpaths and sf-layers by max link load, with the
  virtual lanes each needs, on slimfly:5 and its router-only model; and the
  same routings measured on the emulated testbed on slimfly:3,p=0 (18 ranks:
  slimfly:5's 200 or 50 ranks do not fit a 2-core machine).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from a2a_compiler.fabric import Fabric, parse_bandwidth
from a2a_compiler.routes import route, route_tables
from a2a_compiler.routes.diversity import topology_diversity
from a2a_compiler.routes.routers import router_view
from a2a_compiler.routes.schedule import route_schedule
from a2a_compiler.topology.spec import from_spec

from ._common import figure, write_csv, write_png

# Table I: (description, our spec or None, paper ftree worst/avg, paper MinHop worst/avg, note)
TABLE1 = [
    ("12 nodes spread on 4 IS1 connected as bipartite", "vartree:6,2,w=3", (1, 1), (2, 1.4),
     "2 leaves x 2 spines, port groups of 3 cables"),
    ("16 nodes on 2-ary-4-tree", "fattree:2,4", (1, 1), (4, 2.4), ""),
    ("16 nodes on 4-ary-2-tree", "fattree:4,2", (1, 1), (1, 1), ""),
    ("Reordered 16 nodes on 4-ary-2-tree", None, (1, 1), (1, 1),
     "host order = tree order here; the paper's reordering is not given"),
    ("16 nodes 4-ary-2-tree with merged roots", "fattree:4,2,merge=2", (1, 1), (2, 1.4), "roots merged in pairs"),
    ("16 nodes on 2-ary-4-tree with merged roots", "fattree:2,4,merge=2", (1, 1), (4, 2.4), ""),
    ("16 nodes on 4-ary-2-tree with merged roots", "fattree:4,2,merge=4", (1, 1), (1, 1), "one 16-port root"),
    ("Reordered 16 nodes on 4-ary-2-tree with merged roots", None, (1, 1), (1, 1), "as the other reordered row"),
    ("32 nodes in 8 leafs - half 4-ary-3-tree merged roots", "fattree:4,3,merge=2,hosts=32", (1, 1), (2, 1.7),
     "the paper's Fig. 5 tree"),
    ("32 nodes in 8 leafs with CBB 1/2 on first stage", "vartree:4,2,4", (2, 1.9), (4, 3.2),
     "2 up-links per 4-host leaf"),
    ("32 nodes in 8 leafs with CBB 1/2 on second stage", "vartree:4,4,2", (2, 1.7), (2, 1.7),
     "Fig. 5 tree with single-cable root groups"),
    ("32 nodes in 8 leafs - half 4-ary-3-tree", "fattree:4,3,hosts=32", (1, 1), (4, 2.5), ""),
    ("48 nodes that make 3/4 of 4-ary-3-tree", "fattree:4,3,hosts=48", (1, 1), (4, 3), ""),
    ("64 nodes 4-ary-3-tree", "fattree:4,3", (1, 1), (4, 3.2), ""),
    ("64 nodes 4-ary-3-tree with merged roots", "fattree:4,3,merge=4", (1, 1), (4, 3.2), "roots merged by 4"),
    ("64 nodes 4-ary-3-tree with merged roots", "fattree:4,3,merge=2", (1, 1), (4, 3.2), "roots merged in pairs"),
    ("144 nodes 12-ary-2-tree", "fattree:12,2", (1, 1), (1, 1), ""),
    ("144 nodes 12-ary-2-tree merge roots", "fattree:12,2,merge=12", (1, 1), (2, 1.6), "one 144-port root"),
    ("256 nodes 4-ary-4-tree", "fattree:4,4", (1, 1), (16, 12), ""),
    ("1728 nodes 12-ary-3-tree", "fattree:12,3", (1, 1), (12, 11), ""),
    ("1728 nodes 12-ary-3-tree merged roots", "fattree:12,3,merge=12", (1, 1), (12, 11), "roots merged by 12"),
]

# Table IV (default variants and equivalent Jellyfish): name -> (d', CDP mean, CDP 1% tail, PI mean, PI 99.9% tail)
TABLE4 = {
    "clique": (2, 1.00, 1.00, 0.02, 0.02), "SF": (3, 0.89, 0.10, 0.26, 0.79), "XP": (3, 0.49, 0.34, 0.20, 0.41),
    "HX": (3, 0.25, 0.10, 0.09, 0.67), "DF": (4, 0.25, 0.13, 0.08, 0.74), "FT3": (4, 1.00, 1.00, 0.0, 0.0),
    "SF-JF": (3, 0.56, 0.38, 0.23, 0.45), "XP-JF": (3, 0.51, 0.34, 0.21, 0.41), "HX-JF": (3, 0.50, 0.23, 0.17, 0.37),
    "DF-JF": (4, 0.87, 0.78, 0.13, 0.26), "FT3-JF": (4, 0.96, 0.90, 0.05, 0.14),
}
# our instances: routers only (p=0), a size one machine routes in seconds; the JF twins match N_r and k'
TABLE4_SPECS = {
    "clique": "complete:16", "SF": "slimfly:7,p=0", "XP": "xpander:10,10,seed=1", "HX": "hyperx:4,3,p=0",
    "DF": "dragonfly:4,2,0", "FT3": "fattree:4,3",
    "SF-JF": "jellyfish:98,11,seed=1", "XP-JF": "jellyfish:110,10,seed=1", "HX-JF": "jellyfish:64,9,seed=1",
    "DF-JF": "jellyfish:36,5,seed=1", "FT3-JF": "jellyfish:48,6,seed=1",
}


def _log(msg: str) -> None:
    print(f"  {msg}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------ Table I
def _congestion(spec: str, algo: str) -> tuple[float, float]:
    """Worst and average shift-stage congestion of ``algo``'s tables, counted per cable (a port of a group)."""
    c = route_tables(from_spec(spec), algo).measure().shift
    return c.worst, c.average


def zahavi_table1(out: Path, quick: bool) -> None:
    header = ["row", "topology", "spec", "ftree_worst", "ftree_avg", "paper_ftree_worst", "paper_ftree_avg",
              "minhop_worst", "minhop_avg", "paper_minhop_worst", "paper_minhop_avg", "seconds", "note"]
    rows = []
    for i, (desc, spec, paper_ft, paper_mh, note) in enumerate(TABLE1, 1):
        if spec is None:
            rows.append([i, desc, "", None, None, *paper_ft, None, None, *paper_mh, None, note])
            continue
        t0 = time.perf_counter()
        ft = _congestion(spec, "ftree")
        mh = _congestion(spec, "minhop")
        seconds = time.perf_counter() - t0
        _log(f"{spec}: ftree {ft[0]:g}/{ft[1]:.3g}, minhop {mh[0]:g}/{mh[1]:.3g} ({seconds:.1f} s)")
        rows.append([i, desc, spec, *ft, *paper_ft, *mh, *paper_mh, seconds, note])
    write_csv(out / "zahavi-table1.csv", header, rows)
    fig, axes = figure(ncols=2, width=6.4, height=4.2)
    done = [r for r in rows if r[2]]
    y = np.arange(len(done))
    for ax, (col, pcol, name) in zip(axes[0], ((4, 6, "ftree (Zahavi)"), (8, 10, "MinHop (original OpenSM)"))):
        ax.barh(y + 0.2, [r[col] for r in done], 0.4, label="ours", color="tab:blue")
        ax.barh(y - 0.2, [r[pcol] for r in done], 0.4, label="paper", color="tab:gray")
        ax.set_yticks(y, [r[2] for r in done], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("average shift-stage congestion")
        ax.set_title(name, fontsize=9)
        ax.legend(fontsize=7)
    write_png(fig, out / "zahavi-table1.png")


# ----------------------------------------------------------------- Table IV
def _route_metrics(spec: str, algo: str, **options) -> dict:
    r = route(from_spec(spec), algo, **options)
    return {"paths": r.info["paths_per_router_pair"], "disjoint": r.info["disjoint_paths_mean"],
            "ge3": r.info["pairs_with_3_disjoint"], "pi": r.info["route_interference_mean"], "vls": r.info["vls"]}


def fatpaths_table4(out: Path, quick: bool) -> None:
    samples = 200 if quick else 1000
    header = ["topology", "spec", "d'", "k'", "cdp_mean", "paper_cdp_mean", "cdp_tail_1pct", "paper_cdp_tail_1pct",
              "pi_mean", "paper_pi_mean", "pi_tail_99_9pct", "paper_pi_tail_99_9pct",
              "fatpaths_paths", "fatpaths_disjoint", "fatpaths_ge3", "fatpaths_route_pi", "fatpaths_vls",
              "balanced_paths", "balanced_disjoint", "balanced_ge3", "balanced_vls",
              "sf_layers_paths", "sf_layers_disjoint", "sf_layers_ge3", "sf_layers_vls"]
    rows = []
    for name, spec in TABLE4_SPECS.items():
        d_prime, *paper = TABLE4[name]
        t0 = time.perf_counter()
        t = from_spec(spec)
        view = router_view(t)
        m = topology_diversity(t, view, d_prime, samples)
        fp = _route_metrics(spec, "fatpaths", layers=4)
        bal = _route_metrics(spec, "fatpaths", layers=4, variant="balanced")
        sfl = _route_metrics(spec, "sf-layers", layers=4) if name == "SF" else {}
        _log(f"{name} {spec}: CDP {m['cdp_mean']:.2f} PI {m['pi_mean']:.2f}; fatpaths >=3 disjoint "
             f"{fp['ge3']:.2f} ({time.perf_counter() - t0:.1f} s)")
        rows.append([name, spec, d_prime, m["radix"], m["cdp_mean"], paper[0], m["cdp_tail_1pct"], paper[1],
                     m["pi_mean"], paper[2], m["pi_tail_99_9pct"], paper[3],
                     fp["paths"], fp["disjoint"], fp["ge3"], fp["pi"], fp["vls"],
                     bal["paths"], bal["disjoint"], bal["ge3"], bal["vls"],
                     sfl.get("paths"), sfl.get("disjoint"), sfl.get("ge3"), sfl.get("vls")])
    write_csv(out / "fatpaths-table4.csv", header, rows)
    fig, axes = figure(ncols=2, width=5.6, height=3.8)
    x = np.arange(len(rows))
    for ax, (col, pcol, label) in zip(axes[0], ((4, 5, "CDP mean (fraction of k')"), (8, 9, "PI mean (fraction of k')"))):
        ax.bar(x - 0.2, [r[col] for r in rows], 0.4, label="ours", color="tab:blue")
        ax.bar(x + 0.2, [r[pcol] for r in rows], 0.4, label="paper (N ~ 10^4)", color="tab:gray")
        ax.set_xticks(x, [r[0] for r in rows], rotation=60, fontsize=7)
        ax.set_title(label, fontsize=9)
        ax.legend(fontsize=7)
    write_png(fig, out / "fatpaths-table4.png")


# ------------------------------------------------------- slimfly:5 panel
PANEL = [("mcf-extp", {}), ("sf-min", {}), ("sf-val", {}), ("fatpaths", {"layers": 4}),
         ("sf-layers", {"layers": 4})]
#: the Slim Fly small enough to emulate here (18 ranks): slimfly:5's 200 (or 50) ranks do not fit 2 cores
TESTBED_SPEC, TESTBED_BW = "slimfly:3,p=0", "10Mbps"


def _testbed(schedules: dict[str, Path]) -> dict:
    """``a2a testbed bench`` of the schedules under NIC forwarding (root needed); ``{}`` if it cannot run."""
    a2a = shutil.which("a2a")
    if a2a is None:
        return {}
    cmd = [a2a, "testbed", "bench", TESTBED_SPEC, "--forwarding", "nic", "--link-bw", TESTBED_BW, "--sizes", "64K",
           "--iters", "3", "--json", "-q", "--name", "hpcsf"]
    for path in schedules.values():
        cmd += ["--schedule", str(path)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if not proc.stdout.strip():
        _log(f"testbed not measured: {(proc.stderr.strip().splitlines() or ['exit %d' % proc.returncode])[-1]}")
        return {}
    return json.loads(proc.stdout)


def sf5_alltoall(out: Path, quick: bool) -> None:
    header = ["spec", "algo", "route_time", "file_time", "mcf_time", "ratio", "vls", "paths_per_pair",
              "testbed_algbw_MBps", "testbed_bound_fraction", "testbed_failures", "seconds"]
    rows = []
    specs = ["slimfly:5,p=0"] if quick else ["slimfly:5", "slimfly:5,p=0", TESTBED_SPEC]
    with tempfile.TemporaryDirectory(prefix="sf5-") as tmp:
        files = {}
        for spec in specs:
            t = from_spec(spec)
            mcf_time = None
            for algo, opts in PANEL:
                t0 = time.perf_counter()
                deadlock = "dfsssp" if algo == "mcf-extp" else None
                fabric = Fabric(link_bw=parse_bandwidth(TESTBED_BW), forwarding="nic") if spec == TESTBED_SPEC else None
                r = route_schedule(t, algo, fabric, deadlock=deadlock, mcf_time=mcf_time, **opts)
                mcf_time = r.mcf_time
                if spec == TESTBED_SPEC:
                    files[algo] = Path(tmp, f"{algo}.xml")
                    files[algo].write_bytes(r.xml)
                per_pair = len(r.routes.paths) / (t.n_hosts * (t.n_hosts - 1))
                rows.append([spec, algo, r.routes.alltoall_time, r.predicted_time, r.mcf_time,
                             r.predicted_time / r.mcf_time, r.layers, per_pair, None, None, None,
                             time.perf_counter() - t0])
                _log(f"{spec} {algo}: max link load {r.predicted_time:g} (MCF {r.mcf_time:g}), {r.layers} VLs")
        bench = _testbed(files) if files else {}
    for row in rows:
        for entry in bench.get("results", []):
            if row[0] == TESTBED_SPEC and entry["label"] == row[1]:
                row[8:11] = entry["algbw_GBps"] * 1e3, entry["bound_fraction"], "; ".join(entry["failures"])
    if bench.get("warnings"):
        _log("testbed warnings: " + "; ".join(bench["warnings"][:2]))
    write_csv(out / "sf5-alltoall.csv", header, rows)
    panels = [(spec, "load") for spec in specs] + ([(TESTBED_SPEC, "testbed")] if bench else [])
    fig, axes = figure(ncols=len(panels), width=4.2, height=3.6)
    for ax, (spec, kind) in zip(axes[0], panels):
        sel = [r for r in rows if r[0] == spec]
        if kind == "testbed":
            ax.bar([r[1] for r in sel], [r[8] or 0 for r in sel], color="tab:green")
            ax.set_ylabel("measured algorithm bandwidth (MB/s)")
            ax.set_title(f"{spec} on the testbed ({TESTBED_BW} links)", fontsize=9)
        else:
            ax.bar([r[1] for r in sel], [r[5] for r in sel], color="tab:blue")
            for i, r in enumerate(sel):
                ax.text(i, r[5], f"{r[5]:.2f}\n{r[6]} VL", ha="center", va="bottom", fontsize=7)
            ax.axhline(1.0, color="black", lw=0.8)
            ax.set_ylabel("max link load / MCF")
            ax.set_ylim(0, max(r[5] for r in sel) * 1.3)
            ax.set_title(f"{spec}: all-to-all", fontsize=9)
        ax.tick_params(axis="x", labelsize=7, rotation=30)
    write_png(fig, out / "sf5-alltoall.png")


FIGURES = {
    "zahavi-table1": (zahavi_table1, "Zahavi et al. Table I: shift congestion of ftree and MinHop"),
    "fatpaths-table4": (fatpaths_table4, "FatPaths Table IV: CDP / PI beside the routes' disjoint paths"),
    "sf5-alltoall": (sf5_alltoall, "slimfly:5 all-to-all: MCF-extP vs sf-min, sf-val, fatpaths, sf-layers"),
}
