#!/usr/bin/env python3
"""tsMCF schedules without symmetry against N (issue #22 part 3): wall time and fidelity.

For each N, ``jellyfish:N,D,seed=S`` (a random regular graph: no automorphism, so the
tsMCF LP is the plain source-grouped LP) goes through what ``a2a schedule SPEC --method
tsmcf`` runs (:func:`a2a_compiler.chunk.build_schedule`): the tsMCF LP and its split
by destination, the chunk search (smallest C <= 16 reaching fidelity 0.97), and the
link-MCF solve for ``mcf_time``.  Each N runs in a child process bounded by
``--timeout`` seconds (a size that does not finish is recorded as such); rows go to
``--json`` and the plot (seconds and fidelity against N) to ``--png`` after every size.

    flock /tmp/a2a-bench.lock python tools/bench_tsmcf.py --sizes 32,48,64,96,128,192,256 \\
        --json tsmcf.json --png docs/img/tsmcf-jellyfish.png
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from _quick import apply_quick   # tools/_quick.py: the scripts' shared --quick


def measure(spec: str) -> dict:
    """One size, in this process: the phases of ``a2a schedule SPEC --method tsmcf``."""
    import resource

    from a2a_compiler.chunk.chunking import chunk_link_schedule
    from a2a_compiler.chunk.ir import fidelity
    from a2a_compiler.fabric import Fabric
    from a2a_compiler.solve import solve
    from a2a_compiler.topology import from_spec

    topo = from_spec(spec)
    t0 = time.perf_counter()
    sol = solve(topo, Fabric(), "tsmcf")
    t1 = time.perf_counter()
    sched = chunk_link_schedule(topo, sol, max_chunks=16)
    t2 = time.perf_counter()
    mcf = solve(topo, Fabric(), "mcf-decomp")
    t3 = time.perf_counter()
    return {"spec": spec, "n": topo.n_hosts, "steps": sol.n_steps,
            "lp_time": sol.lp_time, "mcf_time": mcf.lp_time, "C": sched.chunks_per_shard,
            "fidelity": fidelity(sched), "lp_s": sol.timings["lp"], "split_s": sol.timings["split"],
            "tsmcf_s": t1 - t0, "chunk_s": t2 - t1, "mcf_s": t3 - t2, "total_s": t3 - t0,
            "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}


def plot(rows: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    done = [r for r in rows if "total_s" in r]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    n = [r["n"] for r in done]
    for key, label in (("total_s", "total (a2a schedule)"), ("tsmcf_s", "tsMCF LP + split"),
                       ("chunk_s", "chunk search")):
        a.plot(n, [r[key] for r in done], "o-", label=label)
    a.axhline(20, color="grey", ls=":", label="issue #22 target at N=64 (20 s)")
    a.set_xscale("log", base=2)
    a.set_yscale("log")
    a.set_xlabel("N (jellyfish:N,4,seed=1)")
    a.set_ylabel("seconds (wall, 2-core shared machine)")
    a.legend(fontsize=8)
    b.plot(n, [r["fidelity"] for r in done], "o-")
    for r in done:
        b.annotate(f"C={r['C']}", (r["n"], r["fidelity"]), textcoords="offset points", xytext=(4, 4), fontsize=8)
    b.axhline(0.97, color="grey", ls=":", label="fidelity target 0.97")
    b.set_xscale("log", base=2)
    b.set_xlabel("N")
    b.set_ylabel("fidelity = LP time / schedule time")
    b.legend(fontsize=8)
    fig.suptitle("tsMCF schedules without symmetry (issue #22)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="32,48,64,96,128", help="comma-separated N (default 32,48,64,96,128)")
    ap.add_argument("--degree", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per size (default 1800)")
    ap.add_argument("--json", help="write the rows here after every size")
    ap.add_argument("--png", help="plot the rows here after every size")
    ap.add_argument("--one", help=argparse.SUPPRESS)   # child: measure this spec, print one JSON row
    ap.add_argument("--quick", action="store_true", help="N = 8 only, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    apply_quick(ap, args, sizes="8")
    if args.one:
        print(json.dumps(measure(args.one)))
        return 0
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        spec = f"jellyfish:{n},{args.degree},seed={args.seed}"
        load = os.getloadavg()[0]
        try:
            out = subprocess.run([sys.executable, __file__, "--one", spec], capture_output=True, text=True,
                                 timeout=args.timeout, check=True).stdout
            row = json.loads(out.splitlines()[-1])
        except subprocess.TimeoutExpired:
            row = {"spec": spec, "n": n, "timeout_s": args.timeout}
        except subprocess.CalledProcessError as exc:
            row = {"spec": spec, "n": n, "error": (exc.stderr or "").strip().splitlines()[-1:]}
        row["load_before"], row["load_after"] = load, os.getloadavg()[0]
        rows.append(row)
        print(json.dumps(row), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1)
        if args.png:
            plot(rows, args.png)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
