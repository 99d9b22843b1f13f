"""``a2a solve``: optimal all-to-all concurrent flow with a certified bound."""

from __future__ import annotations

from ..cli import command_parser
from ..launcher import under_launcher
from ..errors import A2AError
from ..files import check_writable
from ..progress import Progress
from ..solve import METHODS, solve
from ..solve.lp import SOLVERS
from ..solve.mcf import DEFAULT_SOLVER, PDLP_ABOVE_NNZ
from ..solve.paths import DEFAULT_MAX_PATHS
from ..solve.pricing import PRICING_MODES
from ..solve.symmetry import AUTO_MIN_COLUMNS, SYMMETRY_MODES
from ..solve.widest_paths import DEFAULT_TOL
from ..options import ABSENT, GIVEN, flag
from .common import PROGRESS_DELAY, add_demand_arg, add_fabric_args, add_topology_args, applies_only, \
    demand_from_args, fabric_from_args, positive_int, print_json, topology_from_args

EPILOG = """\
methods (Basu et al. 2024, §3):
  mcf         per-commodity link LP (eqs. 1-5); exact reference, N up to ~64
  mcf-decomp  master LP over source-grouped flows (eqs. 6-9) + per-source split (default)
  pmcf        path LP (eqs. 21-24) over --paths candidates (NIC-forwarding fabrics)
  mcf-extp    link MCF, then widest-path extraction (section 3.2.1)
  tsmcf       time-stepped MCF (eqs. 15-20) for host-forwarding fabrics

Every F is recomputed from the returned flows (a verified primal) and bounded
above by weak duality on the LP's dual link lengths; "gap" is the relative gap.
Units: links have capacity 1, every ordered host pair demands 1 shard; the
all-to-all time is 1/F link-times; with --link-bw b the throughput bound is
(N-1)*F*b.

symmetry: mcf-decomp and tsmcf solve one source per orbit of the largest
automorphism group found (and checked link by link) that moves every host --
one source on tori and hypercubes, N/2 on GenKautz (i -> -i-1), N/10 on
GenKautz(1000,4) -- and map that flow to every source; the optimum is the
same, the LP is smaller.  --symmetry off solves the plain master LP.

pricing: without symmetry (a random expander, a fabric with failed cables)
arc pricing solves mcf-decomp's master LP: link lengths from
the free-energy smoothing of the dual (no LP) pick each source's near-shortest
arcs, a restricted master LP over those columns is solved (IPX; PDLP above
2 million nonzeros, --solver ipm/pdlp to choose), and the columns of
negative reduced cost are priced in until the certified gap is below 8e-7
(a round over 1e-2 below the bound also widens the near-shortest arcs).
Same optimum and certificate, a fraction of the columns (jellyfish:256,4:
5 s against 42 s for the full LP).  --pricing auto (the default) uses it when the
plain master LP has over 20000 columns and the symmetry search finds nothing
("master LP: priced (no symmetry found: arc pricing)"); its seed comes from SciPy's
L-BFGS-B, so its flows (not F) may differ between SciPy releases.

GPU: --solver cupdlpx solves the master LP by cuPDLPx on a CUDA device (the gpu
extra, docs/solver.md "On a GPU"); 'auto' picks it for LPs over 2 million
nonzeros when it imports and a device answers, and says why not otherwise.  Its
answer, like PDLP's, is certified here: the dual bound from its capacity duals,
the exact path split of its flows; tolerance 1e-6, tightened to 1e-7 and 1e-8
only while the certified gap is over 1e-6.

progress (stderr, after 2 s; --quiet silences it): stage, elapsed time and the
LP's iterations and objective (PDLP: its restarts and iterations; cuPDLPx: also
its relative gap).  Ctrl-C stops the LP within about a second (PDLP and cuPDLPx
run in a child process, which Ctrl-C terminates), stops worker processes and exits 130 without writing --save.

parallel per-source work (mcf-decomp, mcf-extp):
  a2a solve genkautz:256,4 --workers 2              local worker processes
  mpiexec -n 8 python -m mpi4py.futures -m a2a_compiler solve genkautz:1000,4 --mpi
                                                    rank 0 solves, the other ranks split sources
  The per-source work is the split; with --child lp (the paper's child LPs, one
  per source) it is most of the solve: jellyfish:256,4,seed=1 --pricing on 320 s
  on 1 worker, 159 s on 2.  The master LP runs in one process.  Cluster launch:
  docs/solver.md, "Per-source work on workers and MPI ranks".

several jobs on one fabric (--jobs FILE, docs/formats.md "Jobs"): job j, an all-to-all among its
hosts with weight w_j; the joint solve is the all-to-allv MCF (as --demand) for the demand w_j on
the pairs of job j (objective fair: w_j = 1, every job the same per-pair rate), certified by weak
duality; beside it each job solved alone, and those alone solutions priced together (they share
links: each job's time is then its busiest link's load with every job's bytes on it).
--schedules DIR writes, per job, its joint schedule NAME.xml, its alone schedule NAME-alone.xml
(MPI path files in the job's own rank numbering, for one communicator per job) and
NAME.topology.json, the fabric as the job sees it ('a2a verify FILE --topology file:...').
all-to-allv (--demand D.csv, mixture-of-experts): commodity (s,d) ships F*D[s,d]; the
matrix is scaled to mean 1 per pair (1/F compares with the uniform time at equal volume),
the dual bound is sum_e c_e*l_e / sum D[s,d]*dist_l(s,d), and the symmetry quotient keeps
only the automorphisms that leave D invariant (checked entry by entry).  The uniform
solution of the same method is solved too and priced under D with its routes and steps
unchanged ("uniform reused"): what reusing one schedule for every batch costs.

examples:
  a2a solve torus:3x3x3 --jobs jobs.json --forwarding nic --schedules jobs/
  a2a solve torus:3x3x3 --link-bw 25Gbps --host-bw 100Gbps --forwarding nic --json
  a2a solve hypercube:4 --method pmcf --paths ksp:4
  a2a solve genkautz:64,4 --method mcf-extp --save gk64.npz
  a2a solve jellyfish:256,4,seed=1 --pricing on      no symmetry: the master LP by arc pricing
  a2a demand zipf 8 --alpha 1 -o D.csv && a2a solve bipartite:4 --demand D.csv
"""


