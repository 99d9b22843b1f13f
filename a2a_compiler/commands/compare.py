"""``a2a compare SPEC ...``: optimal all-to-all time of several topologies against the Theorem 1 bound."""

from __future__ import annotations

from ..cli import command_parser
from ..errors import A2AError
from ..progress import Progress
from .common import PROGRESS_DELAY, SPEC_HELP, add_fabric_args, fabric_from_args, print_json

EPILOG = """\
Each topology's all-to-all time (lp_time) is 1/F link-times for unit shards, F its
certified optimal concurrent flow (mcf-decomp: master LP with a dual-bound
certificate; "gap" is the relative optimality gap).  thm1_time is Basu et al.'s
Theorem 1 lower bound (eq. 25) for any topology with the same number of hosts N
and out-degree d: the depth sum of a full d-ary arborescence on N nodes, over d.
thm1 ratio = thm1_time / lp_time <= 1: the closer to 1, the closer to the best
possible topology of that size and degree.

Topologies are ranked by the thm1 ratio, not by raw times: a topology with more
hosts or a lower degree is slower whatever its structure, so raw times compare
only like with like, while the ratio compares each with the bound for its own N
and degree.  The best row is marked '*'; a row without a Theorem 1 bound
(switches, non-unit capacities) is not ranked.

examples:
  a2a compare genkautz:250,4 xpander:4,50,seed=1 jellyfish:250,4,seed=1 torus:16x16
  a2a compare genkautz:64,4 torus:8x8 --json
  a2a compare genkautz:64,4 slimfly:5,p=0 --link-bw 25Gbps --plot cmp.png
"""


def register(sub) -> None:
    p = command_parser(
        sub, "compare", "optimal all-to-all time of topologies against the Theorem 1 bound (Fig. 10)",
        "Solve the optimal all-to-all concurrent flow of each topology and compare its time with "
        "the Theorem 1 lower bound for its number of hosts and degree (Basu et al. §5.4).", EPILOG)
    p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    add_fabric_args(p)
    p.add_argument("--method", choices=("mcf-decomp", "mcf", "tsmcf"), default="mcf-decomp",
                   help="flow formulation solved for every topology (default mcf-decomp)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (docs/json.md): fabric, best, rows[*] with spec, hosts, degree_max, "
                        "lp_time, thm1_time, thm1_ratio, rank, gap, method, solve_seconds, throughput_bound_GBps")
    p.add_argument("--plot", metavar="PNG", help="also write a bar chart of the thm1 ratios to PNG")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)


def _human(comparison) -> str:
    best = comparison.best
    rank = {id(r): i + 1 for i, r in enumerate(comparison.ranked)}
    head = f"{'topology':28s} {'hosts':>5s} {'deg':>3s} {'a2a time':>10s} {'thm1':>9s} {'ratio':>7s} {'rank':>5s}"
    lines = [head]
    for r in comparison.rows:
        thm1 = "-" if r.thm1_time is None else f"{r.thm1_time:.4g}"
        ratio = "-" if r.thm1_ratio is None else f"{r.thm1_ratio:.4f}"
        mark = "*" if r is best else " "
        lines.append(f"{mark}{r.spec:27s} {r.hosts:5d} {r.degree_max:3d} {r.lp_time:10.5g} {thm1:>9s} {ratio:>7s} "
                     f"{rank.get(id(r), '-'):>5}")
    lines.append("times in link-times for unit shards; ratio = Theorem 1 bound for the row's N and degree / time "
                 "(<= 1); ranked by ratio")
    return "\n".join(lines)


def run(args) -> int:
    from ..compare import compare, plot
    from ..fabric import check_link_classes
    from ..topology.spec import from_spec

    fabric = fabric_from_args(args)
    if args.method == "tsmcf" and fabric.forwarding != "host":
        raise A2AError("--method tsmcf schedules host-forwarded chunks; use --forwarding host")
    topologies = [from_spec(s) for s in args.specs]
    refusals = []  # --nvlink-bw applies to the rows with NVLinks; with none, it was ignored: refused
    for t in topologies:
        try:
            check_link_classes(t, fabric)
        except A2AError as exc:
            refusals.append(exc)
    if len(refusals) == len(topologies):
        raise refusals[0] if len(topologies) == 1 else A2AError(
            f"{str(refusals[0]).split(':')[0]}: none of {', '.join(t.spec for t in topologies)} has such links "
            f"(only nvswitch:... topologies have them)")
    reporter = None if args.quiet else Progress(delay=PROGRESS_DELAY)
    try:
        comparison = compare(topologies, fabric, args.method, progress=reporter)
    finally:
        if reporter:
            reporter.close()
    if args.plot:
        plot(comparison, args.plot)
    if args.json:
        print_json(comparison.to_json_dict())
    else:
        print(_human(comparison))
        if args.plot:
            print(f"saved {args.plot}")
    return 0
