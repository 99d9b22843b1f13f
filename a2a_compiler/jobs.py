"""Several jobs on one fabric: the jobs file, the joint solve, and each job solved alone.

The design source's future work (Basu et al. §7): "a cluster manager allocates
circuits to jobs on a non-interfering basis ... multiple jobs contending for
bandwidth is left for future work".  Here the jobs share the fabric: job ``j``
runs an all-to-all among its hosts ``H_j`` (disjoint from the other jobs') with
weight ``w_j``.

**Joint solve** (:func:`solve_jobs`).  The maximum concurrent flow for the
demand ``D[s, t] = w_j`` for ``s != t`` in ``H_j`` and 0 across jobs
(:mod:`a2a_compiler.demand`: scaled to a mean volume of 1 per ordered pair), by
the demand-aware MCF-extP of :func:`a2a_compiler.solve.solve`: the largest
``F`` such that every pair ships ``F·volume`` at once.  Objective ``fair`` uses
``w_j = 1`` (every job the same per-pair rate, the largest rate all jobs can
have at once: the max-min fair point of this concurrent flow); ``weighted``
uses the file's weights.  Job ``j``'s all-to-all time for unit shards is
``1/(F·v_j)`` link-times (``v_j`` its pairs' volume).  Certified like every
flow here: ``F`` is recomputed from the weighted paths, and weak duality on
the LP's link lengths bounds it (``Σ c_e l_e / Σ_{s,t} volume·dist_l(s,t)``).

**Alone** (:func:`solve_jobs`).  Each job solved as if it were alone on the
fabric (demand on its own pairs only): its alone optimum.  Run together, the
alone routings over-subscribe the links they share; *priced jointly* (every
job shipping its joint volume on its alone routes), link ``e`` carries ``L_e =
Σ_j v_j·load_j(e)``, and job ``j`` needs at least ``max_{e used by j} L_e / c_e
/ v_j`` link-times (its busiest link must carry everything routed over it);
the common rate they reach is ``1 / max_e L_e / c_e``.

**Per-job schedules** (:func:`job_schedule`).  Job ``j`` is its own MPI
communicator: its schedule numbers ranks ``0..n_j-1`` (its hosts in id order)
and the rest of the fabric follows as switches (:func:`job_topology`: other
hosts' NICs forward the job's traffic, so NIC forwarding), and its
``lp_time`` is its joint time ``1/(F·v_j)``.

**File** (``a2a solve SPEC --jobs FILE``, docs/formats.md)::

    {"format": "a2a-jobs", "version": 1, "objective": "fair",
     "jobs": [{"name": "A", "hosts": [0, 1, 2, 3], "weight": 1},
              {"name": "B", "hosts": "4-7", "weight": 2}]}

``hosts`` is a list of host ids or a string of ids and ranges (``"0-3,8"``);
``weight`` (default 1) must be positive; ``objective`` is ``fair`` (default) or
``weighted``.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field

import numpy as np

from .errors import A2AError
from .fabric import Fabric
from .files import read_json
from .topology.model import Topology

FORMAT = "a2a-jobs"
VERSION = 1
OBJECTIVES = ("fair", "weighted")
#: Largest jobs file (bytes).
MAX_JOBS_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Job:
    """One job: a name, its hosts (sorted host ids) and its weight."""

    name: str
    hosts: tuple[int, ...]
    weight: float = 1.0


@dataclass(frozen=True)
class JobSet:
    """The jobs of a file and the objective."""

    jobs: tuple[Job, ...]
    objective: str = "fair"
    source: str = "<jobs>"

    def weights(self) -> np.ndarray:
        """The weight each job's pairs get in the joint solve (all 1 under ``fair``)."""
        return np.array([1.0 if self.objective == "fair" else j.weight for j in self.jobs])

    def demand(self, n_hosts: int) -> np.ndarray:
        """``D[s, t] = w_j`` for ``s != t`` of job ``j``, 0 elsewhere (``N x N``)."""
        D = np.zeros((n_hosts, n_hosts))
        for job, w in zip(self.jobs, self.weights()):
            h = np.asarray(job.hosts)
            D[np.ix_(h, h)] = w
        np.fill_diagonal(D, 0.0)
        return D


