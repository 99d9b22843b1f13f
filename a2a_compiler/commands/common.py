"""Options shared by every subcommand: the topology spec, puncturing, the fabric."""

from __future__ import annotations

import argparse
import json
import sys

from ..fabric import BANDWIDTH_HELP, FORWARDING_MODES, Fabric, parse_bandwidth
from ..options import Rules, fraction, nonnegative_int, positive_int, refuse_inapplicable, refuse_unseeded
from ..progress import Progress
from ..topology import Topology
from ..topology.puncture import AMONG, puncture_options
from ..topology.spec import from_spec

SPEC_HELP = (
    "topology spec, e.g. complete:8 ring:8 bipartite:4 hypercube:3 twisted-hypercube:3 torus:3x3x3 "
    "petersen genkautz:64,4 slimfly:5 xpander:4,8,seed=1 jellyfish:64,4,seed=1 dragonfly:4,2,2 "
    "hyperx:4,2,p=1 fattree:4,3 vartree:4,2,2 file:PATH"
)




def add_chunking_args(p: argparse.ArgumentParser) -> None:
    """pmcf's candidate paths and the chunking options shared by ``schedule`` and ``compile``."""
    from ..solve.paths import DEFAULT_MAX_PATHS

    g = p.add_argument_group("solving and chunking")
    g.add_argument("--paths", metavar="SET",
                   help="pmcf candidate paths: disjoint (default), shortest, ksp:K (as in 'a2a solve')")
    g.add_argument("--max-paths", type=positive_int, metavar="M",
                   help=f"pmcf: refuse --paths shortest beyond M shortest paths per pair (default {DEFAULT_MAX_PATHS})")
    g.add_argument("--max-chunks", type=positive_int, metavar="C",
                   help="most chunks per shard (default 16; 64 for compile --target and --emit mscclpp, whose C "
                        "is a power of two); the smallest C in {1,2,3,4,6,8,12,16,...} reaching the fidelity "
                        "target is used")
    g.add_argument("--min-fidelity", type=fraction, metavar="F",
                   help="fidelity target in (0, 1]: the smallest C whose schedule (compile: whose program; for "
                        "msccl its dataflow time counts) reaches it; none reaching it is an error (default: the "
                        "smallest C reaching 0.97, else the best; compile writes a file below 0.97 with a warning "
                        "and exits 1)")
    g.add_argument("--steps", type=positive_int, metavar="L",
                   help="tsmcf only: number of time steps l_max (>= diameter); default: chosen automatically "
                        "(diameter, diameter+1, ... while the LP optimum improves)")


def add_injection_args(p: argparse.ArgumentParser) -> None:
    """Injection rate control of routed schedules (:mod:`a2a_compiler.chunk.injection`), for MPI path files."""
    g = p.add_argument_group("injection rate control (MPI path schedules)")
    g.add_argument("--max-flows", type=positive_int, metavar="Q",
                   help="time steps with at most Q routes (flows) leaving and Q arriving at every host per step, "
                        "a barrier between steps (MPI path format version 2); default: every route at once")
    g.add_argument("--flow-per-chunk", action="store_true", default=None,
                   help="granular chunking: every chunk its own route, i.e. its own flow (Basu et al. section 4)")


def add_output_args(p: argparse.ArgumentParser, metavar: str, what: str, fields: str) -> None:
    """``-o FILE`` (required), ``--json`` (one object with ``fields`` instead of the summary), ``-q``."""
    p.add_argument("-o", "--output", required=True, metavar=metavar, help=f"where to write {what}")
    p.add_argument("--json", action="store_true", help=f"print one JSON object ({fields}) instead of the summary")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")


def add_topology_args(p: argparse.ArgumentParser, positional: bool = True) -> None:
    """The topology SPEC (positional unless ``positional`` is False) and the puncturing options."""
    if positional:
        p.add_argument("spec", metavar="SPEC", help=SPEC_HELP)
    g = p.add_argument_group("puncturing (failures)")
    g.add_argument("--remove-links", type=nonnegative_int, metavar="K", help="remove K random cables (seeded)")
    g.add_argument("--among", choices=AMONG, help="what --remove-links draws from: links (default: every link, "
                   "host cables included, a port group whole), switch-links (between switches, groups whole), "
                   "switch-cables (single cables between switches: a port group loses one)")
    g.add_argument("--remove-cable", action="append", metavar="A,B|A/PORT", dest="remove_cables",
                   help="remove a named cable (repeatable): the cables between nodes A and B, or the one on port "
                        "PORT of node A; nodes by name or GUID (0x..., ibnet:)")
    g.add_argument("--remove-nodes", type=nonnegative_int, metavar="K", help="remove K random hosts (seeded)")
    g.add_argument("--seed", type=int, metavar="S", help="seed for puncturing (default 0)")


