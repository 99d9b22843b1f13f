"""Slim Fly minimal routing with per-hop virtual channels (Besta & Hoefler 2014, §IV-A and §IV-D).

MIN routes a packet from its router ``R_s`` to ``R_d`` directly when they are
linked and over two router hops otherwise (§IV-A); the packet uses VC0 on the
first router hop and VC1 on the second (§IV-D, after Gopal), so the channel
dependencies over (link, VC) only ever go from VC ``k`` to VC ``k + 1`` and
cannot close a cycle: two VCs suffice on the diameter-2 Slim Fly.

Static and destination-based, as on InfiniBand: every router has one next hop
per destination router.  Where two routers have several 2-hop paths (MMS
graphs other than the Hoffman–Singleton graph), the one with the least load
so far is taken (:func:`~.routers.minimal_tables`).  Host links carry VC 0.
The engine routes any hosts-on-routers network minimally; a network of
diameter ``D`` needs ``D`` VCs.
"""

from __future__ import annotations

import time

from ..fabric import Fabric
from ..topology.model import Topology
from .lft import all_pairs, routes_from_nodes, trace
from .result import RouteSet
from .routers import hop_channels, host_tables, minimal_tables, router_view


def sf_min(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> RouteSet:
    """One minimal route per host pair, VC ``k`` on router hop ``k`` (module docstring)."""
    t0 = time.perf_counter()
    view = router_view(topology)
    nxt = host_tables(view, minimal_tables(view))
    src, dst = all_pairs(topology.n_hosts)
    nodes = trace(topology, nxt, src, dst, algo="sf-min")
    vcs = hop_channels(view, nodes)
    return routes_from_nodes("sf-min", topology, fabric or Fabric(), src, dst, nodes, vcs=vcs,
                             timings={"route": time.perf_counter() - t0}, info={"vcs": int(vcs.max(initial=0)) + 1})
