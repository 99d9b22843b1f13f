"""``a2a compile SPEC --emit {msccl,oneccl,mpi} -o FILE``: solve, chunk, lower, verify, write."""

from __future__ import annotations

import argparse

from ..errors import A2AError
from .common import SPEC_HELP, add_fabric_args, add_topology_args, fabric_from_args, nonnegative_int, positive_int, \
    print_json, progress, topology_from_args

EMITS = {
    "msccl": ("link", "MSCCL executor XML (GPUs; docs/msccl.md)"),
    "oneccl": ("link", "oneCCL-style XML (CPUs; run with 'a2a run')"),
    "mpi": ("path", "MPI path schedule XML (routed; run with 'a2a run')"),
}
DEFAULT_METHOD = {"link": "tsmcf", "path": "mcf-extp"}

EPILOG = """\
formats and the methods that feed them (docs/formats.md):
  --emit msccl   link schedule from tsmcf: thread blocks, sends/receives, scratch relays
  --emit oneccl  link schedule from tsmcf: per-step asynchronous sends/receives + sync
  --emit mpi     path schedule from mcf-extp (default) or pmcf: routes per shard

The output is verified (the checks of 'a2a verify') before it is written; an
invalid program is never written.  Same inputs -> byte-identical file.
times are in link-times for unit shards; fidelity = LP time / predicted time (<= 1).

examples:
  a2a compile hypercube:3 --emit msccl -o hc3.xml
  a2a compile torus:3x3x3 --link-bw 25Gbps --host-bw 100Gbps --emit oneccl -o t3.xml
  a2a compile torus:3x3x3 --emit mpi --method pmcf -o t3-paths.xml
  a2a schedule hypercube:3 -o s.json && a2a compile --from-ir s.json --emit msccl -o hc3.xml
"""




def register(sub) -> None:
    p = sub.add_parser(
        "compile", help="solve, chunk and lower a schedule to MSCCL / oneCCL-style / MPI path XML",
        description="Run solve -> chunk -> lower in one go (or lower a saved schedule IR with --from-ir), "
                    "verify the program and write it atomically.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("spec", metavar="SPEC", nargs="?", help=f"{SPEC_HELP} (omit with --from-ir)")
    p.add_argument("--from-ir", metavar="FILE.json", help="lower this schedule IR (from 'a2a schedule') "
                                                          "instead of solving SPEC")
    p.add_argument("--emit", choices=sorted(EMITS), required=True,
                   help="output format: " + "; ".join(f"{k}: {v[1]}" for k, v in EMITS.items()))
    p.add_argument("--method", choices=("tsmcf", "mcf-extp", "pmcf"),
                   help="solver: tsmcf for --emit msccl/oneccl (default), mcf-extp (default) or pmcf for --emit mpi")
    add_topology_args(p, positional=False)
    add_fabric_args(p)
    g = p.add_argument_group("chunking")
    g.add_argument("--max-chunks", type=positive_int, default=16, metavar="C",
                   help="most chunks per shard; the smallest C reaching fidelity 0.95 is used (default 16)")
    g.add_argument("--steps", type=positive_int, metavar="L",
                   help="tsmcf only: number of time steps (default: chosen automatically)")
    m = p.add_argument_group("MSCCL options (--emit msccl)")
    m.add_argument("--channels", type=positive_int, metavar="K",
                   help="channels each link's chunks are spread over (default: the fewest, up to 8, that keep "
                        "every thread block within the executor's 64 steps)")
    m.add_argument("--instances", type=positive_int, default=1, metavar="I",
                   help="run I copies of the schedule, each on 1/I of every chunk and its own channels "
                        "(nchannels = K*I; default 1)")
    m.add_argument("--proto", choices=("Simple", "LL", "LL128"), default="Simple",
                   help="NCCL protocol the executor uses (default Simple)")
    m.add_argument("--min-bytes", type=nonnegative_int, default=0, metavar="B",
                   help="smallest message (bytes) the algorithm is selected for (default 0)")
    m.add_argument("--max-bytes", type=nonnegative_int, default=0, metavar="B",
                   help="largest message (bytes) it is selected for; 0 = no limit (default)")
    p.add_argument("--name", help="algorithm name written into the file (default SPEC-METHOD)")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="where to write the XML")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (format, method, ranks, chunks_per_shard, lp_time, "
                        "predicted_time, fidelity, output) instead of the summary")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)


