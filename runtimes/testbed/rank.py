"""The program every rank runs in a bench: ``python -m runtimes.testbed.rank JOB.json OUT.json``.

For each item of the job (a schedule, or native ``MPI_Alltoall``; with the
job's demand matrix, ``Alltoallv`` and native ``MPI_Alltoallv``; under the
job's ``runtime`` ``torch``, :class:`runtimes.torch.AllToAll` and native
``dist.all_to_all_single`` over gloo) and each
shard size: warm-up and timed iterations as in ``a2a run`` (barrier, time the
call, the iteration's time is the slowest rank's), the received bytes
checked after the first and the last iteration, and around the timed
iterations rank 0 snapshots the fabric's interface counters and the CPU
(:mod:`.counters`) while every rank records its own CPU time.  Rank 0 writes
the raw measurements to OUT.json; :mod:`.bench` turns them into results.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import mpi4py

mpi4py.rc.initialize = False  # rank 0 opens its netlink sockets (which fork) before MPI starts
#: The gloo rendezvous port (``--runtime torch``) on host 0's data address, inside the testbed's namespaces.
TORCH_PORT = 29500


def _rusage() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _check_placement(host_ns: list[str], rank: int) -> str | None:
    try:
        mine = os.stat("/proc/self/ns/net").st_ino
        want = os.stat(f"/var/run/netns/{host_ns[rank]}").st_ino
    except (OSError, IndexError) as exc:
        return f"rank {rank}: cannot check its namespace: {exc}"
    return None if mine == want else f"rank {rank} does not run in {host_ns[rank]}"


def main(job_path: str, out_path: str) -> int:
    from a2a_compiler.launcher import launcher_rank, release_shared_memory

    with open(job_path) as fh:
        job = json.load(fh)
    counters = None
    if launcher_rank() == 0:
        from .counters import Counters

        counters = Counters(job["counters"])
    from mpi4py import MPI

    MPI.Init()
    from a2a_compiler.errors import A2AError
    from runtimes.mpi.executor import agree
    from runtimes.mpi.watchdog import Watchdog

    comm = MPI.COMM_WORLD
    prog = "a2a testbed bench"
    results = []
    with Watchdog(job["timeout"], comm, prog) as watchdog:
        local = comm.Split_type(MPI.COMM_TYPE_SHARED)
        release_shared_memory(local)   # as a2a run does: no MPICH segment left behind (1 MB a host leaked)
        local.Free()
        try:
            agree(comm, lambda: _raise(_check_placement(job["host_ns"], comm.rank)))
            if job.get("runtime") == "torch":
                agree(comm, lambda: _init_torch(comm, job))
            for item in job["items"]:
                results += _run_item(comm, item, job, counters, watchdog)
        except A2AError as exc:
            if comm.rank == 0:
                print(f"{prog}: error: {exc}", file=sys.stderr, flush=True)
            return 2
    if comm.rank == 0:
        from a2a_compiler.files import atomic_write

        atomic_write(out_path, json.dumps({"results": results}))
        counters.close()
    if job.get("runtime") == "torch":
        import torch.distributed as dist

        dist.destroy_process_group()
    MPI.Finalize()
    return 0


def _raise(error: str | None) -> None:
    if error:
        from a2a_compiler.errors import A2AError

        raise A2AError(error)


def _run_item(comm, item, job, counters, watchdog) -> list[dict]:
    from runtimes.mpi.alltoallv import Alltoallv
    from runtimes.mpi.cli import _timed, workload
    from runtimes.mpi.executor import Alltoall, agree

    if item["kind"] == "jobs":
        return _run_jobs(comm, item, job, counters, watchdog)
    demand = job.get("demand")
    if demand is not None:
        from a2a_compiler.demand import Demand

        demand = Demand.from_volumes(demand, "bench demand")
    a2a = None
    torch_runtime = job.get("runtime") == "torch"
    if torch_runtime and item["kind"] != "native":
        from runtimes.torch import AllToAll

        a2a = agree(comm, lambda: AllToAll(item["file"], route_mode="relay", demand=demand, timeout=job["timeout"]))
    elif item["kind"] != "native":
        steering = _steering(item.get("steering"))
        if demand is None:
            a2a = Alltoall(item["file"], comm, route_mode=item["route_mode"], steering=steering)
        else:
            a2a = Alltoallv(item["file"], comm, route_mode=item["route_mode"], steering=steering, demand=demand)
    rank = comm.rank
    out = []
    if job.get("fft"):
        res = _fft_item(comm, item, job, counters, watchdog, a2a or comm.Alltoall, a2a)
        return [res] if res else []
    for m in job["sizes"]:
        w = _torch_workload(comm, a2a, m, demand) if torch_runtime else workload(comm, a2a, m, demand)
        start = {}
        times, error = _timed(comm, w.ours if a2a is not None else w.native, w.send, w.recv, job["warmup"],
                              job["iters"], "first-last", watchdog, lambda: start.update(_snapshot(comm, counters)),
                              w.recv_counts)
        measured = _measured(comm, counters, start)
        errors = [e for e in comm.gather(error) or () if e]
        if rank == 0:
            out.append({"label": item["label"], "kind": item["kind"], "size_bytes": m, "times_s": times.tolist(),
                        "error": errors[0] if errors else None, **measured})
    if a2a is not None and not torch_runtime:
        a2a.free()
    return out


def _init_torch(comm, job) -> None:
    """The gloo process group over the fabric: every rank's sockets on its host's data interface, the
    rendezvous at host 0's data address."""
    import torch.distributed as dist
    from datetime import timedelta

    from .layout import HOST_IF

    os.environ.update(MASTER_ADDR=job["torch_master"], MASTER_PORT=str(TORCH_PORT), GLOO_SOCKET_IFNAME=HOST_IF)
    dist.init_process_group("gloo", rank=comm.rank, world_size=comm.size, timeout=timedelta(seconds=job["timeout"]))


