"""``a2a routes SPEC --algo ALGO``: a routing baseline or MCF scheme as a chunked, layered MPI path schedule;
a destination-based engine's forwarding tables measured per cable and exported for OpenSM (``--lft``)."""

from __future__ import annotations

import sys

from ..cli import command_parser
from ..deadlock import SCHEMES
from ..deadlock.orders import FAMILIES
from ..errors import A2AError
from ..files import atomic_write
from ..progress import Progress
from ..routes import ENGINES, LAYERED_ENGINES, TABLE_ENGINES
from ..routes.opensm import DEFAULT_VLS, check_vls
from ..routes.patterns import PATTERNS, pattern_congestion
from .common import PROGRESS_DELAY, add_demand_arg, add_fabric_args, add_injection_args, add_topology_args, \
    applies_only, demand_from_args, fabric_from_args, fraction, nonnegative_int, positive_int, print_json, topology_from_args

HELP = "route every host pair with a baseline or MCF scheme; chunk, layer and write an MPI path schedule"

EPILOG = """\
algorithms:
  sssp           Domke, Hoefler & Nagel 2011: shortest-path trees on link weights that grow
                 with the routes already placed (one path per pair); --opensm: what OpenSM's
                 sssp engine installs (per-cable weights that also count each switch's own
                 port, its 4-ary heap's tie order; docs/infiniband.md)
  ewsp           every shortest path of a pair, equal weights (Basu et al. section 5.2)
  ilp-disjoint   one path per pair from its maximal link-disjoint paths, minimising the max
                 link load: a HiGHS MIP (--time-limit, --eps; optimal/gap reported)
  ilp-shortest   the same over all shortest paths
  dor            dimension-order routing; torus:AxBx... and hypercube:D only
  fptas          Garg-Koenemann / Karakostas max concurrent flow to within --eps, with its
                 certified bound
  mcf-extp       link MCF + widest-path extraction (section 3.2.1)
  pmcf-disjoint  path MCF over link-disjoint paths (section 3.1.4)
  pmcf-shortest  path MCF over all shortest paths
  ftree          Zahavi et al. 2009 as OpenSM's ftree engine computes it, per port: congestion-free
                 shift stages on 1:1 fat trees
  minhop         OpenSM's MinHop: the least used min-hop port per switch (ftree's baseline)
  dfsssp         sssp's tables, each host pair on the virtual lane (SL) DFSSSP gives it
  file           OpenSM's file engine: the tables of an LFT dump (--lft-in DUMP), checked
  sf-min         Besta & Hoefler 2014: Slim Fly minimal routing, VC k on router hop k (2 VCs)
  sf-val         Slim Fly Valiant routing via a random router per pair (--route-seed), 4 VCs
  ugal           refused: adaptive per packet, no static routes (use sf-min / sf-val)
  fatpaths       Besta et al. 2020: --layers L layers, random cable subsets (--rho) or the
                 overlap-minimising variant (--variant balanced), shortest paths in each
  sf-layers      Blach et al. 2024, Alg. 1: layer 0 balanced minimal paths, each further layer
                 one almost-minimal path per router pair with the least overlap; layers and
                 fatpaths get virtual lanes by DFSSSP; info reports disjoint-path counts
  mcf-df         deadlock-free by construction (section 5.5's open problem): K = --layers
                 acyclic channel orders (--orders mcf: the link MCF's routes packed into K
                 acyclic layers; updown: up*/down* from K BFS roots; coordinate: tori and
                 hypercubes, dimension orders with datelines), then the exact MCF over routes
                 monotone in one order; each route keeps its order's layer.  bound = certified
                 bound over those routes; 1 / mcf_ratio = the price of deadlock freedom

deadlock schemes (--deadlock; each layer's channel dependency graph is acyclic):
  lash      Skeie et al. 2002: host pairs first-fit into layers
  lash-seq  LASH-sequential (section 5.5): routes first-fit one at a time, then the top
            layers are emptied route by route; never more layers than lash
  dfsssp    Domke et al. 2011: cycles broken at their weakest dependency, routes moved up

patterns (--pattern): shift = stages s = 1..N-1 of pairs i -> (i+s) mod N; reports the
largest number of routes on one link (divided by its capacity) per stage, worst and
average over the stages (congestion_worst, congestion_avg; Zahavi et al. Table I).

forwarding tables (sssp, dfsssp, dor, ftree, minhop, sf-min, fatpaths, sf-layers, file): the
engine's tables (switch x destination -> port, one per LID offset) are measured directly, per
cable: predicted_time, the shift pattern's congestion_worst/avg (always), layers and
deadlock_free over (cable, virtual lane); per-pair routes are built only for -o and
--deadlock (at most 1,000,000).  The link-MCF reference (mcf_time, mcf_ratio), for every
engine, is solved when its LP fits (--mcf auto: up to 400,000 hosts x links columns), else
null with a note; --mcf on always solves it (with progress lines), --mcf off never.
--lft FILE writes OpenSM's LFT dump (opensm -R file -U FILE, with -l LMC for layers) and,
where the routes need virtual lanes, FILE.sl with an SL per (source, destination, LID
offset): OpenSM's file engine installs no SLs (docs/infiniband.md, docs/formats.md).  SL i
goes on data VL i: the fabric has --vls N of them (default 8, VL0-7; at most 15; an SL is 4
bits), and routes needing more lanes are refused.  fatpaths and sf-layers fit theirs: where
DFSSSP needs more, layer 0's minimal routes are laned first and the other layers' routes that
land past N are dropped (their pairs keep their other layers; info: vls_needed, routes_dropped).

chunks: each shard is split into C equal chunks.  C is the least common multiple of the
weights' denominators (for equal splits, of the path counts) when that is <= --max-chunks,
so the file carries the weights exactly.  Otherwise (chunks_exact false, a note on stderr)
the weights of a flow optimisation (fptas, mcf-extp, pmcf-*) are chunked as 'a2a compile'
chunks them: for C = 1, 2, 3, 4, 6, 8, ... up to --max-chunks, rounded by largest remainder
and rebalanced between each pair's paths, keeping the smallest C whose fidelity (lp_time /
predicted_time) reaches 0.97, compile's target, else the fastest (bipartite:4 mcf-extp: 2.5
= lp_time at C = 4; C = 64 alone stalls at 2.5156; genkautz:64,4 pmcf-disjoint: C = 1,
fidelity 0.9765, where C = 64 would reach 0.9996 after 12 local searches); the splits of a routing rule (ewsp, fatpaths, ...) are rounded to multiples of
1/C, C = --max-chunks, and not rebalanced (that would make them another routing).

reported (--json, docs/json.md; times in link-times for unit shards): algo, predicted_time
(max link load of the file as written, via the project's cost model), route_time (the routes'
weights before chunking), lp_time (the engine's relaxation, where there is one: pMCF's path LP,
MCF-extP's link MCF, the FPTAS's flow), bound (a certified lower bound: MIP dual bound,
FPTAS/LP dual), mcf_time (the certified link MCF optimum), fidelity = lp_time /
predicted_time, mcf_ratio = mcf_time / predicted_time, optimal and mip_gap (ILPs), layers
and deadlock_free (channel dependencies over (link, virtual channel) checked on the file),
chunks_per_shard, chunks_exact, routes, steps, max_flows, seconds.  The file records the spec,
fabric, demand, lp_time and mcf_time, so 'a2a verify' and 'a2a run' measure every baseline
against the same MCF bound.

all-to-allv (--demand D.csv): mcf-extp and pmcf-* solve for the demand; every other engine routes
as for the uniform all-to-all (its relaxation and bound then dropped) and is priced under D, as
is mcf_time = 1/F(D).  The file records the volumes; 'a2a run FILE' runs it as that all-to-allv.

examples:
  a2a routes genkautz:64,4 --algo sssp --json
  a2a routes bipartite:4 --algo ilp-disjoint --time-limit 30
  a2a routes torus:3x3x3 --algo mcf-extp --forwarding nic --deadlock lash-seq -o t3-mcf.xml
  a2a routes genkautz:81,8 --remove-links 20 --algo ilp-disjoint --eps 0.1 --time-limit 120
  a2a routes torus:3x3x3 --algo dor -o t3-dor.xml && a2a verify t3-dor.xml --deadlock-free
  a2a routes fattree:4,3 --algo minhop --pattern shift      # congestion 4 worst, 3.24 average
  a2a routes slimfly:5 --algo sf-val --route-seed 1 -o sf5-val.xml && a2a verify sf5-val.xml --deadlock-free
  a2a routes slimfly:5 --algo sf-layers --layers 4 --json   # info: vls, disjoint_paths_histogram, ...
  a2a routes fattree:12,3 --algo ftree --json               # 1728 hosts: congestion 1/1, per cable
  a2a routes ibnet:fabric.txt --algo ftree --lft ftree.dump  # then: opensm -R file -U ftree.dump
  a2a routes ibnet:fabric.txt --algo file --lft-in opensm-lfts.dump --json   # check and measure a dump
  a2a routes genkautz:64,4 --algo mcf-df --layers 4 -o gk64.xml && a2a verify gk64.xml --deadlock-free
"""

