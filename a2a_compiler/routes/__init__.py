"""Routing engines: one module per engine behind one interface, :func:`route`.

Modelled on OpenSM's routing engines.  Every engine is a documented function

    engine(topology: Topology, fabric: Fabric, **options) -> RouteSet

in its own module of this package, citing the paper and section it implements,
and registered in :data:`ENGINES`.  A :class:`~.result.RouteSet` holds weighted
host-to-host paths (switch hops included), optional per-hop virtual channels
and a layer per path; ``a2a routes`` chunks it into an MPI path schedule.
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
    "mcf-df": ("mcf_df", "mcf_df"),
}


#: Engines that route for a demand matrix (the MCF schemes solve with it); the others route as for the
#: uniform all-to-all and are priced under the demand.
DEMAND_ENGINES = ("mcf-extp", "pmcf-disjoint", "pmcf-shortest")


def route(topology: Topology, algo: str, fabric: Fabric | None = None, *, demand=None, **options) -> RouteSet:
    """Route every ordered host pair of ``topology`` with engine ``algo``; the result is validated
    (:meth:`RouteSet.validate`).

    With a ``demand`` (:class:`~a2a_compiler.demand.Demand`, an all-to-allv) the engines of
    :data:`DEMAND_ENGINES` route for it; every other engine routes as for the uniform all-to-all
    and its routes are priced under the demand (their uniform ``lp_time`` and ``bound`` dropped).
    """
    import dataclasses

    if algo not in ENGINES:
        raise A2AError(f"unknown routing algorithm {algo!r}; choose one of {', '.join(ENGINES)}")
    module, name = ENGINES[algo]
    func = getattr(importlib.import_module(f".{module}", __package__), name)
    if demand is not None and algo in DEMAND_ENGINES:
        return func(topology, fabric or Fabric(), demand=demand, **options).validate()
    routes = func(topology, fabric or Fabric(), **options).validate()
    if demand is None:
        return routes
    return dataclasses.replace(routes, demand=demand, lp_time=None, bound=None, optimal=None, mip_gap=None)


__all__ = ["ENGINES", "route", "RouteSet", "RoutedPath"]
