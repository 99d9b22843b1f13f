"""``a2a compile SPEC --emit {msccl,mscclpp,oneccl,mpi} -o FILE``: solve, chunk, lower, verify, write."""

from __future__ import annotations

import sys

from ..cli import command_parser
from ..chunk.cost import fidelity_text
from ..compiler import EMITS
from ..errors import A2AError
from ..formats.msccl_rules import TARGETS
from .common import SPEC_HELP, add_chunking_args, add_demand_arg, add_fabric_args, add_injection_args, \
    add_output_args, add_topology_args, nonnegative_int, positive_int, print_json, progress

EPILOG = """\
formats and the methods that feed them (docs/formats.md):
  --emit msccl   link schedule from tsmcf: thread blocks, sends/receives, scratch relays
  --emit mscclpp link schedule from tsmcf: MSCCL++ execution plan (JSON): puts, signals, waits
  --emit oneccl  link schedule from tsmcf: per-step asynchronous sends/receives + sync
  --emit mpi     path schedule from mcf-extp (default) or pmcf: routes per shard

The output is verified (the checks of 'a2a verify') before it is written; an
invalid program is never written.  Same inputs -> byte-identical file, the
bytes a2a_compiler.compile(SPEC, emit=..., ...) returns from Python.

times are in link-times for unit shards (a shard of m bytes over links of b bytes/s:
multiply by m/b).  The predicted time is the program's, as 'a2a verify' prices it
(msccl: dataflow; oneccl: its steps; mpi: all routes at once).
  fidelity   = LP time / predicted time, LP time the method's own LP optimum (certified)
  MCF ratio  = MCF time / predicted time, MCF time the link MCF optimum (certified): the best
               any schedule can do on this fabric.  Both are <= 1.
--forwarding nic with --host-bw is refused for msccl/mscclpp/oneccl: their programs relay through
the ranks' scratch buffers (host store-and-forward); NIC-routed paths are --emit mpi.  (Without
--host-bw the two modes are the same fabric, and the file records the mode given.)

all-to-allv (--demand D.csv, mixture-of-experts): the solve and the chunks follow D.
  mpi      C chunks per pair, each 1/C of the pair's volume; the file records the volumes,
           and the runtime splits whatever byte counts arrive by the routes' chunk shares
  oneccl   whole chunks of one size, T[s][d] ~ C*D[s,d] per pair (rounded up); the file
           records T (chunks=) and the volumes per rank
  msccl    only matrices whose rows and columns all sum to the same total (fixed-size
           buffers): T[i][j] chunks of rank i for j at input offset sum_{k<j} T[i][k],
           output offset sum_{k<i} T[k][j], rows and columns summing to nchunksperloop
           ('a2a demand show D.csv --chunks C' prints T); others are refused
The plain all-to-all is compiled alike and its program priced under D with its routes and
steps unchanged ("uniform reused"): what reusing one schedule for every batch costs.

sizes the executor runs a GPU file at (docs/msccl.md, "Which sizes each file serves"):
  msccl    msccl-executor-nccl and RCCL select the file only when the elements per peer are a
           multiple of nchunksperloop/ngpus (C, chunks per peer); at any other size they run their
           own all-to-all, silently.  --target chooses C among powers of two, so 1 MiB and 64 MiB
           per peer (every power of two from C elements up) qualify; when no power of two reaches
           the fidelity target, a 'trade-off' line says what --any-chunks (any C) would give
  mscclpp  the executor throws unless the bytes per peer are a multiple of 16*C: C is always
           chosen among powers of two, unless --any-chunks
With C restricted to powers of two the default --max-chunks is 64 (1, 2, 4, ..., 64).
The 'sizes' line says which rule applies and whether 1 MiB and 64 MiB per peer qualify.

fidelity target: without --min-fidelity the smallest C reaching 0.97 is used, else the best;
a file below 0.97 is written, with a warning on stderr saying why, and the exit status is 1.
--min-fidelity F sets the target: the smallest C reaching F, none reaching it is refused (exit 2).

examples:
  a2a compile hypercube:3 --emit msccl -o hc3.xml
  a2a compile torus:3x3x3 --emit mscclpp -o t3.json
  a2a compile torus:3x3x3 --link-bw 25Gbps --host-bw 100Gbps --emit oneccl -o t3.xml
  a2a compile torus:3x3x3 --link-bw 25Gbps --host-bw 100Gbps --emit msccl --min-fidelity 0.99 --max-chunks 24 -o t3.xml
  a2a compile fattree:4,2 --emit mpi --method pmcf --paths shortest -o ft-paths.xml
  a2a compile torus:3x3x3 --forwarding nic --emit mpi --max-flows 8 -o t3-steps.xml   # time-stepped routes
  a2a schedule hypercube:3 -o s.json && a2a compile --from-ir s.json --emit msccl -o hc3.xml
  a2a demand zipf 8 --alpha 1 -o D.csv && a2a compile bipartite:4 --forwarding nic --emit mpi --demand D.csv -o moe.xml
"""