#: Engine options of the command line -> the algorithms that take them (others refuse them: a2a_compiler.options).
ENGINE_OPTIONS = {
    "time_limit": ("algo", ("ilp-disjoint", "ilp-shortest")),
    "eps": ("algo", ("ilp-disjoint", "ilp-shortest", "fptas")),
    "max_paths": ("algo", ("ewsp", "ilp-shortest", "pmcf-shortest")),
    "early_stop": ("algo", ("fptas",)),
    "layers": ("algo", ("fatpaths", "sf-layers", "mcf-df")),
    "orders": ("algo", ("mcf-df",)),
    "solver": ("algo", ("mcf-df",)),
    "rho": ("algo", ("fatpaths",)),
    "variant": ("algo", ("fatpaths",)),
    "route_seed": ("algo", ("sf-val", "fatpaths", "sf-layers")),
    "opensm": ("algo", ("sssp", "dfsssp")),
    "lft_in": ("algo", ("file",)),
}
#: Output options of some engines: the table engines' LFT dump and MCF reference; the chunk search's target
#: of the engines with an LP relaxation.
OUTPUT_OPTIONS = {"lft": ("algo", TABLE_ENGINES), "vls": ("algo", TABLE_ENGINES),
                  "min_fidelity": ("algo", ("fptas", "mcf-extp", "mcf-df", "pmcf-disjoint", "pmcf-shortest"))}
