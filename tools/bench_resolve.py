#!/usr/bin/env python3
"""Re-solving for a new MoE demand matrix on the same fabric: cold against warm-started (issue #19).

An MoE layer's demand matrix changes every step.  For each topology a sequence
of ``--batches`` matrices is drawn from one layer (:func:`a2a_compiler.demand.zipf_demand`:
the same experts and popularity, a new batch of tokens each step; with
``--placement``, a new expert placement each step, a far larger change) and solved

* ``cold``: ``a2a_compiler.solve(..., "mcf-decomp", demand=D)``, what ``a2a solve
  --demand`` runs (interior point, per-source split, certificate), from scratch;
* ``warm``: :class:`a2a_compiler.solve.resolve.Resolver`, the master LP kept in
  HiGHS and re-solved by the dual simplex from the last basis (only the
  right-hand sides move), then the same split and certificate;
* ``warm LP``: the warm re-solve alone, without routes (``certify=False``).

The first warm solve starts cold and is reported apart.  Printed per topology:
median seconds of each over the later batches, the speed-up cold / warm, the
largest relative difference of ``F`` (must be ~1e-8: the same optimum), and the
load average around the run (the machine may be shared).

    python tools/bench_resolve.py                        # bipartite:4 hypercube:4 torus:4x4x4 genkautz:64,4
    flock /tmp/a2a-bench.lock python tools/bench_resolve.py --batches 20 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from _quick import apply_quick   # tools/_quick.py: the scripts' shared --quick

DEFAULT_SPECS = ("bipartite:4", "hypercube:4", "torus:4x4x4", "genkautz:64,4")


def run(spec: str, batches: int, alpha: float, placement: bool = False) -> dict:
    from a2a_compiler.demand import zipf_demand
    from a2a_compiler.solve import solve
    from a2a_compiler.solve.resolve import Resolver
    from a2a_compiler.topology import from_spec

    topo = from_spec(spec)
    demands = [zipf_demand(topo.n_hosts, alpha, seed=1 + b if placement else 1, batch=0 if placement else b,
                           tokens=1024) for b in range(batches)]
    resolver, lp_only = Resolver(topo), Resolver(topo)
    cold, warm, warm_lp, diff, iters = [], [], [], [], []
    for i, d in enumerate(demands):
        t = time.perf_counter()
        a = solve(topo, method="mcf-decomp", demand=d)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = resolver.solve(d)
        warm.append(time.perf_counter() - t)
        t = time.perf_counter()
        c = lp_only.solve(d, certify=False)
        warm_lp.append(time.perf_counter() - t)
        iters.append(b.info["lp_iterations"])
        diff.append(max(abs(b.concurrent_flow - a.concurrent_flow), abs(c.concurrent_flow - a.concurrent_flow))
                    / a.concurrent_flow)
        if b.gap > 1e-6:
            raise SystemExit(f"bench_resolve: {spec} batch {i}: warm solution not certified (gap {b.gap:.2e})")
    later = slice(1, None)
    return {"spec": spec, "hosts": topo.n_hosts, "links": topo.n_links, "batches": batches, "alpha": alpha,
            "new_placement_each_step": placement,
            "first_cold_s": cold[0], "first_warm_s": warm[0],
            "cold_median_s": statistics.median(cold[later]), "warm_median_s": statistics.median(warm[later]),
            "warm_lp_median_s": statistics.median(warm_lp[later]),
            "speedup": statistics.median(cold[later]) / statistics.median(warm[later]),
            "speedup_lp": statistics.median(cold[later]) / statistics.median(warm_lp[later]),
            "first_iterations": iters[0], "warm_iterations_median": statistics.median(iters[later]),
            "max_rel_F_difference": max(diff)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--specs", nargs="+", default=list(DEFAULT_SPECS), metavar="SPEC")
    p.add_argument("--batches", type=int, default=10, help="matrices per topology (default 10)")
    p.add_argument("--alpha", type=float, default=1.0, help="expert-popularity skew (default 1)")
    p.add_argument("--placement", action="store_true",
                   help="a new expert placement (seed) every step instead of a new batch of tokens")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    p.add_argument("--quick", action="store_true",
                   help="bipartite:4, 2 batches, in seconds (tests/test_tools.py runs it)")
    args = p.parse_args(argv)
    apply_quick(p, args, specs=["bipartite:4"], batches=2)
    if args.batches < 2:
        p.error("--batches must be at least 2")
    load = [os.getloadavg()[0]]
    rows = []
    for spec in args.specs:
        rows.append(run(spec, args.batches, args.alpha, args.placement))
        print(f"bench_resolve: {spec} done", file=sys.stderr, flush=True)
    load.append(os.getloadavg()[0])
    if args.json:
        print(json.dumps({"load_average_1min": load, "results": rows}, indent=1))
        return 0
    what = "placements" if args.placement else "batches"
    print(f"# {args.batches} Zipf(alpha={args.alpha:g}) {what} per topology; medians over steps 2..; "
          f"load average {load[0]:.1f} -> {load[1]:.1f}")
    print(f"# {'topology':16s} {'hosts':>5s} {'cold s':>8s} {'warm s':>8s} {'warm LP s':>9s} {'x cold/warm':>11s} "
          f"{'x LP':>6s} {'iters 1st/warm':>15s} {'max dF/F':>9s}")
    for r in rows:
        print(f"  {r['spec']:16s} {r['hosts']:5d} {r['cold_median_s']:8.3f} {r['warm_median_s']:8.3f} "
              f"{r['warm_lp_median_s']:9.4f} {r['speedup']:11.2f} {r['speedup_lp']:6.1f} "
              f"{r['first_iterations']:>7d}/{r['warm_iterations_median']:<7g} {r['max_rel_F_difference']:9.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
