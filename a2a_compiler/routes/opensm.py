"""Forwarding tables as OpenSM reads and writes them: the ``file`` routing engine's LFT dump.

OpenSM writes its tables to ``opensm-lfts.dump`` and its ``file`` routing
engine (``opensm -R file -U FILE``, ``osm_ucast_file.c``) loads such a file:

.. code-block:: text

    Unicast lids [0-20] of switch Lid 17 guid 0x00a2a10000000000 ('s0:0'):
    0x0001 001 # Channel Adapter portguid 0x00a2a00000000001: 'h0'
    0x0011 000 # Switch portguid 0x00a2a10000000000: 's0:0'
    20 lids dumped

A header names the switch by GUID; each row maps a destination LID to an
output port (0: the switch itself).  With a ``portguid`` OpenSM remaps the row
to that port's real LID plus ``lid & (2^LMC - 1)``, so the LIDs here are
placeholders: host ``h`` has base LID ``(h + 1) * 2^LMC``, switch ``i`` the
LID after the hosts'.  A switch missing from the file gets an empty table; a
port a switch does not have makes OpenSM abandon the whole file and fall back
to minhop without a word (its log says which engine configured the tables).
So :func:`write_dump` writes only tables :meth:`~.tables.ForwardingTables.validate`
accepted, and :func:`read_dump` refuses, in one line naming the switch, a row
with a port the switch does not have or has no cable on, a row for an unknown
port, or a switch or port GUID the fabric does not know; the tables it reads
are then checked for missing destinations and loops.

**Layers** are LID offsets: with ``L`` layers the dump has ``2^LMC >= L``
rows per host, offset ``l`` carrying layer ``l`` (offsets past ``L`` repeat
layer 0), and OpenSM must run with ``-l LMC``.

**Switch LIDs** (management traffic, not all-to-all): every switch routes
its own LID to port 0; another switch's LID as the engine routes switches
where it has its own rule (``ftree``: OpenSM's ``fabric_route_to_switches``,
which leaves some pairs without an up/down path, e.g. root to root: no row,
as in OpenSM's dump), else over its least used min-hop port (counting the
hosts routed through each port, ties to the lowest port), OpenSM's MinHop
rule.

**Service levels.**  The ``file`` engine installs no SLs.  Where the routes
need virtual lanes, :func:`sl_file` writes the SL of every (source,
destination, LID offset) beside the dump (docs/formats.md) for whatever sets
up the path records (an SA plugin, the MPI library's SL selection).
"""

from __future__ import annotations

import math
import re

import numpy as np
from scipy.sparse import csgraph
import scipy.sparse as sp

from ..errors import A2AError, FormatError
from ..fabric import Fabric
from ..topology.ibnet import node_guids
from ..topology.model import Topology
from .tables import ForwardingTables

#: Highest unicast LID (0xBFFF).
MAX_LID = 0xBFFF
#: Service levels: the SL field of an InfiniBand packet (LRH) and path record is 4 bits.
SLS = 16
#: Data virtual lanes assumed of a fabric: VL0-7, what most HCAs and switches have (``--vls`` changes it).
DEFAULT_VLS = 8
#: Most data VLs a port has (VL0-14; VL15 carries subnet management only).
MAX_VLS = 15
#: Largest dump read (bytes).
MAX_DUMP_BYTES = 1 << 30


def require_infiniband(topology: Topology) -> None:
    """Refuse a topology that is not an InfiniBand fabric: hosts are CA ports, one cable each, to a switch."""
    t = topology
    nh = t.n_hosts
    csrc, cdst = t.src[t.cable_link], t.dst[t.cable_link]
    deg = np.bincount(csrc, minlength=t.n_nodes)[:nh]
    bad = np.flatnonzero((deg != 1) | np.isin(np.arange(nh), csrc[cdst < nh]))
    if not t.n_switches or len(bad):
        why = "it has no switches" if not t.n_switches else \
            f"host {t.names[bad[0]]} has {deg[bad[0]]} cable(s){' to a host' if deg[bad[0]] == 1 else ''}"
        raise A2AError(f"{t.spec} is not an InfiniBand fabric ({why}): the hosts must be CA ports, one cable each "
                       "to a switch (e.g. slimfly:5 rather than slimfly:5,p=0)")


