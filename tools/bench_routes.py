#!/usr/bin/env python3
"""Routing tables at HPC scale (issue #22 part 5): ``a2a routes`` on fat trees of 1728 and 10,648 hosts.

Each case is the command a user types, ``a2a routes SPEC --algo ALGO --pattern shift --json``, run as a fresh
subprocess: printed are its wall and CPU seconds, peak memory (the child's ``ru_maxrss``), the numbers it
reports (all-to-all time, shift congestion worst / average per cable, deadlock freedom), its own phase
timings, and the load average before and after (the machine may be shared; say so beside the numbers).
Targets: fattree:12,3 (Zahavi's 1728 hosts) <= 10 s and <= 2 GB with congestion 1/1; fattree:22,3
(10,648 hosts) <= 60 s and <= 8 GB.

    flock /tmp/a2a-bench.lock python tools/bench_routes.py             # both targets
    python tools/bench_routes.py --cases fattree:12,3:minhop --json

Every child is bounded by --timeout (default 600 s) and stopped by its PID on timeout or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

#: (spec, algo, wall target s, memory target GB)
CASES = [("fattree:12,3", "ftree", 10.0, 2.0), ("fattree:22,3", "ftree", 60.0, 8.0)]


def run_case(spec: str, algo: str, timeout: float) -> dict:
    a2a = shutil.which("a2a") or sys.exit("bench_routes: the a2a command is not on PATH (pip install -e .)")
    cmd = [a2a, "routes", spec, "--algo", algo, "--pattern", "shift", "--json", "-q"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        proc.kill()
        proc.wait()
        raise
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode:
        return {"spec": spec, "algo": algo, "error": (err.strip().splitlines() or ["?"])[-1]}
    s = json.loads(out)
    return {"spec": spec, "algo": algo, "hosts": s["hosts"], "wall_s": wall,
            "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "peak_gb": after.ru_maxrss / 2**20, "alltoall_time": s["predicted_time"],
            "congestion_worst": s["congestion_worst"], "congestion_avg": s["congestion_avg"],
            "deadlock_free": s["deadlock_free"], "timings": s["timings"], "load_before": load,
            "load_after": os.getloadavg()[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", metavar="SPEC:ALGO", help="e.g. fattree:12,3:ftree (default: the targets)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case (default 600)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    ap.add_argument("--quick", action="store_true",
                    help="fattree:4,2 ftree only, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    if args.quick:
        args.cases = args.cases or ["fattree:4,2:ftree"]
    cases = CASES if not args.cases else [(c.rsplit(":", 1)[0], c.rsplit(":", 1)[1], None, None) for c in args.cases]
    rows = []
    for spec, algo, wall_target, mem_target in cases:
        r = run_case(spec, algo, args.timeout)
        r["targets"] = {"wall_s": wall_target, "peak_gb": mem_target}
        rows.append(r)
        if not args.json:
            if "error" in r:
                print(f"{spec} {algo}: {r['error']}")
                continue
            met = "" if wall_target is None else \
                f"  (targets {wall_target:g} s, {mem_target:g} GB: " + \
                ("met" if r["wall_s"] <= wall_target and r["peak_gb"] <= mem_target else "MISSED") + ")"
            print(f"{spec:14s} {algo:7s} {r['hosts']:6d} hosts: {r['wall_s']:6.1f} s wall, {r['cpu_s']:6.1f} s CPU, "
                  f"{r['peak_gb']:.2f} GB; all-to-all {r['alltoall_time']:g}, shift {r['congestion_worst']:g} / "
                  f"{r['congestion_avg']:g}, deadlock-free {r['deadlock_free']}; load {r['load_before']:.1f} -> "
                  f"{r['load_after']:.1f}{met}", flush=True)
    if args.json:
        json.dump({"cases": rows}, sys.stdout, indent=1)
        print()
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
