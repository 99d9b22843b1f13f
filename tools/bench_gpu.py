#!/usr/bin/env python3
"""The solver on a GPU (issue 36): fabrics without symmetry through ``a2a solve --solver cupdlpx --json``, end to end.

Each case is a fresh ``a2a solve SPEC --solver SOLVER --json --save FILE`` (or ``a2a compile``) with a
time limit.  Printed per case, beside the 2-core CPU numbers of docs/solver.md:

* wall seconds of the command, from the spec to the certified, saved solution;
* the LP solver's own seconds on the GPU (``lp_device_seconds``), all LP seconds, iterations, the
  tolerance reached and the number of solves of the schedule (:mod:`a2a_compiler.solve.first_order`);
* F and the certified gap;
* the peak GPU memory in use (``nvidia-smi``, sampled every 0.5 s; the whole device's, so run nothing
  else) and the peak host memory of the command and its children;
* an independent check of the saved flows (rebuilt from the spec: every commodity leaves its source with
  1, reaches its destination with 1 and is conserved elsewhere, and ``F`` times every link's load is
  within its capacity), computed here from the flows and the links' endpoints alone.

    python tools/bench_gpu.py                     # the table of issue 36 and N=4000 (GPU machine; hours on CPU)
    python tools/bench_gpu.py --cases jellyfish1000,gk1000-10 --timeout 600
    python tools/bench_gpu.py --quick             # small fabrics by PDLP on the CPU: the same path, seconds
    tools/gpu_session.sh                          # a GPU session: build cupdlpx offline, then this

``--quick`` runs here in CI (tests/test_tools_bench_gpu.py) so the script cannot rot; its numbers say
nothing about the GPU.  Ctrl-C stops the running command (it exits 130) and this script.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_solve import tree_rss  # noqa: E402

#: name -> (command after ``a2a``, CPU reference from docs/solver.md, whether the flows are saved and checked:
#: not at N=4000, whose 16 million pairs' paths would take minutes to write).  Specs with ``--remove-links``
#: take ``--seed 1``, as the issue's table did.
CASES = {
    "gk1000-10": (["solve", "genkautz:1000,4", "--remove-links", "10", "--seed", "1"],
                  "1081 s (--solver hipo, --pricing on, 2 cores)", True),
    "jellyfish1000": (["solve", "jellyfish:1000,4,seed=1"], "525 s (--pricing on, 2 cores)", True),
    "jellyfish2000": (["solve", "jellyfish:2000,4,seed=1"], "not finished in 52 min (--pricing on)", True),
    "jellyfish4000": (["solve", "jellyfish:4000,4,seed=1"], "not tried", False),
    "gk4000-40": (["solve", "genkautz:4000,4", "--remove-links", "40", "--seed", "1"], "not tried", False),
    "compile-jellyfish1000": (["compile", "jellyfish:1000,4,seed=1", "--emit", "mpi"], "not measured", True),
}
#: ``--quick``: the same path on small fabrics, PDLP on the CPU.
QUICK = {
    "jellyfish16": (["solve", "jellyfish:16,4,seed=1"], "-", True),
    "gk16-2": (["solve", "genkautz:16,4", "--remove-links", "2", "--seed", "1"], "-", True),
    "compile-jellyfish16": (["compile", "jellyfish:16,4,seed=1", "--emit", "mpi"], "-", True),
}
#: Seconds between samples of the GPU's and the command's memory.
SAMPLE = 0.5


def gpu_memory_used() -> int | None:
    """Bytes in use on GPU 0 now, by ``nvidia-smi`` (``None`` where there is none)."""
    if shutil.which("nvidia-smi") is None:
        return None
    out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                         capture_output=True, text=True, timeout=10)
    return int(out.stdout.split()[0]) * 2**20 if out.returncode == 0 and out.stdout.strip() else None


def run_case(argv: list[str], solver: str, out: Path, timeout: float, quiet: bool, save: bool = True,
             workers: int = 1) -> dict:
    """Run ``a2a ARGV`` with the solver, ``--json``, ``--workers`` for the split and an output file (a solve's
    ``--save`` only with ``save``); the record of the run."""
    compile_ = argv[0] == "compile"
    target = out / ("case.xml" if compile_ else "case.npz")
    cmd = [sys.executable, "-m", "a2a_compiler", *argv, "--json", *(["-q"] if quiet else [])]
    cmd += (["-o", str(target)] if compile_ else
            ["--solver", solver, "--workers", str(workers), *(["--save", str(target)] if save else [])])
    peak = {"gpu": None, "host": 0}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=None, text=True)
    done = threading.Event()

    def sample():
        base = gpu_memory_used()
        while not done.wait(SAMPLE):
            used = gpu_memory_used()
            if used is not None and base is not None:
                peak["gpu"] = max(peak["gpu"] or 0, used - base)
            peak["host"] = max(peak["host"], tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"command": " ".join(cmd[2:]), "error": f"over the {timeout:g} s limit"}
    finally:
        done.set()
        sampler.join()
    wall = time.perf_counter() - t0
    record = {"command": "a2a " + " ".join(cmd[3:]), "wall_s": wall, "peak_gpu_bytes": peak["gpu"],
              "peak_host_bytes": peak["host"]}
    if proc.returncode != 0:
        return {**record, "error": f"exit status {proc.returncode}"}
    s = json.loads(stdout)
    if compile_:
        return {**record, "valid": s.get("valid"), "fidelity": s.get("fidelity"), "lp_time": s.get("lp_time")}
    record.update({k: s.get(k) for k in ("solver", "master", "lp_device_seconds", "lp_iterations", "lp_tolerance",
                                         "lp_solves", "concurrent_flow", "upper_bound", "gap")})
    record["lp_s"] = s["timings"].get("lp")
    record["check"] = check_flows(argv, target, s["concurrent_flow"]) if save else None
    return record


def check_flows(argv: list[str], saved: Path, F: float) -> dict:
    """Conservation and capacity of the saved per-unit flows, from the links' endpoints alone: the largest
    conservation error and ``F · max_e load_e / cap_e`` (at most 1 when feasible)."""
    import numpy as np
    import scipy.sparse as sp

    from a2a_compiler.solve.result import FlowSolution
    from a2a_compiler.topology.spec import from_spec

    topo = from_spec(argv[1])
    if "--remove-links" in argv:
        from a2a_compiler.topology.puncture import puncture

        topo = puncture(topo, remove_links=int(argv[argv.index("--remove-links") + 1]),
                        seed=int(argv[argv.index("--seed") + 1]))
    flows = sp.csr_array(FlowSolution.load(saved).link_flows)
    n, nh, E = topo.n_nodes, topo.n_hosts, topo.n_links
    into = sp.csr_array((np.ones(E), (np.arange(E), topo.dst)), shape=(E, n))
    out_of = sp.csr_array((np.ones(E), (np.arange(E), topo.src)), shape=(E, n))
    net = sp.csr_array(flows @ into - flows @ out_of).tocoo()           # inflow - outflow per (commodity, node)
    k = np.arange(nh * nh)
    s, d = np.divmod(k, nh)
    want = sp.coo_array((np.concatenate([-np.ones(nh * nh), np.ones(nh * nh)]),
                         (np.concatenate([k, k]), np.concatenate([s, d]))), shape=(nh * nh, n)).tocsr()
    off = sp.diags_array((s != d).astype(float))
    error = float(np.abs((off @ (net.tocsr() - want)).data).max(initial=0.0))
    loads = np.asarray(flows.sum(axis=0)).ravel()
    cap = topo.capacity
    utilisation = float(F * np.max(loads / np.where(cap > 0, cap, np.inf)))
    return {"conservation_error": error, "F_times_max_utilisation": utilisation,
            "ok": error <= 1e-9 and utilisation <= 1 + 1e-9}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small fabrics by PDLP on the CPU (the CI check)")
    ap.add_argument("--cases", help=f"comma-separated, of: {', '.join(CASES)} (default all)")
    ap.add_argument("--solver", help="LP solver of the solve cases (default cupdlpx; --quick: pdlp)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds per case (default 900)")
    ap.add_argument("--workers", type=int, default=1, help="local worker processes of the solves' split (default 1)")
    ap.add_argument("--json", action="store_true", help="print each case's record as one JSON line as it ends")
    ap.add_argument("--quiet", action="store_true", help="no progress from the commands")
    args = ap.parse_args(argv)
    table = QUICK if args.quick else CASES
    names = args.cases.split(",") if args.cases else list(table)
    unknown = [n for n in names if n not in table]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; choose from {', '.join(table)}")
    solver = args.solver or ("pdlp" if args.quick else "cupdlpx")
    records = []
    try:
        for name in names:
            argv_, cpu, save = table[name]
            with tempfile.TemporaryDirectory(prefix="a2a-bench-gpu-") as tmp:
                r = {"case": name, "cpu_reference": cpu,
                     **run_case(argv_, solver, Path(tmp), args.timeout, args.quiet, save, args.workers)}
            records.append(r)
            print(json.dumps(r) if args.json else describe(r), flush=True)
    except KeyboardInterrupt:
        print("bench_gpu: interrupted", file=sys.stderr)
        return 130
    return 0 if all("error" not in r for r in records) else 1


def describe(r: dict) -> str:
    """One line of the table."""
    if "error" in r:
        return f"{r['case']:22s} {r['error']}  ({r['command']})"
    mib = (lambda b: "-" if b is None else f"{b / 2**20:.0f} MiB")
    head = f"{r['case']:22s} wall {r['wall_s']:7.1f} s"
    if "valid" in r:
        return f"{head}, valid {r['valid']}, fidelity {r['fidelity']}, host peak {mib(r['peak_host_bytes'])}"
    gpu = "-" if r["lp_device_seconds"] is None else f"{r['lp_device_seconds']:.1f} s"
    return (f"{head}, GPU {gpu}, LP {r['lp_s']:.1f} s, {r['lp_iterations']} iterations, tolerance "
            f"{r['lp_tolerance']} x{r['lp_solves']} ({r['solver']}, {r['master']}), F {r['concurrent_flow']:.10g}, "
            f"gap {r['gap']:.1e}, GPU peak {mib(r['peak_gpu_bytes'])}, host peak {mib(r['peak_host_bytes'])}, "
            f"flows {'-' if r['check'] is None else 'ok' if r['check']['ok'] else 'FAILED'}; "
            f"CPU: {r['cpu_reference']}")


if __name__ == "__main__":
    sys.exit(main())
