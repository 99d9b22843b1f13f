"""``a2a testbed``: an emulated direct-connect fabric on this machine (network namespaces, shaped veth links).

Thin layer over :mod:`runtimes.testbed`: ``up``, ``down``, ``list``, ``exec`` and ``bench``.
"""

from __future__ import annotations

import argparse
import sys

from ..cli import command_parser
from ..errors import A2AError
from ..fabric import Fabric
from ..options import ABSENT
from .common import add_fabric_args, add_topology_args, applies_only, fabric_from_args, nonnegative_int, positive_int, \
    print_json, progress, topology_from_args

DEFAULT_LINK_BW = "20Mbps"
DEFAULT_NAME = "default"

DESCRIPTION = """\
Emulate a direct-connect fabric on one Linux machine (root needed) and measure compiled schedules on it
against native MPI_Alltoall and the MCF bound (Basu et al. §5.2, Figs. 3-6).

Every host gets a host namespace (its MPI rank) and a NIC namespace joined by a veth pair shaped to
--host-bw (the host-NIC bottleneck of Fig. 2); every cable is a veth pair between NIC namespaces shaped
to --link-bw in each direction (tbf). NIC forwarding: the NICs route in the kernel on SSSP default
routes (one path per pair, destination-based, like an InfiniBand LFT), and each route of an MPI path
schedule is steered onto its own path. Host forwarding: NICs never move a packet between cables, so
every relay goes through a host. MPI is MPICH (ofi/tcp) launched by hydra into the namespaces.
"""

EPILOG = f"""\
bandwidths are scaled for one machine: the paper's 25 Gbit/s links become --link-bw (default
{DEFAULT_LINK_BW}; 10Mbps for the 27-host torus, which one machine cannot forward at 20Mbps); keep
--host-bw/--link-bw as in the paper (e.g. --host-bw 40Mbps with 10Mbps links for the torus's
100 Gbit/s hosts). Everything the testbed creates is named a2tb-NAME-*; nothing else is touched.
'bench' tears its testbed down on success, error, Ctrl-C and a killed rank; 'up' leaves it running
until 'down'.

examples:
  a2a testbed bench bipartite:4 --forwarding nic --schedule schedules/bipartite-4-mcf-extp.mpi.xml --native
  a2a testbed bench hypercube:3 --schedule schedules/hypercube-3-tsmcf.oneccl.xml --default-routes --sizes 1M
  a2a testbed bench torus:3x3x3 --link-bw 10Mbps --host-bw 40Mbps --forwarding nic \\
      --schedule schedules/torus-3x3x3-mcf-extp.mpi.xml --native --sizes 256K --json
  a2a testbed up ring:4 --name demo && a2a testbed exec --name demo -- python -m runtimes.mpi FILE
  a2a testbed list;  a2a testbed down --name demo;  a2a testbed down --all
See docs/testbed.md.
"""


def _sizes(text: str) -> list[int]:
    from runtimes.mpi.cli import parse_size

    sizes = [parse_size(s) for s in text.split(",") if s.strip()]
    if not sizes:
        raise argparse.ArgumentTypeError("give at least one size, e.g. 1M or 64K,1M")
    return sizes


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return value


def _fabric_args(p) -> None:
    add_topology_args(p)
    add_fabric_args(p)
    p.add_argument("--name", metavar="NAME", help="instance name: 1-16 lower-case letters and digits")
    p.add_argument("--force", action="store_true",
                   help="build even when the aggregate emulated rate exceeds what one machine forwards")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")


#: Exit codes of each ``a2a testbed`` action beyond every command's (a2a_compiler.cli.EXIT_STATUS).
INTERRUPTED = {130: "interrupted (Ctrl-C / SIGINT, or SIGTERM): 'up' and 'bench' tear their testbed down first, "
                    "'exec' kills its job"}
BENCH_CODES = {1: "a schedule failed its byte-exact or route check", **INTERRUPTED}
EXEC_CODES = {1: "(or any status not listed here) the command's own, as mpiexec reports it: the ranks' exit status, "
                 "N for a rank killed by signal N (128+N for mpiexec itself)",
              124: "the command did not finish within --timeout and was killed (the testbed stays up)", **INTERRUPTED}
