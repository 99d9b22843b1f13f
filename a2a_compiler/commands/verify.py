"""``a2a verify FILE``: check a lowered schedule (MSCCL, oneCCL-style or MPI path XML)."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from ..chunk.cost import fidelity_text
from ..cli import command_parser
from ..errors import A2AError
from ..fabric import parse_bandwidth
from ..formats.msccl_rules import TARGETS
from .common import SPEC_HELP, add_demand_arg, add_fabric_args, add_topology_args, print_json, puncture_args, \
    topology_from_args

HELP = ("check an MSCCL / oneCCL-style / MPI path XML schedule or an MSCCL++ plan (rules, data movement, deadlock, "
        "topology, time)")

DESCRIPTION = """\
Verify a lowered all-to-all schedule in any of the four formats (detected from the
root element: <algo> MSCCL, <oneccl_algo> oneCCL-style, <mpi_paths> MPI path; a JSON
object is an MSCCL++ execution plan).

checks:
  executor rules     MSCCL++: the executor's loader rules and limits (docs/msccl.md).
                     MSCCL: every rule the --target executor applies (lexical form on the raw
                     text, required attributes, ids, <= 64 steps per tb, cnt, depid, offsets,
                     one tb per (peer, channel, direction), dependencies, hasdep, nops, thread
                     blocks per GPU (nccl 1024, rccl 64), channels (nccl 32, rccl 128), the XML
                     parser's <= 4095 nodes per rank and <= 1024 gpus; docs/msccl.md).  An
                     integer attribute other than ASCII digits with no leading zero and an
                     optional '-' (cnt="0_1", "01", "+1") makes any file unreadable: the
                     executor's strtol would read another number than the verifier
  data movement      symbolic execution with labelled chunks: every rank's output is the
                     all-to-all transpose, each chunk delivered once, no read of unwritten data,
                     no overwrite of live data, local accesses ordered by dependencies
  deadlock freedom   MSCCL: thread blocks with dependencies and 8-slot FIFO connections; a stuck
                     program is reported with its wait-for cycle.  MPI paths with --deadlock-free:
                     the routes' channel dependencies over (link, virtual channel) -- each
                     route's layer, or its per-hop vcs -- are acyclic (Dally & Seitz), so the
                     routes cannot deadlock under wormhole / credit-based flow control; a cycle
                     is reported channel by channel
  topology           every transfer (route hop) is a real link of the topology: the one the file
                     records (files of 'a2a compile' and 'a2a routes'), or --topology SPEC; a
                     recorded spec naming another number of hosts than the file's ranks (its
                     parameters tell) is this check's error, without building it
  performance        predicted time in link-times (one shard over one link), by the cost model
                     'a2a compile' uses (MSCCL: dataflow; oneCCL: its steps; MPI paths: all routes
                     at once) on the recorded fabric; fidelity = lp_time / predicted time, lp_time
                     the method's own LP optimum the file records; MCF ratio = mcf_time /
                     predicted time, mcf_time the link MCF optimum 1/F, solved (certified; with
                     --no-lp or no topology to solve on, the recorded number, said so)