#: Command-line options whose engine keyword has another name (``--seed`` is puncturing's).
ENGINE_KEYWORD = {"route_seed": "seed", "lft_in": "path"}


def register(sub) -> None:
    """Add ``a2a routes`` to the subcommand parsers."""
    p = command_parser(sub, "routes", HELP, HELP[0].upper() + HELP[1:] + ".", EPILOG)
    add_topology_args(p)
    p.add_argument("--algo", required=True, choices=list(ENGINES), metavar="ALGO",
                   help="routing algorithm: " + ", ".join(ENGINES))
    add_fabric_args(p)
    add_demand_arg(p, "all-to-allv demand matrix (CSV or .npy, N x N): mcf-extp and pmcf-* route for it, the other "
                      "engines route as usual; every time is priced under it and the file records its volumes")
    g = p.add_argument_group("algorithm options")
    g.add_argument("--time-limit", type=float, metavar="S", help="ILPs: branch-and-bound time limit (default 60 s)")
    g.add_argument("--eps", type=float, metavar="E",
                   help="ILPs: stop within relative gap E of the bound (the tolerance variant of Fig. 9; default "
                        "0, prove optimality); fptas: accuracy (default 0.05)")
    g.add_argument("--max-paths", type=positive_int, metavar="M",
                   help="ewsp, ilp-shortest, pmcf-shortest: refuse pairs with more than M shortest paths "
                        "(default 1000)")
    g.add_argument("--no-early-stop", dest="early_stop", action="store_false", default=None,
                   help="fptas: run to the D(l) >= 1 stopping rule instead of stopping once certified within eps")
    d = p.add_argument_group("deadlock freedom")
    d.add_argument("--deadlock", choices=list(SCHEMES), metavar="SCHEME",
                   help="assign virtual layers: " + ", ".join(SCHEMES) + " (default: keep the engine's layers)")
    d.add_argument("--max-layers", type=positive_int, metavar="K",
                   help="fail unless the routes fit in K virtual layers")
    g.add_argument("--layers", type=positive_int, metavar="L",
                   help="fatpaths, sf-layers: routing layers, i.e. LID offsets of the LMC range (default 4); "
                        "mcf-df: virtual layers K the routes may use (default 2)")
    g.add_argument("--orders", choices=FAMILIES, help="mcf-df: family of the K channel orders: "
                   + ", ".join(FAMILIES) + " (default mcf)")
    g.add_argument("--solver", choices=("ipm-crossover", "ipm", "simplex"),
                   help="mcf-df: LP solver; ipm-crossover (default) ends at the canonical optimal vertex, few "
                        "routes; ipm is faster, same optimum, more routes")
    g.add_argument("--rho", type=float, metavar="R", help="fatpaths: fraction of cables in each random layer "
                                                          "(default 0.6)")
    g.add_argument("--variant", choices=("random", "balanced"),
                   help="fatpaths: random cable sampling (default) or the overlap-minimising layers")
    g.add_argument("--route-seed", type=nonnegative_int, metavar="S",
                   help="sf-val, fatpaths, sf-layers: seed of the random choices (default 0)")
    g.add_argument("--pattern", choices=PATTERNS, help="also report the congestion of this pattern's stages "
                                                       "(always reported for table engines)")
    g.add_argument("--opensm", action="store_true", default=None,
                   help="sssp, dfsssp: OpenSM's own sssp tables (per-cable weights counting each switch's port 0, "
                        "its 4-ary heap's tie order) instead of ours")
    g.add_argument("--lft-in", metavar="DUMP", help="file: the LFT dump to load (opensm-lfts.dump, dump_lfts output)")
    g.add_argument("--mcf", choices=("auto", "on", "off"), default="auto",
                   help="solve the link-MCF reference (mcf_time, mcf_ratio) always, never, or when its LP has at "
                        "most 400,000 columns (default auto)")
    add_injection_args(p)
    o = p.add_argument_group("output")
    o.add_argument("--max-chunks", type=positive_int, default=64, metavar="C",
                   help="most chunks per shard (default 64): the rounding grid when the weights are not exact")
    o.add_argument("--min-fidelity", type=fraction, metavar="F",
                   help="flow optimisations (fptas, mcf-extp, mcf-df, pmcf-*) whose weights need more than "
                        "--max-chunks chunks: the smallest C whose fidelity reaches F, none reaching it an error "
                        "(default: the smallest reaching 0.97, else the best)")
    o.add_argument("-o", "--output", metavar="FILE.xml", help="write the MPI path schedule (docs/formats.md)")
    o.add_argument("--lft", metavar="FILE", help="table engines: write OpenSM's LFT dump for 'opensm -R file -U FILE' "
                                                 "(and FILE.sl where the routes need virtual lanes)")
    o.add_argument("--vls", type=positive_int, default=DEFAULT_VLS, metavar="N",
                   help="the fabric's InfiniBand data virtual lanes (default 8, VL0-7; at most 15): fatpaths and "
                        "sf-layers fit their DFSSSP lanes into them, --lft refuses SLs past them")
    o.add_argument("--json", action="store_true", help="print one JSON object (see 'reported' below)")
    o.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    applies_only(p, {**ENGINE_OPTIONS, **OUTPUT_OPTIONS})
    p.set_defaults(func=run)


