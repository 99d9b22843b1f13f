"""Hosts joined through switches, as link programs (MSCCL, MSCCL++, oneCCL) see them.

A link program moves chunks host to host (GPU to GPU): on a topology with switches
the switches forward and the program connects hosts.  :func:`switch_routes` names the
path each such host-to-host message takes (a direct link, or through one switch:
an NVSwitch inside a server, a rail switch between servers); :func:`switch_graph` is the
hosts-only graph of those connections, the graph tsMCF schedules on, each of its links
given an even share of the physical links it crosses (a static partition, so the
schedule it yields is feasible on the real fabric; the cost model then prices the
program on the physical links, where the shares are not fixed).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from .model import Topology


def switch_routes(topology: Topology) -> dict[tuple[int, int], tuple[int, ...]]:
    """``{(u, v): path}`` for every ordered host pair joined by a link or by one switch
    (the lowest-numbered switch when several join them)."""
    nh = topology.n_hosts
    out = defaultdict(list)
    for u, v in zip(topology.src.tolist(), topology.dst.tolist()):
        out[u].append(v)
    routes: dict[tuple[int, int], tuple[int, ...]] = {}
    for u in range(nh):
        for w in sorted(out[u]):
            if w < nh:
                routes[(u, w)] = (u, w)
        for w in sorted(out[u]):
            if w >= nh:
                for v in sorted(out[w]):
                    if v < nh and v != u and (u, v) not in routes:
                        routes[(u, v)] = (u, w, v)
    return routes


def switch_graph(topology: Topology) -> tuple[Topology, dict[tuple[int, int], tuple[int, ...]]]:
    """The hosts-only graph of :func:`switch_routes` and the routes.

    A graph link's capacity is the smallest, over the physical links of its route, of that
    link's capacity divided by the number of graph links routed over it.
    """
    routes = switch_routes(topology)
    share = defaultdict(int)
    for path in routes.values():
        for e in zip(path, path[1:]):
            share[e] += 1
    cap = {(int(u), int(v)): float(c) for u, v, c in zip(topology.src, topology.dst, topology.capacity)}
    pairs = sorted(routes)
    caps = [min(cap[e] / share[e] for e in zip(routes[p], routes[p][1:])) for p in pairs]
    graph = Topology.from_links(f"{topology.spec} [hosts through switches]", topology.n_hosts, pairs, capacity=caps,
                                names=topology.names[:topology.n_hosts], undirected=False)
    return graph, routes


def host_nodes(topology: Topology) -> np.ndarray:
    """The node (server) of each host: the NVSwitch it reaches over an NVLink, else the host itself;
    hosts of one node share memory channels in an MSCCL++ plan."""
    node = np.arange(topology.n_hosts)
    if topology.classes:
        for u, v, c in zip(topology.src.tolist(), topology.dst.tolist(), topology.classes):
            if c == "nvlink" and u < topology.n_hosts <= v:
                node[u] = v
    return node
