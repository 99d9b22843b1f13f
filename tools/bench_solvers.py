#!/usr/bin/env python3
"""Benchmark the flow solvers on GenKautz d=4 (Basu et al. §5.3, Fig. 7).

Each run is a fresh subprocess, so the reported peak memory (``ru_maxrss``) is
that run's own.  Prints, per N: wall and CPU seconds, peak memory, certified F,
upper bound and gap for mcf-decomp, and the ratio to the per-commodity mcf
where that one is run (``--mcf-max``).

    python tools/bench_solvers.py                         # N = 64 128 256 512 1000
    python tools/bench_solvers.py --sizes 64,128 --solver pdlp --workers 2
    nice python tools/bench_solvers.py --sizes 1000 --timeout 3600

Not a test: it takes minutes to hours.  Run it once, with ``nice`` on shared machines.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(n: int, method: str, solver: str, workers: int) -> None:
    """Child process: solve once and print a JSON record on stdout."""
    from a2a_compiler.solve import solve
    from a2a_compiler.topology import from_spec

    options = {"solver": solver}
    if method == "mcf-decomp":
        options["workers"] = workers
    topo = from_spec(f"genkautz:{n},4")
    wall, cpu = time.perf_counter(), time.process_time()
    sol = solve(topo, method=method, progress=lambda m: print(m, file=sys.stderr, flush=True), **options)
    record = {
        "N": n, "method": method, "solver": sol.info.get("solver", solver), "workers": workers,
        "wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu,
        "peak_rss_GB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6,
        "F": sol.concurrent_flow, "upper_bound": sol.upper_bound, "gap": sol.gap,
        "timings": sol.timings, "lp_columns": sol.info.get("lp_columns"), "lp_rows": sol.info.get("lp_rows"),
    }
    print(json.dumps(record), flush=True)


def run(n: int, method: str, solver: str, workers: int, timeout: float) -> dict | None:
    cmd = [sys.executable, __file__, "--one", str(n), method, solver, str(workers)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        print(f"  N={n} {method}: no result within {timeout:.0f} s", flush=True)
        return None
    if p.returncode != 0:
        print(f"  N={n} {method}: failed: {p.stderr.strip().splitlines()[-1:]}", flush=True)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="64,128,256,512,1000", help="comma-separated N (default 64,...,1000)")
    ap.add_argument("--solver", default="auto", help="LP solver for both methods (default auto: ipm, pdlp on big LPs)")
    ap.add_argument("--workers", type=int, default=1, help="mcf-decomp per-source workers (default 1)")
    ap.add_argument("--mcf-max", type=int, default=64, help="also run the per-commodity mcf up to this N (default 64)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--one", nargs=4, metavar=("N", "METHOD", "SOLVER", "WORKERS"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(int(args.one[0]), args.one[1], args.one[2], int(args.one[3]))
        return 0
    print(f"{'N':>5} {'method':>10} {'solver':>6} {'wall s':>8} {'cpu s':>8} {'lp s':>8} {'split s':>8} "
          f"{'RSS GB':>7} {'F':>12} {'gap':>9} {'F/F_mcf':>9}", flush=True)
    for n in [int(x) for x in args.sizes.split(",")]:
        rows = {}
        for method in (["mcf"] if n <= args.mcf_max else []) + ["mcf-decomp"]:
            r = run(n, method, args.solver, args.workers, args.timeout)
            if r is None:
                continue
            rows[method] = r
            ratio = r["F"] / rows["mcf"]["F"] if "mcf" in rows else float("nan")
            t = r["timings"]
            print(f"{n:>5} {method:>10} {r['solver']:>6} {r['wall_s']:>8.1f} {r['cpu_s']:>8.1f} {t.get('lp', 0):>8.1f} "
                  f"{t.get('split', t.get('decompose', 0)):>8.1f} {r['peak_rss_GB']:>7.2f} {r['F']:>12.9f} "
                  f"{r['gap']:>9.2e} {ratio:>9.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