def engine_options(args) -> dict:
    """The engine keyword options the user gave (those ``args.algo`` does not take were refused)."""
    return {ENGINE_KEYWORD.get(key, key): getattr(args, key) for key in ENGINE_OPTIONS if getattr(args, key) is not None}


def _human(s: dict) -> str:
    exact = "exact" if s["chunks_exact"] else "rounded: the weights need more chunks than --max-chunks"
    lines = [
        f"routes     {s['spec']} {s['algo']}: {s['routes']} routes, up to {s['max_paths_per_pair']} per pair; "
        f"{s['chunks_per_shard']} chunk(s) per shard ({exact})",
        f"time       {s['predicted_time']:.6g} link-times (max link load of the file); " +
        ("link MCF not solved" if s["mcf_time"] is None else
         f"link MCF {s['mcf_time']:.6g}; MCF ratio {s['mcf_ratio']:.4f}"),
    ]
    extra = []
    if s["lp_time"] is not None:
        extra.append(f"relaxation {s['lp_time']:.6g}")
    if s["bound"] is not None:
        extra.append(f"certified bound {s['bound']:.6g}")
    if s["optimal"] is not None:
        extra.append(("proved optimal" if s["optimal"] else "not proved optimal") + f", MIP gap {s['mip_gap']:.3g}")
    if extra:
        lines.append("           " + "; ".join(extra))
    if s["steps"] > 1:
        lines.append(f"steps      {s['steps']} time steps, at most {s['max_flows']} routes per host and direction "
                     "in each (a barrier between steps)")
    how = f" ({s['deadlock']})" if s["deadlock"] else ""
    lines.append(f"layers     {s['layers']}{how}, " + ("deadlock-free" if s["deadlock_free"] else
                                                          "NOT deadlock-free (cyclic channel dependencies)"))
    if "pattern" in s:
        lines.append(f"pattern    {s['pattern']}: congestion worst {s['congestion_worst']:.6g}, average "
                     f"{s['congestion_avg']:.6g} over {s['stages']} stages")
    lines.append(f"computed   in {s['seconds']:.2f} s")
    if s.get("output"):
        lines.append(f"saved      {s['output']}")
    return "\n".join(lines)