def _torch_workload(comm, a2a, m: int, demand):
    """:func:`runtimes.mpi.cli.workload`'s buffers and checks, moved by ``torch.distributed``: the schedule's
    ``all_to_all_single`` (``a2a``) or gloo's own, on tensors sharing the buffers' memory."""
    import numpy as np
    import torch
    import torch.distributed as dist

    from runtimes.mpi.cli import workload

    w = workload(comm, None, m, demand)
    n, r = comm.size, comm.rank
    counts = np.full((n, n), m) if demand is None else demand.pair_bytes(m)
    sc, rc = counts[r].tolist(), counts[:, r].tolist()
    send, recv = torch.from_numpy(w.send), torch.from_numpy(w.recv)
    call = dist.all_to_all_single if a2a is None else a2a.all_to_all_single
    fn = lambda s, v: call(recv, send, rc, sc)  # noqa: E731 - the buffers are the tensors' memory
    return w._replace(ours=fn, native=fn)


def _steering(entry):
    return None if entry is None else {tuple(r[:3]): tuple(r[3:]) for r in entry}


def _run_jobs(comm, item, job, counters, watchdog) -> list[dict]:
    """Several jobs at once (:mod:`.jobs`): each on its own communicator (split by job), every iteration
    started together by a barrier on ``comm``; per job and size, the slowest of its ranks' times."""
    from mpi4py import MPI

    from runtimes.mpi.cli import _timed, workload
    from runtimes.mpi.executor import Alltoall, agree

    jobs = item["jobs"]
    mine = next((i for i, j in enumerate(jobs) if comm.rank in j["hosts"]), None)
    sub = comm.Split(MPI.UNDEFINED if mine is None else mine, comm.rank)
    me = jobs[mine] if mine is not None else None
    a2a = agree(comm, lambda: None if me is None else
                Alltoall(me["file"], sub, route_mode=me["route_mode"], steering=_steering(me["steering"])))
    out = []
    for m in job["sizes"]:
        start = {}
        snap = lambda: start.update(_snapshot(comm, counters))  # noqa: E731
        if me is None:                       # a host in no job: keep the world's barriers in step
            total = job["warmup"] + job["iters"]
            for it in range(total):
                if it == job["warmup"]:
                    snap()
                comm.Barrier()
                watchdog.kick()
            times, error = None, None
        else:
            w = workload(sub, a2a, m)
            times, error = _timed(sub, w.ours, w.send, w.recv, job["warmup"], job["iters"], "first-last", watchdog,
                                  snap, start=comm)
        measured = _measured(comm, counters, start)
        report = comm.gather((mine, None if times is None or sub.rank else times.tolist(), error))
        if comm.rank == 0:
            for i, j in enumerate(jobs):
                errors = [e for k, _, e in report if k == i and e]
                times_i = next(t for k, t, _ in report if k == i and t is not None)
                out.append({"label": item["label"], "job": j["label"], "kind": "job", "size_bytes": m,
                            "times_s": times_i, "error": errors[0] if errors else None, **measured})
    if a2a is not None:
        a2a.free()
    if sub != MPI.COMM_NULL:
        sub.Free()
    return out