EXIT_CODES = {1: f"bench: {BENCH_CODES[1]}; exec: {EXEC_CODES[1]}", 124: f"exec: {EXEC_CODES[124]}", **INTERRUPTED}


def register(sub) -> None:
    p = command_parser(sub, "testbed", "emulated direct-connect fabric: up/down/list/exec/bench", DESCRIPTION,
                       EPILOG, EXIT_CODES)
    tsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    up = command_parser(tsub, "up", "build a testbed and leave it running", DESCRIPTION, EPILOG, INTERRUPTED)
    _fabric_args(up)
    up.set_defaults(func=run_up)

    down = command_parser(tsub, "down", "remove a testbed (or every one with --all)",
                          "Remove a testbed: its namespaces, and every process still inside them.")
    g = down.add_mutually_exclusive_group()
    g.add_argument("--name", metavar="NAME", help=f"instance to remove (default {DEFAULT_NAME!r})")
    g.add_argument("--all", action="store_true", help="remove every a2tb-* instance on this machine")
    down.set_defaults(func=run_down)

    ls = command_parser(tsub, "list", "the testbeds on this machine",
                        "List the testbeds on this machine (stale: the bench that built it died).")
    ls.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    ls.set_defaults(func=run_list)

    ex = command_parser(tsub, "exec", "run a command as one MPI rank per host of a running testbed",
                        "Run a command as one MPI rank per host of a running testbed (hydra's mpiexec).",
                        "example: a2a testbed exec --name demo -- python -m runtimes.mpi FILE -b 64K -e 1M\n",
                        EXEC_CODES)
    ex.add_argument("--name", metavar="NAME", help="the testbed (default: the only one running)")
    ex.add_argument("--timeout", type=_seconds, default=600.0, metavar="S",
                    help="kill the job after S seconds (default 600)")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command each rank runs")
    ex.set_defaults(func=run_exec)

    b = command_parser(tsub, "bench", "up, run schedules and baselines, down: measured vs predicted vs bound",
                       DESCRIPTION, EPILOG, BENCH_CODES)
    _fabric_args(b)
    b.add_argument("--schedule", action="append", default=[], metavar="FILE",
                   help="a schedule to measure (MSCCL, oneCCL-style or MPI path XML); repeat for several.  With "
                        "--jobs: a set A.xml,B.xml of MPI path schedules, one per job in file order, run at once")
    b.add_argument("--jobs", metavar="FILE",
                   help="several jobs at once (a2a solve --jobs FILE --schedules DIR writes their schedules): "
                        "each job its own MPI communicator, every iteration started together; per job: time, "
                        "throughput, check, and the prediction with every job's bytes on the shared links "
                        "(NIC forwarding)")
    b.add_argument("--native", action="store_true", help="also measure native MPI_Alltoall on the default routes")
    b.add_argument("--demand", metavar="FILE",
                   help="MoE all-to-allv: run every item as the all-to-allv of this demand matrix (CSV or .npy, "
                        "scaled to mean 1 per pair): pair s->d sends D[s,d]*m bytes for each --sizes m; schedules "
                        "through runtimes.mpi.Alltoallv, --native as MPI_Alltoallv; the bound is (N-1)*F(D)*b")
    b.add_argument("--runtime", choices=("mpi", "torch"), default="mpi",
                   help="what moves the data: mpi (runtimes.mpi, native MPI_Alltoall; default) or torch "
                        "(runtimes.torch over gloo, native dist.all_to_all_single; needs the torch extra)")
    b.add_argument("--default-routes", action="store_true",
                   help="also measure the default (SSSP) routes as a path schedule, labelled sssp: each shard whole "
                        "on its route, steered under NIC forwarding, relayed by the ranks under host forwarding")
    b.add_argument("--sizes", type=_sizes, default=[1 << 20], metavar="LIST",
                   help="per-peer shard sizes, comma-separated (K/M or KiB/MiB = 1024-powers; default 1M)")
    b.add_argument("--iters", type=positive_int, default=5, metavar="N", help="timed iterations (default 5)")
    b.add_argument("--warmup", type=nonnegative_int, default=1, metavar="W",
                   help="untimed iterations first (default 1)")
    b.add_argument("--fft", type=positive_int, metavar="N",
                   help="run a slab-decomposed 3-D FFT of an N^3 complex grid per iteration instead of bare "
                        "all-to-alls (N a multiple of the host count; its shard size replaces --sizes); reports each "
                        "phase")
    b.add_argument("--timeout", type=_seconds, metavar="S",
                   help="kill the MPI job after S seconds (default: 120 s plus 10 times the predicted run time)")
    b.add_argument("--json", action="store_true", help="print one JSON object (docs/testbed.md) on stdout")
    b.add_argument("--plot", metavar="PNG", help="write a plot of throughput against shard size")
    applies_only(b, {"sizes": ("fft", ABSENT)})
    b.set_defaults(func=run_bench)