def _switch(topology: Topology, u: int) -> str:
    """A switch as the dump names it: its name and GUID."""
    return f"switch {topology.names[u]} (guid 0x{node_guids(topology)[u]:016x})"


def lmc_of(layers: int) -> int:
    """The smallest LMC with ``2^LMC >= layers`` (0..7)."""
    lmc = max(0, math.ceil(math.log2(layers))) if layers > 1 else 0
    if lmc > 7:
        raise A2AError(f"{layers} layers need LMC {lmc}; InfiniBand allows LMC 0..7 (128 LIDs per port)")
    return lmc


def lid_plan(topology: Topology, lmc: int) -> tuple[np.ndarray, np.ndarray]:
    """Placeholder base LIDs of the hosts and of the switches (module docstring)."""
    nh, ns = topology.n_hosts, topology.n_switches
    step = 1 << lmc
    host = (np.arange(nh) + 1) * step
    switch = (nh + 1) * step + np.arange(ns)
    if ns and switch[-1] > MAX_LID:
        raise A2AError(f"{topology.spec}: {nh} hosts with LMC {lmc} and {ns} switches need LIDs up to "
                       f"{int(switch[-1])}, past the unicast range (0x{MAX_LID:x})")
    return host, switch


def switch_entries(tables: ForwardingTables, dor: bool = False) -> np.ndarray:
    """``(n_switches, n_switches)`` cables each switch routes another switch's LID on (``-1``: its own LID),
    by MinHop's rule (``dor``: OpenSM's dor variant, only the ports to the first min-hop port's neighbour)."""
    t = tables.topology
    nh, ns = t.n_hosts, t.n_switches
    csrc, cdst = t.src[t.cable_link], t.dst[t.cable_link]
    sw = (csrc >= nh) & (cdst >= nh)
    adj = sp.csr_array((np.ones(int(sw.sum())), (cdst[sw] - nh, csrc[sw] - nh)), shape=(ns, ns))
    dist = csgraph.shortest_path(adj, unweighted=True)           # dist[v, u]: hops from u to v
    if not np.all(np.isfinite(dist)):
        raise A2AError(f"{t.spec}: its switches are not connected to each other")
    used = tables.cable[:, nh:].reshape(-1)
    count = np.bincount(used[used >= 0], minlength=t.n_cables).astype(float)
    cab = np.flatnonzero(sw)
    cab = cab[np.lexsort((t.cable_port[cab], csrc[cab]))]        # switch cables in (switch, port) order
    u, v = csrc[cab] - nh, cdst[cab] - nh
    starts = np.flatnonzero(np.diff(u, prepend=-1))              # one segment per switch
    seg = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(cab))))
    pos = np.arange(len(cab))
    out = np.full((ns, ns), -1, dtype=np.int64)
    rows = u[starts]
    for target in range(ns):
        ok = dist[target, v] == dist[target, u] - 1              # min-hop ports towards the target
        if dor:
            lead = np.minimum.reduceat(np.where(ok, pos, len(cab)), starts)
            ok &= v == v[np.minimum(lead, len(cab) - 1)][seg]
        load = np.where(ok, count[cab], np.inf)
        least = np.minimum.reduceat(load, starts)
        pick = np.minimum.reduceat(np.where(load == least[seg], pos, len(cab)), starts)
        keep = rows != target
        out[rows[keep], target] = cab[pick[keep]]
    return out


def _desc(name: str) -> str:
    return name.replace("\n", " ").replace("'", "`")


