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
    python tools/bench_routes.py --scale     # issue 34's slow and large cases, with their phases

``--scale`` runs the cases issue 34 (items 7-10) measured, each with its extra options, and prints where
the time went: the command's own phases (``timings`` of its JSON: route, measure, mcf, lft, ...), the
rest being start-up and output.

Every child is bounded by --timeout (default 600 s) and stopped by its PID on timeout or Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

#: (spec, algo, wall target s, memory target GB)
CASES = [("fattree:12,3", "ftree", 10.0, 2.0), ("fattree:22,3", "ftree", 60.0, 8.0)]
#: Issue 34's cases: (spec, algo, extra options); ``{tmp}`` is a scratch directory.
SCALE_CASES = [
    ("slimfly:7", "dfsssp", ()),
    ("slimfly:7", "sf-layers", ()),
    ("slimfly:7", "sf-val", ()),
    ("slimfly:7", "sf-min", ("--lft", "{tmp}/sf7.dump")),
    ("fattree:12,3", "dfsssp", ("--remove-links", "5", "--among", "switch-links")),
    ("fattree:12,3", "sssp", ()),
]


def run_case(spec: str, algo: str, timeout: float, extra: tuple = ()) -> dict:
    a2a = shutil.which("a2a") or sys.exit("bench_routes: the a2a command is not on PATH (pip install -e .)")
    cmd = [a2a, "routes", spec, "--algo", algo, "--pattern", "shift", "--json", "-q", *extra]
    load = os.getloadavg()[0]
    with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, text=True)
        try:
            while True:                       # wait4: this child's own rusage (RUSAGE_CHILDREN keeps the max)
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() - t0 > timeout:
                    raise subprocess.TimeoutExpired(cmd, timeout)
                time.sleep(0.05)
        except (subprocess.TimeoutExpired, KeyboardInterrupt):
            proc.kill()
            proc.wait()
            raise
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    if proc.returncode:
        return {"spec": spec, "algo": algo, "error": (err.strip().splitlines() or ["?"])[-1]}
    s = json.loads(out)
    return {"spec": spec, "algo": algo, "extra": list(extra), "hosts": s["hosts"], "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime, "peak_gb": usage.ru_maxrss / 2**20, "alltoall_time": s["predicted_time"],
            "congestion_worst": s["congestion_worst"], "congestion_avg": s["congestion_avg"],
            "deadlock_free": s["deadlock_free"], "timings": s["timings"], "load_before": load,
            "load_after": os.getloadavg()[0]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", nargs="+", metavar="SPEC:ALGO", help="e.g. fattree:12,3:ftree (default: the targets)")
    ap.add_argument("--scale", action="store_true", help="issue 34's cases (items 7-10) instead of the targets")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per case (default 600)")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    ap.add_argument("--quick", action="store_true",
                    help="fattree:4,2 ftree only, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    if args.quick:
        args.cases = args.cases or ["fattree:4,2:ftree"]
    if args.cases:
        cases = [(c.rsplit(":", 1)[0], c.rsplit(":", 1)[1], None, None, ()) for c in args.cases]
    elif args.scale:
        cases = [(spec, algo, None, None, extra) for spec, algo, extra in SCALE_CASES]
    else:
        cases = [case + ((),) for case in CASES]
    rows = []
    scratch = tempfile.TemporaryDirectory(prefix="bench-routes-")
    for spec, algo, wall_target, mem_target, extra in cases:
        r = run_case(spec, algo, args.timeout, tuple(x.format(tmp=scratch.name) for x in extra))
        r["targets"] = {"wall_s": wall_target, "peak_gb": mem_target}
        rows.append(r)
        if not args.json:
            if "error" in r:
                print(f"{spec} {algo}: {r['error']}")
                continue
            met = "" if wall_target is None else \
                f"  (targets {wall_target:g} s, {mem_target:g} GB: " + \
                ("met" if r["wall_s"] <= wall_target and r["peak_gb"] <= mem_target else "MISSED") + ")"
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in r["timings"].items())
            print(f"{spec:14s} {algo:7s} {' '.join(extra)} {r['hosts']:6d} hosts: {r['wall_s']:6.1f} s wall, "
                  f"{r['cpu_s']:6.1f} s CPU, {r['peak_gb']:.2f} GB; all-to-all {r['alltoall_time']:g}, shift "
                  f"{r['congestion_worst']:g} / {r['congestion_avg']:g}, deadlock-free {r['deadlock_free']}; "
                  f"phases: {phases}; load {r['load_before']:.1f} -> {r['load_after']:.1f}{met}", flush=True)
    scratch.cleanup()
    if args.json:
        json.dump({"cases": rows}, sys.stdout, indent=1)
        print()
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