#: MSCCL lowering options: flag, type, metavar, help.
MSCCL_FLAGS = [
    ("--channels", positive_int, "K", "channels each link's chunks are spread over (default: the fewest, up to 8, "
                                      "that keep every thread block within the executor's 64 steps, or 2, 4, 8 when "
                                      "only separate connections reach the fidelity target)"),
    ("--instances", positive_int, "I", "run I copies of the schedule, each on 1/I of every chunk and its own "
                                       "channels (nchannels = K*I; default 1)"),
    ("--min-bytes", nonnegative_int, "B", "smallest message (bytes) the algorithm is selected for (default 0)"),
    ("--max-bytes", nonnegative_int, "B", "largest message (bytes) it is selected for; 0 = no limit (default)"),
]


def register(sub) -> None:
    """Add ``a2a compile`` to the subcommands."""
    p = command_parser(sub, "compile",
                       "solve, chunk and lower a schedule to MSCCL XML, an MSCCL++ plan, oneCCL-style or MPI path XML",
                       "Run solve -> chunk -> lower in one go (or lower a saved schedule IR with --from-ir), "
                       "verify the program and write it atomically.", EPILOG,
                       {1: "the file is written, but its fidelity is below the default target 0.97 (a warning on "
                           "stderr says why; --min-fidelity F sets the target)"})
    p.add_argument("spec", metavar="SPEC", nargs="?", help=f"{SPEC_HELP} (omit with --from-ir)")
    p.add_argument("--from-ir", metavar="FILE.json", help="lower this schedule IR (from 'a2a schedule') "
                                                          "instead of solving SPEC; its LP times are solved again "
                                                          "and an IR whose records differ is refused; its chunk "
                                                          "count is kept, so --target and --emit mscclpp cannot "
                                                          "choose a power of two (the 'sizes' line says which "
                                                          "sizes the executor runs it at)")
    p.add_argument("--emit", choices=sorted(EMITS), required=True,
                   help="output format: " + "; ".join(f"{k}: {v[1]}" for k, v in EMITS.items()))
    p.add_argument("--method", choices=("tsmcf", "mcf-extp", "pmcf"),
                   help="solver: tsmcf for --emit msccl/mscclpp/oneccl (default), mcf-extp (default) or pmcf for "
                        "--emit mpi")
    add_topology_args(p, positional=False)
    add_fabric_args(p)
    add_demand_arg(p)
    add_chunking_args(p)
    m = p.add_argument_group("MSCCL options (--emit msccl)")
    for flag, kind, metavar, text in MSCCL_FLAGS:
        m.add_argument(flag, type=kind, metavar=metavar, help=text)
    m.add_argument("--proto", choices=("Simple", "LL", "LL128"), help="NCCL protocol the executor uses (default Simple)")
    m.add_argument("--target", choices=sorted(TARGETS),
                   help="MSCCL executor the file must load in: nccl (msccl-executor-nccl, default) or rccl (ROCm): "
                        "thread blocks per GPU (1024 / 64), channels (32 / 128) and the parser's 4095 nodes per rank; "
                        "the chunk count is chosen among programs that fit and that the executor selects at "
                        "power-of-two message sizes (C a power of two), and the target is recorded in the file, "
                        "for 'a2a verify' (docs/msccl.md)")
    m.add_argument("--any-chunks", action="store_true", default=None,
                   help="msccl with --target, and mscclpp: choose C among all chunk counts, even those the executor "
                        "never selects at power-of-two sizes (MSCCL then runs its own all-to-all there, MSCCL++ "
                        "throws)")
    m.add_argument("--rcs", action="store_true", default=None,
                   help="pass chunks straight on with rcs (receive-copy-send) steps where the reference allows it "
                        "(3-hop paths whose relays can stage the chunk in its output slot), on extra channels: "
                        "less scratch, but more steps and thread blocks (docs/formats.md)")
    add_injection_args(p)
    p.add_argument("--name", help="algorithm name written into the file: letters, digits and . _ : , = + - "
                                  "(default SPEC-METHOD, other characters as _)")
    add_output_args(p, "FILE", "the file (XML; an MSCCL++ plan: JSON)",
                    "docs/json.md: valid, format, spec, method, fabric, ranks, chunks_per_shard, program, "
                    "predicted_time, lp_time, mcf_time, fidelity, mcf_ratio, target, sizes, fidelity_warning, "
                    "output, ...; the same values 'a2a verify FILE --json' prints")
    p.set_defaults(func=run)


