#!/usr/bin/env python3
"""Solver at scale: our mcf-decomp against the plain master LP in HiGHS, on GenKautz d=4 (Basu et al. §5.3)
or, without symmetry, on Jellyfish or punctured fabrics (``--family``, ``--remove-links``).

For every N, in one run:

* ``plain``: the master LP of eqs. 6–9 over every source (per-unit form,
  :func:`a2a_compiler.solve.mcf.flow_lp`) handed to HiGHS's interior point
  solver IPX with HiGHS's defaults (presolve, crossover), timed from building
  the LP to HiGHS's answer;
* ``ours``: ``a2a_compiler.solve(..., method="mcf-decomp")`` with its defaults
  (symmetry quotient, IPX without crossover, per-source split, certificate):
  the whole solve, certified.

Each is a fresh subprocess with a timeout; its peak memory is that of the subprocess and its own
children together (PDLP rounds and worker pools run in child processes), sampled every 0.5 s.
Printed per N: wall and CPU seconds of both, their ratios (ours / plain), F of both and their
relative difference, our certified gap, peak memory, and the load average around the run (the
machine may be shared).
A plain LP that hits the timeout gives a bound on the ratio (``<``).

    python tools/bench_solve.py                              # N = 64 128 256 512 1000
    python tools/bench_solve.py --sizes 256 --json
    python tools/bench_solve.py --sizes 128,256 --family jellyfish        # no symmetry (issue #22)
    python tools/bench_solve.py --sizes 256 --remove-links 2              # GK(256,4) minus 2 cables
    python tools/bench_solve.py --sizes 256 --family jellyfish --pricing --plain-solver ipm   # arc pricing
    python tools/bench_solve.py --sizes 64 --family jellyfish --child lp --workers 2 --mpi    # per-source work on 2 MPI workers
    flock /tmp/a2a-bench.lock python tools/bench_solve.py --sizes 1000 --plain-max 512

With ``--workers K`` (K > 1) ``ours`` runs twice, on 1 and on K workers (local processes, or with
``--mpi`` MPI ranks of mpi4py.futures under ``mpiexec -n K+1``), instead of beside the plain LP: printed
per N are both runs' wall and per-source split seconds and the speedups of the split and the whole
solve.  ``--child lp`` splits by the paper's per-source child LPs (eqs. 10–14), the work it distributes.

Progress of every run goes to stderr (``--quiet`` silences it); Ctrl-C stops
the running child and exits 130.  Not a test: the plain LPs take hours at N=1000.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time

from _quick import apply_quick   # tools/_quick.py: the scripts' shared --quick

#: Kinds of run a child process performs: the plain master LP, a solve method
#: (``options["method"]``, default mcf-decomp), a routing engine (``options["engine"]``).
KINDS = ("plain", "ours", "route")
#: ``--family`` -> spec of N hosts of degree d.
FAMILIES = {"genkautz": "genkautz:{n},{d}", "jellyfish": "jellyfish:{n},{d},seed=1"}


def tree_rss(root: int) -> int:
    """Resident bytes of process ``root`` and all its descendants now (Linux ``/proc``; 0 elsewhere)."""
    parent, rss = {}, {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/statm") as f:
                rss[int(entry.name)] = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            with open(f"/proc/{entry.name}/stat") as f:
                parent[int(entry.name)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue                                   # gone meanwhile
    children: dict[int, list[int]] = {}
    for pid, pp in parent.items():
        children.setdefault(pp, []).append(pid)
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, ()))
    return total


class TreePeak:
    """Peak of :func:`tree_rss` of this process, sampled every :data:`TREE_SAMPLE` seconds in a thread while
    in the ``with`` block: the PDLP rounds and worker pools run in child processes, which ``ru_maxrss``
    of this process does not see (and that of its children gives only the largest one)."""

    def __enter__(self):
        self.peak, self._done = tree_rss(os.getpid()), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.wait(TREE_SAMPLE):
            self.peak = max(self.peak, tree_rss(os.getpid()))

    def __exit__(self, *exc):
        self._done.set()
        self._thread.join()


#: Seconds between samples of :class:`TreePeak`.
TREE_SAMPLE = 0.5


def child(kind: str, spec: str, options: dict, quiet: bool) -> dict:
    """Run one solve in this process and return its record (called in the child): wall and CPU seconds, and
    the peak memory of this process and its children (:class:`TreePeak`; under ``--mpi`` rank 0's only)."""
    from a2a_compiler.progress import Progress
    from a2a_compiler.topology import from_spec

    progress = None if quiet else Progress(interval=5.0)
    topo = from_spec(spec)
    failed = options.pop("remove_links", 0)
    if failed:
        from a2a_compiler.topology.puncture import puncture

        topo = puncture(topo, remove_links=failed, seed=options.pop("seed", 0))
    wall, cpu = time.perf_counter(), _cpu_seconds()
    with TreePeak() as tree:
        record = _run(kind, topo, options, progress)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return {"kind": kind, "spec": spec, "wall_s": time.perf_counter() - wall, "cpu_s": _cpu_seconds() - cpu,
            "peak_rss_GB": max(usage.ru_maxrss, tree.peak / 1024) / 1e6, **record}


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (PDLP rounds, worker pools)."""
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF,
                                                                          resource.RUSAGE_CHILDREN)))


def _run(kind: str, topo, options: dict, progress) -> dict:
    """One run of ``kind`` on ``topo``: its record."""
    import numpy as np
    import scipy.sparse as sp

    if kind == "plain":
        from a2a_compiler.solve.lp import solve_lp
        from a2a_compiler.solve.mcf import flow_lp

        n = topo.n_hosts
        s, d = np.divmod(np.arange(n * n), n)
        sinks = sp.coo_array((np.ones(n * n - n), (s[s != d], d[s != d])), shape=(n, topo.n_nodes))
        A, lo, hi = flow_lp(topo, np.arange(n), sinks)
        if progress:
            progress(f"plain master LP: {A.shape[0]} rows, {A.shape[1]} columns, {A.nnz} nonzeros")
        c = np.zeros(A.shape[1])
        c[0] = 1.0
        res = solve_lp(c, A, lo, hi, solver=options.get("solver", "ipm-crossover"), inexact_ok=True,
                       label="plain master LP", progress=progress)
        record = {"F": 1.0 / res.objective, "status": res.status, "iterations": res.iterations,
                  "lp_rows": A.shape[0], "lp_columns": A.shape[1], "lp_nonzeros": int(A.nnz)}
    elif kind == "route":
        from a2a_compiler.routes import route

        rs = route(topo, options["engine"], **{k: v for k, v in options.items() if k != "engine"})
        record = {"alltoall_time": rs.alltoall_time, "lp_time": rs.lp_time, "bound": rs.bound,
                  "optimal": rs.optimal, "mip_gap": rs.mip_gap}
    else:
        from a2a_compiler.solve import solve

        sol = solve(topo, method=options.get("method", "mcf-decomp"), progress=progress,
                    **{k: v for k, v in options.items() if k != "method"})
        record = {"F": sol.concurrent_flow, "upper_bound": sol.upper_bound, "gap": sol.gap, "status": sol.status,
                  "timings": sol.timings, "symmetry": sol.info.get("symmetry"), "master": sol.info.get("master"),
                  "pricing_rounds": sol.info.get("pricing_rounds"),
                  "iterations": sol.info.get("lp_iterations"), "lp_rows": sol.info.get("lp_rows"),
                  "lp_columns": sol.info.get("lp_columns"), "alltoall_time": sol.a2a_time}
    return record


def measure(kind: str, spec: str, *, options: dict | None = None, timeout: float = 1800,
            quiet: bool = False) -> dict:
    """Run :func:`child` in a fresh process; ``{"timeout": seconds}`` if it did not finish in time.

    The child's progress goes to this process's stderr; its record comes back on stdout.  With
    ``options["mpi"]`` the child runs on rank 0 of ``mpiexec -n workers+1`` under mpi4py.futures.
    """
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    options = options or {}
    cmd = [sys.executable, os.path.abspath(__file__), "--subprocess", kind, spec, json.dumps(options)]
    if options.get("mpi"):
        mpiexec = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or shutil.which("mpiexec")
        if mpiexec is None:
            raise RuntimeError("--mpi needs mpiexec (the mpich wheel: pip install mpich)")
        cmd = [mpiexec, "-n", str(options["workers"] + 1), sys.executable, "-m", "mpi4py.futures", *cmd[1:]]
    if quiet:
        cmd.append("--quiet")
    load = os.getloadavg()[0]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop(p)
        return {"kind": kind, "spec": spec, "timeout": timeout, "load_before": load}
    except BaseException:
        _stop(p)
        raise
    if p.returncode != 0:
        raise RuntimeError(f"{kind} {spec} failed with exit status {p.returncode}")
    return {**json.loads(out.strip().splitlines()[-1]), "load_before": load, "load_after": os.getloadavg()[0]}


def _stop(p: subprocess.Popen) -> None:
    """Stop a child: SIGTERM first (mpiexec passes it on to its ranks), SIGKILL after 5 s."""
    p.terminate()
    try:
        p.communicate(timeout=5)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()


def _fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def row(n: int, plain: dict | None, ours: dict) -> dict:
    """The comparison of one N: ratios of ours to plain (``ratio_*_below`` when plain timed out)."""
    out = {"N": n, "plain": plain, "ours": ours}
    if plain and "timeout" not in plain:
        out.update(ratio_wall=ours["wall_s"] / plain["wall_s"], ratio_cpu=ours["cpu_s"] / plain["cpu_s"],
                   F_rel_diff=abs(ours["F"] - plain["F"]) / plain["F"])
    elif plain:
        out.update(ratio_wall_below=ours["wall_s"] / plain["timeout"])
    return out


def workers_row(n: int, one: dict, many: dict) -> dict:
    """The comparison of one N on 1 and K workers: speedups of the per-source split and the whole solve."""
    return {"N": n, "one": one, "many": many, "speedup_split": one["timings"]["split"] / many["timings"]["split"],
            "speedup_wall": one["wall_s"] / many["wall_s"]}


def print_workers_row(r: dict) -> None:
    one, many = r["one"], r["many"]
    print(f"{r['N']:5d} {one['wall_s']:8.1f} {one['timings']['split']:8.1f} {many['wall_s']:8.1f} "
          f"{many['timings']['split']:8.1f} {r['speedup_split']:7.2f} {r['speedup_wall']:7.2f} {many['F']:.9f} "
          f"{many['gap']:8.1e} {many['load_before']:5.1f}", flush=True)


def print_row(r: dict) -> None:
    p, o = r["plain"], r["ours"]
    if p is None:
        plain = f"{'(not run)':>19s}"
    elif "timeout" in p:
        plain = f"{'>' + format(p['timeout'], '.0f'):>9s} {'-':>9s}"
    else:
        plain = f"{p['wall_s']:9.1f} {p['cpu_s']:9.1f}"
    ratio = (f"{r['ratio_wall']:7.3f} {r['ratio_cpu']:7.3f}" if "ratio_wall" in r
             else f"{'<' + format(r['ratio_wall_below'], '.3f'):>7s} {'-':>7s}" if "ratio_wall_below" in r
             else f"{'-':>7s} {'-':>7s}")
    sym = o.get("symmetry") or {}
    print(f"{r['N']:5d} {plain} {_fmt(None if p is None or 'timeout' in p else p['peak_rss_GB'], '.2f'):>6s} "
          f"{o['wall_s']:8.1f} {o['cpu_s']:8.1f} {o['peak_rss_GB']:6.2f} {ratio} {o['F']:.9f} "
          f"{_fmt(r.get('F_rel_diff'), '.1e'):>8s} {o['gap']:8.1e} {sym.get('order', 1):5d} "
          f"{o['load_before']:5.1f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="64,128,256,512,1000", help="comma-separated N (default 64,...,1000)")
    ap.add_argument("--family", choices=FAMILIES, default="genkautz",
                    help="topology family: genkautz:N,d (default) or jellyfish:N,d,seed=1 (no symmetry)")
    ap.add_argument("--degree", type=int, default=4, help="degree d (default 4)")
    ap.add_argument("--remove-links", type=int, default=0, metavar="K",
                    help="remove K random cables (seed --seed) from every fabric: no symmetry left")
    ap.add_argument("--seed", type=int, default=1, help="puncturing seed (default 1)")
    ap.add_argument("--plain-max", type=int, default=1000, metavar="N",
                    help="run the plain LP only up to this N (default 1000: all)")
    ap.add_argument("--plain-solver", default="ipm-crossover",
                    help="solve_lp preset for the plain LP (default ipm-crossover: IPX with HiGHS's defaults; "
                         "'ipm' is IPX as mcf-decomp runs it, without presolve and crossover)")
    ap.add_argument("--pricing", action="store_true",
                    help="ours solves its master LP by arc pricing (mcf-decomp --pricing on)")
    ap.add_argument("--child", choices=("paths", "lp"), default="paths",
                    help="ours: the per-source split, 'paths' (default) or the paper's child LPs (eqs. 10-14)")
    ap.add_argument("--workers", type=int, default=1, metavar="K",
                    help="K > 1: run ours on 1 and on K workers (not the plain LP) and print the speedups")
    ap.add_argument("--mpi", action="store_true",
                    help="with --workers K: the K workers are MPI ranks (mpi4py.futures under mpiexec -n K+1)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run (default 1800)")
    ap.add_argument("--json", action="store_true", help="one JSON record per N on stdout instead of the table")
    ap.add_argument("--quiet", action="store_true", help="no progress from the runs on stderr")
    ap.add_argument("--subprocess", nargs=3, metavar=("KIND", "SPEC", "OPTIONS"), help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help="N = 16 only, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    apply_quick(ap, args, sizes="16")
    if args.subprocess:
        kind, spec, options = args.subprocess
        try:
            print(json.dumps(child(kind, spec, json.loads(options), args.quiet)), flush=True)
        except KeyboardInterrupt:   # the parent reports the interrupt
            return 130
        return 0
    try:
        sizes = [int(x) for x in args.sizes.split(",")]
    except ValueError:
        ap.error(f"--sizes must be comma-separated integers, got {args.sizes!r}")
    if args.workers < 1:
        ap.error(f"--workers must be >= 1, got {args.workers}")
    if args.mpi and args.workers < 2:
        ap.error("--mpi needs --workers K with K >= 2")
    fabric = (f"{FAMILIES[args.family].format(n='N', d=args.degree)}"
              f"{f' minus {args.remove_links} cables (seed {args.seed})' if args.remove_links else ''}")
    if args.workers > 1 and not args.json:
        print(f"{fabric}: ours = mcf-decomp{' --pricing on' if args.pricing else ''} --child {args.child} on 1 and on "
              f"{args.workers} {'MPI-rank' if args.mpi else 'local'} workers; times in seconds, load = 1-min load average")
        print(f"{'N':>5s} {'1: wall':>8s} {'1: split':>8s} {f'{args.workers}: wall':>8s} {f'{args.workers}: split':>8s} "
              f"{'x split':>7s} {'x wall':>7s} {'F':>11s} {'gap':>8s} {'load':>5s}", flush=True)
    elif not args.json:
        print(f"{fabric}: ours = mcf-decomp{' --pricing on' if args.pricing else ''} (certified), plain = master LP in "
              f"HiGHS ({args.plain_solver}); times in seconds, memory = peak RSS in GB, load = 1-min load average")
        print(f"{'N':>5s} {'plain wall':>9s} {'plain cpu':>9s} {'GB':>6s} {'our wall':>8s} {'our cpu':>8s} "
              f"{'GB':>6s} {'r wall':>7s} {'r cpu':>7s} {'F (ours)':>11s} {'|dF|/F':>8s} {'gap':>8s} "
              f"{'|sym|':>5s} {'load':>5s}", flush=True)
    try:
        failed = {"remove_links": args.remove_links, "seed": args.seed} if args.remove_links else {}
        for n in sizes:
            spec = FAMILIES[args.family].format(n=n, d=args.degree)
            mine = {**failed, **({"pricing": "on"} if args.pricing else {}), "child": args.child}
            ours = measure("ours", spec, options=mine, timeout=args.timeout, quiet=args.quiet)
            if "timeout" in ours:
                print(f"{n:5d} ours: no result within {args.timeout:.0f} s", file=sys.stderr, flush=True)
                continue
            if args.workers > 1:
                many = measure("ours", spec, options={**mine, "workers": args.workers, "mpi": args.mpi},
                               timeout=args.timeout, quiet=args.quiet)
                if "timeout" in many:
                    print(f"{n:5d} ours on {args.workers} workers: no result within {args.timeout:.0f} s",
                          file=sys.stderr, flush=True)
                    continue
                r = workers_row(n, ours, many)
                if args.json:
                    print(json.dumps(r), flush=True)
                else:
                    print_workers_row(r)
                continue
            plain = (measure("plain", spec, options={"solver": args.plain_solver, **failed}, timeout=args.timeout,
                             quiet=args.quiet) if n <= args.plain_max else None)
            r = row(n, plain, ours)
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                print_row(r)
    except KeyboardInterrupt:
        print("bench_solve: interrupted", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
