"""``a2a schedule SPEC --method M -o FILE.json``: solve, chunk, write the schedule IR."""

from __future__ import annotations

from ..cli import command_parser
from ..chunk import SCHEDULE_METHODS, build_schedule, predicted_time, save_schedule
from ..chunk.cost import fidelity_text, ratio
from ..chunk.ir import LinkSchedule, Schedule
from ..compiler import CHUNKING_OPTIONS
from .common import add_chunking_args, add_demand_arg, add_fabric_args, add_output_args, add_topology_args, \
    applies_only, demand_from_args, fabric_from_args, print_json, progress, topology_from_args

EPILOG = """\
methods:
  tsmcf     time-stepped MCF (Basu et al. §3.1.3): a link schedule, hosts store and forward chunks
            step by step; switchless topologies only
  mcf-extp  link MCF + widest-path extraction (§3.2.1): a path schedule (routes per shard)
  pmcf      path MCF over candidate paths (§3.1.4): a path schedule

times are in link-times for unit shards (a shard of m bytes over links of b bytes/s: multiply by m/b).
fidelity = lp_time / predicted_time (<= 1): how much of the method's own LP optimum survives chunking;
mcf_ratio = mcf_time / predicted_time (<= 1): the same against the link MCF optimum, the best any schedule
can do (pmcf over disjoint paths can be far from it on switched trees: try --paths shortest).
Both LP times are certified lower bounds (weak duality), so neither ratio can exceed 1.

all-to-allv (--demand D.csv): times are the all-to-allv's (volumes scaled to mean 1 per pair);
a path schedule keeps C chunks per pair, each 1/C of its volume; a link schedule gets whole
chunks of one size, T[s][d] per pair (rows and columns summing to N*C when D is balanced, as
MSCCL needs).  The IR records the demand (docs/formats.md).
"""


def summary(schedule: Schedule, path) -> dict:
    """The ``--json`` object."""
    t = predicted_time(schedule)
    link = isinstance(schedule, LinkSchedule)
    return {
        "spec": schedule.spec,
        "method": schedule.method,
        "kind": "link" if link else "path",
        "fabric": schedule.fabric.to_json_dict(),
        "ranks": schedule.n_ranks,
        "steps": len(schedule.steps) if link else 1,
        "chunks_per_shard": schedule.chunks_per_shard,
        "transfers": sum(len(s) for s in schedule.steps) if link else None,
        "routes": None if link else len(schedule.routes),
        "predicted_time": t,
        "lp_time": schedule.lp_time,
        "fidelity": ratio(schedule.lp_time, t),
        "mcf_time": schedule.info.get("mcf_time"),
        "mcf_ratio": ratio(schedule.info["mcf_time"], t) if "mcf_time" in schedule.info else None,
        "output": str(path),
        **({} if schedule.demand is None else {"demand": schedule.demand.to_json_dict(max_ranks=0)}),
    }


def _human(s: dict) -> str:
    shape = (f"{s['steps']} steps, {s['transfers']} transfers" if s["kind"] == "link"
             else f"{s['routes']} routes")
    return "\n".join([
        f"schedule   {s['spec']} {s['method']} ({s['kind']} schedule, {s['ranks']} ranks)",
        f"shape      {shape}, {s['chunks_per_shard']} chunk{'' if s['chunks_per_shard'] == 1 else 's'} per shard",
        f"time       predicted {s['predicted_time']:.6g}, LP {s['lp_time']:.6g}, link MCF {s['mcf_time']:.6g} "
        f"link-times (unit shards)",
        f"fidelity   {fidelity_text(s['fidelity'])} of {s['method']}'s own LP, "
        f"{fidelity_text(s['mcf_ratio'])} of the link MCF optimum",
        f"saved      {s['output']}",
    ])


def run(args) -> int:
    """``a2a schedule``: :func:`a2a_compiler.chunk.build_schedule`, write the IR, print the summary."""
    topology = topology_from_args(args)
    fabric = fabric_from_args(args)
    demand = demand_from_args(args, topology.n_hosts)
    options = {k: v for k, v in (("paths", args.paths), ("max_paths", args.max_paths)) if v}
    schedule = build_schedule(
        topology, fabric, args.method, max_chunks=args.max_chunks or 16, min_fidelity=args.min_fidelity,
        steps=args.steps,
        solve_options=options, progress=None if args.quiet else progress, demand=demand,
    )
    save_schedule(schedule, args.output)
    s = summary(schedule, args.output)
    if args.json:
        print_json(s)
    else:
        print(_human(s))
    return 0



def register(subparsers) -> None:
    """Add ``a2a schedule`` to the subcommands."""
    p = command_parser(subparsers, "schedule", "solve, chunk and write a schedule (IR JSON)",
                       "Solve SPEC with METHOD, split every shard into equal chunks, assign chunks to "
                       "time-stepped links (tsmcf) or routes (mcf-extp, pmcf), and write the schedule IR "
                       "(docs/formats.md, 'Schedule IR JSON').", EPILOG)
    add_topology_args(p)
    p.add_argument("--method", choices=sorted(SCHEDULE_METHODS), default="tsmcf",
                   help="solver whose flows are chunked (default tsmcf)")
    add_chunking_args(p)
    applies_only(p, CHUNKING_OPTIONS)
    add_fabric_args(p)
    add_demand_arg(p)
    add_output_args(p, "FILE.json", "the schedule IR", "method, steps, chunks_per_shard, predicted_time, lp_time, "
                                                       "fidelity, mcf_time, mcf_ratio, ...")
    p.set_defaults(func=run)
