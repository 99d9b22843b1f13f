"""Stage 6: verify a lowered schedule (MSCCL XML, MSCCL++ JSON plan, oneCCL-style XML or MPI path XML).

:func:`verify_bytes` runs every pass that applies to the file's format and
collects the results in a :class:`Report`:

=================== ================================================ =========================
check               what                                              module
=================== ================================================ =========================
executor rules      MSCCL lexical form, attributes, ids, limits;      :mod:`..formats.msccl_rules`,
                    MSCCL++ loader rules and limits                   :mod:`..formats.mscclpp_rules`
data movement       symbolic execution: output = all-to-all transpose :mod:`.simulate`
deadlock freedom    wait-for analysis with 8-slot FIFOs (MSCCL);      :mod:`.simulate`,
                    MPI paths: acyclic channel dependencies           :mod:`..deadlock`
topology            every transfer / route hop is a real link         :mod:`.topology_check`
performance         predicted time, ratio to the LP optimum           :mod:`.performance`
=================== ================================================ =========================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace

from ..chunk.cost import ratio
from ..chunk.counts import msccl_counts
from ..deadlock import find_deadlock
from ..errors import A2AError, FormatError, echo
from ..fabric import Fabric
from ..files import read_bytes
from ..formats import FORMATS, detect_format
from ..formats.mscclpp import looks_like_plan, parse_mscclpp
from ..formats.record import TAG, Record
from ..formats.xmlutil import parse_xml
from ..topology.model import Topology
from ..formats import msccl_rules, mscclpp_rules
from . import performance, simulate, topology_check

CHECKS = ("executor rules", "data movement", "deadlock freedom", "topology")
#: Most buffer chunks (input + output + scratch over all ranks) the symbolic execution allocates.
MAX_SIMULATED_CHUNKS = 1 << 24


@dataclass
class Report:
    """What :func:`verify_bytes` found: errors per check, skipped checks, warnings, and the predicted time."""

    source: str
    format: str
    ranks: int
    chunks_per_shard: int
    errors: dict[str, list[str]] = field(default_factory=lambda: {c: [] for c in CHECKS})
    skipped: dict[str, str] = field(default_factory=dict)   # check -> why it did not run
    warnings: list[str] = field(default_factory=list)
    perf: performance.Performance | None = None
    record: Record | None = None          # how the file was made (spec, method, fabric, LP times), if it says
    spec: str | None = None               # topology checked against: --topology, else the recorded spec
    fabric: Fabric = Fabric()             # fabric the times are predicted on: the record's, or the overrides'
    overrides: list[str] = field(default_factory=list)  # where the given topology / fabric differ from the record
    mcf_time: float | None = None         # link-MCF optimum of spec under fabric: solved (certified), else recorded
    mcf_solved: bool = False              # mcf_time was solved here (else it is the record's number)
    summary: str = ""
    target: str | None = None             # the MSCCL executor whose limits applied
    size_rule: msccl_rules.SizeRule | None = None  # GPU formats: the sizes the executor runs the file at
    parser_nodes: int | None = None       # MSCCL: the most parser nodes any rank needs
    reused: bool = False                  # a plain all-to-all file priced under another demand (its LP times are not)

    @property
    def valid(self) -> bool:
        """True when no check found an error."""
        return not any(self.errors.values())

    @property
    def lp_time(self) -> float | None:
        """The certified optimum of the method's own LP, as the file records it (``a2a compile``'s ``lp_time``)."""
        return None if self.record is None or self.reused else self.record.lp_time

    @property
    def mcf_ratio(self) -> float | None:
        """Link MCF optimum / predicted time (<= 1): ``a2a compile``'s ``mcf_ratio`` for the same file."""
        p = self.perf
        return None if p is None or not self.mcf_time else ratio(self.mcf_time, p.predicted_time)

    @property
    def fidelity(self) -> float | None:
        """The file's own LP time / predicted time (<= 1): ``a2a compile``'s ``fidelity``; needs a recorded
        ``lp_time`` and the recorded fabric (the LP time is an optimum on that fabric only).  ``None`` above 1
        too: the LP time is a lower bound on the fabric it was solved for, so the file was made for another."""
        p = self.perf
        if p is None or not self.lp_time or self.fabric != self.record.fabric:
            return None
        r = ratio(self.lp_time, p.predicted_time)
        return None if r is None or r > 1 else r

    def messages(self) -> list[str]:
        """Every error as ``check: message``."""
        return [f"{check}: {m}" for check in CHECKS for m in self.errors[check]]

    def to_json(self) -> dict:
        """The ``a2a verify --json`` object (docs/json.md)."""
        p = self.perf
        return {
            "valid": self.valid,
            "file": self.source,
            "format": self.format,
            "spec": self.spec,
            "method": None if self.record is None else self.record.method,
            "fabric": self.fabric.to_json_dict(),
            "ranks": self.ranks,
            "chunks_per_shard": self.chunks_per_shard,
            "program": self.summary,
            "target": self.target,
            "sizes": None if self.size_rule is None else self.size_rule.to_json_dict(),
            "parser_nodes": self.parser_nodes,
            "checks": {c: ("skipped: " + self.skipped[c] if c in self.skipped else
                           "fail" if self.errors[c] else "pass") for c in CHECKS},
            "errors": self.messages(),
            "warnings": list(self.warnings),
            "overrides": list(self.overrides),
            "predicted_time": None if p is None else p.predicted_time,
            "step_loads": None if p is None else list(p.step_loads),
            "busiest_link": None if p is None else {"link": list(p.busiest), "load": p.busiest_load},
            "lp_time": self.lp_time,
            "mcf_time": self.mcf_time,
            "fidelity": self.fidelity,
            "mcf_ratio": self.mcf_ratio,
        }