#: Solver options and the methods they apply to (others refuse them: a2a_compiler.options).
METHOD_OPTIONS = {
    "child": ("method", ("mcf-decomp", "mcf-extp")),
    "paths": ("method", ("pmcf",)),
    "max_paths": ("method", ("pmcf",)),
    "base": ("method", ("mcf-extp",)),
    "tol": ("method", ("mcf-extp",)),
    "steps": ("method", ("tsmcf",)),
    "workers": ("method", ("mcf-decomp", "mcf-extp")),
    "mpi": ("method", ("mcf-decomp", "mcf-extp")),
    "symmetry": ("method", ("mcf-decomp", "mcf-extp", "tsmcf")),
    "pricing": ("method", ("mcf-decomp", "mcf-extp")),
}
#: Options of one solve and of --jobs (a jobs file gives the demand; the joint solve is the demand-aware MCF-extP).
JOBS_OPTIONS = {
    "method": ("jobs", ABSENT),
    "save": ("jobs", ABSENT),
    "demand": ("jobs", ABSENT),
    "schedules": ("jobs", GIVEN),
    "max_chunks": ("schedules", GIVEN),
}


def register(sub) -> None:
    """Add ``a2a solve`` to the subcommands."""
    p = command_parser(sub, "solve", "optimal concurrent flow (MCF LPs) with a certified upper bound",
                       "Solve the all-to-all maximum concurrent multicommodity flow on a topology.", EPILOG)
    add_topology_args(p)
    add_fabric_args(p)
    add_demand_arg(p)
    g = p.add_argument_group("solver")
    g.add_argument("--method", choices=list(METHODS), default="mcf-decomp",
                   help="flow formulation (default mcf-decomp); see 'methods' below")
    g.add_argument("--solver", choices=list(SOLVERS), default=None,
                   help="LP solver: HiGHS's algorithms, or cuPDLPx.  Default 'auto': each method chooses by LP "
                        "size -- for the flow LPs 'ipm' (interior point without crossover, certified gap ~1e-8) up to "
                        f"{PDLP_ABOVE_NNZ:.0e} nonzeros, then 'cupdlpx' on a GPU or else 'pdlp' (first-order; 1.9x "
                        "faster than ipm at N=512 on GenKautz).  'simplex' gives vertex solutions "
                        "but is ~10x slower already at N=64; 'ipm-crossover' is ipm plus a vertex; 'hipo' is HiGHS's "
                        "interior point with a direct factorisation (the hipo extra), only with --pricing on, for its "
                        "large rounds on fabrics with many equal paths (1.3x faster than pdlp on punctured "
                        "GenKautz(1000,4)); 'cupdlpx' is cuPDLPx on a CUDA GPU (the gpu extra; 'auto' picks it "
                        "above the same size when it runs).  First-order answers (pdlp, cupdlpx) are solved to "
                        "1e-6, then tighter until the certified gap is at most 1e-6")
    g.add_argument("--child", choices=["paths", "lp"], default="paths",
                   help="mcf-decomp (and mcf-extp's mcf-decomp base) per-source split: exact path "
                        "decomposition (default) or the paper's child LPs (eqs. 10-14)")
    g.add_argument("--paths", default="disjoint", metavar="SET",
                   help="pmcf candidate paths: 'disjoint' (maximal link-disjoint, default), "
                        "'shortest' (all minimum-hop paths) or 'ksp:K' (K shortest simple paths)")
    g.add_argument("--max-paths", type=int, default=DEFAULT_MAX_PATHS, metavar="M",
                   help=f"refuse --paths shortest when a host pair has more than M shortest paths "
                        f"(default {DEFAULT_MAX_PATHS})")
    g.add_argument("--base", choices=["mcf", "mcf-decomp"], default="mcf-decomp",
                   help="mcf-extp: link-based solver whose flows are decomposed (default mcf-decomp)")
    g.add_argument("--tol", type=float, default=DEFAULT_TOL, metavar="T",
                   help=f"mcf-extp: stop extracting a commodity's paths below width T of its unit "
                        f"demand (default {DEFAULT_TOL:g}); weights are renormalised")
    g.add_argument("--steps", type=positive_int, default=None, metavar="T",
                   help="tsmcf: number of time steps l_max (>= diameter; default: chosen automatically, "
                        "diameter, diameter+1, ... while the optimum improves)")
    g.add_argument("--workers", type=int, default=1, metavar="N",
                   help="local worker processes for per-source work (mcf-decomp, mcf-extp; default 1); capped at the "
                        "work and at the CPUs this process may use")
    g.add_argument("--symmetry", choices=SYMMETRY_MODES, default="auto",
                   help="mcf-decomp, mcf-extp, tsmcf: solve the LP's quotient by the topology's automorphisms "
                        "(found and checked link by link: rotations/reflections of circulants and GenKautz, "
                        "translations of tori and hypercubes); same optimum, smaller LP.  'auto' (default): when "
                        f"the plain LP has over {AUTO_MIN_COLUMNS} columns; 'off': the plain LP over every source")
    g.add_argument("--pricing", choices=PRICING_MODES, default="auto",
                   help="mcf-decomp, mcf-extp: 'on' solves the plain master LP by arc pricing (restricted master "
                        "LP seeded by free-energy lengths, columns priced in by reduced cost; same optimum, much "
                        "faster on fabrics without symmetry; no symmetry search, not with --symmetry on); "
                        f"'off': the quotient or full master LP; 'auto' (default): the quotient when the symmetry "
                        f"search finds one, arc pricing when it finds none (plain LPs over {AUTO_MIN_COLUMNS} "
                        "columns; not when --solver cupdlpx or auto puts the full master LP on a GPU), the full "
                        "master LP below; the progress line 'master LP: ...' and the JSON key 'master' say which")
    g.add_argument("--mpi", action="store_true",
                   help="run per-source work on MPI ranks (mpi4py.futures); launch under "
                        "'mpiexec -n K python -m mpi4py.futures -m a2a_compiler solve ...'")
    j = p.add_argument_group("several jobs on one fabric")
    j.add_argument("--jobs", metavar="FILE", help="jobs file: host subsets with weights and an objective "
                                                  "(fair or weighted); solve them jointly and each alone")
    j.add_argument("--schedules", metavar="DIR", help="with --jobs: write each job's joint and alone MPI path "
                                                      "schedules and its topology into DIR")
    j.add_argument("--max-chunks", type=positive_int, default=64, metavar="C",
                   help="with --schedules: most chunks per shard (default 64)")
    o = p.add_argument_group("output")
    o.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    o.add_argument("--save", metavar="FILE.npz",
                   help="write the solution (flows per unit demand, paths, certificate) to FILE.npz")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress messages on stderr")
    applies_only(p, {**METHOD_OPTIONS, **JOBS_OPTIONS})
    p.set_defaults(func=run)