def write_dump(tables: ForwardingTables) -> tuple[str, int]:
    """The dump of ``tables`` (module docstring) and its LMC.  The tables must be valid."""
    t = tables.topology
    require_infiniband(t)
    nh, ns = t.n_hosts, t.n_switches
    lmc = lmc_of(tables.layers)
    host_lid, sw_lid = lid_plan(t, lmc)
    if tables.share is not None:                               # a layer's unrouted entries: layer 0's
        full = np.where(tables.cable >= 0, tables.cable, tables.cable[:1])
        tables = ForwardingTables(tables.algo, t, tables.fabric, full).validate()
    guids = node_guids(t)
    port = t.cable_port
    to_sw = tables.switch_routes() if tables.switch_routes is not None else switch_entries(tables)
    step = 1 << lmc
    max_lid = int(sw_lid[-1])
    # rows in LID order: (lid, destination node, layer)
    lids = np.concatenate([(host_lid[:, None] + np.arange(step)).reshape(-1), sw_lid])
    dest = np.concatenate([np.repeat(np.arange(nh), step), nh + np.arange(ns)])
    layer = np.concatenate([np.tile(np.arange(step) % tables.layers, nh), np.zeros(ns, np.int64)])
    label = [f"Channel Adapter portguid 0x{guids[h]:016x}: '{_desc(t.names[h])}'" for h in range(nh)] + \
        [f"Switch portguid 0x{guids[nh + i]:016x}: '{_desc(t.names[nh + i])}'" for i in range(ns)]
    out = []
    for i in range(ns):
        s = nh + i
        out.append(f"Unicast lids [0-{max_lid}] of switch Lid {int(sw_lid[i])} guid 0x{guids[s]:016x} "
                   f"('{_desc(t.names[s])}'):")
        host_c = tables.cable[layer[: nh * step], s, dest[: nh * step]]
        sw_c = to_sw[i]
        cab = np.concatenate([host_c, sw_c])
        p = np.where(cab >= 0, port[np.maximum(cab, 0)], np.where(cab == -1, 0, -1))
        for lid, d, pp in zip(lids.tolist(), dest.tolist(), p.tolist()):
            if pp >= 0:                                       # -1: no path, no row (as OpenSM dumps it)
                out.append(f"0x{lid:04x} {pp:03d} # {label[d]}")
        out.append(f"{max_lid} lids dumped")
    return "\n".join(out) + "\n", lmc


def check_vls(vls: int) -> None:
    """Refuse a number of data VLs outside 1..:data:`MAX_VLS`."""
    if not 1 <= vls <= MAX_VLS:
        raise A2AError(f"--vls must be in 1..{MAX_VLS} (InfiniBand's data virtual lanes), got {vls}")


def check_sls(algo: str, lanes: int, vls: int) -> None:
    """Refuse, in one line, routes on more virtual lanes than the fabric has: an SL is 4 bits (SL 0..15) and
    SL ``i`` is mapped to data VL ``i`` (``vls`` of them, :data:`DEFAULT_VLS` unless the fabric has more)."""
    check_vls(vls)
    if lanes > vls:
        raise A2AError(f"{algo}: the routes need {lanes} virtual lanes (SLs 0..{lanes - 1}), more than the fabric's "
                       f"{vls} data VLs (--vls; an SL is 4 bits, 0..{SLS - 1}; a port has at most {MAX_VLS} data VLs)")


def opensm_options(path: str, lmc: int) -> str:
    """The ``opensm`` options that load the dump at ``path``."""
    return f"-R file -U {path}" + (f" -l {lmc}" if lmc else "")


