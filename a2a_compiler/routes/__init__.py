"""Routing engines: one module per engine behind one interface, :func:`route`.

Modelled on OpenSM's routing engines.  Every engine is a documented function

    engine(topology: Topology, fabric: Fabric, **options) -> RouteSet

in its own module of this package, citing the paper and section it implements,
and registered in :data:`ENGINES`.  A :class:`~.result.RouteSet` holds weighted
host-to-host paths (switch hops included), optional per-hop virtual channels
and a layer per path; ``a2a routes`` chunks it into an MPI path schedule.

The destination-based engines (:data:`TABLE_ENGINES`: OpenSM's and the
papers' forwarding-table routings) return
:class:`~.tables.ForwardingTables` instead, the InfiniBand LFTs as arrays;
:func:`route_tables` gives them (checked), and :func:`route` traces them into
a :class:`RouteSet` for the consumers that need per-pair paths.
"""

from __future__ import annotations

import importlib

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .result import RoutedPath, RouteSet

#: engine name -> (module, function); modules are imported on first use.
ENGINES: dict[str, tuple[str, str]] = {
    "sssp": ("sssp", "sssp"),
    "ewsp": ("ewsp", "ewsp"),
    "ilp-disjoint": ("ilp", "ilp_disjoint"),
    "ilp-shortest": ("ilp", "ilp_shortest"),
    "dor": ("dor", "dor"),
    "fptas": ("fptas", "fptas"),
    "mcf-extp": ("flows", "mcf_extp"),
    "pmcf-disjoint": ("flows", "pmcf_disjoint"),
    "pmcf-shortest": ("flows", "pmcf_shortest"),
    "ftree": ("ftree", "ftree"),
    "minhop": ("minhop", "minhop"),
    "sf-min": ("sf_min", "sf_min"),
    "sf-val": ("sf_val", "sf_val"),
    "ugal": ("ugal", "ugal"),
    "fatpaths": ("fatpaths", "fatpaths"),
    "sf-layers": ("sf_layers", "sf_layers"),
    "dfsssp": ("sssp", "dfsssp"),
    "file": ("opensm", "lft_file"),
    "mcf-df": ("mcf_df", "mcf_df"),
}
#: Engines that return forwarding tables (:class:`~.tables.ForwardingTables`).
TABLE_ENGINES = ("sssp", "dfsssp", "dor", "ftree", "minhop", "sf-min", "fatpaths", "sf-layers", "file")
#: Table engines with several LID layers, laned by DFSSSP within the fabric's data VLs (``vls``).
LAYERED_ENGINES = ("fatpaths", "sf-layers")


def _engine(algo: str):
    if algo not in ENGINES:
        raise A2AError(f"unknown routing algorithm {algo!r}; choose one of {', '.join(ENGINES)}")
    module, name = ENGINES[algo]
    return getattr(importlib.import_module(f".{module}", __package__), name)


def route_tables(topology: Topology, algo: str, fabric: Fabric | None = None, **options):
    """The forwarding tables of destination-based engine ``algo`` (:data:`TABLE_ENGINES`), checked
    (:meth:`~.tables.ForwardingTables.validate`)."""
    if algo not in TABLE_ENGINES:
        raise A2AError(f"{algo} is not a destination-based engine (forwarding tables: {', '.join(TABLE_ENGINES)})")
    from ..topology.metrics import require_table

    # the tables (4-byte entries; the check counts 8) and each switch's paths to every host
    require_table(topology, int(options.get("layers", 1)) * topology.n_nodes, topology.n_hosts,
                  "the forwarding tables")
    return _engine(algo)(topology, fabric or Fabric(), **options).validate()


#: Engines that route for a demand matrix (the MCF schemes solve with it); the others route as for the
#: uniform all-to-all and are priced under the demand.
DEMAND_ENGINES = ("mcf-extp", "pmcf-disjoint", "pmcf-shortest")


def route(topology: Topology, algo: str, fabric: Fabric | None = None, *, demand=None, **options) -> RouteSet:
    """Route every ordered host pair of ``topology`` with engine ``algo``; the result is validated
    (:meth:`RouteSet.validate`).  A table engine's routes are traced from its tables (and keep them as
    ``tables``).

    With a ``demand`` (:class:`~a2a_compiler.demand.Demand`, an all-to-allv) the engines of
    :data:`DEMAND_ENGINES` route for it; every other engine routes as for the uniform all-to-all
    and its routes are priced under the demand (their uniform ``lp_time`` and ``bound`` dropped).
    """
    import dataclasses

    if demand is not None and algo in DEMAND_ENGINES:
        return _engine(algo)(topology, fabric or Fabric(), demand=demand, **options).validate()
    if algo in TABLE_ENGINES:
        routes = route_tables(topology, algo, fabric, **options).routes().validate()
    else:
        routes = _engine(algo)(topology, fabric or Fabric(), **options).validate()
    if demand is None:
        return routes
    return dataclasses.replace(routes, demand=demand, lp_time=None, bound=None, optimal=None, mip_gap=None)


__all__ = ["ENGINES", "TABLE_ENGINES", "LAYERED_ENGINES", "DEMAND_ENGINES", "route", "route_tables", "RouteSet",
           "RoutedPath"]