def _say(args):
    return None if args.quiet else (lambda msg: progress(f"a2a testbed: {msg}"))


def _name(args, default: str | None) -> str | None:
    """``--name``, checked before any work (an empty name too), else ``default``."""
    from runtimes.testbed.layout import check_name

    return default if args.name is None else check_name(args.name)


def _fabric(args):
    if args.link_bw is None:
        args.link_bw = DEFAULT_LINK_BW
    return fabric_from_args(args)


def run_up(args) -> int:
    from runtimes.testbed.instance import Testbed

    name = _name(args, DEFAULT_NAME)
    tb = Testbed.up(topology_from_args(args), _fabric(args), name, owner=False, force=args.force,
                    progress=_say(args))
    try:
        print(f"testbed {name}: {tb.layout.topology.spec}, {tb.layout.fabric.describe()}, routes {tb.routes.algo}; "
              f"'a2a testbed exec --name {name} -- CMD' runs CMD on its {tb.layout.topology.n_hosts} hosts")
        sys.stdout.flush()
    except BaseException:  # 'up' that fails (stdout full or closed, Ctrl-C) leaves nothing up
        tb.down()
        raise
    return 0


def run_down(args) -> int:
    from runtimes.testbed.cleanup import remove, remove_all, require_root

    name = _name(args, DEFAULT_NAME)
    require_root()
    if args.all:
        removed = remove_all()
        print(f"removed {len(removed)} testbed(s)" + (f": {', '.join(removed)}" if removed else ""))
        return 0
    if not remove(name):
        raise A2AError(f"no testbed named {name!r}; 'a2a testbed list' shows the running ones")
    print(f"removed testbed {name}")
    return 0


def run_list(args) -> int:
    from runtimes.testbed.cleanup import instances, owner_alive, read_state

    rows = []
    for name, nss in instances().items():
        st = read_state(name) or {}
        topo = st.get("topology", {}).get("spec", "?")
        stale = st.get("owner_pid") is not None and not owner_alive(st)
        fabric = st.get("fabric")
        rows.append({"name": name, "spec": topo, "namespaces": len(nss),
                     "fabric": fabric and Fabric.from_json_dict(fabric).to_json_dict(),
                     "default_routes": st.get("routes"), "owner_pid": st.get("owner_pid"), "stale": stale})
    if args.json:
        print_json({"testbeds": rows})
        return 0
    if not rows:
        print("no testbeds")
    for r in rows:
        fab = r["fabric"] or {}
        bw = f"{fab['link_bw_Bps'] * 8 / 1e6:g} Mbit/s {fab.get('forwarding')}" if fab.get("link_bw_Bps") else "?"
        note = " (stale: its bench died; 'a2a testbed down --name NAME')" if r["stale"] else ""
        print(f"{r['name']:16s} {r['spec']:24s} {bw:22s} {r['namespaces']:4d} namespaces{note}")
    return 0