Every file the compiler writes records its topology spec, method, fabric, demand and LP times (a
comment; an MSCCL++ plan's "a2a_record" key; docs/formats.md), so 'a2a verify FILE' with no other
option reports what 'a2a compile' said.  Fabric flags (--link-bw, --host-bw, --nvlink-bw,
--forwarding) replace the recorded values and --topology the recorded spec, and --remove-links /
--remove-nodes (--seed) puncture the recorded topology (or --topology's), each difference with a
warning on stderr; files of other tools (msccl-tools, the MSCCL++ DSL) record nothing: give them
--topology and the fabric flags.

all-to-allv (--demand D.csv, default: the demand the file records): data movement is checked
against the demand.  MSCCL XML and MSCCL++ plans are read in the fixed-size-buffer layout of D
(T[i][j] chunks of rank i for rank j at input offset sum_{k<j} T[i][k], output offset
sum_{k<i} T[k][j]; 'a2a demand show D.csv --chunks C' prints T); files compiled for a demand
record it (MSCCL and MSCCL++ in their record, oneCCL-style and MPI path files in
<rank volumes=...>), and it must be D's.  A plain all-to-all file of any format is valid for
any D and is priced under it, reused (routes and steps unchanged); a uniform D is the plain
all-to-all.  Times are then the all-to-allv's, and the LP optimum is 1/F(D).

Warnings (a receive described differently from its send, many channels or thread blocks, a
recorded spec that cannot be built here, so the topology check could not run) do not make a file
invalid unless --strict; a valid file with warnings ends "VALID, with N warnings".
"""

EPILOG = """\
examples:
  a2a verify t3.xml                                   # the recorded spec and fabric
  a2a verify schedules/*.xml --junit verify.xml       # CI: one JUnit testcase per file
  a2a verify allpairs.xml --topology complete:3       # a file from msccl-tools (no record)
  a2a verify t3.xml --link-bw 10Gbps                  # predicted on another fabric (warns)
  a2a verify t3.xml --remove-links 2 --seed 1         # the recorded topology minus 2 cables (warns)
"""


def register(sub) -> None:
    """Add ``a2a verify`` to the subcommands."""
    p = command_parser(sub, "verify", HELP, DESCRIPTION, EPILOG,
                       {0: "every FILE passes every check",
                        1: "some FILE is an invalid schedule (each error is listed with its location)",
                        2: "user error: some FILE is unreadable (missing, malformed, hostile XML) or an option is bad"})
    p.add_argument("files", nargs="+", metavar="FILE",
                   help="schedule XML (MSCCL, oneCCL-style or MPI path) or MSCCL++ plan (JSON)")
    p.add_argument("--topology", metavar="SPEC", dest="spec",
                   help=f"check transfers against this topology instead of the recorded one; {SPEC_HELP}")
    add_topology_args(p, positional=False)
    add_fabric_args(p)
    add_demand_arg(p, "check the schedule as an all-to-allv of this demand matrix (CSV or .npy, N x N; see above; "
                      "default: the demand the file records)")
    p.add_argument("--target", choices=sorted(TARGETS),
                   help="MSCCL executor whose limits and size rule apply: nccl (msccl-executor-nccl) or rccl (ROCm); "
                        "default: the one the file records ('a2a compile --target'), else nccl; one that differs "
                        "from the record is a warning, and so is --target on an MSCCL++, oneCCL-style or MPI path "
                        "file (they have no executor target)")
    p.add_argument("--no-lp", action="store_true", help="do not solve the link MCF (mcf_time is then the recorded one)")
    p.add_argument("--deadlock-free", action="store_true",
                   help="MPI path files: prove the routes' channel dependency graph over (link, virtual channel) "
                        "acyclic (the layers or vcs written by 'a2a routes --deadlock')")
    p.add_argument("--strict", action="store_true",
                   help="treat warnings as errors: a receive whose srcbuf/srcoff/dstbuf/dstoff differ from its "
                        "send's (msccl-tools writes both alike; the public MSCCL-XML-Verifier rejects the "
                        "difference), more than 32 channels or 108 thread blocks, i_chunks above nchunksperloop")
    p.add_argument("--skip-other", action="store_true",
                   help="skip a FILE that is well-formed XML or JSON but no schedule (another root element; JSON "
                        "with fewer than two of an execution plan's keys gpus, collective, protocol, inplace, "
                        "a2a_record, e.g. the IR of 'a2a schedule'), with a note on "
                        "stderr: the pre-commit hook passes every staged .xml and .json file")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per file (docs/json.md): valid, file, format, spec, method, fabric, "
                        "ranks, chunks_per_shard, program, target, sizes, parser_nodes, checks, errors, warnings, "
                        "overrides, predicted_time, "
                        "lp_time, mcf_time, fidelity, mcf_ratio; several files: {valid, files: [...]}; an "
                        "unreadable file gives valid false and the reason in errors")
    p.add_argument("--junit", metavar="OUT.xml",
                   help="also write a JUnit XML report: one testcase per FILE, its errors as a <failure> "
                        "(an unreadable file: an <error>), for CI dashboards (Jenkins, GitLab)")
    p.set_defaults(func=run)


def _fabric_overrides(args) -> dict:
    """The fabric fields the flags give, to replace the recorded ones."""
    return {"link_bw": None if args.link_bw is None else parse_bandwidth(args.link_bw, "--link-bw"),
            "host_bw": None if args.host_bw is None else parse_bandwidth(args.host_bw, "--host-bw"),
            "forwarding": args.forwarding,
            "nvlink_bw": None if args.nvlink_bw is None else parse_bandwidth(args.nvlink_bw, "--nvlink-bw")}



def run(args) -> int:
    """``a2a verify``: :func:`a2a_compiler.verify.verify_file` on each FILE; 0 all valid, 1 some invalid,
    2 some unreadable (or a bad option)."""
    import time

    from ..verify import verify_file

    topology = topology_from_args(args, link_classes=False) if args.spec else None
    cut = None if args.spec else (puncture_args(args) or None)
    overrides = _fabric_overrides(args)
    demand = None
    if args.demand:
        from ..demand import read_demand

        demand = read_demand(args.demand, None if topology is None else topology.n_hosts)
    outcomes = []
    for path in args.files:
        t0 = time.perf_counter()
        if args.skip_other and _other_file(path):
            outcomes.append(Outcome(path, None, None, time.perf_counter() - t0))
            continue
        try:
            report, error = verify_file(path, topology, overrides, lp=not args.no_lp, deadlock_free=args.deadlock_free,
                                        strict=args.strict, demand=demand, target=args.target, cut=cut), None
        except A2AError as exc:
            report, error = None, str(exc)
        outcomes.append(Outcome(path, report, error, time.perf_counter() - t0))
        for note in report.overrides if report else ():
            print(f"a2a verify: warning: {path}: {note}", file=sys.stderr)
        if not args.json:
            if error is not None:
                print(f"a2a verify: error: {error}", file=sys.stderr)
            else:
                print(_human(report))
    if args.json:
        objs = [o.to_json() for o in outcomes]
        print_json(objs[0] if len(objs) == 1 else {"valid": all(o["valid"] for o in objs), "files": objs})
    if args.junit:
        from ..files import atomic_write

        atomic_write(args.junit, junit_xml(outcomes))
    return max(o.exit_code for o in outcomes)


@dataclass(frozen=True)
class Outcome:
    """One FILE: its report, or why it could not be read; seconds taken."""

    path: str
    report: object
    error: str | None
    seconds: float

    @property
    def skipped(self) -> bool:
        """Not a schedule (``--skip-other``): neither a report nor an error."""
        return self.report is None and self.error is None

    @property
    def exit_code(self) -> int:
        return 2 if self.error is not None else 0 if self.skipped or self.report.valid else 1

    def to_json(self) -> dict:
        if self.skipped:
            return {"valid": True, "file": self.path, "format": None, "skipped": "not a schedule", "errors": [],
                    "warnings": []}
        if self.error is not None:
            return {"valid": False, "file": self.path, "format": None, "errors": [self.error], "warnings": []}
        return self.report.to_json()


def _other_file(path) -> bool:
    """``--skip-other``: whether ``path`` is well-formed XML or JSON but no schedule (said on stderr); an
    unreadable or malformed one is not skipped, so verify reports it."""
    from ..files import read_bytes
    from ..formats import schedule_format

    try:
        other = schedule_format(read_bytes(path), str(path)) is None
    except A2AError:
        return False
    if other:
        print(f"a2a verify: {path}: skipped, not a schedule (--skip-other)", file=sys.stderr)
    return other


def junit_xml(outcomes: list[Outcome]) -> bytes:
    """JUnit XML (the schema Jenkins and GitLab read): one ``<testcase classname="a2a.verify" name=FILE>``
    per file; an invalid file gets a ``<failure>`` whose message is its first error and whose text lists
    every error, an unreadable one an ``<error>``."""
    from lxml import etree

    failures = sum(o.exit_code == 1 for o in outcomes)
    errors = sum(o.exit_code == 2 for o in outcomes)
    counts = {"tests": str(len(outcomes)), "failures": str(failures), "errors": str(errors),
              "skipped": str(sum(o.skipped for o in outcomes)),
              "time": f"{sum(o.seconds for o in outcomes):.3f}"}
    suites = etree.Element("testsuites", name="a2a verify", **counts)
    suite = etree.SubElement(suites, "testsuite", name="a2a verify", **counts)
    for o in outcomes:
        case = etree.SubElement(suite, "testcase", classname="a2a.verify", name=o.path, time=f"{o.seconds:.3f}")
        if o.skipped:
            etree.SubElement(case, "skipped", message="not a schedule")
        elif o.error is not None:
            etree.SubElement(case, "error", type="unreadable", message=o.error).text = o.error
        elif not o.report.valid:
            msgs = o.report.messages()
            fail = etree.SubElement(case, "failure", type="invalid schedule",
                                    message=f"{len(msgs)} error(s); first: {msgs[0]}")
            fail.text = "\n".join(msgs)
    etree.indent(suites, space="  ")
    return etree.tostring(suites, encoding="UTF-8", xml_declaration=True) + b"\n"


def _human(report) -> str:
    from ..verify import CHECKS

    lines = [f"{report.source}: {report.format}, {report.summary}"]
    rec = report.record
    if rec is not None:
        lines.append(f"  compiled for       {rec.spec}, {rec.method}; {rec.fabric.describe()}"
                     + ("" if rec.demand is None else f"; all-to-allv of demand sha256 {rec.demand['sha256'][:12]}")
                     + ("" if rec.target is None else f"; target {rec.target}"))
    if report.size_rule is not None:
        lines.append(f"  sizes              {report.size_rule.describe()}")
    for check in CHECKS:
        errs = report.errors[check]
        status = f"skipped ({report.skipped[check]})" if check in report.skipped else \
            f"FAIL ({len(errs)})" if errs else "ok"
        lines.append(f"  {check:<18} {status}")
        lines += [f"    error: {m}" for m in errs]
    lines += [f"  warning: {w}" for w in report.warnings]
    perf = report.perf
    if perf is not None:
        line = f"  predicted time     {perf.predicted_time:.6g} link-times"
        if report.format in ("msccl", "mscclpp"):
            line += " as a dataflow"
        elif report.format == "oneccl":
            line += f" over {len(perf.step_loads)} steps"
        line += f"; busiest link {perf.busiest[0]}->{perf.busiest[1]} carries {perf.busiest_load:.4g} shards"
        lines.append(line)
        if report.fidelity is not None:
            lines.append(f"  LP time            {report.lp_time:.6g} link-times, {rec.method}'s own LP (recorded); "
                         f"fidelity {fidelity_text(report.fidelity)}")
        if report.mcf_time:
            lines.append(f"  link MCF optimum   {report.mcf_time:.6g} link-times "
                         f"({'certified' if report.mcf_solved else 'recorded, not solved here'}); MCF ratio "
                         f"{fidelity_text(report.mcf_ratio)}")
    n = len(report.warnings)   # a warning can mean a check did not run: VALID says so
    lines.append("INVALID" if not report.valid else f"VALID, with {n} warning{'s' if n > 1 else ''} (see above)" if n
                 else "VALID")
    return "\n".join(lines)