def _schedule(args):
    """The schedule IR, from --from-ir or by solving SPEC; checks the method fits the format."""
    from ..chunk import build_schedule, load_schedule
    from ..chunk.ir import LinkSchedule

    kind = EMITS[args.emit][0]
    if args.from_ir:
        if args.spec:
            raise A2AError("give either SPEC or --from-ir, not both")
        solving = [o for o, v in (("--method", args.method), ("--link-bw", args.link_bw), ("--host-bw", args.host_bw),
                                  ("--forwarding", args.forwarding != "host"), ("--remove-links", args.remove_links),
                                  ("--remove-nodes", args.remove_nodes), ("--steps", args.steps),
                                  ("--max-chunks", args.max_chunks != 16)) if v]
        if solving:
            raise A2AError(f"{', '.join(solving)}: the schedule in {args.from_ir} is already solved and chunked; "
                           f"these options apply when compiling from SPEC")
        schedule = load_schedule(args.from_ir)
        got = "link" if isinstance(schedule, LinkSchedule) else "path"
        if got != kind:
            raise A2AError(f"--emit {args.emit} needs a {kind} schedule, but {args.from_ir} holds a {got} schedule "
                           f"(method {schedule.method}); use --emit {'mpi' if got == 'path' else 'msccl or oneccl'}")
        return schedule
    if not args.spec:
        raise A2AError("give a topology SPEC (or --from-ir FILE.json)")
    method = args.method or DEFAULT_METHOD[kind]
    if (method == "tsmcf") != (kind == "link"):
        raise A2AError(f"--emit {args.emit} needs a {kind} schedule: use --method "
                       f"{'tsmcf' if kind == 'link' else 'mcf-extp or pmcf'} "
                       f"({method} gives {'routes: emit them with --emit mpi' if kind == 'link' else 'a time-stepped link schedule: emit it with --emit msccl or oneccl'})")
    return build_schedule(topology_from_args(args), fabric_from_args(args), method,
                          max_chunks=args.max_chunks, steps=args.steps,
                          progress=None if args.quiet else progress)


def _lower(args, schedule):
    from ..lower import LOWERINGS

    options = {"name": args.name}
    if args.emit == "msccl":
        options.update(channels=args.channels, instances=args.instances, proto=args.proto,
                       min_bytes=args.min_bytes, max_bytes=args.max_bytes)
    return LOWERINGS[args.emit](schedule, **options)


def schedule_topology(schedule):
    """The topology a schedule was built on, rebuilt from its ``links`` (for verification)."""
    from ..chunk.ir import PathSchedule
    from ..topology.model import Topology

    n_nodes = schedule.n_nodes if isinstance(schedule, PathSchedule) else schedule.n_ranks
    return Topology.from_links(schedule.spec, schedule.n_ranks, [(u, v) for u, v, _ in schedule.links],
                               n_switches=n_nodes - schedule.n_ranks, capacity=[c for _, _, c in schedule.links],
                               undirected=False)


def run(args) -> int:
    from ..chunk import predicted_time
    from ..files import atomic_write
    from ..formats import program_to_xml
    from ..verify import verify_bytes

    msccl_only = [o for o, v in (("--channels", args.channels), ("--instances", args.instances != 1),
                                 ("--proto", args.proto != "Simple"), ("--min-bytes", args.min_bytes),
                                 ("--max-bytes", args.max_bytes)) if v]
    if msccl_only and args.emit != "msccl":
        raise A2AError(f"{', '.join(msccl_only)} appl{'ies' if len(msccl_only) == 1 else 'y'} to --emit msccl only")
    schedule = _schedule(args)
    program = _lower(args, schedule)
    data = program_to_xml(program)
    report = verify_bytes(data, args.output, schedule_topology(schedule), schedule.fabric, lp=False)
    if not report.valid:  # a compiler bug, never a user error: keep the evidence, write nothing
        raise RuntimeError("lowered program failed verification:\n" + "\n".join(report.messages()[:20]))
    atomic_write(args.output, data)
    t = predicted_time(schedule)
    out = {
        "format": args.emit,
        "spec": schedule.spec,
        "method": schedule.method,
        "fabric": schedule.fabric.to_json_dict(),
        "ranks": schedule.n_ranks,
        "chunks_per_shard": schedule.chunks_per_shard,
        "lp_time": schedule.lp_time,
        "predicted_time": t,
        "fidelity": schedule.lp_time / t if t > 0 else 0.0,
        "program": report.summary,
        "program_predicted_time": report.perf.predicted_time,
        "verified": True,
        "output": str(args.output),
    }
    if args.json:
        print_json(out)
    else:
        print(f"compiled   {out['spec']} {out['method']} -> {args.emit} ({report.summary})")
        print(f"LP time    {out['lp_time']:.6g} link-times (unit shards)")
        print(f"predicted  {t:.6g} link-times for the chunked schedule, fidelity {out['fidelity']:.4f}")
        print("verified   executor rules, data movement, deadlock freedom, links"
              if args.emit == "msccl" else "verified   data movement, links")
        print(f"saved      {args.output}")
    return 0
