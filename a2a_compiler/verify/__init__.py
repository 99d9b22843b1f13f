"""Stage 6: verify a lowered schedule (MSCCL XML, oneCCL-style XML or MPI path XML).

:func:`verify_bytes` runs every pass that applies to the file's format and
collects the results in a :class:`Report`:

=================== ================================================ =========================
check               what                                              module
=================== ================================================ =========================
executor rules      MSCCL lexical form, attributes, ids, limits       :mod:`..formats.msccl_rules`
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
from ..deadlock import find_deadlock
from ..errors import A2AError
from ..fabric import Fabric
from ..files import read_bytes
from ..formats import FORMATS, detect_format
from ..formats.record import Record
from ..formats.xmlutil import parse_xml
from ..topology.model import Topology
from ..formats import msccl_rules
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
    summary: str = ""

    @property
    def valid(self) -> bool:
        """True when no check found an error."""
        return not any(self.errors.values())

    @property
    def lp_time(self) -> float | None:
        """The certified optimum of the method's own LP, as the file records it (``a2a compile``'s ``lp_time``)."""
        return None if self.record is None else self.record.lp_time

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
                lp: bool = True, deadlock_free: bool = False, strict: bool = False) -> Report:
    """Read ``path`` and :func:`verify_bytes` it."""
    return verify_bytes(read_bytes(path), str(path), topology, fabric, lp, deadlock_free, strict)


def verify_bytes(data: bytes, source: str = "<xml>", topology: Topology | None = None,
                 fabric: Fabric | dict | None = None, lp: bool = True, deadlock_free: bool = False,
                 strict: bool = False) -> Report:
    """Run every check that applies to the file's format; with ``strict``, warnings are errors.

    Warnings name what the executor accepts but other tools do not (a receive
    whose fields differ from its send's, msccl-tools' convention) or what is
    unusual (many channels or thread blocks); ``strict`` files them under
    "executor rules" so the file is invalid.  See :func:`_verify`.
    """
    report = _verify(data, source, topology, fabric, lp, deadlock_free)
    if strict and report.warnings:
        report.errors["executor rules"] += [f"(--strict) {w}" for w in report.warnings]
        report.warnings = []
    return report


def _verify(data: bytes, source: str, topology: Topology | None, fabric: Fabric | dict | None, lp: bool,
            deadlock_free: bool) -> Report:
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
    channel) (:func:`a2a_compiler.deadlock.find_deadlock`; layers or per-hop ``vcs``).
    """
    root = parse_xml(data, source)
    fmt = detect_format(root, source)
    program = FORMATS[fmt].from_element(root, source)
    context = _context(program.record, topology, fabric)
    topology, fabric = context.topology, context.fabric
    caps = None if topology is None else topology_check.link_capacities(topology)
    made = dict(record=program.record, spec=None if topology is None else topology.spec, fabric=fabric,
                overrides=context.overrides)
    if fmt == "msccl":
        report = Report(source, fmt, program.ngpus, program.nchunksperloop // max(program.ngpus, 1), **made)
        rules = report.errors["executor rules"]
        rules += msccl_rules.check_lexical(data)
        rules += msccl_rules.check_attributes(root)
        findings = msccl_rules.check_rules(program)
        rules += findings.errors
        report.warnings += findings.warnings
        sound = findings.sound
        tbs = sum(len(g.tbs) for g in program.gpus)
        steps = sum(len(t.steps) for g in program.gpus for t in g.tbs)
        report.summary = (f"{program.ngpus} gpus, {report.chunks_per_shard} chunk(s) per peer, "
                          f"{program.nchannels} channel(s), {tbs} thread blocks, {steps} steps, proto {program.proto}")
        if sound and _too_big(report, program.nchunksperloop * 2 * len(program.gpus)
                              + sum(max(g.s_chunks, 0) for g in program.gpus)):
            sound = False
        if not sound:
            why = "the program breaks structural executor rules (see above)"
            report.skipped = {c: why for c in ("data movement", "deadlock freedom", "topology") if not report.errors[c]}
            return report
        trace = simulate.simulate_msccl(program)
        for m in trace.errors:
            report.errors["deadlock freedom" if m.startswith("deadlock") else "data movement"].append(m)
    elif fmt == "oneccl":
        report = Report(source, fmt, program.nranks, program.chunks_per_shard, **made)
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
        report = Report(source, fmt, program.nranks, program.chunks_per_shard, **made)
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
    if topology is None:
        report.skipped["topology"] = context.no_topology
    else:
        terr = report.errors["topology"]
        terr += topology_check.check_ranks(report.ranks, topology)
        if fmt == "mpi":
            terr += topology_check.check_routes(program, topology)
        else:
            terr += topology_check.check_moves(trace.moves, topology, "gpu" if fmt == "msccl" else "rank")
    if report.valid:  # the cost model needs a complete, well-formed schedule
        report.perf = performance.program_performance(program, fabric, caps, trace)
        if report.lp_time and report.fidelity is None and fabric == program.record.fabric:
            report.overrides.append(
                f"the file records the LP time {report.lp_time:.6g}, above its predicted time "
                f"{report.perf.predicted_time:.6g} on the recorded fabric: a certified LP optimum cannot exceed "
                f"it, so the record is wrong; no fidelity")
    if topology is not None and lp and not report.errors["topology"]:
        from ..solve import solve

        report.mcf_time = solve(topology, fabric, "mcf-decomp").lp_time
        recorded = program.record.mcf_time if program.record is not None and not context.overrides else None
        if recorded and abs(recorded - report.mcf_time) > 1e-6 * report.mcf_time:
            report.overrides.append(f"the file records the link MCF optimum {recorded:.9g}, but solving its spec "
                                    f"and fabric gives {report.mcf_time:.9g}")
    elif program.record is not None and not context.overrides:
        report.mcf_time = program.record.mcf_time
    return report


@dataclass(frozen=True)
class _Context:
    """What :func:`_verify` checks against: the topology (or why there is none), the fabric, and how
    they differ from the file's record."""

    topology: Topology | None
    fabric: Fabric
    overrides: list[str]
    no_topology: str = ""


def _context(record: Record | None, topology: Topology | None, fabric: Fabric | dict | None) -> _Context:
    """The topology and fabric a file is verified against: the given ones, else the recorded ones."""
    base = record.fabric if record is not None else Fabric()
    if isinstance(fabric, dict):
        fabric = replace(base, **{k: v for k, v in fabric.items() if v is not None}) if fabric else None
    overrides = []
    if record is not None and fabric is not None and fabric != record.fabric:
        overrides.append(f"the fabric given ({fabric.describe()}) differs from the one the file was compiled for "
                         f"({record.fabric.describe()}): times are predicted on the one given")
    if record is not None and topology is not None and topology.spec != record.spec:
        overrides.append(f"--topology {topology.spec} differs from the spec the file was compiled for "
                         f"({record.spec}): its links are checked against --topology")
    no_topology = "no --topology given"
    if topology is None and record is not None:
        from ..topology.puncture import from_recorded_spec

        try:
            topology = from_recorded_spec(record.spec)
        except A2AError as exc:
            no_topology = f"the recorded spec {record.spec!r} cannot be built here ({exc}); give --topology"
    return _Context(topology, fabric or base, overrides, no_topology)


def _too_big(report: Report, size: int) -> bool:
    """Record (and say) that a program declaring ``size`` buffer chunks is too big to simulate."""
    if size <= MAX_SIMULATED_CHUNKS:
        return False
    report.errors["data movement"].append(
        f"the program declares {size} buffer chunks over all ranks, more than the verifier simulates "
        f"({MAX_SIMULATED_CHUNKS}); not verified")
    report.skipped.setdefault("topology", "not checked")
    return True