def run_exec(args) -> int:
    import shutil

    from runtimes.testbed.cleanup import instances
    from runtimes.testbed.instance import Testbed

    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        raise A2AError("give the command after --, e.g. a2a testbed exec -- python -m runtimes.mpi FILE")
    if shutil.which(cmd[0]) is None:  # else every rank's proxy prints its own execvp error
        raise A2AError(f"{cmd[0]}: no such command (neither an executable file nor a program on PATH)")
    name = _name(args, None)
    if name is None:
        running = list(instances())
        if len(running) != 1:
            raise A2AError("several testbeds are running; choose one with --name" if running
                           else "no testbed is running; start one with 'a2a testbed up SPEC'")
        name = running[0]
    finished = Testbed.attach(name).run(cmd, args.timeout)
    if finished.timed_out:
        print(f"a2a testbed: error: {finished.timeout_message()}", file=sys.stderr)
        return 124
    return finished.returncode if finished.returncode >= 0 else 128 - finished.returncode  # mpiexec killed: 128+N


def run_bench(args) -> int:
    from pathlib import Path

    from runtimes.testbed.bench import bench

    from .common import demand_from_args

    if args.jobs:
        return _run_jobs_bench(args)
    name = _name(args, None)
    topology = topology_from_args(args)
    result = bench(topology, _fabric(args), [Path(s) for s in args.schedule],
                   native=args.native, default_routes=args.default_routes, sizes=args.sizes, iters=args.iters,
                   warmup=args.warmup, name=name, force=args.force, fft=args.fft, timeout=args.timeout,
                   progress=_say(args), demand=demand_from_args(args, topology.n_hosts), runtime=args.runtime)
    if args.plot:
        from runtimes.testbed.plot import plot_bench

        plot_bench(result, args.plot)
    if args.json:
        print_json(result.to_json())
    else:
        _print_table(result)
    for w in result.warnings:
        print(f"a2a testbed: warning: {w}", file=sys.stderr)
    for f in result.failed:
        print(f"a2a testbed: FAILED {f}", file=sys.stderr)
    return 1 if result.failed else 0


def _run_jobs_bench(args) -> int:
    """``bench --jobs FILE --schedule A.xml,B.xml ...``: :func:`runtimes.testbed.jobs.bench_jobs`."""
    from pathlib import Path

    from ..jobs import load_jobs
    from runtimes.testbed.jobs import bench_jobs

    other = [flag for flag, given in (("--native", args.native), ("--default-routes", args.default_routes),
                                      ("--fft", args.fft), ("--plot", args.plot), ("--demand", args.demand))
             if given]
    if other:
        raise A2AError(f"{', '.join(other)} {'does' if len(other) == 1 else 'do'} not apply with --jobs")
    if args.runtime != "mpi":
        raise A2AError("--jobs runs with --runtime mpi only")
    name = _name(args, None)
    topology = topology_from_args(args)
    jobs = load_jobs(args.jobs, topology.n_hosts)
    sets = [[Path(f) for f in s.split(",") if f] for s in args.schedule]
    result = bench_jobs(topology, _fabric(args), jobs, sets, sizes=args.sizes, iters=args.iters,
                        warmup=args.warmup, name=name, force=args.force, timeout=args.timeout,
                        progress=_say(args))
    if args.json:
        print_json(result.to_json())
    else:
        h = result.header
        print(f"# {h['spec']}: jobs " + ", ".join(f"{j['name']} ({len(j['hosts'])} hosts)" for j in h["jobs"])
              + f"; link {h['fabric']['link_bw_Bps'] * 8 / 1e6:g} Mbit/s; {h['iters']} timed iterations after "
              f"{h['warmup']} warm-up, each job's time = median of its slowest rank's; jobs start together")
        cols = [("set", 28), ("job", 8), ("bytes", 9), ("time(s)", 9), ("MB/s", 7), ("pred MB/s", 10),
                ("file bound", 11), ("check", 6), ("routes", 9)]
        print("# " + " ".join(f"{c:{w}}" if i < 2 else f"{c:>{w}}" for i, (c, w) in enumerate(cols)))
        for r in result.results:
            fb = r["file_throughput_bound_GBps"]
            cells = [r["label"][:28], r["job"][:8], r["size_bytes"], f"{r['time_median_s']:.3f}",
                     f"{r['algbw_GBps'] * 1e3:.3f}", f"{r['predicted_algbw_GBps'] * 1e3:.3f}",
                     "-" if fb is None else f"{fb * 1e3:.3f}", "ok" if r["verified"] else "FAILED",
                     "ok" if r["routes_followed"] else "OFF-ROUTE"]
            print("  " + " ".join(f"{c:{w}}" if i < 2 else f"{c:>{w}}" for i, (c, (_, w)) in
                                  enumerate(zip(cells, cols))))
    for w in result.warnings:
        print(f"a2a testbed: warning: {w}", file=sys.stderr)
    for f in result.failed:
        print(f"a2a testbed: FAILED {f}", file=sys.stderr)
    return 1 if result.failed else 0