def _hosts(value, where: str) -> tuple[int, ...]:
    if isinstance(value, str):
        out = []
        for part in value.replace(" ", "").split(","):
            m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
            if not m:
                raise A2AError(f"{where}: hosts {value!r}: {part!r} is not an id or a range a-b")
            lo, hi = int(m[1]), int(m[2] or m[1])
            if hi < lo or hi - lo > 1_000_000:
                raise A2AError(f"{where}: hosts {value!r}: bad range {part!r}")
            out.extend(range(lo, hi + 1))
        return tuple(out)
    if not isinstance(value, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in value):
        raise A2AError(f"{where}: hosts must be a list of host ids or a string like \"0-3,8\"")
    return tuple(value)


def parse_jobs(obj, n_hosts: int, source: str = "<jobs>") -> JobSet:
    """A :class:`JobSet` from the file's JSON object, checked against ``n_hosts``; one :class:`A2AError` line per
    problem (unknown objective, a job of fewer than 2 hosts, a host outside the topology or in two jobs, ...)."""
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        raise A2AError(f"{source}: not an {FORMAT} file (missing \"format\": \"{FORMAT}\")")
    if obj.get("version") != VERSION:
        raise A2AError(f"{source}: unsupported version {obj.get('version')!r} (this reader knows {VERSION})")
    objective = obj.get("objective", "fair")
    if objective not in OBJECTIVES:
        raise A2AError(f"{source}: objective {objective!r}; choose one of {', '.join(OBJECTIVES)}")
    raw = obj.get("jobs")
    if not isinstance(raw, list) or not raw:
        raise A2AError(f"{source}: \"jobs\" must be a non-empty list")
    jobs, owner, names = [], {}, set()
    for i, j in enumerate(raw):
        where = f"{source}: jobs[{i}]"
        if not isinstance(j, dict):
            raise A2AError(f"{where} must be an object with \"hosts\"")
        name = str(j.get("name", f"job{i}"))
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,64}", name) or name in names:
            raise A2AError(f"{where}: name {name!r} must be unique, 1-64 letters, digits, '.', '_' or '-'")
        names.add(name)
        if "hosts" not in j:
            raise A2AError(f"{where}: missing \"hosts\"")
        hosts = _hosts(j["hosts"], where)
        for h in hosts:
            if not 0 <= h < n_hosts:
                raise A2AError(f"{where} ({name}): host {h} outside 0..{n_hosts - 1}")
            if h in owner:
                raise A2AError(f"{where} ({name}): host {h} is already in job {owner[h]}; jobs must not share hosts")
            owner[h] = name
        if len(hosts) < 2:
            raise A2AError(f"{where} ({name}): an all-to-all needs at least 2 hosts, got {len(hosts)}")
        weight = j.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (0 < weight < math.inf):
            raise A2AError(f"{where} ({name}): weight must be a positive number, got {weight!r}")
        jobs.append(Job(name, tuple(sorted(hosts)), float(weight)))
    weights = [j.weight for j in jobs]
    if max(weights) > 1e6 * min(weights):
        raise A2AError(f"{source}: weights span more than 1e6; the flow LP would lose the smallest")
    return JobSet(tuple(jobs), objective, source)


def load_jobs(path, n_hosts: int) -> JobSet:
    """Read and check a jobs file (module docstring)."""
    return parse_jobs(read_json(path, MAX_JOBS_BYTES), n_hosts, str(path))


# ------------------------------------------------------------------ solving
@dataclass(frozen=True, eq=False)
class DemandFlow:
    """A concurrent flow with demands: every pair ``(s, t)`` ships ``F·volumes[s, t]`` at once.

    ``volumes`` is the demand as solved (the jobs' weights scaled to a mean of 1 per ordered pair,
    :class:`~a2a_compiler.demand.Demand`); ``paths`` are ``(s, t, nodes, weight)`` on base nodes for the pairs
    of positive volume, the weights of a pair summing to 1; ``concurrent_flow`` (``F``) is certified on
    them, ``upper_bound`` by weak duality (``Σ c·l / Σ volumes·dist_l``).
    """

    volumes: np.ndarray
    paths: tuple
    concurrent_flow: float
    upper_bound: float
    timings: dict = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """Relative gap ``(bound - F) / bound``."""
        return max(0.0, (self.upper_bound - self.concurrent_flow) / self.upper_bound)

    def time(self, s: int, t: int) -> float:
        """All-to-all time of pair ``(s, t)``'s unit shard in link-times: ``1 / (F·volumes[s, t])``."""
        return 1.0 / (self.concurrent_flow * self.volumes[s, t])


