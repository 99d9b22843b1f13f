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
from dataclasses import dataclass, field

from ..chunk.cost import ratio
from ..deadlock import find_deadlock
from ..errors import A2AError
from ..fabric import Fabric
from ..files import read_bytes
from ..formats import FORMATS, detect_format
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
    lp_time: float | None = None          # link MCF optimum of --topology under the fabric (certified)
    file_lp_time: float | None = None     # the method's own LP time the file records (oneCCL, MPI paths)
    topology: str | None = None
    summary: str = ""

    @property
    def valid(self) -> bool:
        """True when no check found an error."""
        return not any(self.errors.values())

    @property
    def mcf_ratio(self) -> float | None:
        """Link MCF optimum / predicted time (<= 1): ``a2a compile``'s ``mcf_ratio`` for the same file."""
        p = self.perf
        return None if p is None or not self.lp_time else ratio(self.lp_time, p.predicted_time)

    @property
    def fidelity(self) -> float | None:
        """The file's own LP time / predicted time (<= 1): ``a2a compile``'s ``fidelity``; needs a recorded
        ``lp_time`` (oneCCL and MPI path files; MSCCL XML has no place for it).  ``None`` above 1 too: the
        LP time is a lower bound on the fabric it was solved for, so the file was compiled for another one."""
        p = self.perf
        r = None if p is None or not self.file_lp_time else ratio(self.file_lp_time, p.predicted_time)
        return None if r is None or r > 1 else r

    def messages(self) -> list[str]:
        """Every error as ``check: message``."""
        return [f"{check}: {m}" for check in CHECKS for m in self.errors[check]]

    def to_json(self) -> dict:
        """The ``a2a verify --json`` object."""
        p = self.perf
        return {
            "valid": self.valid,
            "source": self.source,
            "format": self.format,
            "ranks": self.ranks,
            "chunks_per_shard": self.chunks_per_shard,
            "summary": self.summary,
            "checks": {c: ("skipped: " + self.skipped[c] if c in self.skipped else
                           "fail" if self.errors[c] else "pass") for c in CHECKS},
            "errors": self.messages(),
            "warnings": list(self.warnings),
            "predicted_time": None if p is None else p.predicted_time,
            "step_loads": None if p is None else list(p.step_loads),
            "busiest_link": None if p is None else {"link": list(p.busiest), "load": p.busiest_load},
            "topology": self.topology,
            "lp_time": self.lp_time,
            "ratio_to_lp": None if p is None or not self.lp_time else p.predicted_time / self.lp_time,
            "mcf_ratio": self.mcf_ratio,
            "file_lp_time": self.file_lp_time,
            "fidelity": self.fidelity,
        }


def verify_file(path: str | os.PathLike, topology: Topology | None = None, fabric: Fabric | None = None,
                lp: bool = True, deadlock_free: bool = False, strict: bool = False, demand=None) -> Report:
    """Read ``path`` and :func:`verify_bytes` it."""
    return verify_bytes(read_bytes(path), str(path), topology, fabric, lp, deadlock_free, strict, demand)


def verify_bytes(data: bytes, source: str = "<xml>", topology: Topology | None = None,
                 fabric: Fabric | None = None, lp: bool = True, deadlock_free: bool = False,
                 strict: bool = False, demand=None) -> Report:
    """Run every check that applies to the file's format; with ``strict``, warnings are errors.

    Warnings name what the executor accepts but other tools do not (a receive
    whose fields differ from its send's, msccl-tools' convention) or what is
    unusual (many channels or thread blocks); ``strict`` files them under
    "executor rules" so the file is invalid.  ``demand`` (a
    :class:`~a2a_compiler.demand.Demand`): check data movement against it
    (:func:`_demand_layout`).  See :func:`_verify`.
    """
    report = _verify(data, source, topology, fabric, lp, deadlock_free, demand)
    if strict and report.warnings:
        report.errors["executor rules"] += [f"(--strict) {w}" for w in report.warnings]
        report.warnings = []
    return report