def _print_table(result) -> None:
    h = result.header
    fab = h["fabric"]
    host = "unlimited" if fab["host_bw_Bps"] is None else f"{fab['host_bw_Bps'] * 8 / 1e6:g} Mbit/s"
    print(f"# {h['spec']}: {h['ranks']} ranks, link {fab['link_bw_Bps'] * 8 / 1e6:g} Mbit/s, host {host}, "
          f"{fab['forwarding']} forwarding, default routes {h['default_routes']}")
    if h.get("runtime") == "torch":
        print("# runtime torch: torch.distributed over gloo (TCP on the fabric); schedules relayed by the ranks; "
              "native = dist.all_to_all_single")
    if h.get("demand"):
        print(f"# all-to-allv of demand {h['demand']['source']} (sha256 {h['demand']['sha256'][:12]}, mean 1 per "
              f"pair): bytes = the mean block m, pair s->d sends D[s,d]*m; native = MPI_Alltoallv; MB/s = bytes a "
              f"rank sends per second, averaged")
    print(f"# MCF bound (N-1)*F*b = {h['throughput_bound_GBps'] * 1e3:.3f} MB/s (F = {h['mcf_flow']:.6g}); "
          f"{h['iters']} timed iterations after {h['warmup']} warm-up, time = median of the slowest rank's")
    native = {r["size_bytes"]: r["algbw_GBps"] for r in result.results if r["item"] == "native"}
    cols = [("label", 24), ("bytes", 9), ("time(s)", 9), ("MB/s", 7), ("pred MB/s", 10), ("%bound", 7),
            ("x native", 9), ("check", 6), ("routes", 9), ("busiest meas/pred", 18), ("cpu%", 5)]
    print("# " + " ".join(f"{c:{w}}" if i == 0 else f"{c:>{w}}" for i, (c, w) in enumerate(cols)))
    for r in result.results:
        nat = native.get(r["size_bytes"])
        bl = r["busiest_link"]
        cells = [r["label"][:24], r["size_bytes"], f"{r['time_median_s']:.3f}", f"{r['algbw_GBps'] * 1e3:.3f}",
                 f"{r['predicted_algbw_GBps'] * 1e3:.3f}", f"{100 * r['bound_fraction']:.1f}",
                 f"{r['algbw_GBps'] / nat:.2f}" if nat else "-",
                 "ok" if r["verified"] else "FAILED", "ok" if r["routes_followed"] else "OFF-ROUTE",
                 "{}-{} {:.2f}".format(*bl["link"], bl["measured"] / max(bl["predicted"], 1)),
                 f"{100 * r['cpu']['busy_fraction']:.0f}"]
        print("  " + " ".join(f"{c:{w}}" if i == 0 else f"{c:>{w}}" for i, (c, (_, w)) in enumerate(zip(cells, cols))))
        if "fft_s" in r:
            f = r["fft_s"]
            print(f"#   3-D FFT of {h['fft_grid']}^3: 2-D FFTs {f['fft2d']:.3f} s, all-to-all {f['alltoall']:.3f} s, "
                  f"1-D FFTs {f['fft1d']:.3f} s, total {f['total']:.3f} s")
