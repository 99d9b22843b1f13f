"""InfiniBand fabrics as ``ibnetdiscover`` prints them: ``ibnet:PATH`` and the net files ``ibsim`` reads.

``ibnetdiscover`` (infiniband-diags) prints one record per node::

    switchguid=0x200001(200001)
    Switch  8 "S-0000000000200001"     # "leaf-1" base port 0 lid 3 lmc 0
    [1]     "H-0000000000100002"[1](100003)    # "node-7 HCA-1" lid 5 4xQDR
    [3]     "S-0000000000200000"[5]            # "spine-1" lid 2 4xQDR

    caguid=0x100002
    Ca      2 "H-0000000000100002"     # "node-7 HCA-1"
    [1](100003)     "S-0000000000200001"[1]    # lid 5 lmc 0 "leaf-1" lid 3 4xQDR

A header names the node type (``Switch``, ``Ca``/``Hca``; ``Rt`` routers are
refused), its number of ports and its id in quotes, and a comment carries its
description; each port line gives the local port (with the CA port's GUID in
parentheses), the remote node's id and the remote port.  ``ibsim`` (ibsim-utils)
reads the same format as its net file, with ``switchguid=`` / ``caguid=`` lines
fixing the GUIDs of the next node.

:func:`parse_ibnet` makes a :class:`~.model.Topology`: every connected CA port
is a host (an InfiniBand endpoint with its own LID), named by its node
description (with the port when the CA has several connected ports), every
switch a switch; parallel cables between two nodes stay separate cables of
one link (``cables``, with their real port numbers); ``guids`` are the hosts'
port GUIDs and the switches' node GUIDs, ``n_ports`` the ports each node has.
Hosts are ordered by port GUID and switches by GUID.  Anything malformed or
inconsistent (a cable listed differently at its two ends, a port used twice,
an unknown node, a router) is refused in one line naming the line.

:func:`net_file` writes a topology as an ibsim net file, with GUIDs from the
topology or :func:`node_guids`' plan, so that discovering the simulated fabric
gives back the same topology.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import FormatError, echo
from ..files import read_text
from .model import Topology

#: Largest ibnetdiscover file read (bytes).
MAX_IBNET_BYTES = 256 * 1024 * 1024
#: Largest fabric read (nodes).
MAX_IBNET_NODES = 100_000
#: GUID plans for topologies without GUIDs: host ``h`` is the CA with node GUID ``HOST_GUID + 16 h`` (its
#: port 1 has GUID ``HOST_GUID + 16 h + 1``); switch ``i`` has GUID ``SWITCH_GUID + i``.
HOST_GUID = 0x00A2A00000000000
SWITCH_GUID = 0x00A2A10000000000

_HEADER = re.compile(r'^(Switch|Ca|Hca|Rt)\s+(\d+)\s+"([^"]*)"\s*(.*)$')
_PORT = re.compile(r'^\[(\d+)\](?:\[ext \d+\])?(?:\((?:0x)?([0-9a-fA-F]+)\))?\s+"([^"]*)"\[(\d+)\]'
                   r'(?:\[ext \d+\])?(?:\((?:0x)?([0-9a-fA-F]+)\))?\s*(.*)$')
_GUID_LINE = re.compile(r'^(switchguid|caguid|hcaguids|sysimgguid|vendid|devid|rtguid)\s*=\s*(?:0x)?([0-9a-fA-F]+)')
_DESC = re.compile(r'#\s*"([^"]*)"')


def node_guids(topology: Topology) -> tuple[int, ...]:
    """The topology's GUIDs, or the plan of :data:`HOST_GUID` / :data:`SWITCH_GUID` (host: its port GUID)."""
    if topology.guids is not None:
        return topology.guids
    nh = topology.n_hosts
    port = np.ones(nh, dtype=np.int64)
    first = np.searchsorted(topology.src[topology.cable_link], np.arange(nh))
    has = first < topology.n_cables
    port[has] = topology.cable_port[first[has]]
    return tuple([HOST_GUID + 16 * h + int(port[h]) for h in range(nh)]
                 + [SWITCH_GUID + i for i in range(topology.n_switches)])


