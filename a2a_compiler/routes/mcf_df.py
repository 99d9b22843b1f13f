"""MCF-DF: throughput-optimal routes that are deadlock-free with ``K`` virtual layers by construction.

The design source's open problem (Basu et al. §5.5): LASH, LASH-sequential
and DFSSSP add layers *after* routing, and multipath MCF routes then need more
layers than fabrics offer (5–6 on GenKautz(64,4)).  Here the number of layers
is fixed first: ``K`` channel orders (:mod:`a2a_compiler.deadlock.orders`,
``--orders``), and the exact LP of :mod:`a2a_compiler.solve.dfmcf` finds the
best concurrent flow over routes monotone in one of them; each route keeps the
layer whose order it follows, so the routes' channel dependencies over (link,
layer) are acyclic for every weight the LP could choose.

``lp_time`` is the LP's own time ``U``; ``bound`` the certified lower bound on
the time of every routing the orders allow (weak duality on the restricted
LP); ``info`` has the orders (family, roots or datelines, the MCF flow they
keep), the LP's size and, for ``--orders mcf``, the unrestricted MCF time they
were built from.
"""

from __future__ import annotations

import time

from ..deadlock.orders import channel_orders
from ..fabric import Fabric
from ..solve.dfmcf import check_size, deadlock_free_mcf
from ..topology.model import Topology
from .result import RoutedPath, RouteSet

#: Default number of virtual layers.
DEFAULT_LAYERS = 2
#: Default LP solver: interior point, then crossover to the canonical optimal vertex, which has few
#: routes (measured, genkautz:64,4 at K = 4: 4,213 routes, 204 s; plain interior point 13,750 routes,
#: 37 s, the same optimum), so most shards are whole and the file keeps the LP's time.
DEFAULT_SOLVER = "ipm-crossover"


def mcf_df(topology: Topology, fabric: Fabric | None = None, *, layers: int = DEFAULT_LAYERS, orders: str = "mcf",
           solver: str = DEFAULT_SOLVER, progress=None) -> RouteSet:
    """Deadlock-free MCF routes in ``layers`` virtual layers over channel orders of family ``orders``;
    ``solver`` is the LP solver (:data:`a2a_compiler.solve.lp.SOLVERS`)."""
    fabric = fabric or Fabric()
    check_size(topology, layers)                # before the orders' MCF solve
    t0 = time.perf_counter()
    chosen = channel_orders(topology, orders, layers, fabric=fabric, progress=progress)
    t1 = time.perf_counter()
    if progress:
        progress(f"mcf-df: {layers} {orders} order(s) in {t1 - t0:.2f} s")
    flow = deadlock_free_mcf(topology, fabric, chosen.keys, solver=solver, progress=progress)
    paths = tuple(RoutedPath(r.src, r.dst, r.nodes, r.weight, r.layer) for r in flow.routes)
    info = {"orders": orders, "layers": layers, "layers_used": flow.layers_used, **chosen.info, **flow.info,
            "lp_concurrent_flow": flow.lp_concurrent_flow, "restricted_upper_bound": flow.upper_bound}
    return RouteSet("mcf-df", topology, fabric, paths, lp_time=1.0 / flow.lp_concurrent_flow,
                    bound=flow.bound_time, timings={"orders": t1 - t0, **flow.timings}, info=info)
