"""``a2a verify FILE``: check a lowered schedule (MSCCL, oneCCL-style or MPI path XML)."""

from __future__ import annotations

from ..cli import command_parser
from ..errors import A2AError
from .common import SPEC_HELP, add_demand_arg, add_fabric_args, add_topology_args, fabric_from_args, print_json, \
    topology_from_args

HELP = "check an MSCCL / oneCCL-style / MPI path XML schedule (rules, data movement, deadlock, topology, time)"

DESCRIPTION = """\
Verify a lowered all-to-all schedule in any of the three formats (detected from the
root element: <algo> MSCCL, <oneccl_algo> oneCCL-style, <mpi_paths> MPI path).

checks:
  executor rules     MSCCL only: every rule the MSCCL executor applies (lexical form on the raw
                     text, required attributes, ids, <= 64 steps per tb, cnt, depid, offsets,
                     one tb per (peer, channel, direction), dependencies, hasdep, nops)
  data movement      symbolic execution with labelled chunks: every rank's output is the
                     all-to-all transpose, each chunk delivered once, no read of unwritten data,
                     no overwrite of live data, local accesses ordered by dependencies
  deadlock freedom   MSCCL: thread blocks with dependencies and 8-slot FIFO connections; a stuck
                     program is reported with its wait-for cycle.  MPI paths with --deadlock-free:
                     the routes' channel dependencies over (link, virtual channel) -- each
                     route's layer, or its per-hop vcs -- are acyclic (Dally & Seitz), so the
                     routes cannot deadlock under wormhole / credit-based flow control; a cycle
                     is reported channel by channel
  topology           with --topology: every transfer (route hop) is a real link
  performance        predicted time in link-times (one shard over one link), by the cost model
                     'a2a compile' uses (MSCCL: dataflow; oneCCL: its steps; MPI paths: all routes
                     at once); fidelity against the LP time the file records (oneCCL, MPI paths)
                     and, with --topology, the link MCF optimum 1/F (certified) and the MCF ratio

all-to-allv (--demand D.csv): data movement is checked against the demand.  MSCCL XML is read in
the fixed-size-buffer layout of D (T[i][j] chunks of rank i for rank j at input offset
sum_{k<j} T[i][k], output offset sum_{k<i} T[k][j]; 'a2a demand show D.csv --chunks C' prints T);
oneCCL-style and MPI path files record their demand's volumes, which must be D's.  A plain
all-to-all oneCCL or MPI path file is valid for any D and is priced under it, reused (routes
and steps unchanged).  Times are then the all-to-allv's, and the LP optimum is 1/F(D).

Warnings (a receive described differently from its send, many channels or thread blocks) do not
make a file invalid unless --strict.

exit status: 0 all checks pass, 1 the schedule is invalid, 2 the file is unreadable (or a bad option).
"""


def register(sub) -> None:
    """Add ``a2a verify`` to the subcommands."""
    p = command_parser(sub, "verify", HELP, DESCRIPTION)
    p.add_argument("file", metavar="FILE", help="schedule XML (MSCCL, oneCCL-style or MPI path)")
    p.add_argument("--topology", metavar="SPEC", dest="spec",
                   help=f"check transfers against this topology and compare with its LP optimum; {SPEC_HELP}")
    add_topology_args(p, positional=False)
    add_fabric_args(p)
    add_demand_arg(p, "check the schedule as an all-to-allv of this demand matrix (CSV or .npy, N x N; see above)")
    p.add_argument("--no-lp", action="store_true", help="with --topology, skip solving the LP for the optimum")
    p.add_argument("--deadlock-free", action="store_true",
                   help="MPI path files: prove the routes' channel dependency graph over (link, virtual channel) "
                        "acyclic (the layers or vcs written by 'a2a routes --deadlock')")
    p.add_argument("--strict", action="store_true",
                   help="treat warnings as errors: a receive whose srcbuf/srcoff/dstbuf/dstoff differ from its "
                        "send's (msccl-tools writes both alike; the public MSCCL-XML-Verifier rejects the "
                        "difference), more than 32 channels or 108 thread blocks, i_chunks above nchunksperloop")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: valid, format, ranks, checks, errors, warnings, "
                        "predicted_time, lp_time (link MCF), mcf_ratio, file_lp_time, fidelity; also for an "
                        "unreadable file (valid false, the reason in errors, exit 2)")
    p.set_defaults(func=run)


def run(args) -> int:
    """``a2a verify``: :func:`a2a_compiler.verify.verify_file`, print the report; 0 valid, 1 invalid, 2 unreadable."""
    from ..verify import CHECKS, verify_file

    try:
        topology = topology_from_args(args) if args.spec else None
        demand = None
        if args.demand:
            from ..demand import read_demand

            demand = read_demand(args.demand, None if topology is None else topology.n_hosts)
        report = verify_file(args.file, topology, fabric_from_args(args), lp=not args.no_lp,
                             deadlock_free=args.deadlock_free, strict=args.strict,
                             demand=None if demand is None or demand.is_uniform else demand)
    except A2AError as exc:
        if not args.json:
            raise
        print_json({"valid": False, "source": args.file, "format": None, "errors": [str(exc)], "warnings": []})
        return 2
    if args.json:
        print_json(report.to_json())
        return 0 if report.valid else 1
    print(f"{report.source}: {report.format}, {report.summary}")
    for check in CHECKS:
        errs = report.errors[check]
        status = f"skipped ({report.skipped[check]})" if check in report.skipped else \
            f"FAIL ({len(errs)})" if errs else "ok"
        print(f"  {check:<18} {status}")
        for m in errs:
            print(f"    error: {m}")
    for w in report.warnings:
        print(f"  warning: {w}")
    perf = report.perf
    if perf is not None:
        line = f"  predicted time     {perf.predicted_time:.6g} link-times"
        if report.format == "msccl":
            line += " as a dataflow"
        elif report.format == "oneccl":
            line += f" over {len(perf.step_loads)} steps"
        line += f"; busiest link {perf.busiest[0]}->{perf.busiest[1]} carries {perf.busiest_load:.4g} shards"
        print(line)
        if report.fidelity is not None:
            print(f"  file's LP time     {report.file_lp_time:.6g} link-times; fidelity {report.fidelity:.4f}")
        if report.lp_time:
            print(f"  link MCF optimum   {report.lp_time:.6g} link-times (certified); MCF ratio {report.mcf_ratio:.4f}")
    print("VALID" if report.valid else "INVALID")
    return 0 if report.valid else 1
