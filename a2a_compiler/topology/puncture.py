"""Punctured topologies: K random cables (all, or between switches only, or single cables of port groups),
named cables, or K random hosts removed (failures).

topologies.md, "Punctured variants".  Draws come from
``numpy.random.default_rng(seed)``: first the hosts (if any), then the cables of
what remains (after the named ones), so the same topology, counts and seed give
the same result.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

import numpy as np

from ..errors import DisconnectedError, SpecError
from .metrics import hosts_connected
from .model import Topology


#: What ``--remove-links`` draws from (``among``): every link (a port group whole, host cables included), the
#: switch-to-switch links (port groups whole), or single switch-to-switch cables (a group of W keeps W - 1).
AMONG = ("links", "switch-links", "switch-cables")


def _node(topology: Topology, word: str) -> int:
    """The node a named cable's end names: its name, or its GUID as ``0x...``."""
    if word in topology.names:
        return topology.names.index(word)
    if re.fullmatch(r"0x[0-9a-fA-F]{1,16}", word) and topology.guids is not None and int(word, 16) in topology.guids:
        return topology.guids.index(int(word, 16))
    raise SpecError(f"--remove-cable: {topology.spec} has no node {word!r} (give a node name or GUID 0x...)")


def named_cables(topology: Topology, cables) -> np.ndarray:
    """The directed cables (both directions) of every named cable: ``"A,B"`` is the port group between nodes
    ``A`` and ``B`` (names or GUIDs), ``"A/P"`` the one cable on port ``P`` of node ``A``.  Raises
    :class:`SpecError` naming an item that names no cable, or only cables an earlier item named."""
    t = topology
    out, named = [], {}
    for item in cables:
        if "," in item:
            u, v = (_node(t, w.strip()) for w in item.split(",", 1))
            e = np.searchsorted(t.src * t.n_nodes + t.dst, u * t.n_nodes + v)
            if e >= t.n_links or (t.src[e], t.dst[e]) != (u, v):
                raise SpecError(f"--remove-cable {item}: no cable between {t.names[u]} and {t.names[v]}")
            ks = np.arange(t.cable_ptr[e], t.cable_ptr[e + 1])
        else:
            m = re.fullmatch(r"(.+)/([0-9]+)", item)
            if not m:
                raise SpecError(f"--remove-cable {item}: give NODE,NODE (the cables between two nodes) or NODE/PORT "
                                "(one cable)")
            u, port = _node(t, m.group(1)), int(m.group(2))
            table = t.cable_of_port()
            k = int(table[u, port]) if port < table.shape[1] else -1
            if k < 0:
                raise SpecError(f"--remove-cable {item}: {t.names[u]} has no cable on port {port}")
            ks = np.array([k])
        both = np.concatenate([ks, t.cable_reverse[ks][t.cable_reverse[ks] >= 0]])
        if all(int(k) in named for k in both):
            raise SpecError(f"--remove-cable {item}: names the same cable(s) as --remove-cable "
                            f"{named[int(both[0])]} did")
        named.update(dict.fromkeys(map(int, both), item))
        out.append(both)
    return np.unique(np.concatenate(out)) if out else np.zeros(0, np.int64)


def puncture_options(remove_links: int | None = None, remove_nodes: int | None = None, seed: int | None = None,
                     among: str | None = None, cables=None) -> dict:
    """:func:`puncture`'s keywords from the puncturing options as given (``None``: not given), or ``{}`` for
    no puncture; ``among`` without ``remove_links`` is refused (it would be ignored)."""
    if among and not remove_links:
        raise SpecError("--among applies only with --remove-links")
    if not (remove_links or remove_nodes or cables):
        return {}
    return {"remove_links": remove_links or 0, "remove_nodes": remove_nodes or 0, "seed": seed or 0,
            "among": among or "links", "cables": tuple(cables or ())}