def parse_ibnet(text: str, source: str = "<ibnetdiscover>") -> Topology:
    """The :class:`Topology` of an ``ibnetdiscover`` output (module docstring); :class:`FormatError` names
    the line at fault."""
    nodes: dict[str, dict] = {}             # id -> {type, ports, desc, guid, line, links: {port: (rid, rport, guid)}}
    order: list[str] = []
    current = None
    pending_guid = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{source}: line {lineno}"
        if not line or line.startswith("#"):
            continue
        m = _GUID_LINE.match(line)
        if m:
            if m.group(1) in ("switchguid", "caguid", "hcaguids", "rtguid"):
                pending_guid = int(m.group(2), 16)
            current = None
            continue
        m = _HEADER.match(line)
        if m:
            kind, nports, nid, rest = m.group(1), int(m.group(2)), m.group(3), m.group(4)
            if kind == "Rt":
                raise FormatError(f"{where}: router {nid!r}: routers (IB-to-IB) are not supported")
            if not 1 <= nports <= 255:
                raise FormatError(f"{where}: node {nid!r} has {nports} ports; InfiniBand allows 1..255")
            if not nid or nid in nodes:
                raise FormatError(f"{where}: node id {nid!r} is empty or defined twice")
            if len(nodes) >= MAX_IBNET_NODES:
                raise FormatError(f"{where}: more than {MAX_IBNET_NODES} nodes")
            d = _DESC.search(rest)
            guid = pending_guid if pending_guid is not None else _guid_from_id(nid)
            if guid is None:
                raise FormatError(f"{where}: node {nid!r} has no GUID (no switchguid=/caguid= line before it "
                                  "and its id is not S-/H-<guid>)")
            current = nodes[nid] = {"switch": kind == "Switch", "ports": nports, "desc": d.group(1) if d else nid,
                                    "guid": guid, "line": lineno, "links": {}}
            order.append(nid)
            pending_guid = None
            continue
        m = _PORT.match(line)
        if m:
            if current is None:
                raise FormatError(f"{where}: a port line outside a node record")
            port, rid, rport = int(m.group(1)), m.group(3), int(m.group(4))
            local_guid = m.group(2)
            if not 1 <= port <= current["ports"]:
                raise FormatError(f"{where}: port {port} outside 1..{current['ports']} of {current['desc']!r}")
            if not 1 <= rport <= 255:
                raise FormatError(f"{where}: remote port {rport} outside 1..255")
            if port in current["links"]:
                raise FormatError(f"{where}: port {port} of {current['desc']!r} listed twice")
            current["links"][port] = (rid, rport, int(local_guid, 16) if local_guid else None, lineno)
            continue
        raise FormatError(f"{where}: not an ibnetdiscover line: {echo(raw.strip())}")
    return _build(nodes, order, source)


def _guid_from_id(nid: str) -> int | None:
    m = re.fullmatch(r"[SH]-([0-9a-fA-F]{1,16})", nid)
    return int(m.group(1), 16) if m else None


def _build(nodes: dict, order: list[str], source: str) -> Topology:
    if not nodes:
        raise FormatError(f"{source}: no Switch or Ca records")
    # every cable must be listed the same way at both ends
    for nid in order:
        for port, (rid, rport, _, lineno) in nodes[nid]["links"].items():
            if rid not in nodes:
                raise FormatError(f"{source}: line {lineno}: {nodes[nid]['desc']!r} port {port} leads to unknown "
                                  f"node {rid!r}")
            other = nodes[rid]
            if rport > other["ports"]:
                raise FormatError(f"{source}: line {lineno}: {other['desc']!r} has no port {rport}")
            back = other["links"].get(rport)
            if back is None or back[0] != nid or back[1] != port:
                raise FormatError(f"{source}: line {lineno}: cable {nodes[nid]['desc']!r}[{port}] -> "
                                  f"{other['desc']!r}[{rport}] is not listed back at its other end")
            if rid == nid:
                raise FormatError(f"{source}: line {lineno}: {nodes[nid]['desc']!r} port {port} is cabled to itself")
            if not nodes[nid]["switch"] and not other["switch"]:
                raise FormatError(f"{source}: line {lineno}: CA {nodes[nid]['desc']!r} is cabled to CA "
                                  f"{other['desc']!r}; a CA does not forward")
    # hosts: connected CA ports, by port GUID (port GUID from the line, else node GUID + port)
    hosts = []
    for nid in order:
        nd = nodes[nid]
        if nd["switch"]:
            continue
        for port, (_, _, pguid, _) in sorted(nd["links"].items()):
            hosts.append((pguid if pguid is not None else nd["guid"] + port, nid, port))
    switches = sorted((nodes[nid]["guid"], nid) for nid in order if nodes[nid]["switch"])
    if len(hosts) < 2:
        raise FormatError(f"{source}: needs at least 2 connected CA ports (hosts), found {len(hosts)}")
    hosts.sort()
    guids = [g for g, _, _ in hosts] + [g for g, _ in switches]
    if len(set(guids)) != len(guids):
        raise FormatError(f"{source}: two nodes or ports share a GUID")
    index = {(nid, port): i for i, (_, nid, port) in enumerate(hosts)}
    sw_index = {nid: len(hosts) + i for i, (_, nid) in enumerate(switches)}
    multi = {nid for _, nid, _ in hosts if len(nodes[nid]["links"]) > 1}

    def end(nid, port):
        return sw_index[nid] if nodes[nid]["switch"] else index[(nid, port)]

    groups: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for nid in order:
        for port, (rid, rport, _, _) in nodes[nid]["links"].items():
            u, v = end(nid, port), end(rid, rport)
            if u < v:
                groups.setdefault((u, v), []).append((port, rport))
    pairs = sorted(groups)
    port_lists = [tuple(zip(*sorted(groups[p]))) for p in pairs]
    names = [nodes[nid]["desc"] + (f" port {port}" if nid in multi else "") for _, nid, port in hosts] + \
        [nodes[nid]["desc"] for _, nid in switches]
    if len(set(names)) != len(names):                     # descriptions are not unique: add the GUIDs
        names = [f"{nm} 0x{g:016x}" for nm, g in zip(names, guids)]
    n_ports = [nodes[nid]["ports"] for _, nid, _ in hosts] + [nodes[nid]["ports"] for _, nid in switches]
    return Topology.from_links(
        f"ibnet:{source}", len(hosts), pairs, n_switches=len(switches),
        capacity=[len(groups[p]) for p in pairs], cables=[len(groups[p]) for p in pairs], ports=port_lists,
        names=names, guids=guids, n_ports=n_ports,
        notes=["read from ibnetdiscover output: hosts are CA ports, names their node descriptions"],
    )


