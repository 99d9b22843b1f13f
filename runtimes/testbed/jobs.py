"""Several jobs at once on one testbed, each job its own MPI communicator (``a2a testbed bench --jobs``).

A *set* holds one MPI path schedule per job of a jobs file
(:mod:`a2a_compiler.jobs`), each in its job's own numbering (ranks ``0..n_j-1``
are the job's hosts, :func:`~a2a_compiler.jobs.job_topology`).  One MPI job
runs across every host; the ranks split ``MPI_COMM_WORLD`` by job
(:func:`runtimes.testbed.rank._run_jobs`), every iteration starts with a
barrier on the world communicator so the jobs run at the same time, and each
job is timed on its own communicator (the slowest of its ranks).  Every route
of every job is steered onto its path (NIC forwarding).

Per job and shard size: time, throughput ``(n_j - 1)·m / T``, the byte-exact
check, and the time the cost model predicts for it *in company*: its busiest
link carrying every job's bytes over it (and its hosts' ingress/egress).  The
link counters over the timed iterations are checked against all jobs' routes
together.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import MpiPathProgram, PathSend, load_program
from a2a_compiler.jobs import Job, JobSet, job_topology
from a2a_compiler.topology.model import Topology

from . import routes as routing
from .bench import BenchResult, link_chunks, observed, run_on_testbed
from .layout import link_key


@dataclass
class JobRun:
    """One job's schedule in a set: the file, its program (job numbering) and its view in topology numbering."""

    job: Job
    file: Path
    program: MpiPathProgram
    view: MpiPathProgram


def prepare_set(files: list[Path], topology: Topology, fabric: Fabric, jobs: JobSet) -> list[JobRun]:
    """Verify each job's file against its job topology and map its routes back onto the fabric."""
    from a2a_compiler.verify import verify_file

    if len(files) != len(jobs.jobs):
        raise A2AError(f"a schedule set needs one file per job ({len(jobs.jobs)}: "
                       f"{', '.join(j.name for j in jobs.jobs)}), got {len(files)}")
    if fabric.forwarding != "nic":
        raise A2AError("jobs share the fabric through other hosts' NICs: use --forwarding nic")
    out = []
    for path, job in zip(files, jobs.jobs):
        t, new_id = job_topology(topology, job)
        report = verify_file(path, t, fabric, lp=False)
        if not report.valid:
            raise A2AError(f"{path} (job {job.name}): {report.messages()[0]}")
        fmt, program = load_program(path)
        if fmt != "mpi":
            raise A2AError(f"{path} (job {job.name}): jobs run MPI path schedules, not {fmt}")
        old = [0] * len(new_id)
        for v, k in enumerate(new_id.tolist()):
            old[k] = v
        sends = tuple(PathSend(old[s.src], old[s.dst], s.route_id, s.layer, tuple(old[v] for v in s.nodes),
                               s.chunks, s.vcs, s.step) for s in program.sends)
        view = MpiPathProgram(program.name, topology.n_hosts, topology.n_nodes, program.chunks_per_shard, sends,
                              program.record, nsteps=program.nsteps)
        out.append(JobRun(job, path, program, view))
    return out


def _predicted(runs: list[JobRun], topology: Topology, fabric: Fabric, m: int) -> tuple[dict, list[float]]:
    """Link bytes per iteration of all jobs together, and each job's predicted time in company (seconds)."""
    cap = {(int(u), int(v)): float(c) for u, v, c in zip(topology.src, topology.dst, topology.capacity)}
    total: Counter = Counter()
    per_job = []
    for r in runs:
        chunk = -(-m // r.program.chunks_per_shard)
        mine = {e: c * chunk for e, c in link_chunks(r.view).items()}
        total.update(mine)
        per_job.append(mine)
    times = []
    for r, mine in zip(runs, per_job):
        t = max(total[e] / (fabric.link_bw * cap[e]) for e in mine)
        if fabric.host_bw is not None:    # NIC forwarding: a host's link carries its own shards only
            t = max(t, (len(r.job.hosts) - 1) * m / fabric.host_bw)
        times.append(t)
    return dict(total), times


def bench_jobs(topology: Topology, fabric: Fabric, jobs: JobSet, sets: list[list[Path]], *, sizes: list[int],
               iters: int = 5, warmup: int = 1, name: str | None = None, force: bool = False,
               timeout: float | None = None, progress=None) -> BenchResult:
    """Measure every set of job schedules (module docstring); one result per set, job and size."""
    say = progress or (lambda msg: None)
    if fabric.link_bw is None:
        raise A2AError("the testbed needs --link-bw")
    if not sets:
        raise A2AError("nothing to measure: give --schedule A.xml,B.xml (one file per job) for each set")
    prepared = [prepare_set(files, topology, fabric, jobs) for files in sets]
    labels = ["+".join(r.file.stem for r in runs) for runs in prepared]
    expected = (iters + warmup) * sum(max(_predicted(runs, topology, fabric, m)[1]) for runs in prepared
                                      for m in sizes)

    def job_items(tb, tmp):
        items = []
        for label, runs in zip(labels, prepared):
            entries = []
            for r in runs:
                steered = tb.steer(r.view)
                say(f"{label}: job {r.job.name}: {len(steered)} routes steered")
                hosts = list(r.job.hosts)
                entries.append({"label": r.job.name, "hosts": hosts, "file": str(r.file.resolve()),
                                "route_mode": "direct",
                                "steering": sorted([hosts.index(s), hosts.index(d), k, *a]
                                                   for (s, d, k), a in steered.items())})
            items.append({"label": label, "kind": "jobs", "jobs": entries})
        return items

    raw, header = run_on_testbed(topology, fabric, routing.default_routes(topology, fabric), job_items,
                                 len(sets), expected, sizes=sizes, iters=iters, warmup=warmup, name=name,
                                 force=force, timeout=timeout, say=say)
    header["jobs"] = [{"name": j.name, "hosts": list(j.hosts), "weight": j.weight} for j in jobs.jobs]
    header["objective"] = jobs.objective
    warnings: list[str] = []
    results = []
    by_label = dict(zip(labels, prepared))
    for r in raw:
        runs = by_label[r["label"]]
        i = [x.job.name for x in runs].index(r["job"])
        m = r["size_bytes"]
        total, times = _predicted(runs, topology, fabric, m)
        predicted = {link_key(u, v): b * iters for (u, v), b in total.items()}
        out = observed(r, topology, predicted, f"{r['label']} job {r['job']}", True, warnings)
        n_j = len(runs[i].job.hosts)
        rec = runs[i].program.record
        lp = None if rec is None else rec.lp_time
        results.append({
            "label": r["label"], "job": r["job"], "item": "job", "size_bytes": m, **out,
            "algbw_GBps": (n_j - 1) * m / out["time_median_s"] / 1e9, "predicted_algbw_GBps": (n_j - 1) * m / times[i] / 1e9,
            "file_throughput_bound_GBps": None if lp is None else (n_j - 1) * fabric.link_bw / lp / 1e9,
        })
    return BenchResult(header, results, warnings)