def method_options(args) -> dict:
    """The keyword options of ``args.method``'s solver function."""
    m = args.method
    solver = args.solver or DEFAULT_SOLVER
    if args.workers < 1:
        raise A2AError(f"--workers must be >= 1, got {args.workers}")
    if args.mpi and args.workers > 1:
        raise A2AError("--mpi and --workers: give one; under --mpi the MPI ranks are the workers")
    if args.mpi and not under_launcher():
        raise A2AError("--mpi runs on MPI ranks: launch it as 'mpiexec -n K python -m mpi4py.futures -m "
                       "a2a_compiler solve SPEC --mpi' (K-1 worker ranks; docs/solver.md)")
    if m == "mcf":
        return {"solver": solver}
    if m == "mcf-decomp":
        return {"solver": solver, "child": args.child, "workers": args.workers, "mpi": args.mpi,
                "symmetry": args.symmetry, "pricing": args.pricing}
    if m == "pmcf":
        if args.max_paths < 1:
            raise A2AError(f"--max-paths must be >= 1, got {args.max_paths}")
        return {"solver": solver, "paths": args.paths, "max_paths": args.max_paths}
    if m == "mcf-extp":
        if not 0 < args.tol < 1:
            raise A2AError(f"--tol must be in (0, 1), got {args.tol}")
        opts = {"base": args.base, "tol": args.tol, "workers": args.workers, "mpi": args.mpi, "solver": solver}
        if args.base == "mcf-decomp":
            opts.update(child=args.child, symmetry=args.symmetry, pricing=args.pricing)
        return opts
    return {"steps": args.steps, "symmetry": args.symmetry, **({"solver": args.solver} if args.solver else {})}


