"""``a2a compare SPEC ...``: optimal all-to-all time of several topologies against the Theorem 1 bound."""

from __future__ import annotations

import argparse

from ..errors import A2AError
from ..progress import Progress
from .common import PROGRESS_DELAY, SPEC_HELP, add_fabric_args, fabric_from_args, print_json

EPILOG = """\
Each topology's all-to-all time is 1/F link-times for unit shards, F its certified
optimal concurrent flow (mcf-decomp: master LP with a dual-bound certificate;
"gap" is the relative optimality gap).  thm1_time is Basu et al.'s Theorem 1
lower bound (eq. 25) for any topology with the same number of hosts N and
out-degree d: the depth sum of a full d-ary arborescence on N nodes, over d.
ratio = time / thm1_time >= 1; the closer to 1, the closer to the best possible
topology of that size and degree.  The best row (smallest time) is marked '*'.

examples:
  a2a compare genkautz:250,4 xpander:4,50,seed=1 jellyfish:250,4,seed=1 torus:16x16
  a2a compare genkautz:64,4 torus:8x8 --json
  a2a compare genkautz:64,4 slimfly:5,p=0 --link-bw 25Gbps --plot cmp.png
"""


def register(sub) -> None:
    p = sub.add_parser(
        "compare", help="optimal all-to-all time of topologies against the Theorem 1 bound (Fig. 10)",
        description="Solve the optimal all-to-all concurrent flow of each topology and compare its time with "
                    "the Theorem 1 lower bound for its number of hosts and degree (Basu et al. §5.4).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("specs", nargs="+", metavar="SPEC", help=SPEC_HELP)
    add_fabric_args(p)
    p.add_argument("--method", choices=("mcf-decomp", "mcf", "tsmcf"), default="mcf-decomp",
                   help="flow formulation solved for every topology (default mcf-decomp)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object: fabric, best, rows[*] with spec, hosts, degree, alltoall_time, "
                        "thm1_time, ratio, gap, method, solve_seconds, throughput_bound_GBps")
    p.add_argument("--plot", metavar="PNG", help="also write a bar chart of time / Thm. 1 bound to PNG")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=run)


def _human(comparison) -> str:
    best = comparison.best
    head = f"{'topology':28s} {'hosts':>5s} {'deg':>3s} {'a2a time':>10s} {'thm1':>9s} {'ratio':>7s} {'vs best':>8s}"
    lines = [head]
    for r in comparison.rows:
        thm1 = "-" if r.thm1_time is None else f"{r.thm1_time:.4g}"
        ratio = "-" if r.ratio is None else f"{r.ratio:.4f}"
        mark = "*" if r is best else " "
        lines.append(f"{mark}{r.spec:27s} {r.hosts:5d} {r.degree:3d} {r.alltoall_time:10.5g} {thm1:>9s} {ratio:>7s} "
                     f"{r.alltoall_time / best.alltoall_time:7.3f}x")
    lines.append("times in link-times for unit shards; ratio = time / Theorem 1 bound for the row's N and degree")
    return "\n".join(lines)


def run(args) -> int:
    from ..compare import compare, plot
    from ..topology.spec import from_spec

    fabric = fabric_from_args(args)
    if args.method == "tsmcf" and fabric.forwarding != "host":
        raise A2AError("--method tsmcf schedules host-forwarded chunks; use --forwarding host")
    topologies = [from_spec(s) for s in args.specs]
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