def add_fabric_args(p: argparse.ArgumentParser) -> None:
    """``--link-bw``, ``--host-bw`` and ``--forwarding`` (the fabric of §2.1, §3.2.2)."""
    g = p.add_argument_group("fabric", f"bandwidths: {BANDWIDTH_HELP}")
    g.add_argument("--link-bw", metavar="BW", help="link bandwidth b per direction, e.g. 25Gbps or 3.125GB/s")
    g.add_argument("--host-bw", metavar="BW",
                   help="host injection/ejection (host-NIC) bandwidth per direction; default unlimited; needs --link-bw")
    g.add_argument("--nvlink-bw", metavar="BW",
                   help="bandwidth of NVLink links (GPU to NVSwitch, nvswitch:... topologies) per direction; "
                        "default: the link bandwidth; needs --link-bw, which is then the NIC bandwidth")
    g.add_argument("--forwarding", choices=FORWARDING_MODES,
                   help="who relays traffic: 'host' (GPU/CPU store-and-forward, time-stepped; default) "
                        "or 'nic' (NIC cut-through routing)")


DEMAND_HELP = ("all-to-allv: an N x N matrix of relative volumes D[s,d] (CSV or .npy; the diagonal is ignored; "
               "'a2a demand' makes one); a uniform matrix is the plain all-to-all")


def add_demand_arg(p: argparse.ArgumentParser, help: str = DEMAND_HELP) -> None:
    """``--demand FILE``: the all-to-allv demand matrix (:mod:`a2a_compiler.demand`)."""
    p.add_argument("--demand", metavar="FILE", help=help)


def demand_from_args(args, n_hosts: int):
    """The :class:`~a2a_compiler.demand.Demand` of ``--demand`` (``None`` without it, or for a uniform matrix)."""
    if not getattr(args, "demand", None):
        return None
    from ..demand import as_demand

    return as_demand(args.demand, n_hosts)


def puncture_args(args) -> dict:
    """:func:`~a2a_compiler.topology.puncture.puncture`'s keywords from the puncturing options (``{}``: none)."""
    return puncture_options(args.remove_links, args.remove_nodes, args.seed, args.among, args.remove_cables)


def topology_from_args(args, link_classes: bool = True) -> Topology:
    """The topology of ``args.spec``, punctured as the options ask, its classed links (NVLink) at the
    fabric options' bandwidths (unless ``link_classes`` is False: the caller applies its own fabric); a class
    bandwidth for a topology without such links is refused (:func:`~a2a_compiler.fabric.check_link_classes`)."""
    from ..fabric import apply_link_classes, check_link_classes

    topo = from_spec(args.spec)
    cut = puncture_args(args)
    if cut:
        from ..topology.puncture import puncture

        topo = puncture(topo, **cut)
    if not hasattr(args, "link_bw"):
        return topo
    fabric = fabric_from_args(args)
    check_link_classes(topo, fabric)
    return apply_link_classes(topo, fabric) if link_classes else topo


def fabric_from_args(args) -> Fabric:
    """The :class:`~a2a_compiler.fabric.Fabric` of the fabric options."""
    return Fabric(
        link_bw=None if args.link_bw is None else parse_bandwidth(args.link_bw, "--link-bw"),
        host_bw=None if args.host_bw is None else parse_bandwidth(args.host_bw, "--host-bw"),
        forwarding=args.forwarding or "host",
        nvlink_bw=None if getattr(args, "nvlink_bw", None) is None else parse_bandwidth(args.nvlink_bw, "--nvlink-bw"),
    )


def applies_only(p: argparse.ArgumentParser, rules: Rules) -> None:
    """Options of ``p`` that apply only to some values of another (:mod:`a2a_compiler.options`): one given
    where it does not apply is refused in one line before the command runs (:func:`check_applicable`).
    Their defaults are applied after that check, so that a flag counts as given only when it is."""
    flags = {a.dest: max(a.option_strings, key=len) for a in p._actions if a.dest in rules}
    defaults = {d: p.get_default(d) for d in rules}
    p.set_defaults(**{d: None for d in rules}, applies_only=(rules, flags, defaults))


def check_applicable(args) -> None:
    """Refuse the inapplicable options of ``args`` (see :func:`applies_only`), then fill in their defaults."""
    rules, flags, defaults = getattr(args, "applies_only", None) or ({}, {}, {})
    refuse_inapplicable(vars(args), rules, flags, defaults)
    args.options_given = frozenset(d for d in defaults if getattr(args, d) is not None)  # before the defaults
    if hasattr(args, "remove_links"):  # the puncturing options (add_topology_args)
        refuse_unseeded(vars(args))
    for dest, value in defaults.items():
        if getattr(args, dest) is None:
            setattr(args, dest, value)


def print_json(obj: dict) -> None:
    """``obj`` as indented JSON on stdout, ``json_version`` first (docs/json.md)."""
    from ..vocabulary import versioned

    json.dump(versioned(obj), sys.stdout, indent=1, sort_keys=False)
    sys.stdout.write("\n")


#: Seconds a command runs before ``a2a solve`` starts printing progress.
PROGRESS_DELAY = 2.0

#: Progress reporter of the running command (stderr, elapsed time since start, LP ticks).
progress = Progress()
