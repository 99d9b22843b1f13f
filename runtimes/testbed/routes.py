"""Routes as the fabric would have them: default (destination-based) routes and steered per-route paths.

*Default routes* carry native ``MPI_Alltoall`` and every unsteered message:
one path per (source, destination), destination-based like an InfiniBand LFT,
so each NIC namespace holds one ``/32`` route per destination host.
:func:`default_routes` takes them from the ``sssp`` routing engine
(:mod:`a2a_compiler.routes.sssp`, congestion-weighted shortest-path trees,
as OpenSM computes them).

*Forwarding* (Basu et al. §2.1, Fig. 2): with NIC forwarding the NIC
namespaces route between cables in the kernel.  With host forwarding a NIC
never moves a packet from one cable to another: a policy rule sends whatever
arrives on a cable up to its host, whose kernel routes it back down, so every
relayed byte crosses the host–NIC link twice, as the model prices it.  The
ranks' link schedules only ever talk to neighbours; the relays serve
unsteered control traffic.

*Steered routes* (NIC forwarding only) carry the ``<send route=...>`` s of MPI
path schedules.  The paper steers each route by the RoCE UDP source port,
which the fabric hashes to a route id (§4); here each route ``i`` owns two
addresses (:meth:`~.layout.Layout.route_addrs`), one on the source host and
one on the destination host, and every NIC namespace on the path holds a
``/32`` route for each: forward towards the destination, and back (for the
ACKs) towards the source.  A connection bound to the pair can only travel its
route.
"""

from __future__ import annotations

import numpy as np

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import MpiPathProgram, PathSend
from a2a_compiler.routes import RouteSet, route
from a2a_compiler.topology.model import Topology

from .build import Handles
from .layout import HOST_IF, Layout

#: Routing table of a host-forwarding NIC for what arrives on its cables: up to the host.
UP_TABLE = 100
#: Bytes in flight per TCP connection: four jumbo segments (see :data:`WINDOW_METRICS`).
WINDOW = 4 * 8948
#: Metrics of every host's route: receive windows clamped to :data:`WINDOW` (``window``) and immediate ACKs.
#: Fabrics like the paper's are lossless (credit-based flow control); a window-limited connection is the
#: nearest TCP gets: each link's queue stays below the connections crossing it times the window, far below the
#: shaper's limit, so no packet is dropped and no retransmission timer fires, while a lone connection still
#: fills its link (the window is many times the unloaded bandwidth-delay product).
WINDOW_METRICS = {"window": WINDOW, "quickack": 1, "rto_min": 1000, "lock": 1 << 13}


def default_routes(topology: Topology, fabric: Fabric) -> RouteSet:
    """The fabric's default routes: the ``sssp`` engine's (one destination-based path per pair)."""
    return route(topology, "sssp", fabric)


def forwarding_table(routes: RouteSet) -> np.ndarray:
    """``next_hop[u, d]`` of single-path, destination-based ``routes`` (-1: none).

    Raises :class:`A2AError` when a pair has several paths or two paths to one
    destination leave a node by different links (not an LFT).
    """
    t = routes.topology
    nxt = np.full((t.n_nodes, t.n_hosts), -1)
    seen = set()
    for p in routes.paths:
        if (p.src, p.dst) in seen:
            raise A2AError(f"routes {routes.algo!r} give pair {p.src}->{p.dst} several paths; default routes "
                           f"need one path per pair")
        seen.add((p.src, p.dst))
        for u, v in zip(p.nodes, p.nodes[1:]):
            if nxt[u, p.dst] not in (-1, v):
                raise A2AError(f"routes {routes.algo!r} are not destination-based: node {u} forwards traffic "
                               f"for {p.dst} to both {nxt[u, p.dst]} and {v}")
            nxt[u, p.dst] = v
    missing = [(s, d) for s in range(t.n_hosts) for d in range(t.n_hosts) if s != d and (s, d) not in seen]
    if missing:
        raise A2AError(f"routes {routes.algo!r} give no path for pair {missing[0][0]}->{missing[0][1]}")
    return nxt


def path_program(routes: RouteSet, name: str) -> MpiPathProgram:
    """Single-path ``routes`` as an MPI path schedule: each shard whole (one chunk) on its route."""
    t = routes.topology
    sends = tuple(PathSend(p.src, p.dst, 0, p.layer, p.nodes, (0,)) for p in routes.paths)
    return MpiPathProgram(name, t.n_hosts, t.n_nodes, 1, sends)


def install_default(layout: Layout, ns: Handles, routes: RouteSet) -> None:
    """Default routes on every host and NIC namespace; host-forwarding policy rules (module docstring)."""
    t = layout.topology
    nxt = forwarding_table(routes)
    for h in range(t.n_hosts):
        host = ns[layout.host_ns(h)]
        host.route("add", dst="0.0.0.0/0", gateway=layout.nic_addr(h), oif=host.link_lookup(ifname=HOST_IF)[0],
                   prefsrc=layout.host_addr(h), metrics=WINDOW_METRICS)
    for u in range(t.n_nodes):
        nic = ns[layout.nic_ns(u)]
        for d in range(t.n_hosts):
            v = int(nxt[u, d])
            if d != u and v >= 0:
                nic.route("add", dst=f"{layout.host_addr(d)}/32", gateway=layout.cable_addr(v, u))
        if layout.fabric.forwarding == "host" and u < t.n_hosts:
            nic.route("add", dst="0.0.0.0/0", gateway=layout.host_addr(u), table=UP_TABLE)
            for v in t.dst[t.src == u].tolist():
                nic.rule("add", iifname=layout.link_if(v), table=UP_TABLE, priority=UP_TABLE)


def steering(program: MpiPathProgram, first: int) -> list[tuple[PathSend, str, str]]:
    """Each route of ``program`` with its (source, destination) addresses, numbered from route ``first``."""
    return [(s, *Layout.route_addrs(first + i)) for i, s in enumerate(program.sends)]


def install_steering(layout: Layout, ns: Handles, steered: list[tuple[PathSend, str, str]]) -> None:
    """Addresses on the end hosts' loopback and ``/32`` routes at every NIC on each route (module docstring)."""
    if layout.fabric.forwarding != "nic":
        raise A2AError("steered path schedules need NIC forwarding (--forwarding nic); with host forwarding "
                       "run path schedules hop by hop (--route-mode relay)")
    for send, src_ip, dst_ip in steered:
        nodes = send.nodes
        ns_src, ns_dst = ns[layout.host_ns(send.src)], ns[layout.host_ns(send.dst)]
        ns_src.addr("add", index=ns_src.link_lookup(ifname="lo")[0], address=src_ip, prefixlen=32)
        ns_dst.addr("add", index=ns_dst.link_lookup(ifname="lo")[0], address=dst_ip, prefixlen=32)
        for j, u in enumerate(nodes):
            ahead = layout.host_addr(send.dst) if j == len(nodes) - 1 else layout.cable_addr(nodes[j + 1], u)
            back = layout.host_addr(send.src) if j == 0 else layout.cable_addr(nodes[j - 1], u)
            nic = ns[layout.nic_ns(u)]
            nic.route("add", dst=f"{dst_ip}/32", gateway=ahead)
            nic.route("add", dst=f"{src_ip}/32", gateway=back)