def verify_file(path: str | os.PathLike, topology: Topology | None = None, fabric: Fabric | dict | None = None,
                lp: bool = True, deadlock_free: bool = False, strict: bool = False, demand=None,
                target: str | None = None, cut: dict | None = None) -> Report:
    """Read ``path`` and :func:`verify_bytes` it."""
    return verify_bytes(read_bytes(path), str(path), topology, fabric, lp, deadlock_free, strict, demand, target, cut)


def verify_bytes(data: bytes, source: str = "<xml>", topology: Topology | None = None,
                 fabric: Fabric | dict | None = None, lp: bool = True, deadlock_free: bool = False,
                 strict: bool = False, demand=None, target: str | None = None,
                 cut: dict | None = None) -> Report:
    """Run every check that applies to the file's format; with ``strict``, warnings are errors.

    ``cut``: :func:`~a2a_compiler.topology.puncture.puncture`'s ``remove_links``, ``remove_nodes``
    and ``seed``, applied to the recorded topology (``--remove-links`` without ``--topology``).

    ``target`` names the MSCCL executor whose limits apply (:data:`~a2a_compiler.formats.msccl_rules.TARGETS`;
    default: the one the file records, else ``nccl``); one that differs from the recorded target is warned about.

    Warnings name what the executor accepts but other tools do not (a receive
    whose fields differ from its send's, msccl-tools' convention) or what is
    unusual (many channels or thread blocks); ``strict`` files them under
    "executor rules" so the file is invalid.  ``demand`` (a
    :class:`~a2a_compiler.demand.Demand`): check data movement against it
    (:func:`_demand_layout`); default: the demand the file records.  A uniform one is the plain all-to-all
    and one of another size than the file's ranks an :class:`A2AError`.  See :func:`_verify`.
    """
    report = _verify(data, source, topology, fabric, lp, deadlock_free, demand,
                     None if target is None else msccl_rules.get_target(target), cut)
    if strict and report.warnings:
        report.errors["executor rules"] += [f"(--strict) {w}" for w in report.warnings]
        report.warnings = []
    return report