def _snapshot(comm, counters) -> dict:
    """Counters and CPU before the timed iterations (all ranks: after a barrier)."""
    from mpi4py import MPI

    from .counters import cpu_times, tcp_counters

    comm.Barrier()
    start = {"rusage": _rusage(), "wall": MPI.Wtime(), "tcp": tcp_counters()}
    if comm.rank == 0:
        start.update(counters=counters.snapshot(), cpu=cpu_times())
    return start


def _measured(comm, counters, start: dict) -> dict | None:
    """Rank 0: what the fabric and the CPUs did since ``start``."""
    from mpi4py import MPI

    from .counters import cpu_times, delta, tcp_counters

    comm.Barrier()
    cpu_ranks, window = comm.reduce(_rusage() - start["rusage"]), MPI.Wtime() - start["wall"]
    tcp = comm.gather({k: v - start["tcp"][k] for k, v in tcp_counters().items()})
    if comm.rank:
        return None
    return {"counters": delta(start["counters"], counters.snapshot()), "cpu_before": start["cpu"],
            "cpu_after": cpu_times(), "ranks_cpu_s": cpu_ranks, "window_s": window,
            "tcp": {k: sum(t[k] for t in tcp) for k in tcp[0]}}


def _fft_item(comm, item, job, counters, watchdog, call, a2a) -> dict | None:
    """The 3-D FFT workload (:mod:`.fft`): per timed iteration, the slowest rank's time of each phase
    (``times_s``: the all-to-all phase's)."""
    import numpy as np
    from mpi4py import MPI

    from . import fft

    n, P = job["fft"], comm.size
    planes = fft.local_input(n, P, comm.rank)
    total = job["warmup"] + job["iters"]
    phases = np.zeros((job["iters"], 3))
    error = None
    for it in range(total):
        if it == job["warmup"]:
            start = _snapshot(comm, counters)
        comm.Barrier()
        res, ph = fft.fft3d(planes, call, P, MPI.Wtime)
        if it >= job["warmup"]:
            phases[it - job["warmup"]] = ph
        if it in (0, total - 1) and error is None:
            error = fft.first_error(res, n, P, comm.rank)
        watchdog.kick()
    comm.Allreduce(MPI.IN_PLACE, phases, op=MPI.MAX)
    errors = [e for e in comm.gather(error) or () if e]
    measured = _measured(comm, counters, start)
    if a2a is not None:
        a2a.free()
    if comm.rank:
        return None
    return {"label": item["label"], "kind": item["kind"], "size_bytes": fft.shard_bytes(n, P),
            "times_s": phases[:, 1].tolist(), "fft_phases_s": phases.tolist(),
            "error": errors[0] if errors else None, **measured}


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
