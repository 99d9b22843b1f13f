"""UGAL on Slim Fly (Besta & Hoefler 2014, §IV-C): adaptive, so not a static routing.

UGAL-G picks, for every packet, the MIN path or one of four random VAL paths
by the occupancy of all router queues on them; UGAL-L by its own output
queues times the path length.  The choice depends on queue state at the time
a packet is injected, which a precomputed path schedule does not have: the
routes of a pair change with the traffic.  ``a2a routes --algo ugal`` says so
and names the static engines that bracket it, ``sf-min`` (UGAL under light
load) and ``sf-val`` (its non-minimal choice); ``fatpaths`` and ``sf-layers``
give a pair several static paths to spread over instead.
"""

from __future__ import annotations

from ..errors import A2AError
from ..fabric import Fabric
from ..topology.model import Topology
from .result import RouteSet


def ugal(topology: Topology, fabric: Fabric | None = None, *, progress=None) -> RouteSet:
    """Refuse with the reason (module docstring): UGAL has no static routes."""
    raise A2AError("ugal is adaptive (Besta & Hoefler §IV-C: MIN or VAL chosen per packet from queue "
                   "occupancy), not expressible as static routes; use sf-min or sf-val, or fatpaths / sf-layers "
                   "for several static paths per pair")