def sl_file(tables: ForwardingTables, lanes: np.ndarray, scheme: str) -> str:
    """The SL side file (docs/formats.md): ``src_guid dst_guid offset sl`` for every routed pair and layer."""
    t = tables.topology
    guids = node_guids(t)
    lmc = lmc_of(tables.layers)
    head = [f"# a2a SL file for {t.spec}, --algo {tables.algo}: the service level of every (source port, "
            "destination port, LID offset)",
            f"# virtual lanes by {scheme}: {int(lanes.max(initial=0)) + 1}; LMC {lmc}",
            "# OpenSM's file routing engine installs no SLs: give them to the path records (SA) or the MPI "
            "library's SL selection",
            "# src_portguid dst_portguid lid_offset sl"]
    nh = t.n_hosts
    rows = []
    share = tables.share if tables.share is not None else np.ones(lanes.shape, dtype=bool)
    for layer in range(tables.layers):
        s, d = np.nonzero(share[layer] & ~np.eye(nh, dtype=bool))
        sl = lanes[layer, s, d]
        rows += [f"0x{guids[a]:016x} 0x{guids[b]:016x} {layer} {c}" for a, b, c in zip(s.tolist(), d.tolist(),
                                                                                  sl.tolist())]
    return "\n".join(head + rows) + "\n"


# ------------------------------------------------------------------ reading
_HEAD = re.compile(r"^Unicast lids .* guid 0x([0-9a-fA-F]+)")
_ROW = re.compile(r"^0x([0-9a-fA-F]+)\s+(\d+)\b(.*)$")
_PORTGUID = re.compile(r"portguid 0x([0-9a-fA-F]+)")
#: A dump_fts / dump_lfts switch header: the top LID of the table it lists.
_FTS_HEAD = re.compile(r"Unicast lids \[0x[0-9a-fA-F]+-0x([0-9a-fA-F]+)\] of switch DR path")


def parse_dump(text: str, topology: Topology, source: str = "<dump>") -> np.ndarray:
    """Every row of an ``opensm-lfts.dump`` (ours, OpenSM's, or ``dump_lfts`` output) on ``topology``, as an
    ``(rows, 4)`` array ``(switch, destination node, LID offset, cable)``, sorted; cable ``-1``: port 0 (the
    switch itself).

    Switches and destinations are found by GUID; a destination's ``k``
    distinct LIDs in the file are its LID offsets ``0 .. k-1``; port 255 (no
    path) rows are skipped.  Raises :class:`FormatError` in one line naming the
    switch for a port it does not have or has no cable on, port 0 for another
    destination, or a GUID the fabric does not know.
    """
    t = topology
    require_infiniband(t)
    guids = node_guids(t)
    node_of = {g: i for i, g in enumerate(guids)}
    ports = t.cable_of_port()
    count = t.port_count
    rows: dict[tuple[int, int], tuple[int, int]] = {}          # (switch, lid) -> (dest, cable)
    sw = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        where = f"{source}: line {lineno}"
        m = _HEAD.match(line)
        if m:
            g = int(m.group(1), 16)
            sw = node_of.get(g)
            if sw is None or sw < t.n_hosts:
                raise FormatError(f"{where}: switch guid 0x{g:016x} is not a switch of {t.spec}")
            continue
        m = _ROW.match(line)
        if not m or sw is None:
            continue
        lid, p = int(m.group(1), 16), int(m.group(2))
        pg = _PORTGUID.search(m.group(3))
        if pg is None:
            raise FormatError(f"{where}: {_switch(t, sw)}: LID 0x{lid:04x} has no portguid")
        d = node_of.get(int(pg.group(1), 16))
        if d is None:
            raise FormatError(f"{where}: {_switch(t, sw)}: portguid 0x{int(pg.group(1), 16):016x} is not a "
                              f"port of {t.spec}")
        if p == 255:                                             # OSM_NO_PATH
            continue
        if p > count[sw]:
            raise FormatError(f"{where}: {_switch(t, sw)} has no port {p} (it has {count[sw]}); OpenSM would "
                              "abandon the file and fall back to minhop")
        if p == 0:
            if d != sw:
                raise FormatError(f"{where}: {_switch(t, sw)} sends LID 0x{lid:04x} ({t.names[d]}) to port 0, "
                                  "itself")
            c = -1
        else:
            c = int(ports[sw, p]) if p < ports.shape[1] else -1
            if c < 0:
                raise FormatError(f"{where}: {_switch(t, sw)}: port {p} has no cable")
        rows[(sw, lid)] = (d, c)
    if not rows:
        raise FormatError(f"{source}: no switch tables (no 'Unicast lids ... guid 0x...' rows)")
    key = np.array(list(rows.keys()), dtype=np.int64).reshape(-1, 2)
    val = np.array(list(rows.values()), dtype=np.int64).reshape(-1, 2)
    base = np.full(t.n_nodes, np.iinfo(np.int64).max)
    np.minimum.at(base, val[:, 0], key[:, 1])
    out = np.stack([key[:, 0], val[:, 0], key[:, 1] - base[val[:, 0]], val[:, 1]], 1)
    return out[np.lexsort(out.T[::-1])]