def load_ibnet(path) -> Topology:
    """``ibnet:PATH``: read and check an ``ibnetdiscover`` output file; every host must reach every other."""
    from .metrics import require_connected

    path = Path(path)
    topo = parse_ibnet(read_text(path, MAX_IBNET_BYTES), str(path))
    require_connected(topo, f" (ibnet:{path})")
    return topo


def net_file(topology: Topology) -> str:
    """The topology as an ibsim net file (ibnetdiscover format with ``switchguid=`` / ``caguid=`` lines).

    Hosts must be leaves (one port each, to a switch): InfiniBand CAs do not
    forward.  Node ids are ``S-<guid>`` / ``H-<guid>``, descriptions the node names.
    """
    from ..errors import A2AError

    t = topology
    guids = node_guids(t)
    nh = t.n_hosts
    if not t.n_switches:
        raise A2AError(f"{t.spec}: an InfiniBand fabric needs switches; its hosts are CAs, which do not forward")
    src = t.src[t.cable_link]
    bad = np.flatnonzero((np.bincount(src, minlength=t.n_nodes)[:nh] != 1))
    if len(bad):
        raise A2AError(f"{t.spec}: host {t.names[bad[0]]} has {np.bincount(src, minlength=t.n_nodes)[bad[0]]} "
                       "cables; an InfiniBand CA port has one")
    if not t.is_symmetric():
        raise A2AError(f"{t.spec}: InfiniBand cables are bidirectional; this topology has one-way links")
    for name in t.names:
        if '"' in name or "#" in name or "\n" in name:
            raise A2AError(f"{t.spec}: node name {name!r} cannot be written to a net file (quote or #)")
    port, remote, rport = t.cable_port, t.dst[t.cable_link], t.cable_port[t.cable_reverse]
    ports = t.port_count
    out = [f"# ibsim net file of {t.spec}, written by a2a (hosts: CA port 1; names in the comments)", ""]

    def node_id(u: int) -> str:
        return f"{'H' if u < nh else 'S'}-{guids[u] - (int(port[np.searchsorted(src, u)]) if u < nh else 0):016x}"

    for u in list(range(nh, t.n_nodes)) + list(range(nh)):
        first, last = np.searchsorted(src, u), np.searchsorted(src, u, side="right")
        cab = np.arange(first, last)[np.argsort(port[first:last], kind="stable")]
        if u >= nh:
            out += [f"switchguid=0x{guids[u]:x}", f'Switch\t{int(ports[u])} "{node_id(u)}"\t# "{t.names[u]}"']
        else:
            out += [f"caguid=0x{guids[u] - int(port[cab[0]]):x}",
                    f'Hca\t{max(int(ports[u]), int(port[cab[0]]))} "{node_id(u)}"\t# "{t.names[u]}"']
        for c in cab.tolist():
            out.append(f'[{port[c]}]\t"{node_id(int(remote[c]))}"[{rport[c]}]')
        out.append("")
    return "\n".join(out)