def run(args) -> int:
    """Route, chunk, layer and price (:func:`a2a_compiler.routes.schedule.route_schedule`), or, for a table
    engine, measure the tables (:func:`a2a_compiler.routes.report.table_report`); write and report."""
    from ..routes.report import mcf_skipped
    from ..routes.schedule import route_schedule

    topology = topology_from_args(args)
    fabric = fabric_from_args(args)
    options = engine_options(args)
    demand = demand_from_args(args, topology.n_hosts)
    if demand is not None and (args.lft or args.mcf != "auto"):
        raise A2AError("--lft and --mcf measure a table engine's all-to-all; with --demand the routes are priced "
                       "under the demand per route (run --lft without --demand: the tables do not depend on it)")
    check_vls(args.vls)
    if args.vls != DEFAULT_VLS and args.algo not in LAYERED_ENGINES and not args.lft:
        raise A2AError(f"--vls applies to --algo {' / '.join(LAYERED_ENGINES)}, or with --lft (its SL file)")
    reporter = None if args.quiet else Progress(delay=PROGRESS_DELAY)
    try:
        if args.algo in TABLE_ENGINES and demand is None and not (args.max_flows or args.flow_per_chunk):
            return _run_tables(args, topology, fabric, options, reporter)   # time steps: the route path below
        if args.algo in LAYERED_ENGINES:
            options["vls"] = args.vls
        skipped = mcf_skipped(topology, args.mcf)
        result = route_schedule(topology, args.algo, fabric, deadlock=args.deadlock, max_layers=args.max_layers,
                                max_chunks=args.max_chunks, min_fidelity=args.min_fidelity, max_flows=args.max_flows,
                                flow_per_chunk=bool(args.flow_per_chunk), progress=reporter, demand=demand,
                                mcf=skipped is None, **options)
    finally:
        if reporter:
            reporter.close()
    if args.output:
        atomic_write(args.output, result.xml)
    s = {**result.summary(), "output": args.output}
    if args.pattern:
        c = pattern_congestion(result.routes, args.pattern)
        s.update(pattern=args.pattern, congestion_worst=c.worst, congestion_avg=c.average, stages=len(c.per_stage))
    if skipped and not args.quiet:
        print(f"a2a routes: note: {skipped}", file=sys.stderr)
    if not result.chunks_exact and not args.quiet:
        print(f"a2a routes: note: the route weights need more than --max-chunks {args.max_chunks} chunks per "
              f"shard to be exact; rounded to multiples of 1/{s['chunks_per_shard']} (all-to-all time "
              f"{s['route_time']:.6g} -> {s['predicted_time']:.6g})", file=sys.stderr)
    if args.json:
        print_json(s)
    else:
        print(_human(s))
    return 0