def run(args) -> int:
    """``a2a solve``: :func:`a2a_compiler.solve.solve`, optionally save, print the summary."""
    if args.jobs:
        return run_jobs(args)
    topo = topology_from_args(args)
    fabric = fabric_from_args(args)
    demand = demand_from_args(args, topo.n_hosts)
    reporter = None if args.quiet else Progress(delay=PROGRESS_DELAY)
    try:
        sol = solve(topo, fabric, args.method, demand=demand, progress=reporter, **method_options(args))
        uniform = None if demand is None else solve(topo, fabric, args.method, progress=reporter,
                                                    **method_options(args))
    finally:
        if reporter:
            reporter.close()
    if args.save:
        sol.save(args.save)
    s = sol.summary()
    if uniform is not None:
        from ..chunk.cost import flow_time

        reused = flow_time(uniform, topo, demand)
        s["uniform_reused"] = {"flow_time": reused, "uniform_flow_time": uniform.a2a_time,
                               "slowdown": reused / sol.a2a_time}
    if args.json:
        print_json(s)
        return 0
    print(f"{s['spec']}: {s['hosts']} hosts, {fabric.describe()}")
    if demand is not None:
        st = demand.stats()
        print(f"demand {demand.source}: volumes scaled to mean 1 per pair, largest {st['max']:.3g}, busiest "
              f"receiver {st['max_receive']:.3g} (uniform {topo.n_hosts - 1}), sha256 {demand.sha256[:12]}")
    what = "all-to-allv" if demand is not None else "all-to-all"
    print(f"method {s['method']}: concurrent flow F = {s['concurrent_flow']:.9g}, {what} time 1/F = "
          f"{s['flow_time']:.6g} link-times")
    print(f"certified upper bound {s['upper_bound']:.9g}, gap {s['gap']:.2e}, solved in {s['solve_seconds']:.2f} s")
    if s["throughput_bound_GBps"] is not None:
        print(f"throughput bound (N-1)*F*b = {s['throughput_bound_GBps']:.4g} GB/s")
    if uniform is not None:
        u = s["uniform_reused"]
        print(f"uniform {s['method']} solution reused under the demand (routes and steps unchanged): "
              f"{u['flow_time']:.6g} link-times, {u['slowdown']:.3f}x the re-solved")
    if s["paths"]:
        print(f"{s['paths']} weighted paths")
    if args.save:
        print(f"saved {args.save}")
    return 0


