"""Every transfer of a lowered program uses a real link of the topology."""

from __future__ import annotations

from ..errors import echo_items
from ..topology.model import Topology


def link_capacities(topology: Topology) -> dict[tuple[int, int], float]:
    """``{(u, v): capacity}`` of every link."""
    return {(int(u), int(v)): float(c) for u, v, c in zip(topology.src, topology.dst, topology.capacity)}


def schedule_capacities(schedule) -> dict[tuple[int, int], float]:
    """:func:`link_capacities` of the topology a schedule IR was built on."""
    return {(int(u), int(v)): float(c) for u, v, c in schedule.links}


def schedule_topology(schedule) -> Topology:
    """The topology a schedule IR was built on, rebuilt from its ``links`` (to verify its programs)."""
    n_nodes = getattr(schedule, "n_nodes", schedule.n_ranks)
    return Topology.from_links(schedule.spec, schedule.n_ranks, [(u, v) for u, v, _ in schedule.links],
                               n_switches=n_nodes - schedule.n_ranks, capacity=[c for _, _, c in schedule.links],
                               undirected=False)


def check_ranks(n_ranks: int, spec: str, n_hosts: int) -> list[str]:
    """The program has as many ranks as the topology ``spec`` has hosts (``n_hosts``, known before it is built:
    :func:`~a2a_compiler.topology.puncture.recorded_hosts`)."""
    if n_ranks != n_hosts:
        return [f"the program has {n_ranks} ranks but topology {spec} has {n_hosts} hosts"]
    return []


def check_moves(moves, topology: Topology, name: str = "gpu") -> list[str]:
    """Link programs: each (src, dst) pair that exchanges data is a topology link, or, with switches,
    joined through one switch (:func:`~a2a_compiler.topology.switched.switch_routes`)."""
    from ..topology.switched import switch_routes

    links = switch_routes(topology) if topology.n_switches else link_capacities(topology)
    bad = sorted({(m.src, m.dst) for m in moves if (m.src, m.dst) not in links})
    via = " (nor a switch joining them)" if topology.n_switches else ""
    return [f"{name} {u} sends to {name} {v}, but topology {topology.spec} has no link {u}->{v}{via}" for u, v in bad]


def check_routes(program, topology: Topology) -> list[str]:
    """Path programs: each route is a path of topology links."""
    links = link_capacities(topology)
    errors = []
    if program.nnodes != topology.n_nodes:
        errors.append(f"the program has nnodes={program.nnodes} but topology {topology.spec} has "
                      f"{topology.n_nodes} nodes")
    for s in program.sends:
        for u, v in zip(s.nodes, s.nodes[1:]):
            if (u, v) not in links:
                errors.append(f"rank {s.src} send to {s.dst} route_id {s.route_id}: hop {u}->{v} of route "
                              f"{echo_items(s.nodes, 'nodes')} is not a link of {topology.spec}")
                break
    return errors
