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

import numpy as np

from ..fabric import Fabric
from ..topology.model import Topology
from .routers import host_tables, minimal_tables, router_distances, router_view
from .tables import ForwardingTables, from_next_nodes


def sf_min(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> ForwardingTables:
    """One minimal route per host pair, VC ``k`` on router hop ``k`` (module docstring)."""
    t0 = time.perf_counter()
    view = router_view(topology)
    nxt = host_tables(view, minimal_tables(view))
    routers = view.routers
    diameter = int(router_distances(view)[np.ix_(routers, routers)].max(initial=0))
    return from_next_nodes("sf-min", topology, fabric or Fabric(), nxt, hop_vc=view.is_router,
                           timings={"route": time.perf_counter() - t0}, info={"vcs": max(diameter, 1)})
