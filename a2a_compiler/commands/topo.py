"""``a2a topo SPEC``: build a topology, print its size, distances and bounds, optionally save it."""

from __future__ import annotations

from ..cli import command_parser
from ..progress import Progress
from ..topology.metrics import distance_bound, distance_stats, require_connected, thm1_lower_bound
from ..topology.model import Topology
from .common import PROGRESS_DELAY, add_topology_args, print_json, topology_from_args

EPILOG = """\
bounds (unit link capacities, unit demand per ordered host pair):
  distance_bound_F       F <= sum of link capacities / sum of host-pair distances (Basu et al., known-values.md)
  thm1_time              1/F >= (depth sum of a full d-ary arborescence on N nodes) / d, d = max out-degree
                         (Basu et al. §5.4, Thm. 1); only for switchless, unit-capacity topologies
"""


def summary(topology: Topology, progress=None) -> dict:
    """The ``--json`` object: sizes, host degrees, distances over ordered host pairs, bounds."""
    require_connected(topology)
    stats = distance_stats(topology, progress)
    deg = topology.out_degree()[: topology.n_hosts]
    return {
        "spec": topology.spec,
        "hosts": topology.n_hosts,
        "switches": topology.n_switches,
        "links": topology.n_links,
        "cables": topology.n_cables // (1 if not topology.is_symmetric() else 2),
        "directed": not topology.is_symmetric(),
        "degree_min": int(deg.min()),
        "degree_max": int(deg.max()),
        "diameter": int(stats.diameter),
        "mean_distance": stats.mean,
        "distance_bound_F": distance_bound(topology, stats),
        "thm1_time": thm1_lower_bound(topology),
        "notes": list(topology.notes),
    }


def _human(s: dict) -> str:
    parallel = s["cables"] != s["links"] // 2
    kind = "arcs (directed)" if s["directed"] else \
        f"links ({s['links'] // 2} cables)" if not parallel else \
        f"links ({s['links'] // 2} port groups of {s['cables']} cables)"
    lines = [
        f"topology   {s['spec']}",
        f"nodes      {s['hosts']} hosts, {s['switches']} switches",
        f"links      {s['links']} {kind}",
        f"degree     host out-degree {s['degree_min']}..{s['degree_max']}",
        f"distance   diameter {s['diameter']}, mean {s['mean_distance']:.4f} over ordered host pairs",
        f"bound      F <= {s['distance_bound_F']:.6g} (distance bound; all-to-all time >= {1 / s['distance_bound_F']:.6g})",
    ]
    if s["thm1_time"] is not None:
        lines.append(f"thm 1      all-to-all time 1/F >= {s['thm1_time']:.6g} (Basu et al. §5.4)")
    lines += [f"note       {n}" for n in s["notes"]]
    return "\n".join(lines)


def run(args) -> int:
    """``a2a topo``: build, summarise, optionally save the topology."""
    from ..files import atomic_write
    from ..topology.ibnet import net_file

    reporter = None if args.quiet else Progress(delay=PROGRESS_DELAY)
    try:
        if reporter:
            reporter(f"building {args.spec}")
        topology = topology_from_args(args)
        if reporter:
            reporter(f"{topology.spec}: {topology.n_nodes} nodes, {topology.n_links} links; distances")
        s = summary(topology, reporter)
    finally:
        if reporter:
            reporter.close()
    net = net_file(topology) if args.ibnet else None
    if args.save:
        topology.save(args.save)
    if net is not None:
        atomic_write(args.ibnet, net)
    if args.json:
        print_json(s)
    else:
        print(_human(s))
        if args.save:
            print(f"saved      {args.save}")
        if args.ibnet:
            print(f"ibnet      {args.ibnet} (ibsim's net file; ibnetdiscover's format)")
    return 0


def register(subparsers) -> None:
    """Add ``a2a topo`` to the subcommands."""
    p = command_parser(subparsers, "topo", "build a topology and print its size, distances and bounds",
                       "Build the topology SPEC (optionally punctured), print a summary, optionally save it as JSON.",
                       EPILOG)
    add_topology_args(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (spec, hosts, switches, links, cables, degree_min, degree_max, diameter, "
                        "mean_distance, distance_bound_F, thm1_time, ...) instead of the summary")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--save", metavar="FILE",
                   help="write the topology in the JSON topology format (docs/formats.md), atomically; "
                        "load it back with file:FILE")
    p.add_argument("--ibnet", metavar="FILE",
                   help="write the topology as an InfiniBand fabric in ibnetdiscover's format, the net file ibsim "
                        "simulates (hosts must be CA ports cabled to switches; docs/infiniband.md); "
                        "read it back with ibnet:FILE")
    p.set_defaults(func=run)
