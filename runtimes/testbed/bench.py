"""``bench``: up -> run each schedule and baseline across the emulated fabric -> down, with predictions.

Every result holds the measured time and throughput ``(N-1)·m/T`` (Basu et
al. §2.2), what the cost model predicts for exactly those routes or steps on
this fabric, the MCF bound ``(N-1)·F·b`` (§5.2), the byte-exact check, and the
payload each directed link carried over the timed iterations beside what the
schedule puts on it.  A schedule whose bytes do not follow its routes
(:func:`links_follow`) fails the run.

With a demand matrix (MoE all-to-allv) every item runs as an all-to-allv: pair
``(s, d)`` sends ``D[s, d]·m`` bytes (volumes of mean 1, so ``m`` is the mean
block), schedules through :class:`~runtimes.mpi.alltoallv.Alltoallv` and the
baseline as native ``MPI_Alltoallv``; the bound is ``(N-1)·F(D)·b`` and each
link's predicted bytes are what the schedule puts there for those counts
(:func:`link_bytes`).
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import MpiPathProgram, MscclProgram, load_program
from a2a_compiler.interrupt import signals_raise
from a2a_compiler.topology.model import Topology

from .counters import counter_map, cpu_use
from .instance import Testbed
from .layout import link_key
from . import routes as routing

#: Measured link payload must lie within these factors of the prediction ...
LINK_TOLERANCE = (0.90, 1.25)
#: ... and a link the schedule does not use may carry at most this fraction of the busiest link's prediction.
QUIET_FRACTION = 0.01
#: Warn when the machine's CPUs were busier than this during the timed iterations.
BUSY_WARNING = 0.90
#: Refuse benches whose schedules alone would run longer than this at their predicted rates.
MAX_HOURS = 6
NATIVE = "native"
#: What moves the data: the mpi4py runtime (native MPI_Alltoall) or torch.distributed (native all_to_all_single).
RUNTIMES = ("mpi", "torch")


@dataclass
class Item:
    """One thing to measure: a schedule file, the default routes as a path schedule, or native MPI_Alltoall."""

    label: str
    kind: str                      # "schedule" or "native"
    program: object | None         # lowered program (None for native)
    file: Path | None = None
    route_mode: str | None = None  # MPI path schedules: "direct" (steered) or "relay"
    predicted_time: float = math.nan  # link-times (cost model, unit shards)
    link_chunks: dict = field(default_factory=dict)  # (u, v) -> chunks per call
    chunks_per_shard: int = 1
    wire: object | None = None     # the program whose hops carry the traffic (native: the default routes')
    layout: object | None = None   # all-to-allv: chunks per pair of a link program's buffers

    def link_bytes(self, m: int, demand=None) -> dict[tuple[int, int], int]:
        """Bytes each directed link carries in one call with shards of ``m`` bytes (the mean block under a
        ``demand``): whole padded chunks of ``ceil(m/C)`` bytes, or :func:`link_bytes` of the demand's counts."""
        if demand is None:
            chunk = -(-m // self.chunks_per_shard)
            return {k: c * chunk for k, c in self.link_chunks.items()}
        return link_bytes(self.wire, demand.pair_bytes(m), self.layout)


@dataclass
class BenchResult:
    header: dict
    results: list[dict]
    warnings: list[str]

    @property
    def failed(self) -> list[str]:
        return [f"{r['label']} {r['size_bytes']} B: {why}" for r in self.results for why in r["failures"]]

    def to_json(self) -> dict:
        """The ``a2a testbed bench --json`` object (docs/json.md)."""
        return {**self.header, "warnings": self.warnings, "results": self.results}

    @classmethod
    def from_json(cls, obj: dict) -> BenchResult:
        """The inverse of :meth:`to_json` (a result saved by ``bench --json``)."""
        header = {k: v for k, v in obj.items() if k not in ("json_version", "warnings", "results")}
        return cls(header, obj["results"], obj["warnings"])


def link_chunks(program, layout=None, routes=None) -> dict[tuple[int, int], int]:
    """Chunks each directed link carries in one call of ``program`` (every hop of every route or message;
    ``layout``: an MSCCL all-to-allv's chunks per pair; ``routes`` gives the switch path of a message
    between hosts no link joins)."""
    from a2a_compiler.formats import MscclppProgram
    from a2a_compiler.verify import simulate

    count: Counter = Counter()
    if isinstance(program, MpiPathProgram):
        for s in program.sends:
            for u, v in zip(s.nodes, s.nodes[1:]):
                count[(u, v)] += len(s.chunks)
        return dict(count)
    if isinstance(program, MscclProgram):
        trace = simulate.simulate_msccl(program, layout)
    else:
        trace = (simulate.simulate_mscclpp if isinstance(program, MscclppProgram) else simulate.simulate_oneccl)(program)
    for m in trace.moves:
        path = (routes or {}).get((m.src, m.dst), (m.src, m.dst))
        for u, v in zip(path, path[1:]):
            count[(u, v)] += len(m.labels)
    return dict(count)


def link_bytes(program, counts, layout=None) -> dict[tuple[int, int], int]:
    """Bytes each directed link carries in one all-to-allv call of ``program`` moving ``counts[s, d]`` bytes per
    pair, as :class:`~runtimes.mpi.alltoallv.Alltoallv` moves them: an MPI path program's chunk ``k`` of a pair
    of ``c`` bytes is ``⌊(k+1)c/C⌋ - ⌊kc/C⌋`` bytes; a link program's chunks (``layout[s, d]`` per pair) are all
    the largest ``⌈c/T⌉`` bytes, padding included."""
    import numpy as np

    from runtimes.mpi.plan import chunk_runs

    count: Counter = Counter()
    if isinstance(program, MpiPathProgram):
        C = program.chunks_per_shard
        for s in program.sends:
            c = int(counts[s.src, s.dst])
            nbytes = sum((k + n) * c // C - k * c // C for k, n in chunk_runs(s.chunks))
            for u, v in zip(s.nodes, s.nodes[1:]):
                count[(u, v)] += nbytes
        return dict(count)
    pos = layout > 0
    cb = int(max(1, (-(-np.asarray(counts)[pos] // layout[pos])).max(initial=1)))
    return {k: c * cb for k, c in link_chunks(program, layout).items()}


def prepare(path: Path, topology: Topology, fabric: Fabric, demand=None) -> Item:
    """Read, verify and price one schedule for this fabric (as an all-to-allv of ``demand``, if given);
    one clear error if it cannot run here."""
    from a2a_compiler.verify import verify_file
    from runtimes.mpi.plan import layout_counts

    report = verify_file(path, topology, fabric, lp=False, demand=demand)
    if not report.valid:
        raise A2AError(f"{path}: {report.messages()[0]}")
    fmt, program = load_program(path)
    mode = None
    if fmt == "mpi":
        mode = "direct" if fabric.forwarding == "nic" else "relay"
    layout = None if demand is None else layout_counts(program, topology.n_hosts, demand)
    routes = None
    if topology.n_switches and fmt != "mpi":
        from a2a_compiler.topology.switched import switch_routes

        routes = switch_routes(topology)
    return Item(path.stem, "schedule", program, path, mode, report.perf.predicted_time,
                link_chunks(program, layout, routes), report.chunks_per_shard, program, layout)


def _routes_item(routes, fabric: Fabric, demand=None) -> Item:
    """The default routes as a path schedule: steered end to end (NIC forwarding) or relayed by the ranks."""
    from a2a_compiler.verify.performance import program_performance

    program = routing.path_program(routes, routes.algo)
    mode = "direct" if fabric.forwarding == "nic" else "relay"
    perf = program_performance(program, fabric, _capacities(routes.topology), demand=demand)
    return Item(routes.algo, "schedule", program, None, mode, perf.predicted_time, link_chunks(program), 1, program)


def _native_item(routes, fabric: Fabric, demand=None) -> Item:
    """Native MPI_Alltoall(v): every shard on its default route, priced as if all ran at once (an upper bound)."""
    item = _routes_item(routes, fabric, demand)
    return Item(NATIVE, "native", None, None, None, item.predicted_time, item.link_chunks, 1, item.program)


def _capacities(topology: Topology) -> dict:
    from a2a_compiler.verify.topology_check import link_capacities

    return link_capacities(topology)


def bench(topology: Topology, fabric: Fabric, schedules: list[Path], *, native: bool = False,
          default_routes: bool = False, sizes: list[int] | None = None, iters: int = 5, warmup: int = 1,
          name: str | None = None, force: bool = False, timeout: float | None = None, fft: int | None = None,
          progress=None, demand=None, runtime: str = "mpi") -> BenchResult:
    """Bring a testbed up, measure every schedule and baseline at every size, take it down.

    With ``fft=n`` each item runs a slab-decomposed 3-D FFT of an ``n³``
    complex grid instead (:mod:`.fft`); its all-to-all shards are
    ``(n/N)²·n·16`` bytes and ``sizes`` is ignored.  With a ``demand``
    (:class:`~a2a_compiler.demand.Demand`) every item runs the all-to-allv of
    that matrix, ``sizes`` being the mean block (module docstring).

    The testbed is torn down on success, error, SIGINT/SIGTERM/SIGHUP and a
    killed rank.  Raises :class:`A2AError` for input that cannot run here
    (bad file, wrong rank count, a schedule using a missing link).

    ``runtime="torch"`` moves the data with ``torch.distributed`` (gloo over TCP on the hosts' fabric
    addresses, :mod:`runtimes.torch`): schedules through :class:`~runtimes.torch.AllToAll`, path schedules
    relayed by the ranks (gloo cannot steer a route), and native as ``dist.all_to_all_single``; MPI only
    starts the ranks and carries the bench's barriers and results.
    """
    from a2a_compiler.solve import solve

    say = progress or (lambda msg: None)
    if not (schedules or native or default_routes):
        raise A2AError("nothing to measure: give --schedule FILE, --native or --default-routes")
    if fabric.link_bw is None:
        raise A2AError("the testbed needs --link-bw")
    if demand is not None and fft is not None:
        raise A2AError("--fft runs the FFT's own all-to-all; it does not take --demand")
    if runtime not in RUNTIMES:
        raise A2AError(f"--runtime must be one of {', '.join(RUNTIMES)}, got {runtime!r}")
    if runtime == "torch" and fft is not None:
        raise A2AError("--fft runs with --runtime mpi only")
    if runtime == "torch" and importlib.util.find_spec("torch") is None:
        raise A2AError("--runtime torch needs torch: pip install 'a2a-compiler[torch]'")
    items = [prepare(Path(p), topology, fabric, demand) for p in schedules]
    n = topology.n_hosts
    if fft is not None:
        from . import fft as fft3d

        if fft3d.check_grid(fft, n):
            raise A2AError(fft3d.check_grid(fft, n))
        sizes = [fft3d.shard_bytes(fft, n)]
    if not sizes:
        raise A2AError("give the shard sizes to measure (--sizes) or an FFT grid (--fft)")
    routes = routing.default_routes(topology, fabric)
    items += [_routes_item(routes, fabric, demand)] * default_routes + [_native_item(routes, fabric, demand)] * native
    if runtime == "torch":   # gloo has no steered routes: the ranks relay
        items = [replace(it, route_mode="relay") if it.route_mode else it for it in items]
    _check_resources(items, n, sizes, iters + warmup, fabric, demand)
    flow = solve(topology, fabric, "mcf-decomp", demand=demand).concurrent_flow
    bound = (n - 1) * flow * fabric.link_bw

    def job_items(tb, tmp):
        jobs = []
        for item in items:
            steering = None
            if item.route_mode == "direct":
                steering = [[*k, *v] for k, v in sorted(tb.steer(item.program).items())]
                say(f"{item.label}: {len(steering)} routes steered")
            jobs.append({"label": item.label, "kind": item.kind, "route_mode": item.route_mode,
                         "file": _program_file(item, tmp), "steering": steering})
        return jobs

    expected = sum((iters + warmup) * it.predicted_time * m / fabric.link_bw for it in items for m in sizes)
    raw, header = run_on_testbed(topology, fabric, routes, job_items, len(items), expected, sizes=sizes,
                                 iters=iters, warmup=warmup, fft=fft, name=name, force=force, timeout=timeout,
                                 say=say, demand=demand, runtime=runtime)
    header.update(mcf_flow=flow, throughput_bound_GBps=bound / 1e9)
    warnings: list[str] = []
    by_label = {it.label: it for it in items}
    results = [_result(r, by_label[r["label"]], topology, fabric, bound, iters, warnings, demand) for r in raw]
    return BenchResult(header, results, warnings)


def run_on_testbed(topology: Topology, fabric: Fabric, routes, job_items, n_items: int, expected: float, *,
                   sizes: list[int], iters: int, warmup: int, fft: int | None = None, name: str | None = None,
                   force: bool = False, timeout: float | None = None, say=None,
                   demand=None, runtime: str = "mpi") -> tuple[list[dict], dict]:
    """Bring the testbed up, run :mod:`.rank` over the items ``job_items(tb, tmp)`` returns (they may steer
    routes on ``tb``), take it down: the rank program's raw results and the bench header.

    ``expected`` is the predicted run time in seconds (the default timeout is 120 s plus ten times it).
    """
    say = say or (lambda msg: None)
    n = topology.n_hosts
    name = f"b{os.getpid()}" if name is None else name
    with signals_raise(), Testbed.up(topology, fabric, name, routes=routes, force=force, progress=say) as tb:
        with tempfile.TemporaryDirectory(dir=tb.state_dir) as tmp:
            jobs = job_items(tb, tmp)
            timeout = timeout or 120 + 10 * expected  # native may run far below its prediction
            job = {"items": jobs, "sizes": sizes, "iters": iters, "warmup": warmup, "fft": fft,
                   "counters": counter_map(tb.layout), "timeout": min(timeout, 600),
                   "host_ns": [tb.layout.host_ns(h) for h in range(n)],
                   "demand": None if demand is None else demand.volumes.tolist(), "runtime": runtime,
                   "torch_master": tb.layout.host_addr(0)}
            job_file, out_file = Path(tmp, "job.json"), Path(tmp, "out.json")
            job_file.write_text(json.dumps(job))
            say(f"running {n_items} item(s) x {len(sizes)} size(s) x {warmup}+{iters} iterations "
                f"on {n} ranks (about {expected:.0f} s at the predicted rates)")
            with open(Path(tmp, "stderr"), "w+b") as err:
                finished = tb.run([sys.executable, "-m", "runtimes.testbed.rank", str(job_file), str(out_file)],
                                  timeout, stdout=subprocess.DEVNULL, stderr=err)
                if finished.returncode != 0 or not out_file.exists():
                    err.seek(0)
                    raise A2AError(_job_error(finished, err.read().decode(errors="replace")))
            raw = json.loads(out_file.read_text())["results"]
    header = {"spec": topology.spec, "ranks": n, "runtime": runtime, "fabric": fabric.to_json_dict(),
              "default_routes": tb.routes.algo,
              "iters": iters, "warmup": warmup, "fft_grid": fft,
              "demand": None if demand is None else demand.to_json_dict(),
              "job": {"wall_s": finished.wall_s, "cpu_user_s": finished.cpu_user_s,
                      "cpu_system_s": finished.cpu_system_s}}
    return raw, header


def _check_resources(items: list[Item], n: int, sizes: list[int], runs: int, fabric: Fabric, demand=None) -> None:
    """Refuse a bench whose buffers cannot fit in memory or whose schedules would run for hours."""
    try:
        with open("/proc/meminfo") as fh:
            avail = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("MemAvailable:"))
    except (OSError, StopIteration, ValueError):
        avail = None
    need = n * 4 * n * max(sizes)  # every rank: send, receive, padding and scratch buffers
    if demand is not None:
        need *= float(max(demand.row_sums().max(), demand.col_sums().max()) + 1) / n
    if avail is not None and need > 0.8 * avail:
        raise A2AError(f"--sizes {max(sizes)}: {n} ranks need ~{need / 2**30:.1f} GiB of buffers, only "
                       f"{avail / 2**30:.1f} GiB available; use smaller sizes")
    hours = sum(runs * it.predicted_time * m / fabric.link_bw for it in items for m in sizes) / 3600
    if hours > MAX_HOURS:
        raise A2AError(f"the schedules alone would run for {hours:.1f} h at the predicted rates (limit "
                       f"{MAX_HOURS} h); use fewer or smaller --sizes, fewer --iters, or a higher --link-bw")


def _program_file(item: Item, tmp: str) -> str | None:
    if item.program is None:
        return None
    if item.file is not None:
        return str(item.file.resolve())
    from a2a_compiler.formats import program_to_xml

    path = Path(tmp, f"{item.label}.xml")
    path.write_bytes(program_to_xml(item.program))
    return str(path)


def _job_error(finished, stderr: str) -> str:
    """One line for a failed job: the rank program's own error, else why mpiexec ended it."""
    if finished.timed_out:
        return finished.timeout_message()
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if "a2a testbed bench: error:" in ln:
            return ln.split("error: ", 1)[1]
    killed = [ln for ln in lines if "KILLED BY SIGNAL" in ln or "EXIT CODE" in ln]
    why = killed[0].strip("= ") if killed else (lines[-1] if lines else "no message")
    return f"the MPI job failed (a rank died or was killed; exit {finished.returncode}): {why}"


def links_follow(measured: dict, predicted: dict) -> list[str]:
    """Why the link payloads do not follow the prediction (empty if they do): each used link within
    :data:`LINK_TOLERANCE` of its prediction, each unused link below :data:`QUIET_FRACTION` of the busiest."""
    busiest = max(predicted.values(), default=0)
    problems = []
    lo, hi = LINK_TOLERANCE
    for key in sorted(measured, key=lambda k: tuple(map(int, k.split("-")))):
        got, want = measured[key], predicted.get(key, 0)
        if want and not lo * want <= got <= hi * want:
            problems.append(f"link {key} carried {got} B, predicted {want} B ({got / want:.2f}x)")
        elif not want and got > QUIET_FRACTION * busiest:
            problems.append(f"link {key} carried {got} B but the routes do not use it")
    return problems


def _result(raw: dict, item: Item, topology: Topology, fabric: Fabric, bound: float, iters: int,
            warnings: list[str], demand=None) -> dict:
    n, m, b = topology.n_hosts, raw["size_bytes"], fabric.link_bw
    chunk = -(-m // item.chunks_per_shard) if demand is None else None
    predicted = {link_key(u, v): c * iters for (u, v), c in sorted(item.link_bytes(m, demand).items())}
    out = observed(raw, topology, predicted, item.label, item.kind == "schedule", warnings)
    t = out["time_median_s"]
    algbw = (n - 1) * m / t if demand is None else float(demand.pair_bytes(m).sum()) / n / t
    if algbw > bound:
        warnings.append(over_bound(item.label, m, algbw / bound, t, fabric.link_bw))
    return {
        "label": item.label, "item": item.kind, "size_bytes": m, "chunk_bytes": chunk, **out,
        "algbw_GBps": algbw / 1e9,
        "predicted_algbw_GBps": (n - 1) * b / item.predicted_time / 1e9,
        "throughput_bound_GBps": bound / 1e9, "bound_fraction": algbw / bound,
        "route_mode": item.route_mode,
        **({"fft_s": _fft_phases(raw["fft_phases_s"])} if "fft_phases_s" in raw else {}),
    }


def over_bound(label: str, m: int, fraction: float, t: float, link_bw: float) -> str:
    """Why a measurement above the MCF bound is possible: each cable's token bucket (:func:`.build.burst_bytes`)
    starts an iteration with a burst of credit, sent on top of the rate; a short iteration gains a visible share."""
    from .build import BURST_SECONDS, burst_bytes

    burst = burst_bytes(link_bw)
    return (f"{label} {m} B: {100 * fraction:.1f}% of the MCF bound: each link's token bucket starts an iteration "
            f"with {burst} B of credit ({BURST_SECONDS * 1e3:g} ms of its rate) sent above the rate, here "
            f"{100 * burst / (link_bw * t):.1f}% of a {t * 1e3:.0f} ms iteration; larger --sizes make it negligible")


def observed(raw: dict, topology: Topology, predicted: dict, label: str, routed: bool, warnings: list[str]) -> dict:
    """What a bench measured beside ``predicted`` link bytes (``{"u-v": bytes}``): times, the byte-exact
    check, the link payloads and whether they follow the routes (checked when ``routed``), host, TCP and CPU
    counters, and the failures; a busy-CPU warning goes to ``warnings``."""
    m, times, counters = raw["size_bytes"], raw["times_s"], raw["counters"]
    links = [link_key(u, v) for u, v in zip(topology.src.tolist(), topology.dst.tolist())]
    measured = {k: counters[k]["payload"] for k in links}
    predicted = {k: predicted.get(k, 0) for k in links}
    cpu = cpu_use(raw["cpu_before"], raw["cpu_after"])
    cpu["ranks_fraction"] = raw["ranks_cpu_s"] / (raw["window_s"] * cpu["cpus"])
    failures = []
    if raw["error"]:
        failures.append(raw["error"])
    follow = links_follow(measured, predicted)
    if follow and routed:
        failures.append("bytes do not follow the routes: " + "; ".join(follow[:3]))
    if cpu["busy_fraction"] > BUSY_WARNING:
        warnings.append(f"{label} {m} B: the CPUs were {100 * cpu['busy_fraction']:.0f}% busy (ranks "
                        f"{100 * cpu['ranks_fraction']:.0f}%, kernel softirq {100 * cpu['softirq_fraction']:.0f}%, "
                        f"the rest other load): the emulation may not hold the link rates; lower --link-bw or "
                        f"quiet the machine")
    busiest = max(predicted, key=lambda k: (predicted[k], k))
    return {
        "time_median_s": statistics.median(times), "time_min_s": min(times), "time_max_s": max(times),
        "verified": raw["error"] is None, "error": raw["error"], "routes_followed": not follow,
        "busiest_link": {"link": [int(x) for x in busiest.split("-")], "measured": measured[busiest],
                         "predicted": predicted[busiest]},
        "link_bytes": measured, "predicted_link_bytes": predicted,
        "host_bytes": {k: v["payload"] for k, v in counters.items() if ">" in k},
        "tcp": raw["tcp"],
        "mgmt_bytes": counters.get("mgmt", {}).get("bytes"),
        "cpu": {**cpu, "ranks_cpu_s": raw["ranks_cpu_s"], "window_s": raw["window_s"]},
        "failures": failures,
    }


def _fft_phases(phases: list) -> dict:
    """Median over the timed iterations of each phase of the 3-D FFT and of their sum."""
    cols = list(zip(*phases))
    out = {k: statistics.median(c) for k, c in zip(("fft2d", "alltoall", "fft1d"), cols)}
    out["total"] = statistics.median(sum(p) for p in phases)
    return out