def _demand_layout(fmt: str, program, demand, report: "Report", trace=None):
    """What ``--demand`` means for this file: the MSCCL layout counts (or ``None``).

    * MSCCL XML and MSCCL++ plans record no layout: a file whose plain all-to-all ``trace`` is valid
      is one (reused, as below); any other is read in the all-to-allv layout of the demand given, else
      of the one its record holds,
      :func:`~a2a_compiler.chunk.counts.msccl_counts` (an unbalanced matrix is an
      :class:`~a2a_compiler.errors.A2AError`).  The two layouts never hold the same program.
    * oneCCL-style and MPI path files of an all-to-allv record the demand's volumes: they must
      be the demand's, else a data-movement error names both hashes.
    * a plain all-to-all file is valid for any demand (every pair has its chunks) and is
      priced under it, reused (:func:`.performance.program_performance`); a warning says so.
    """
    if demand is None:
        return None
    recorded = program.record.demand["sha256"] if program.record is not None and program.record.demand else None
    if fmt in ("oneccl", "mpi") and program.volumes is not None:
        from ..demand import Demand

        recorded = Demand.from_volumes(program.volumes, report.source).sha256
    if recorded is not None and recorded != demand.sha256:
        report.errors["data movement"].append(
            f"the file was compiled for another demand matrix (volumes sha256 {recorded[:12]}), not "
            f"{demand.source} ({demand.sha256[:12]})")
    if fmt in ("msccl", "mscclpp") and trace.errors:
        return msccl_counts(demand, report.chunks_per_shard, "MSCCL++" if fmt == "mscclpp" else "MSCCL")
    if recorded is None:
        report.reused = True
        report.warnings.append(
            f"the file is the plain all-to-all: priced for {demand.source} reused, with its routes and steps "
            + ("unchanged and each pair's chunks scaled to its volume" if fmt == "mpi" else
               "unchanged and fixed-size chunks padded to the largest pair's volume"))
    return None


#: What ``--target`` does not change for each format that has no executor target (MSCCL's nccl / rccl).
UNTARGETED = {"mscclpp": "an MSCCL++ plan runs on the MSCCL++ executor, whose rules and size rule are checked",
              "oneccl": "a oneCCL-style file is checked without executor limits",
              "mpi": "an MPI path file is checked without executor limits"}


def _layout_run(fmt: str, simulate_fn, demand, report: Report):
    """``run(program)`` for :func:`_executor_trace` of an MSCCL file or MSCCL++ plan (``simulate_fn`` executes
    one, in the layout ``counts`` given), and the dict where it leaves the ``"layout"`` found: under a demand,
    the layout depends on whether the plain transpose holds (:func:`_demand_layout`)."""
    found: dict = {}

    def run(program):
        trace = simulate_fn(program)
        found["layout"] = _demand_layout(fmt, program, demand, report, trace)
        return trace if found["layout"] is None else simulate_fn(program, counts=found["layout"])
    return run, found