def read_dump(text: str, topology: Topology, fabric: Fabric | None = None, source: str = "<dump>",
              algo: str = "file") -> ForwardingTables:
    """The host-destination tables of a dump (:func:`parse_dump`); hosts' own rows (CAs have no table) are
    their single cable.  Raises as :func:`parse_dump` and
    :meth:`~.tables.ForwardingTables.validate` (missing entries, loops)."""
    t = topology
    nh = t.n_hosts
    rows = parse_dump(text, t, source)
    rows = rows[rows[:, 1] < nh]
    layers = int(rows[:, 2].max(initial=0)) + 1
    if layers > 128:
        raise FormatError(f"{source}: host LIDs spread over {layers} offsets; LMC allows 128")
    table = np.full((layers, t.n_nodes, nh), -1, dtype=np.int32)
    table[rows[:, 2], rows[:, 0], rows[:, 1]] = rows[:, 3]
    csrc = t.src[t.cable_link]
    host_cable = np.flatnonzero(csrc < nh)
    table[:, csrc[host_cable]] = host_cable[None, :, None]
    table[:, np.arange(nh), np.arange(nh)] = -1
    info = {"lmc": lmc_of(layers), "source": source}
    top = missing_top(text)
    if top is not None:
        info["notes"] = [f"{source}: no switch lists LID 0x{top:04x}, the top of every table, a switch's own LID "
                         f"(infiniband-diags 44's dump_lfts/dump_fts leave that row out); the host routes are complete"]
    try:
        return ForwardingTables(algo, t, fabric or Fabric(), table, info=info).validate()
    except A2AError as exc:
        if top is None:
            raise
        raise FormatError(f"{source}: no switch lists LID 0x{top:04x}, the top of every table ({exc}): "
                          "infiniband-diags 44's dump_lfts/dump_fts skip the last 64-LID block when it holds only "
                          "that LID; read the tables with 'python -m runtimes.infiniband.installed' (dump_fts plus "
                          "smpdump for that block)") from None


def missing_top(text: str) -> int | None:
    """The top LID that every switch of a ``dump_fts``/``dump_lfts`` output (headers ``Unicast lids
    [0x0-0xTOP] of switch DR path ...``) lacks a row for, or ``None``: infiniband-diags 44 reads the tables in
    64-entry blocks and skips the last one when it holds only the top LID (docs/infiniband.md, step 5)."""
    tops = set()
    for section in re.split(r"(?m)^(?=Unicast lids)", text):
        m = _FTS_HEAD.match(section)
        if m:
            top = int(m.group(1), 16)
            if re.search(rf"(?m)^0x{top:04x} ", section):
                return None
            tops.add(top)
    return tops.pop() if len(tops) == 1 else None


def lft_file(topology: Topology, fabric: Fabric | None = None, *, path=None, progress=None) -> ForwardingTables:
    """OpenSM's ``file`` engine as a routing engine: the tables of the dump at ``path`` (:func:`read_dump`)."""
    from ..files import read_text

    if path is None:
        raise A2AError("--algo file needs --lft-in DUMP (an opensm-lfts.dump or dump_lfts output)")
    return read_dump(read_text(path, MAX_DUMP_BYTES), topology, fabric, str(path))