def _demand_layout(fmt: str, program, demand, report: "Report", trace=None):
    """What ``--demand`` means for this file: the MSCCL layout counts (or ``None``).

    * MSCCL XML records no layout: a file whose plain all-to-all ``trace`` is valid is one
      (reused, as below); any other is read in the all-to-allv layout of
      :meth:`~a2a_compiler.demand.Demand.msccl_counts` (an unbalanced matrix is an
      :class:`~a2a_compiler.errors.A2AError`).  The two layouts never hold the same program.
    * oneCCL-style and MPI path files of an all-to-allv record the demand's volumes: they must
      be the demand's, else a data-movement error names both hashes.
    * a plain all-to-all file is valid for any demand (every pair has its chunks) and is
      priced under it, reused (:func:`.performance.program_performance`); a warning says so.
    """
    if demand is None:
        return None
    if demand.n != report.ranks:
        raise A2AError(f"{demand.source}: the demand matrix is {demand.n} x {demand.n}, but the file has "
                       f"{report.ranks} ranks")
    if fmt == "msccl" and trace.errors:
        return demand.msccl_counts(program.nchunksperloop // max(program.ngpus, 1))
    if fmt != "msccl" and program.volumes is not None:
        from ..demand import Demand

        recorded = Demand.from_volumes(program.volumes, report.source)
        if recorded.sha256 != demand.sha256:
            report.errors["data movement"].append(
                f"the file was compiled for another demand matrix (volumes sha256 {recorded.sha256[:12]}), not "
                f"{demand.source} ({demand.sha256[:12]})")
    else:
        report.warnings.append(
            f"the file is the plain all-to-all: priced for {demand.source} reused, with its routes and steps "
            + ("unchanged and each pair's chunks scaled to its volume" if fmt == "mpi" else
               "unchanged and fixed-size chunks padded to the largest pair's volume"))
    return None


def _verify(data: bytes, source: str, topology: Topology | None, fabric: Fabric | None, lp: bool,
            deadlock_free: bool, demand=None) -> Report:
    """Run every check that applies to the file's format.

    Unreadable input (malformed XML, an unknown root, hostile constructs, bad
    integers) raises :class:`~a2a_compiler.errors.FormatError`; every schedule
    problem is recorded in the returned :class:`Report`.  With a ``topology``,
    transfers must use its links, predicted times use its capacities and, with
    ``lp``, the LP optimum (``1/F`` of the MCF on ``topology`` under ``fabric``)
    is computed for comparison.  With ``deadlock_free``, an MPI path program's
    routes must have acyclic channel dependencies over (link, virtual channel)
    (:func:`a2a_compiler.deadlock.find_deadlock`; layers or per-hop ``vcs``).  With a
    ``demand`` data movement is checked against it (:func:`_demand_layout`), the predicted
    time is the all-to-allv's and the LP optimum is ``1/F(D)``.
    """
    fabric = fabric or Fabric()
    root = parse_xml(data, source)
    fmt = detect_format(root, source)
    program = FORMATS[fmt].from_element(root, source)
    caps = None if topology is None else topology_check.link_capacities(topology)
    if fmt == "msccl":
        report = Report(source, fmt, program.ngpus, program.nchunksperloop // max(program.ngpus, 1))
        if demand is not None and demand.n != report.ranks:
            _demand_layout(fmt, program, demand, report)          # the one-line refusal
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
        layout = _demand_layout(fmt, program, demand, report, trace)
        if layout is not None:
            trace = simulate.simulate_msccl(program, layout)
        for m in trace.errors:
            report.errors["deadlock freedom" if m.startswith("deadlock") else "data movement"].append(m)
    elif fmt == "oneccl":
        report = Report(source, fmt, program.nranks, program.chunks_per_shard)
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
        report = Report(source, fmt, program.nranks, program.chunks_per_shard)
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
    if topology is None:
        report.skipped["topology"] = "no --topology given"
    else:
        report.topology = topology.spec
        terr = report.errors["topology"]
        terr += topology_check.check_ranks(report.ranks, topology)
        if fmt == "mpi":
            terr += topology_check.check_routes(program, topology)
        else:
            terr += topology_check.check_moves(trace.moves, topology, "gpu" if fmt == "msccl" else "rank")
    if report.valid:  # the cost model needs a complete, well-formed schedule
        report.perf = performance.program_performance(program, fabric, caps, trace, demand, layout)
        reused = demand is not None and layout is None and getattr(program, "volumes", None) is None
        report.file_lp_time = None if reused else getattr(program, "lp_time", None)  # a reused file's is uniform
        if report.file_lp_time and report.fidelity is None:
            report.warnings.append(
                f"the file's LP time {report.file_lp_time:.6g} exceeds its predicted time "
                f"{report.perf.predicted_time:.6g} on this fabric, so it was compiled for another one: give "
                f"--link-bw, --host-bw and --forwarding as at compile time for its fidelity")
    if topology is not None and lp and not report.errors["topology"]:
        from ..solve import solve

        report.lp_time = solve(topology, fabric, "mcf-decomp", demand=demand).lp_time
    return report


def _too_big(report: Report, size: int) -> bool:
    """Record (and say) that a program declaring ``size`` buffer chunks is too big to simulate."""
    if size <= MAX_SIMULATED_CHUNKS:
        return False
    report.errors["data movement"].append(
        f"the program declares {size} buffer chunks over all ranks, more than the verifier simulates "
        f"({MAX_SIMULATED_CHUNKS}); not verified")
    report.skipped.setdefault("topology", "not checked")
    return True