def _verify(data: bytes, source: str, topology: Topology | None, fabric: Fabric | dict | None, lp: bool,
            deadlock_free: bool, demand=None, target: msccl_rules.Target | None = None,
            cut: dict | None = None) -> Report:
    """Run every check that applies to the file's format.

    Unreadable input (malformed XML, an unknown root, hostile constructs, bad
    integers) raises :class:`~a2a_compiler.errors.FormatError`; every schedule
    problem is recorded in the returned :class:`Report`.

    The topology and fabric default to what the file records (:mod:`..formats.record`):
    ``topology`` replaces the recorded spec; ``fabric`` is a :class:`Fabric` used as
    it is, or a dict of the fields (``link_bw``, ``host_bw``, ``forwarding``) that
    replace the recorded ones; each difference from the record is noted in
    ``overrides``.  With a topology, transfers must use its links, predicted times
    use its capacities and, with ``lp``, the link-MCF optimum (``1/F`` of the MCF
    under the fabric, certified) is solved.  With ``deadlock_free``, an MPI path
    program's routes must have acyclic channel dependencies over (link, virtual
    channel) (:func:`a2a_compiler.deadlock.find_deadlock`; layers or per-hop ``vcs``).  With a
    ``demand`` (default: the one an MSCCL file's record holds; oneCCL-style and MPI path files
    carry their volumes) data movement is checked against it (:func:`_demand_layout`), the
    predicted time is the all-to-allv's and the link-MCF optimum is ``1/F(D)``.
    """
    if looks_like_plan(data):
        fmt, program = "mscclpp", parse_mscclpp(data, source)
    else:
        root = parse_xml(data, source)
        fmt = detect_format(root, source)
        program = FORMATS[fmt].from_element(root, source)
    if deadlock_free and fmt != "mpi":
        raise A2AError(f"--deadlock-free applies to MPI path files (their routes' channel dependencies); this {fmt} "
                       f"file's deadlock freedom is checked without it")
    ranks = program.ngpus if fmt == "msccl" else program.nranks
    if demand is not None and demand.n != ranks:
        raise A2AError(f"{demand.source}: the demand matrix is {demand.n} x {demand.n}, but the file has "
                       f"{ranks} ranks")
    recorded = (program.record is not None and program.record.demand) or getattr(program, "volumes", None) is not None
    if demand is not None and demand.is_uniform and not recorded:    # the plain all-to-all
        demand = None
    if demand is None and program.record is not None:
        demand = program.record.demand_volumes(source)
    context = _context(program.record, topology, fabric, ranks, cut)
    topology, fabric = context.topology, context.fabric
    caps = None if topology is None else topology_check.link_capacities(topology)
    made = dict(record=program.record, spec=None if topology is None else topology.spec, fabric=fabric,
                overrides=context.overrides, warnings=list(context.warnings))
    if target is not None and fmt != "msccl":   # a warning, not a refusal: the pre-commit hook passes it to every file
        made["warnings"].append(f"--target {target.name} names an MSCCL executor and applies to MSCCL XML only; "
                                f"{UNTARGETED[fmt]}")
    if fmt == "mscclpp":
        report = Report(source, fmt, ranks, program.chunks_per_shard, **made)
        findings = mscclpp_rules.check_rules(program)
        report.errors["executor rules"] += findings.errors
        report.warnings += findings.warnings
        _size_rule(report, msccl_rules.mscclpp_size_rule(program) if findings.sound else None)
        g_ops = [sum(len(op.ops or ()) + 1 for op in tb.ops) for g in program.gpus for tb in g.threadblocks]
        report.summary = (f"{program.nranks} gpus, {report.chunks_per_shard} chunk(s) per peer, "
                          f"{'in-place' if program.inplace else 'out-of-place'}, "
                          f"{max((len(g.threadblocks) for g in program.gpus), default=0)} threadblocks per gpu (max; "
                          f"{sum(len(g.threadblocks) for g in program.gpus)} in all), {sum(g_ops)} ops "
                          f"(at most {max(g_ops, default=0)} per threadblock), protocol {program.protocol}")
        run, found = _layout_run(fmt, simulate.simulate_mscclpp, demand, report)
        trace = _executor_trace(report, findings.sound, 3 * program.nranks ** 2 * max(report.chunks_per_shard, 1)
                                + sum(max(g.scratch_chunks, 0) for g in program.gpus), run, program)
        layout = found.get("layout")
        if trace is None:
            return report
    elif fmt == "msccl":
        target = _msccl_target(target, program.record, made["warnings"])
        report = Report(source, fmt, ranks, program.nchunksperloop // max(ranks, 1), **made)
        rules = report.errors["executor rules"]
        rules += msccl_rules.check_lexical(data)
        rules += msccl_rules.check_attributes(root)
        findings = msccl_rules.check_rules(program, target)
        rules += findings.errors
        report.warnings += findings.warnings
        sound = findings.sound
        tbs = [len(g.tbs) for g in program.gpus]      # the executors' limits are per GPU
        steps = sum(len(t.steps) for g in program.gpus for t in g.tbs)
        nodes = max((msccl_rules.parser_nodes(program, g) for g in program.gpus), default=0)
        report.target, report.parser_nodes = target.name, nodes
        _size_rule(report, msccl_rules.msccl_size_rule(program, target) if sound else None)
        report.summary = (f"{program.ngpus} gpus, {report.chunks_per_shard} chunk(s) per peer, "
                          f"{program.nchannels} channel(s), {max(tbs, default=0)} thread blocks per gpu (max; "
                          f"{sum(tbs)} in all), {steps} steps, "
                          f"{nodes} parser nodes per rank (max; {target.name} target), proto {program.proto}")
        run, found = _layout_run(fmt, simulate.simulate_msccl, demand, report)
        trace = _executor_trace(report, sound, program.nchunksperloop * 2 * len(program.gpus)
                                + sum(max(g.s_chunks, 0) for g in program.gpus), run, program)
        layout = found.get("layout")
        if trace is None:
            return report
    elif fmt == "oneccl":
        report = Report(source, fmt, ranks, program.chunks_per_shard, **made)
        layout = _demand_layout(fmt, program, demand, report)
        report.skipped["executor rules"] = "MSCCL only"
        report.skipped["deadlock freedom"] = "matched asynchronous operations and a local wait-all per step"
        if _too_big(report, sum(r.i_chunks + r.o_chunks + r.s_chunks for r in program.ranks)):
            return report
        trace = simulate.simulate_oneccl(program)
        report.errors["data movement"] += trace.errors
        ops = sum(len(s) for r in program.ranks for s in r.steps)
        report.summary = (f"{program.nranks} ranks, {program.chunks_per_shard} chunk(s) per shard, "
                          f"{program.nsteps} steps, {ops} operations, "
                          f"{sum(r.s_chunks for r in program.ranks)} scratch chunks")
    else:
        report = Report(source, fmt, ranks, program.chunks_per_shard, **made)
        layout = _demand_layout(fmt, program, demand, report)
        report.skipped["executor rules"] = "MSCCL only"
        if deadlock_free:
            cycle = find_deadlock([s.nodes for s in program.sends], [s.channels for s in program.sends])
            if cycle is not None:
                report.errors["deadlock freedom"].append(
                    f"cyclic channel dependencies over (link, virtual channel): {cycle}; under wormhole or "
                    "credit-based flow control these routes can deadlock (give them other layers or vcs)")
        else:
            report.skipped["deadlock freedom"] = ("routes are independent end-to-end transfers; --deadlock-free "
                                                  "checks their channel dependencies")
        if _too_big(report, program.nranks * program.nranks * program.chunks_per_shard):
            return report
        trace = simulate.check_paths(program)
        report.errors["data movement"] += trace.errors
        report.summary = (f"{program.nranks} ranks, {program.nnodes} nodes, {program.chunks_per_shard} chunk(s) "
                          f"per shard, {len(program.sends)} routes")
    if context.misfit:
        report.errors["topology"] += context.misfit
    elif topology is None:
        report.skipped["topology"] = context.no_topology
    else:
        terr = report.errors["topology"]
        terr += topology_check.check_ranks(report.ranks, topology.spec, topology.n_hosts)
        if fmt == "mpi":
            terr += topology_check.check_routes(program, topology)
        else:
            terr += topology_check.check_moves(trace.moves, topology, "rank" if fmt == "oneccl" else "gpu")
    if demand is None and getattr(program, "volumes", None) is not None:
        from ..demand import Demand

        demand = Demand.from_volumes(program.volumes, source)   # the file's own all-to-allv, for its MCF optimum
    if report.valid:  # the cost model needs a complete, well-formed schedule
        routes = None
        if topology is not None and topology.n_switches and fmt != "mpi":
            from ..topology.switched import switch_routes

            routes = switch_routes(topology)
        report.perf = performance.program_performance(program, fabric, caps, trace, demand, layout, routes)
        if report.lp_time and report.fidelity is None and fabric == program.record.fabric:
            report.overrides.append(
                f"the file records the LP time {report.lp_time:.6g}, above its predicted time "
                f"{report.perf.predicted_time:.6g} on the recorded fabric: a certified LP optimum of this file "
                f"alone cannot exceed it, so the LP was solved under other conditions (a job's time beside other "
                f"jobs, 'a2a solve --jobs') or the record is wrong; no fidelity")
    if topology is not None and lp and not report.errors["topology"]:
        from ..solve import solve

        report.mcf_time, report.mcf_solved = solve(topology, fabric, "mcf-decomp", demand=demand).lp_time, True
        recorded = program.record.mcf_time if program.record is not None and not context.overrides \
            and not report.reused else None
        if recorded and abs(recorded - report.mcf_time) > 1e-6 * report.mcf_time:
            report.overrides.append(f"the file records the link MCF optimum {recorded:.9g}, but solving its spec "
                                    f"and fabric gives {report.mcf_time:.9g}")
    elif program.record is not None and not context.overrides and not report.reused:
        report.mcf_time = program.record.mcf_time
    return report


def _msccl_target(given: msccl_rules.Target | None, record: Record | None, warnings: list[str]) -> msccl_rules.Target:
    """The MSCCL executor whose limits apply: ``given`` (``--target``), else the recorded one, else ``nccl``;
    a ``given`` one that differs from the record's is noted in ``warnings``."""
    recorded = None if record is None else record.target
    if recorded is not None and recorded not in msccl_rules.TARGETS:
        raise FormatError(f"{TAG} target {recorded!r} is not one of {', '.join(msccl_rules.TARGETS)}")
    if given is not None and recorded is not None and given.name != recorded:
        warnings.append(f"--target {given.name}: the file was compiled for {recorded} (its record); "
                        f"{given.name}'s limits and size rule are checked")
    return given or msccl_rules.get_target(recorded or msccl_rules.DEFAULT_TARGET)


def _size_rule(report: Report, rule: msccl_rules.SizeRule | None) -> None:
    """Note when the executor runs the file; warn when it runs it at no power-of-two size."""
    report.size_rule = rule
    if rule is not None and rule.powers_of_two() is None:
        report.warnings.append(f"{rule.describe()}; 'a2a compile SPEC"
                               + (" --target T" if report.format == "msccl" else "")
                               + "' chooses a count it selects (not with --any-chunks or --from-ir)")


def _executor_trace(report: Report, sound: bool, size: int, run, program):
    """Symbolic execution (``run``) of an executor program the rules found sound and that declares
    ``size`` buffer chunks, its errors filed; None, with the later checks marked skipped, otherwise."""
    if sound and _too_big(report, size):
        sound = False
    if not sound:
        why = "the program breaks structural executor rules (see above)"
        report.skipped = {c: why for c in ("data movement", "deadlock freedom", "topology") if not report.errors[c]}
        return None
    trace = run(program)
    for m in trace.errors:
        report.errors["deadlock freedom" if m.startswith("deadlock") else "data movement"].append(m)
    return trace


@dataclass(frozen=True)
class _Context:
    """What :func:`_verify` checks against: the topology (or why there is none), the fabric, and how
    they differ from the file's record; ``misfit``: the topology errors of a recorded spec whose host
    count is not the file's rank count (found before building it); ``warnings``: why a recorded spec
    could not be built (the topology check could not run: a warning, an error with ``strict``)."""

    topology: Topology | None
    fabric: Fabric
    overrides: list[str]
    no_topology: str = ""
    misfit: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _context(record: Record | None, topology: Topology | None, fabric: Fabric | dict | None,
             ranks: int, cut: dict | None = None) -> _Context:
    """The topology and fabric a file of ``ranks`` ranks is verified against: the given ones, else the
    recorded ones, punctured by ``cut`` (see :func:`verify_bytes`); a recorded spec with another number of
    hosts is not built (``complete:4000`` for 3 ranks would take half a minute and gigabytes)."""
    base = record.fabric if record is not None else Fabric()
    given = fabric if isinstance(fabric, dict) else {}
    if isinstance(fabric, dict):
        fabric = replace(base, **{k: v for k, v in fabric.items() if v is not None}) if fabric else None
    overrides = []
    if record is not None and fabric is not None and fabric != record.fabric:
        overrides.append(f"the fabric given ({fabric.describe()}) differs from the one the file was compiled for "
                         f"({record.fabric.describe()}): times are predicted on the one given")
    if record is not None and topology is not None and topology.spec != record.spec:
        overrides.append(f"--topology {topology.spec} differs from the spec the file was compiled for "
                         f"({record.spec}): its links are checked against --topology")
    no_topology, misfit, warnings = "no --topology given", [], []
    if topology is None and record is not None:
        from ..topology.puncture import from_recorded_spec, recorded_hosts

        hosts = recorded_hosts(record.spec)
        misfit = [] if hosts is None else topology_check.check_ranks(ranks, record.spec, hosts)
        try:
            topology = None if misfit else from_recorded_spec(record.spec)
        except A2AError as exc:
            no_topology = "the recorded spec cannot be built here (see the warning)"
            warnings.append(f"the topology check could not run: the recorded spec {echo(record.spec)} cannot be "
                            f"built here ({exc}); give --topology")
        if topology is not None and cut:
            from ..topology.puncture import puncture

            topology = puncture(topology, **cut)
            overrides.append(f"--remove-links/--remove-nodes puncture the topology the file was compiled for "
                             f"({record.spec}): its links are checked against {topology.spec}")
    elif topology is None and cut:
        raise A2AError("--remove-links/--remove-nodes: the file records no topology to puncture; give --topology")
    fabric = fabric or base
    if topology is not None:
        from ..fabric import CLASS_BANDWIDTHS, apply_link_classes, check_link_classes

        if any(given.get(name) is not None for name in CLASS_BANDWIDTHS.values()):
            check_link_classes(topology, fabric)  # --nvlink-bw on a topology without NVLinks (it was recorded)
        topology = apply_link_classes(topology, fabric)
    return _Context(topology, fabric, overrides, no_topology, misfit, warnings)


def _too_big(report: Report, size: int) -> bool:
    """Record (and say) that a program declaring ``size`` buffer chunks is too big to simulate."""
    if size <= MAX_SIMULATED_CHUNKS:
        return False
    report.errors["data movement"].append(
        f"the program declares {size} buffer chunks over all ranks, more than the verifier simulates "
        f"({MAX_SIMULATED_CHUNKS}); not verified")
    report.skipped.setdefault("topology", "not checked")
    return True