def solve_demand(topology: Topology, fabric: Fabric | None, demand: np.ndarray, *, progress=None) -> DemandFlow:
    """The maximum concurrent flow for ``demand`` (``N x N``, zeros allowed): the demand-aware MCF-extP of
    :func:`a2a_compiler.solve.solve` (link MCF, then widest paths), certified."""
    from .demand import Demand
    from .solve import solve

    t0 = time.perf_counter()
    D = Demand.from_array(demand, "jobs")
    sol = solve(topology, fabric, "mcf-extp", demand=D, progress=progress)
    V = np.asarray(D.volumes)
    paths = tuple((p.src, p.dst, p.nodes, p.weight) for p in sol.paths if V[p.src, p.dst] > 0)
    return DemandFlow(V, paths, sol.concurrent_flow, sol.upper_bound, {"total": time.perf_counter() - t0})


def route_loads(topology: Topology, fabric: Fabric, paths, demand: np.ndarray) -> np.ndarray:
    """Load of every resource of the cost model (links, then host ingress / egress) when pair ``(s, t)``
    ships ``demand[s, t]`` over its weighted ``paths``, divided by capacity: time in link-times."""
    from .chunk.cost import CostModel

    model = CostModel.from_topology(topology, fabric)
    hops = [(u, v, s, t, w * demand[s, t]) for s, t, nodes, w in paths for u, v in zip(nodes, nodes[1:])]
    u, v, o, d, k = (np.array(x) for x in zip(*hops))
    loads = model.step_loads(np.zeros(len(u), dtype=np.int64), model.link_index(u, v), u, v, o.astype(np.int64),
                             d.astype(np.int64), 1, counts=k)[0]
    return loads / model.capacity


@dataclass(frozen=True, eq=False)
class JobsResult:
    """Joint and alone solutions of a :class:`JobSet` (see the module docstring)."""

    jobs: JobSet
    joint: DemandFlow
    alone: tuple[DemandFlow, ...]
    n_hosts: int
    fabric: Fabric
    shared: np.ndarray          # time-loads of the alone routings run together (per resource)
    used: tuple[np.ndarray, ...]  # resources each job's alone routes use
    joint_used: tuple[np.ndarray, ...]
    joint_loads: np.ndarray

    def summary(self) -> dict:
        """The ``a2a solve --jobs --json`` object (times in link-times for each job's unit shards)."""
        lam = self.joint.concurrent_flow
        out = []
        for i, job in enumerate(self.jobs.jobs):
            a = self.alone[i]
            s, t = job.hosts[:2]
            v = float(self.joint.volumes[s, t])         # the volume of every pair of the job
            out.append({
                "name": job.name, "hosts": list(job.hosts), "weight": job.weight, "volume": v,
                "joint_time": self.joint.time(s, t),
                "joint_time_busiest_link": float(self.joint_loads[self.joint_used[i]].max(initial=0.0) / v) or None,
                "alone_time": a.time(s, t), "alone_bound_time": 1.0 / (a.upper_bound * float(a.volumes[s, t])),
                "alone_together_time": float(self.shared[self.used[i]].max(initial=0.0) / v),
            })
        shared_rate = 1.0 / float(self.shared.max())
        return {
            "objective": self.jobs.objective, "fabric": self.fabric.to_json_dict(), "hosts": self.n_hosts,
            "joint_concurrent_flow": lam, "joint_upper_bound": self.joint.upper_bound, "joint_gap": self.joint.gap,
            "alone_together_concurrent_flow": shared_rate, "joint_over_alone_together": lam / shared_rate,
            "jobs": out,
        }