def run_jobs(args) -> int:
    """``a2a solve SPEC --jobs FILE``: :func:`a2a_compiler.jobs.solve_jobs`, per-job schedules, the summary."""
    from pathlib import Path

    from ..jobs import load_jobs, solve_jobs, write_job_schedules

    solver = [d for d in METHOD_OPTIONS if d in args.options_given] + (["solver"] if args.solver else [])
    if solver:  # the joint and alone solves are the demand-aware MCF-extP's, with its defaults
        raise A2AError(f"{', '.join(flag(d) for d in solver)} {'does' if len(solver) == 1 else 'do'} not apply "
                       f"with --jobs (its solves are the demand-aware MCF-extP's, with their defaults)")
    if args.schedules == "":
        raise A2AError("--schedules: the path is empty")
    out = Path(args.schedules) if args.schedules else None
    if out is not None and out.exists() and not out.is_dir():
        raise A2AError(f"--schedules {out}: not a directory")
    if out is not None and not out.exists():
        check_writable(out)  # created once the schedules are ready
    topo = topology_from_args(args)
    fabric = fabric_from_args(args)
    jobs = load_jobs(args.jobs, topo.n_hosts)
    reporter = None if args.quiet else Progress(delay=PROGRESS_DELAY)
    try:
        result = solve_jobs(topo, fabric, jobs, progress=reporter)
    finally:
        if reporter:
            reporter.close()
    if out is not None:
        out.mkdir(exist_ok=True)
    written = write_job_schedules(result, topo, out, args.max_chunks) if out is not None else []
    s = {"spec": topo.spec, **result.summary(), "schedules": [str(p) for p in written]}
    if args.json:
        print_json(s)
        return 0
    print(f"{topo.spec}: {len(jobs.jobs)} jobs, objective {jobs.objective}, {fabric.describe()}")
    print(f"joint      F = {s['joint_concurrent_flow']:.6g} per unit of volume (certified bound "
          f"{s['joint_upper_bound']:.6g}, gap {s['joint_gap']:.1e}); volumes: the weights scaled to mean 1 per pair")
    print(f"  {'job':12s} {'hosts':>5s} {'weight':>7s} {'joint time':>11s} {'alone time':>11s} "
          f"{'alone, together':>16s}")
    for j in s["jobs"]:
        print(f"  {j['name'][:12]:12s} {len(j['hosts']):5d} {j['weight']:7.3g} {j['joint_time']:11.5g} "
              f"{j['alone_time']:11.5g} {j['alone_together_time']:16.5g}")
    print(f"together   the alone solutions reach F = {s['alone_together_concurrent_flow']:.6g}: the joint "
          f"solve is {s['joint_over_alone_together']:.4f}x that (times in link-times for unit shards)")
    for path in written:
        print(f"saved      {path}")
    return 0