def _run_tables(args, topology, fabric, options, reporter) -> int:
    from ..routes.report import table_report

    rep = table_report(topology, args.algo, fabric, deadlock=args.deadlock, max_layers=args.max_layers, mcf=args.mcf,
                       output=bool(args.output), max_chunks=args.max_chunks, lft=args.lft, vls=args.vls,
                       progress=reporter, **options)
    if args.output:
        atomic_write(args.output, rep.schedule.xml)
    if args.lft:
        atomic_write(args.lft, rep.lft["text"])
        if rep.lft["sl_text"] is not None:
            atomic_write(rep.lft["sl_file"], rep.lft["sl_text"])
    s = {**rep.summary(), "output": args.output}
    if s["opensm"] is not None:
        s["opensm"] = {k: v for k, v in s["opensm"].items() if not k.endswith("text")}
    if not args.quiet:
        for note in s["notes"]:
            print(f"a2a routes: note: {note}", file=sys.stderr)
    if args.json:
        print_json(s)
    else:
        print(_human_tables(s))
    return 0


def _human_tables(s: dict) -> str:
    mcf = "link MCF not solved" if s["mcf_time"] is None else \
        f"link MCF {s['mcf_time']:.6g}; MCF ratio {s['mcf_ratio']:.4f}"
    layers = f" in {s['lid_layers']} LID layers" if s["lid_layers"] > 1 else ""
    lines = [
        f"tables     {s['spec']} {s['algo']}: {s['hosts']} hosts, {s['cables']} cables; {s['routes']} routes{layers}",
        f"time       {s['predicted_time']:.6g} link-times (max load of one cable); {mcf}",
        f"pattern    shift: congestion worst {s['congestion_worst']:.6g}, average {s['congestion_avg']:.6g} over "
        f"{s['stages']} stages (per cable)",
    ]
    how = f" ({s['deadlock']})" if s["deadlock"] else ""
    lines.append(f"lanes      {s['layers']}{how}, " + ("deadlock-free" if s["deadlock_free"] else
                                                        "NOT deadlock-free (cyclic channel dependencies)"))
    if s["file_time"] is not None:
        exact = "exact" if s["chunks_exact"] else "rounded"
        lines.append(f"file       {s['file_time']:.6g} link-times per link, {s['chunks_per_shard']} chunk(s) per shard "
                     f"({exact}): {s['output']}")
    if s["opensm"] is not None:
        o = s["opensm"]
        lines.append(f"lft        {o['lft']}: opensm {o['options']}" + (f"; SLs in {o['sl_file']}" if o["sl_file"]
                                                                         else ""))
    lines.append(f"computed   in {s['seconds']:.2f} s")
    return "\n".join(lines)