def solve_jobs(topology: Topology, fabric: Fabric | None, jobs: JobSet, *, progress=None) -> JobsResult:
    """The joint solve and every job alone, priced together (module docstring)."""
    fabric = fabric or Fabric()
    joint = solve_demand(topology, fabric, jobs.demand(topology.n_hosts), progress=progress)
    V = joint.volumes
    mine = []
    for job in jobs.jobs:
        m = np.zeros_like(V)
        h = np.asarray(job.hosts)
        m[np.ix_(h, h)] = 1.0
        np.fill_diagonal(m, 0.0)
        mine.append(m)
    alone = tuple(solve_demand(topology, fabric, m, progress=progress) for m in mine)
    shared = route_loads(topology, fabric, [p for a in alone for p in a.paths], V)
    used = tuple(np.flatnonzero(route_loads(topology, fabric, a.paths, m)) for a, m in zip(alone, mine))
    joint_loads = route_loads(topology, fabric, joint.paths, V)
    joint_used = tuple(np.flatnonzero(route_loads(topology, fabric, [p for p in joint.paths if m[p[0], p[1]]], m))
                       for m in mine)
    return JobsResult(jobs, joint, alone, topology.n_hosts, fabric, shared, used, joint_used, joint_loads)


# ------------------------------------------------------------ per-job files
def job_topology(topology: Topology, job: Job) -> tuple[Topology, np.ndarray]:
    """The fabric as job ``job``'s communicator sees it: its hosts are ranks ``0..n_j-1`` (in host id order),
    every other node (other jobs' hosts included) a switch, in id order; and ``new_id[old_id]``."""
    n = topology.n_nodes
    mine = set(job.hosts)
    order = list(job.hosts) + [v for v in range(n) if v not in mine]
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(n)
    links = np.stack([new_id[topology.src], new_id[topology.dst]], 1)
    t = Topology.from_links(f"{topology.spec} job {job.name}", len(job.hosts), links, n_switches=n - len(job.hosts),
                            capacity=topology.capacity, names=[topology.names[v] for v in order], undirected=False,
                            notes=(f"job {job.name} of {topology.spec}: hosts {list(job.hosts)} are ranks "
                                   f"0..{len(job.hosts) - 1}; every other node forwards",))
    return t, new_id


def job_schedule(topology: Topology, fabric: Fabric, job: Job, paths, lp_time: float, method: str,
                 max_chunks: int = 64):
    """Job ``job``'s routes among ``paths`` as a chunked :class:`~a2a_compiler.chunk.PathSchedule` over
    :func:`job_topology` (chunks as ``a2a routes`` makes them), with ``lp_time``; and that topology."""
    import dataclasses

    from .routes.result import RoutedPath, RouteSet
    from .routes.schedule import chunk_routes

    t, new_id = job_topology(topology, job)
    mine = set(job.hosts)
    routed = tuple(RoutedPath(int(new_id[s]), int(new_id[d]), tuple(int(new_id[v]) for v in nodes), w)
                   for s, d, nodes, w in paths if s in mine and d in mine)
    routes = RouteSet(method, t, fabric, routed).validate()
    schedule, _ = chunk_routes(routes, max_chunks)
    return dataclasses.replace(schedule, lp_time=lp_time), t


def write_job_schedules(result: JobsResult, topology: Topology, directory, max_chunks: int = 64) -> list:
    """Per job: ``NAME.xml`` (joint), ``NAME-alone.xml`` and ``NAME.topology.json`` in ``directory``, each
    program verified against the job's topology before anything is written; returns the paths."""
    from pathlib import Path

    from .files import atomic_write
    from .formats.mpi_paths import mpi_paths_to_xml
    from .lower.mpi_paths import lower_mpi_paths
    from .verify import verify_bytes

    directory = Path(directory)
    out = {}
    for job, alone in zip(result.jobs.jobs, result.alone):
        s, t = job.hosts[:2]
        for suffix, paths, lp_time in (("", result.joint.paths, result.joint.time(s, t)),
                                       ("-alone", alone.paths, alone.time(s, t))):
            schedule, t = job_schedule(topology, result.fabric, job, paths, lp_time,
                                       "jobs-joint" if not suffix else "jobs-alone", max_chunks)
            data = mpi_paths_to_xml(lower_mpi_paths(schedule, f"{job.name}{suffix}"))
            report = verify_bytes(data, f"<job {job.name}{suffix}>", t, result.fabric, lp=False)
            if not report.valid:   # a bug, never bad input
                raise RuntimeError(f"job {job.name}{suffix}: " + "; ".join(report.messages()[:3]))
            out[directory / f"{job.name}{suffix}.xml"] = data
        out[directory / f"{job.name}.topology.json"] = t.to_json_dict()
    import json

    for path, data in out.items():
        atomic_write(path, data if isinstance(data, bytes) else json.dumps(data, indent=1) + "\n")
    return list(out)