def puncture(topology: Topology, remove_links: int = 0, remove_nodes: int = 0, seed: int = 0,
             among: str = "links", cables=()) -> Topology:
    """Remove ``remove_nodes`` random hosts, the named ``cables``, then ``remove_links`` random cables
    ``among`` :data:`AMONG`.

    * A cable is both directions ``u->v`` and ``v->u``; a topology in which some
      link lacks a reverse of equal capacity (a directed graph such as GenKautz)
      loses single arcs.
    * ``among="links"`` draws from every link, cables to hosts included; a port
      group of parallel cables (``cables`` of :class:`~.model.Topology`) is
      removed whole.  ``"switch-links"`` draws only links between two switches
      (whole groups), ``"switch-cables"`` single cables between two switches: a
      group of ``W`` cables keeps the other ``W - 1`` and their share of its
      capacity.  Ports and GUIDs are kept for what remains.
    * ``cables`` name failed cables (:func:`named_cables`): ``"A,B"`` the group
      between two nodes, ``"A/P"`` the cable on port ``P`` of ``A`` (names, or
      GUIDs ``0x...`` for ``ibnet:`` fabrics).
    * Removed hosts take their links with them; the remaining hosts keep their
      relative order and are renumbered ``0 ..`` (hosts first), switches follow.
    * The spec records the puncture, e.g. ``"torus:3x3x3 -links 3 seed=1"``,
      ``"slimfly:5 -links 10 among=switch-links seed=2"``, ``"fattree:4,3 -cable s0:0/3 seed=0"``.

    Raises :class:`SpecError` for counts out of range and
    :class:`~a2a_compiler.errors.DisconnectedError` (naming the seed) when some
    ordered host pair is no longer connected.
    """
    if remove_links < 0 or remove_nodes < 0:
        raise SpecError("--remove-links/--remove-nodes: K must be >= 0")
    if seed < 0:
        raise SpecError(f"--seed: must be >= 0, got {seed}")
    if among not in AMONG:
        raise SpecError(f"--among: choose one of {', '.join(AMONG)}, not {among!r}")
    if remove_nodes > topology.n_hosts - 2:
        raise SpecError(f"--remove-nodes: K={remove_nodes} would leave fewer than 2 of the {topology.n_hosts} hosts")
    cables = tuple(cables)
    if not (remove_links or remove_nodes or cables):
        return topology
    t = topology
    rng = np.random.default_rng(seed)
    keep_node = np.ones(t.n_nodes, dtype=bool)
    keep_node[rng.choice(t.n_hosts, size=remove_nodes, replace=False)] = False
    new_id = np.cumsum(keep_node) - 1
    keep = keep_node[t.src] & keep_node[t.dst]                 # links whose ends survive
    cable_gone = np.zeros(t.n_cables, dtype=bool)
    cable_gone[named_cables(t, cables)] = True
    kept_of = np.add.reduceat(~cable_gone, t.cable_ptr[:-1]) if t.n_links else np.zeros(0, np.int64)
    keep &= kept_of > 0

    directed = not t.is_symmetric()
    unit = {"links": "arc" if directed else "cable", "switch-links": "switch-to-switch link",
            "switch-cables": "switch-to-switch cable"}[among]
    switch_link = (t.src >= t.n_hosts) & (t.dst >= t.n_hosts)
    if among == "switch-cables":
        csrc, cdst = t.src[t.cable_link], t.dst[t.cable_link]
        cand = np.flatnonzero(~cable_gone & keep[t.cable_link] & switch_link[t.cable_link] & (csrc < cdst))
    else:
        cand = np.flatnonzero(keep & ((t.src < t.dst) | directed) & (switch_link | (among == "links")))
    if remove_links > len(cand):
        raise SpecError(f"--remove-links: K={remove_links} exceeds the {len(cand)} {unit}s of {t.spec}"
                        + (" left" if cables or remove_nodes else ""))
    pick = cand[rng.choice(len(cand), size=remove_links, replace=False)]
    if among == "switch-cables":
        cable_gone[pick] = True
        cable_gone[t.cable_reverse[pick]] = True
    else:
        gone = np.zeros(t.n_links, dtype=bool)
        gone[pick] = True
        if not directed:                                       # the reverse direction of each removed cable
            gone[t.reverse_link[pick]] = True
        cable_gone |= gone[t.cable_link]
    left_of = np.add.reduceat(~cable_gone, t.cable_ptr[:-1]) if t.n_links else np.zeros(0, np.int64)
    left = np.flatnonzero(keep & (left_of > 0))                # surviving links of the original topology
    width = t.link_cables[left]
    parts = [t.spec]
    if remove_nodes:
        parts.append(f"-nodes {remove_nodes}")
    parts += [f"-cable {quote(c, safe=',/:')}" for c in cables]
    if remove_links:
        parts.append(f"-links {remove_links}" + (f" among={among}" if among != "links" else ""))
    parts.append(f"seed={seed}")
    names = [nm for nm, k in zip(t.names, keep_node) if k]
    coords = None if t.coords is None else [c for c, k in zip(t.coords, keep_node) if k]
    ptr, alive = t.cable_ptr, ~cable_gone
    result = Topology.from_links(
        " ".join(parts), t.n_hosts - remove_nodes, np.stack([new_id[t.src[left]], new_id[t.dst[left]]], 1),
        n_switches=t.n_switches, capacity=t.capacity[left] * left_of[left] / width, names=names, coords=coords,
        notes=t.notes, undirected=False,
        cables=None if t.cables is None else left_of[left],
        ports=None if t.ports is None else
        [t.ports[ptr[e]:ptr[e + 1]][alive[ptr[e]:ptr[e + 1]]].tolist() for e in left.tolist()],
        guids=None if t.guids is None else [g for g, k in zip(t.guids, keep_node) if k],
        n_ports=None if t.n_ports is None else t.n_ports[keep_node],
    )
    what = " and ".join(
        f"{k} {w}{'s' if k != 1 else ''}" for k, w in ((remove_nodes, "random host"), (len(cables), "named cable"),
                                                       (remove_links, f"random {unit}")) if k
    )
    if not hosts_connected(result):
        raise DisconnectedError(
            f"{t.spec} is disconnected after removing {what}"
            + (f" (seed {seed}); try another seed or a smaller K" if remove_links or remove_nodes else "")
            + (", or --among switch-links (host cables are drawn too)" if among == "links" and remove_links
               and t.n_switches and hosts_connected(puncture(t, 0, remove_nodes, seed, cables=cables)) else "")
        )
    return result


def _recorded(spec: str) -> tuple[str, dict]:
    """A spec as :func:`puncture` writes it (``"torus:3x3x3 -links 3 seed=1"``): the spec punctured and
    :func:`puncture`'s keyword arguments (none for a spec that is not punctured)."""
    m = re.fullmatch(r"(.+?)(?: -nodes ([0-9]+))?((?: -cable \S+)*)(?: -links ([0-9]+)(?: among=([a-z-]+))?)? "
                     r"seed=([0-9]+)", spec.strip())
    if m and (m.group(2) or m.group(3) or m.group(4)):
        cut = {"remove_nodes": int(m.group(2) or 0), "remove_links": int(m.group(4) or 0), "seed": int(m.group(6))}
        if m.group(5):
            cut["among"] = m.group(5)
        if m.group(3):
            cut["cables"] = tuple(unquote(c) for c in m.group(3).split(" -cable ")[1:])
        return m.group(1), cut
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