#: ``a2a compile`` options that are keywords of :func:`a2a_compiler.compiler.compile`.
OPTIONS = ("method", "link_bw", "host_bw", "forwarding", "nvlink_bw", "remove_links", "remove_nodes", "among",
           "remove_cables", "seed", "max_chunks",
           "min_fidelity", "steps", "paths", "max_paths", "channels", "instances", "proto", "min_bytes",
           "max_bytes", "rcs", "target", "max_flows", "flow_per_chunk", "name", "demand", "any_chunks")


def run(args) -> int:
    """``a2a compile``: :func:`a2a_compiler.compile`, write the file, print the summary."""
    from ..chunk import load_schedule
    from ..compiler import compile

    if bool(args.spec) == bool(args.from_ir):
        raise A2AError("give either SPEC or --from-ir FILE.json" + (", not both" if args.spec else ""))
    source = load_schedule(args.from_ir) if args.from_ir else args.spec
    result = compile(source, args.emit, progress=None if args.quiet else progress,
                     **{k: getattr(args, k) for k in OPTIONS if getattr(args, k) is not None})
    result.write(args.output)
    out = {**result.summary(), "output": str(args.output)}
    status = 0 if out["fidelity_warning"] is None else 1
    if status:
        print(f"a2a compile: warning: {out['fidelity_warning']}", file=sys.stderr)
    if args.json:
        print_json(out)
        return status
    print(f"compiled   {out['spec']} {out['method']} -> {args.emit} ({out['program']})")
    print(f"predicted  {out['predicted_time']:.6g} link-times (unit shards) for the program"
          + (" as a dataflow" if args.emit in ("msccl", "mscclpp") else ""))
    print(f"LP         {out['lp_time']:.6g} link-times, {out['method']}'s own LP (certified): "
          f"fidelity {fidelity_text(out['fidelity'])}")
    print(f"MCF        {out['mcf_time']:.6g} link-times, the link MCF optimum (certified): "
          f"ratio {fidelity_text(out['mcf_ratio'])}")
    if "demand" in out:
        print(f"demand     {out['demand']['source']} (sha256 {out['demand']['sha256'][:12]}): times are the "
              f"all-to-allv's, volumes scaled to mean 1 per pair")
    if "uniform_reused" in out:
        u = out["uniform_reused"]
        print(f"reused     the plain all-to-all program under this demand: {u['predicted_time']:.6g} link-times, "
              f"{u['slowdown']:.3f}x this one")
    if out["sizes"] is not None:
        print(f"sizes      {result.size_rule.describe()}")
    if "any_chunks" in out:
        a = out["any_chunks"]
        print(f"trade-off  C = {out['chunks_per_shard']}, a count {out['sizes']['executor']} selects at power-of-two "
              f"sizes, gives fidelity {fidelity_text(out['fidelity'])}; --any-chunks gives "
              f"{fidelity_text(a['fidelity'])} at C = {a['chunks_per_shard']}, which it never selects at them")
    print("verified   " + ("executor rules, data movement, deadlock freedom, links" if args.emit in ("msccl", "mscclpp")
                           else "data movement, links"))
    print(f"saved      {args.output}")
    return status
