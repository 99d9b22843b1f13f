"""Punctured topologies: K random cables or K random hosts removed (failures).

topologies.md, "Punctured variants".  Draws come from
``numpy.random.default_rng(seed)``: first the hosts (if any), then the cables of
what remains, so the same topology, counts and seed give the same result.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import DisconnectedError, SpecError
from .metrics import hosts_connected
from .model import Topology


def puncture(topology: Topology, remove_links: int = 0, remove_nodes: int = 0, seed: int = 0) -> Topology:
    """Remove ``remove_nodes`` random hosts, then ``remove_links`` random cables.

    * A cable is both directions ``u->v`` and ``v->u``; a topology in which some
      link lacks a reverse of equal capacity (a directed graph such as GenKautz)
      loses single arcs.
      Cables to switches count too; a port group of parallel cables (``cables``
      of :class:`~.model.Topology`) is removed whole, its ports and the nodes'
      GUIDs are kept for what remains.
    * Removed hosts take their links with them; the remaining hosts keep their
      relative order and are renumbered ``0 ..`` (hosts first), switches follow.
    * The spec records the puncture, e.g. ``"torus:3x3x3 -links 3 seed=1"``.

    Raises :class:`SpecError` for counts out of range and
    :class:`~a2a_compiler.errors.DisconnectedError` (naming the seed) when some
    ordered host pair is no longer connected.
    """
    if remove_links < 0 or remove_nodes < 0:
        raise SpecError("--remove-links/--remove-nodes: K must be >= 0")
    if seed < 0:
        raise SpecError(f"--seed: must be >= 0, got {seed}")
    if remove_nodes > topology.n_hosts - 2:
        raise SpecError(f"--remove-nodes: K={remove_nodes} would leave fewer than 2 of the {topology.n_hosts} hosts")
    if not (remove_links or remove_nodes):
        return topology
    rng = np.random.default_rng(seed)
    keep_node = np.ones(topology.n_nodes, dtype=bool)
    keep_node[rng.choice(topology.n_hosts, size=remove_nodes, replace=False)] = False
    new_id = np.cumsum(keep_node) - 1
    keep = keep_node[topology.src] & keep_node[topology.dst]
    src, dst, cap = new_id[topology.src[keep]], new_id[topology.dst[keep]], topology.capacity[keep]
    kept_links = np.flatnonzero(keep)
    n = int(keep_node.sum())

    directed = not topology.is_symmetric()
    unit = "arc" if directed else "cable"
    cand = np.arange(len(src)) if directed else np.flatnonzero(src < dst)
    if remove_links > len(cand):
        raise SpecError(f"--remove-links: K={remove_links} exceeds the {len(cand)} {unit}s of {topology.spec}")
    gone = np.zeros(len(src), dtype=bool)
    gone[cand[rng.choice(len(cand), size=remove_links, replace=False)]] = True
    if not directed:  # the reverse direction of each removed cable
        key = src * n + dst
        gone |= np.isin(key, (dst * n + src)[gone])

    parts = [topology.spec]
    if remove_nodes:
        parts.append(f"-nodes {remove_nodes}")
    if remove_links:
        parts.append(f"-links {remove_links}")
    parts.append(f"seed={seed}")
    names = [nm for nm, k in zip(topology.names, keep_node) if k]
    coords = None if topology.coords is None else [c for c, k in zip(topology.coords, keep_node) if k]
    left = kept_links[~gone]                            # surviving links of the original topology
    t, ptr = topology, topology.cable_ptr
    result = Topology.from_links(
        " ".join(parts), topology.n_hosts - remove_nodes, np.stack([src[~gone], dst[~gone]], 1),
        n_switches=topology.n_switches, capacity=cap[~gone], names=names, coords=coords,
        notes=topology.notes, undirected=False,
        cables=None if t.cables is None else t.cables[left],
        ports=None if t.ports is None else [t.ports[ptr[e]:ptr[e + 1]].tolist() for e in left.tolist()],
        guids=None if t.guids is None else [g for g, k in zip(t.guids, keep_node) if k],
        n_ports=None if t.n_ports is None else t.n_ports[keep_node],
    )
    what = " and ".join(
        f"{k} random {w}{'s' if k != 1 else ''}" for k, w in ((remove_nodes, "host"), (remove_links, unit)) if k
    )
    if not hosts_connected(result):
        raise DisconnectedError(
            f"{topology.spec} is disconnected after removing {what} (seed {seed}); try another seed or a smaller K"
        )
    return result


def _recorded(spec: str) -> tuple[str, dict]:
    """A spec as :func:`puncture` writes it (``"torus:3x3x3 -links 3 seed=1"``): the spec punctured and
    :func:`puncture`'s keyword arguments (none for a spec that is not punctured)."""
    m = re.fullmatch(r"(.+?)(?: -nodes ([0-9]+))?(?: -links ([0-9]+))? seed=([0-9]+)", spec.strip())
    if m and (m.group(2) or m.group(3)):
        return m.group(1), {"remove_nodes": int(m.group(2) or 0), "remove_links": int(m.group(3) or 0),
                            "seed": int(m.group(4))}
    return spec, {}


def recorded_hosts(spec: str) -> int | None:
    """The hosts of :func:`from_recorded_spec`'s topology without building it
    (:func:`~a2a_compiler.topology.spec.spec_hosts`; ``None`` when the parameters do not tell)."""
    from .spec import spec_hosts

    base, cut = _recorded(spec)
    hosts = spec_hosts(base)
    return None if hosts is None else hosts - cut.get("remove_nodes", 0)


def from_recorded_spec(spec: str) -> Topology:
    """The topology a spec names, puncturing included: the inverse of :attr:`Topology.spec` as
    :func:`puncture` writes it, for the spec a schedule file records."""
    from .spec import from_spec

    base, cut = _recorded(spec)
    return puncture(from_spec(base), **cut) if cut else from_spec(spec)
