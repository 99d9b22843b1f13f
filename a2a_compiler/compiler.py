"""The library API: ``a2a_compiler.compile(...)``, the whole pipeline in one call (Basu et al. §3–§4).

solve (MCF LPs) -> chunk -> lower (MSCCL / oneCCL-style / MPI path program) ->
verify -> :class:`CompileResult`.  ``a2a compile`` is a thin layer over
:func:`compile` and writes exactly ``result.data``.

>>> import a2a_compiler
>>> r = a2a_compiler.compile("hypercube:3", emit="msccl")            # doctest: +SKIP
>>> r.fidelity, r.predicted_time, r.lp_time                           # doctest: +SKIP
>>> r.write("hc3.xml")                                                # doctest: +SKIP
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from .chunk.cost import fidelity_text, ratio
from .errors import A2AError, echo
from .options import (check_numbers, flag, fraction, nonnegative_int, positive_int, refuse_inapplicable,
                      refuse_unseeded)

#: ``emit`` -> (schedule kind, description).
EMITS = {
    "msccl": ("link", "MSCCL executor XML (GPUs; docs/msccl.md)"),
    "mscclpp": ("link", "MSCCL++ JSON execution plan (GPUs; docs/msccl.md)"),
    "oneccl": ("link", "oneCCL-style XML (CPUs; run with 'a2a run')"),
    "mpi": ("path", "MPI path schedule XML (routed; run with 'a2a run')"),
}
#: Method used when none is given, per schedule kind.
DEFAULT_METHOD = {"link": "tsmcf", "path": "mcf-extp"}


@dataclass(frozen=True, eq=False)
class CompileResult:
    """What :func:`compile` produced, like ``scipy.optimize.OptimizeResult``.

    ``data`` / ``text``: the file, byte-identical to ``a2a compile``'s;
    ``program``: the in-memory program (:mod:`a2a_compiler.formats`);
    ``schedule``: the chunked schedule IR it was lowered from; ``report``: the
    verifier's :class:`~a2a_compiler.verify.Report` (always valid).

    Times are in link-times for unit shards (multiply by shard bytes / link
    bandwidth).  ``predicted_time`` is the program's time under the one cost
    model (:mod:`a2a_compiler.chunk.cost`), the number ``a2a verify`` prints;
    ``lp_time`` the certified optimum of the method's own LP and ``mcf_time``
    the certified link-MCF optimum of the fabric (the best any method can do).
    ``fidelity = lp_time / predicted_time`` and ``mcf_ratio = mcf_time /
    predicted_time`` are both <= 1.
    """

    format: str
    program: object
    data: bytes
    schedule: object
    report: object
    timings: dict = field(default_factory=dict)
    uniform: "CompileResult | None" = None   # all-to-allv: the plain all-to-all compiled alike
    uniform_reused_time: float | None = None  # ... and its program's time under the demand (reused)
    search: object = None                     # the chunk count search (chunking.ChunkSearch), from a topology
    default_target: bool = False              # no --min-fidelity: the fidelity target is FIDELITY_TARGET

    @property
    def text(self) -> str:
        """The file as text (ASCII XML)."""
        return self.data.decode()

    @property
    def method(self) -> str:
        """The solver method the schedule came from."""
        return self.schedule.method

    @property
    def chunks_per_shard(self) -> int:
        """Chunks per shard of the program (the schedule's ``C`` times MSCCL instances)."""
        return self.report.chunks_per_shard

    @property
    def predicted_time(self) -> float:
        """The program's all-to-all time in link-times (unit shards), as ``a2a verify`` prices it."""
        return self.report.perf.predicted_time

    @property
    def lp_time(self) -> float:
        """Certified optimum of the method's own LP, in link-times (§3)."""
        return self.schedule.lp_time

    @property
    def mcf_time(self) -> float | None:
        """Certified link-MCF optimum of the fabric, in link-times (eqs. 1–5)."""
        return self.schedule.info.get("mcf_time")

    @property
    def fidelity(self) -> float:
        """``lp_time / predicted_time`` (<= 1)."""
        return ratio(self.lp_time, self.predicted_time)

    @property
    def mcf_ratio(self) -> float | None:
        """``mcf_time / predicted_time`` (<= 1)."""
        return None if self.mcf_time is None else ratio(self.mcf_time, self.predicted_time)

    @property
    def target(self) -> str | None:
        """MSCCL: the executor whose limits the file meets (``--target``, default ``nccl``); else ``None``."""
        return self.report.target

    @property
    def size_rule(self):
        """When the executor runs the file (:class:`~a2a_compiler.formats.msccl_rules.SizeRule`; GPU formats)."""
        return self.report.size_rule

    @property
    def fidelity_warning(self) -> str | None:
        """Why the fidelity is below the default target (``None`` when it meets it, or when ``min_fidelity``
        was given, which refuses instead): the warning ``a2a compile`` prints before exiting 1."""
        from .chunk.chunking import FIDELITY_TARGET
        from .numeric import TIE

        if not self.default_target or self.fidelity >= FIDELITY_TARGET - TIE:
            return None
        why = [f"fidelity {fidelity_text(self.fidelity)} is below the default target {FIDELITY_TARGET:g}: the best "
               f"chunk count tried is C = {self.schedule.chunks_per_shard}"]
        if self.search is not None and self.search.refused:
            why.append(f"{self.search.refused}")
        if self.search is not None and self.search.unrestricted:
            c, f = self.search.unrestricted
            why.append(f"--any-chunks gives {fidelity_text(f)} at C = {c}, which {self.size_rule.executor} never "
                       f"selects at power-of-two sizes")
        stepped = None if self.search is None else self.search.stepped
        if self.format in ("msccl", "mscclpp") and stepped is not None and stepped[1] >= FIDELITY_TARGET - TIE:
            why.append(f"{FIXED_BUFFERS[self.format]} runs the schedule as a dataflow, without its steps; run in "
                       f"its steps, --emit oneccl reaches {fidelity_text(stepped[1])} at C = {stepped[0]}")
        return "; ".join(why) + "; the file is written; --min-fidelity F sets a target it meets"

    def write(self, path) -> Path:
        """Write :attr:`data` to ``path`` atomically (:func:`a2a_compiler.files.atomic_write`)."""
        from .files import atomic_write

        return atomic_write(path, self.data)

    def summary(self) -> dict:
        """The ``a2a compile --json`` object (without ``output``; docs/json.md): every key it shares with
        ``a2a verify --json`` on the written file has the same value there."""
        from .chunk import predicted_time

        s = self.schedule
        return {
            "valid": self.report.valid,
            "format": self.format,
            "spec": s.info.get("switched", s.spec),     # a switched topology's programs: the physical spec
            "method": s.method,
            "fabric": s.fabric.to_json_dict(),
            "ranks": s.n_ranks,
            "chunks_per_shard": self.chunks_per_shard,
            "program": self.report.summary,
            "predicted_time": self.predicted_time,
            "lp_time": self.lp_time,
            "mcf_time": self.mcf_time,
            "fidelity": self.fidelity,
            "mcf_ratio": self.mcf_ratio,
            "schedule_predicted_time": predicted_time(s),
            "target": self.target,
            "sizes": None if self.size_rule is None else self.size_rule.to_json_dict(),
            "fidelity_warning": self.fidelity_warning,
            **({} if self.search is None or self.search.unrestricted is None else {
                "any_chunks": {"chunks_per_shard": self.search.unrestricted[0],
                               "fidelity": self.search.unrestricted[1]}}),
            "timings": dict(self.timings),
            **({} if s.demand is None else {"demand": s.demand.to_json_dict()}),
            **({} if self.uniform is None else {
                "uniform_reused": {"predicted_time": self.uniform_reused_time,
                                   "uniform_predicted_time": self.uniform.predicted_time,
                                   "slowdown": self.uniform_reused_time / self.predicted_time}}),
        }


def _fabric(fabric, link_bw, host_bw, forwarding, nvlink_bw=None):
    from .fabric import Fabric, parse_bandwidth

    if fabric is not None:
        if (link_bw, host_bw, forwarding, nvlink_bw) != (None, None, None, None):
            raise A2AError("give either fabric= or link_bw/host_bw/forwarding/nvlink_bw, not both")
        return fabric

    def bw(value, option):  # the command line's rule: a number and its unit (is 25e9 bits or bytes per second?)
        if value is not None and not isinstance(value, str):
            raise A2AError(f"{option}: give a bandwidth with its unit, e.g. '25Gbps' or '3.125GB/s', not the bare "
                           f"number {value!r} (b is a bit, B a byte); fabric=Fabric(...) takes bytes/s")
        return value if value is None else parse_bandwidth(value, option)

    return Fabric(bw(link_bw, "--link-bw"), bw(host_bw, "--host-bw"), forwarding or "host",
                  bw(nvlink_bw, "--nvlink-bw"))


def _topology(source, **failures):
    from .topology.model import Topology
    from .topology.puncture import puncture, puncture_options
    from .topology.spec import from_spec

    cut = puncture_options(**failures)
    if not isinstance(source, (Topology, str)):
        raise A2AError(f"the topology must be a spec string (e.g. 'torus:3x3x3') or a Topology, got "
                       f"{type(source).__name__}")
    topo = source if isinstance(source, Topology) else from_spec(source)
    return puncture(topo, **cut) if cut else topo


#: Channel counts tried, after the fewest that fit, when MSCCL's --channels is not given.
CHANNEL_CANDIDATES = (2, 4, 8)


class _Programs:
    """Lowers candidate schedules and prices them as :func:`compile` will write them.

    The chunk count search calls :meth:`time` for each candidate schedule, :func:`compile`
    :meth:`lower` for the chosen one.  For MSCCL and MSCCL++ the time is the program's dataflow time;
    without ``--channels`` each schedule is lowered with the fewest channels that fit, then
    with :data:`CHANNEL_CANDIDATES` channels, stopping at the first program that reaches the
    fidelity target, and the fastest is kept (separate connections let a relayed chunk
    overtake the messages queued ahead of it on one connection: hypercube:3 under a 50 Gbit/s
    host bottleneck reaches the LP's 6 link-times with 8 channels, 7.5 with 1).  oneCCL and
    MPI path programs run the schedule's own steps, whose stepped time the chunk search
    computes itself (:meth:`time` is then None).
    """

    def __init__(self, emit: str, name: str | None, msccl: dict, fabric, fidelity: float | None, physical=None):
        from .chunk.chunking import FIDELITY_TARGET
        from .lower import LOWERINGS

        self._lower = LOWERINGS[emit]
        self.options = {"name": name, **(msccl if emit == "msccl" else {})}
        self.physical, self.routes = physical, None
        if physical is not None:  # switches forward, programs connect hosts: priced on the physical links
            from .topology.switched import host_nodes, switch_routes

            self.routes = switch_routes(physical)
            if emit == "mscclpp":
                self.options["nodes"] = tuple(host_nodes(physical).tolist())
        self.priced = emit in ("msccl", "mscclpp")
        self.search = emit == "msccl" and "channels" not in msccl
        self.fabric = fabric
        self.target = FIDELITY_TARGET if fidelity is None else fidelity
        self.done: list[tuple] = []  # (schedule, time, program)

    def lower(self, schedule):
        """The program written for ``schedule``."""
        return self._best(schedule)[1] if self.priced else self._lower(schedule, **self.options)

    @property
    def time(self):
        """``time(schedule)`` for the chunk search, or None when it prices the schedule itself."""
        return (lambda schedule: self._best(schedule)[0]) if self.priced else None

    def _price(self, schedule, program) -> float:
        from .verify.performance import program_performance
        from .verify.topology_check import link_capacities, schedule_capacities

        caps = schedule_capacities(schedule) if self.physical is None else link_capacities(self.physical)
        d = schedule.demand
        return program_performance(program, self.fabric or schedule.fabric, caps, routes=self.routes, demand=d,
                                   layout=None if d is None else schedule.counts()).predicted_time

    def _best(self, schedule):
        from .chunk.chunking import TIE

        for s, t, prog in self.done:
            if s is schedule:
                return t, prog
        prog = self._lower(schedule, **self.options)
        best = (self._price(schedule, prog), prog)
        for k in CHANNEL_CANDIDATES if self.search else ():
            if ratio(schedule.lp_time, best[0]) >= self.target - TIE:
                break
            if k * self.options.get("instances", 1) <= prog.nchannels:
                continue
            try:
                other = self._lower(schedule, **self.options, channels=k)
            except A2AError:  # more channels than the target allows
                break
            t = self._price(schedule, other)
            if t < best[0] * (1 - 1e-12):
                best = (t, other)
        self.done.append((schedule, *best))
        return best


#: What an IR records of its method's LP, for :func:`recertify` to solve it again (mcf-extp's is the link MCF).
RECORDED_LP = {"tsmcf": "lp_steps", "pmcf": "solve_options"}


def recertify(schedule):
    """``schedule`` after solving again the two LP times an IR records (a file's numbers are claims, and
    ``compile --from-ir`` prints them as certified): its method's own LP on the IR's links (tsmcf at its
    recorded steps, pmcf over its recorded candidate paths, mcf-extp's is the link MCF) and the link MCF of the
    topology its spec names (a switched topology's physical one: what ``a2a verify`` solves for the output).
    A time that differs from the record by more than 1e-6 raises :class:`A2AError` naming both: the IR was
    edited, or its spec, fabric or demand changed."""
    from .chunk import PMCF_OPTIONS
    from .fabric import apply_link_classes
    from .solve import solve
    from .topology.puncture import from_recorded_spec, recorded_hosts
    from .verify.topology_check import schedule_topology

    spec = schedule.info.get("switched", schedule.spec)
    hosts = recorded_hosts(spec)
    if hosts is not None and hosts != schedule.n_ranks:
        raise A2AError(f"the IR has {schedule.n_ranks} ranks but its spec {spec} has {hosts} hosts")
    fabric, demand = schedule.fabric, schedule.demand
    mcf = solve(apply_link_classes(from_recorded_spec(spec), fabric), fabric, "mcf-decomp", demand=demand).lp_time
    if schedule.method == "mcf-extp":
        lp = solve(schedule_topology(schedule), fabric, "mcf-decomp", demand=demand).lp_time
    elif RECORDED_LP[schedule.method] in schedule.info:
        options = schedule.info[RECORDED_LP[schedule.method]]
        options = {"steps": options} if schedule.method == "tsmcf" else options
        if not isinstance(options, dict) or set(options) - {"steps", *PMCF_OPTIONS} or \
                not isinstance(options.get("paths", ""), str):
            raise A2AError(f"the IR's {RECORDED_LP[schedule.method]} {echo(str(options))} is not what "
                           f"'a2a schedule' records; make it again")
        check_numbers(options, NUMBER_OPTIONS)
        lp = solve(schedule_topology(schedule), fabric, schedule.method, demand=demand, **options).lp_time
    else:
        what = "steps" if schedule.method == "tsmcf" else "candidate paths"
        raise A2AError(f"the IR records no {what} for its {schedule.method} LP, so its LP time cannot be "
                       f"certified; make it again with 'a2a schedule'")
    for what, recorded, solved in (("LP time", schedule.lp_time, lp), ("link MCF time", schedule.info.get("mcf_time"),
                                                                       mcf)):
        if recorded is None or abs(recorded - solved) > 1e-6 * solved:
            said = "no " + what if recorded is None else f"the {what} {recorded:.9g}"
            raise A2AError(f"the IR records {said}, but solving it again on "
                           f"{'its links' if what == 'LP time' else 'its spec ' + spec} and fabric gives "
                           f"{solved:.9g}: the IR was edited or its spec, fabric or demand changed; make it again "
                           f"with 'a2a schedule'")
    return schedule


def _check_msccl_size(n_hosts: int, spec: str, msccl: dict) -> None:
    """Refuse, before solving, a rank count no MSCCL XML can describe, and more channels than the target builds."""
    from .formats.msccl_rules import MAX_CHILDREN
    from .lower.msccl import SCALES_FURTHER, check_channel_options

    check_channel_options(spec, msccl.get("channels"), msccl.get("instances", 1), msccl.get("target"))

    if n_hosts > MAX_CHILDREN:
        raise A2AError(f"{n_hosts} ranks: MSCCL XML holds at most {MAX_CHILDREN} <gpu> elements (the executors' "
                       f"parser keeps {MAX_CHILDREN} children per node); use {SCALES_FURTHER}")


#: Chunking options and the methods they apply to (others refuse them: :mod:`a2a_compiler.options`).
CHUNKING_OPTIONS = {"paths": ("method", ("pmcf",)), "max_paths": ("method", ("pmcf",)), "steps": ("method", ("tsmcf",))}
#: MSCCL lowering options: they apply to ``emit="msccl"`` only.
MSCCL_OPTIONS = {k: ("emit", ("msccl",)) for k in ("channels", "instances", "proto", "min_bytes", "max_bytes", "rcs",
                                                   "target")}
#: Formats whose executor selects a file by its chunk count: ``any_chunks`` lifts the restriction.
SELECTING = {"any_chunks": ("emit", ("msccl", "mscclpp"))}
#: Default --max-chunks when the counts are restricted to powers of two (1, 2, 4, ..., 64: as many candidates
#: as 1..16 unrestricted; hypercube:3 reaches 0.9922 at C = 32, 0.9697 at 8 and 16).
RESTRICTED_MAX_CHUNKS = 64
#: Formats whose buffers hold the same number of chunks on every rank: balanced all-to-allv matrices only.
FIXED_BUFFERS = {"msccl": "MSCCL", "mscclpp": "MSCCL++"}
#: Injection rate control: routed schedules (``emit="mpi"``) only.
INJECTION_OPTIONS = {k: ("emit", ("mpi",)) for k in ("max_flows", "flow_per_chunk")}

#: Numeric keywords of :func:`compile` and their ``a2a compile`` option's type.
NUMBER_OPTIONS = {**dict.fromkeys(("max_chunks", "steps", "max_paths", "channels", "instances", "max_flows"),
                                  positive_int),
                  **dict.fromkeys(("remove_links", "remove_nodes", "seed", "min_bytes", "max_bytes"), nonnegative_int),
                  "min_fidelity": fraction}
#: Keywords of :func:`compile` that solve and chunk (refused for an already chunked schedule).
SOLVE_OPTIONS = ("method", "fabric", "link_bw", "host_bw", "forwarding", "nvlink_bw", "remove_links", "remove_nodes",
                 "among", "remove_cables",
                 "seed", "max_chunks", "min_fidelity", "steps", "paths", "max_paths", "solver", "demand",
                 "any_chunks")


def compile(source, emit: str = "msccl", method: str | None = None, *, fabric=None, link_bw=None, host_bw=None,
            forwarding: str | None = None, nvlink_bw=None, remove_links: int | None = None, remove_nodes: int | None = None,
            among: str | None = None, remove_cables=None,
            seed: int | None = None, max_chunks: int | None = None, min_fidelity: float | None = None,
            steps: int | None = None, paths: str | None = None, max_paths: int | None = None,
            solver: str | None = None, channels: int | None = None, instances: int | None = None,
            proto: str | None = None, min_bytes: int | None = None, max_bytes: int | None = None,
            rcs: bool | None = None, target: str | None = None, max_flows: int | None = None,
            flow_per_chunk: bool | None = None, name: str | None = None, progress=None,
            demand=None, any_chunks: bool | None = None) -> CompileResult:
    """Compile an all-to-all schedule for ``source`` and lower it to ``emit`` (Basu et al. §3–§4).

    ``source`` is a topology spec (``"torus:3x3x3"``), a
    :class:`~a2a_compiler.topology.Topology`, or an already chunked schedule IR
    (:func:`a2a_compiler.chunk.load_schedule`), which is lowered as it is once its LP times are certified
    again (:func:`recertify`).

    ``emit``: ``msccl`` / ``mscclpp`` / ``oneccl`` (link schedule, ``method`` ``tsmcf``) or
    ``mpi`` (path schedule, ``method`` ``mcf-extp`` (default) or ``pmcf`` with
    ``paths`` = ``disjoint`` | ``shortest`` | ``ksp:K``, ``max_paths``).
    Fabric: ``link_bw``, ``host_bw`` (``"25Gbps"``, spelled as on the command line: a bare number is
    refused), ``forwarding``
    (``host`` | ``nic``), ``nvlink_bw`` (NVLinks of ``nvswitch:`` topologies), or a
    :class:`~a2a_compiler.fabric.Fabric` (bytes/s).  On a topology with switches a link program connects
    hosts and the switches forward: tsMCF schedules the hosts-through-switches graph
    (:func:`~a2a_compiler.topology.switched.switch_graph`), the program is priced and verified on
    the physical links, and ``mcf_time`` is the physical topology's link MCF optimum.  Failures:
    ``remove_links``, ``remove_nodes``, ``seed``, ``among``, ``remove_cables``
    (:func:`~a2a_compiler.topology.puncture.puncture`).  Chunking: ``max_chunks``
    (16; 64 where ``C`` is a power of two), ``min_fidelity`` (the smallest ``C`` reaching it; for MSCCL
    and MSCCL++ measured on the lowered program), tsMCF ``steps``.  MSCCL: ``channels``,
    ``instances`` (1), ``proto`` (Simple), ``min_bytes``, ``max_bytes`` (0 = no
    limit), ``rcs`` (False), ``target`` (``nccl`` | ``rccl``: the executor whose limits the
    program meets and that selects it at power-of-two sizes: the chunk search keeps only powers of two
    whose program fits; recorded in the file).  ``mscclpp`` chooses ``C`` among powers of two too;
    ``any_chunks`` (with ``target`` or ``mscclpp``) lifts that (docs/msccl.md).  MPI paths
    (:mod:`a2a_compiler.chunk.injection`): ``flow_per_chunk`` (every chunk its own route),
    ``max_flows`` (time steps with at most that many routes per host and direction).  ``name``
    goes into the file.  ``demand`` (a :class:`~a2a_compiler.demand.Demand`, an array or a CSV /
    ``.npy`` path) compiles the all-to-allv of that matrix (MSCCL and MSCCL++: balanced matrices only, in the
    fixed-size-buffer layout of docs/formats.md; others are refused before solving); the plain all-to-all
    is then compiled alike and
    its program priced under the demand (``uniform_reused_time``).  Each keyword is the ``a2a compile``
    option of the same name (``max_chunks`` is ``--max-chunks``), with the same
    defaults; errors name the option that way.

    Returns a :class:`CompileResult`; the program has passed every check of
    ``a2a verify``.  A program below the default fidelity target 0.97 is returned with
    :attr:`CompileResult.fidelity_warning` saying why (``a2a compile`` writes it and exits 1); with
    ``min_fidelity`` one below it is refused.  Bad input raises :class:`~a2a_compiler.errors.A2AError`.
    """
    from .chunk import SCHEDULE_METHODS, build_schedule
    from .fabric import apply_link_classes, check_link_classes
    from .chunk.ir import LinkSchedule, PathSchedule
    from .formats import program_to_xml
    from .lower import check_name
    from .lower.placement import check_store_and_forward
    from .verify import verify_bytes
    from .verify.topology_check import schedule_topology

    given = {k: v for k, v in locals().items() if k in SOLVE_OPTIONS and v is not None}
    check_numbers(locals(), NUMBER_OPTIONS)
    check_name(name)
    refuse_unseeded(locals())
    if emit not in EMITS:
        raise A2AError(f"--emit must be one of {', '.join(EMITS)}, got {emit!r}")
    kind = EMITS[emit][0]
    msccl = {k: v for k, v in (("channels", channels), ("instances", instances), ("proto", proto),
                               ("min_bytes", min_bytes), ("max_bytes", max_bytes), ("rcs", rcs),
                               ("target", target)) if v is not None}
    injection = {k: v for k, v in (("max_flows", max_flows), ("flow_per_chunk", flow_per_chunk)) if v}
    refuse_inapplicable({"emit": emit, **msccl, **({"any_chunks": True} if any_chunks else {}), **injection},
                        {**MSCCL_OPTIONS, **INJECTION_OPTIONS, **SELECTING})
    if any_chunks and emit == "msccl" and target is None:
        raise A2AError("--any-chunks applies with --target (without it the chunk count is not restricted to the "
                       "counts the executor selects)")
    search = None
    t0 = time.perf_counter()
    if isinstance(source, (LinkSchedule, PathSchedule)):
        if given:
            raise A2AError(f"{', '.join(map(flag, given))}: the schedule is already solved and chunked; these "
                           f"options apply when compiling from a topology")
        got = "link" if isinstance(source, LinkSchedule) else "path"
        if got != kind:
            raise A2AError(f"--emit {emit} needs a {kind} schedule, but this one is a {got} schedule (method "
                           f"{source.method}); use --emit {'mpi' if got == 'path' else 'msccl, mscclpp or oneccl'}")
        _check_fixed_buffers(source.demand, emit)
        schedule = recertify(source)
        programs = _Programs(emit, name, msccl, None, None)
    else:
        method = method or DEFAULT_METHOD[kind]
        if method not in SCHEDULE_METHODS:
            raise A2AError(f"--method must be one of {', '.join(SCHEDULE_METHODS)}, got {method!r}")
        if SCHEDULE_METHODS[method] != kind:
            raise A2AError(
                f"--emit {emit} needs a {kind} schedule: use --method "
                f"{'tsmcf' if kind == 'link' else 'mcf-extp or pmcf'} ({method} gives "
                + ("routes: emit them with --emit mpi)" if kind == "link" else
                   "a time-stepped link schedule: emit it with --emit msccl, mscclpp or oneccl)"))
        refuse_inapplicable({"method": method, "paths": paths, "max_paths": max_paths, "steps": steps},
                            CHUNKING_OPTIONS)
        fab = _fabric(fabric, link_bw, host_bw, forwarding, nvlink_bw)
        if kind == "link":
            check_store_and_forward(fab)
        solve_options = {k: v for k, v in (("paths", paths), ("max_paths", max_paths), ("solver", solver)) if v}
        topology = _topology(source, remove_links=remove_links, remove_nodes=remove_nodes, seed=seed, among=among,
                             cables=remove_cables)
        check_link_classes(topology, fab)
        topology = apply_link_classes(topology, fab)
        from .demand import as_demand

        demand = as_demand(demand, topology.n_hosts)
        _check_fixed_buffers(demand, emit)
        if demand is not None and emit == "msccl":
            if (instances or 1) != 1 or rcs:
                raise A2AError("--instances and --rcs apply to the plain all-to-all; an all-to-allv file takes "
                               "--channels")
        if emit == "msccl":
            _check_msccl_size(topology.n_hosts, topology.spec, msccl)
        physical = topology if kind == "link" and topology.n_switches else None
        if physical is not None:  # link programs connect hosts; the switches forward (topology.switched)
            from .topology.switched import switch_graph

            topology = switch_graph(physical)[0]
        programs = _Programs(emit, name, msccl, fab, min_fidelity, physical)
        from .chunk.chunking import ChunkSearch
        from .formats.msccl_rules import is_power_of_two

        restrict = not any_chunks and (emit == "mscclpp" or emit == "msccl" and target is not None)
        if restrict and not is_power_of_two(instances or 1):
            raise A2AError(f"--instances {instances} with --target: the chunks per peer (C x {instances}) are never a "
                           f"power of two, so {target} would select the file at no power-of-two size; use a "
                           f"power-of-two --instances, or --any-chunks")
        search = ChunkSearch((lambda C: is_power_of_two(C * (instances or 1))) if restrict else None)
        default_max = RESTRICTED_MAX_CHUNKS if search.accept is not None else 16
        schedule = build_schedule(topology, fab, method, max_chunks=default_max if max_chunks is None else max_chunks,
                                  min_fidelity=min_fidelity, steps=steps, solve_options=solve_options,
                                  program_time=programs.time, progress=progress, demand=demand, search=search)
        if physical is not None:
            from dataclasses import replace

            from .solve import solve

            schedule = replace(schedule, info={**schedule.info, "switched": physical.spec,
                                               "mcf_time": solve(physical, fab, "mcf-decomp", demand=demand).lp_time})
    if injection:
        from .chunk.injection import injection_control

        schedule = injection_control(schedule, max_flows, bool(flow_per_chunk))
    t1 = time.perf_counter()
    program = programs.lower(schedule)
    data = program_to_xml(program)
    report = verify_bytes(data, f"<{emit}>", programs.physical or schedule_topology(schedule), schedule.fabric,
                          lp=False, demand=schedule.demand)   # the target the file records
    if not report.valid:  # a compiler bug, never a user error: keep the evidence
        raise RuntimeError("lowered program failed verification:\n" + "\n".join(report.messages()[:20]))
    timings = {"schedule": t1 - t0, "lower_and_verify": time.perf_counter() - t1}
    uniform = reused = None
    if schedule.demand is not None and not isinstance(source, (LinkSchedule, PathSchedule)):
        from .verify.performance import program_performance
        from .verify.topology_check import link_capacities, schedule_capacities

        uniform = compile(programs.physical or topology, emit, method, fabric=fab, max_chunks=max_chunks,
                          steps=steps, paths=paths, max_paths=max_paths, solver=solver, channels=channels,
                          instances=instances, proto=proto, min_bytes=min_bytes, max_bytes=max_bytes, rcs=rcs,
                          target=target, max_flows=max_flows, flow_per_chunk=flow_per_chunk, name=name,
                          progress=progress, any_chunks=any_chunks)
        caps = (schedule_capacities(uniform.schedule) if programs.physical is None
                else link_capacities(programs.physical))
        reused = program_performance(uniform.program, fab, caps, routes=programs.routes,
                                     demand=schedule.demand).predicted_time
        timings["uniform"] = sum(uniform.timings.values())
    return CompileResult(emit, program, data, schedule, report, timings, uniform, reused, search,
                         search is not None and min_fidelity is None)


def _check_fixed_buffers(demand, emit: str) -> None:
    """Refuse, before solving or lowering, an all-to-allv matrix a fixed-buffer format cannot hold."""
    if demand is not None and emit in FIXED_BUFFERS:
        demand.require_balanced(FIXED_BUFFERS[emit])
