"""Topology files for ``file:PATH``: our JSON format or a plain edge list.

The edge-list format (docs/formats.md, "Topology edge list"):

* one cable per line: ``u v [capacity]`` (two links of that capacity, default 1);
* ``#`` starts a comment; blank lines are ignored; fields are whitespace-separated;
* node names are arbitrary tokens (no whitespace, no ``#``);
* ``directed`` on a line of its own, before the first link line, makes every
  link line one arc ``u -> v``;
* ``switch NAME [NAME ...]`` marks nodes as switches (they forward only);
* hosts are numbered by their names' integer values when every host name is a
  non-negative integer, else in order of first appearance; switches follow, in
  order of first appearance.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import FormatError
from ..files import parse_json, read_text
from .metrics import require_connected
from .model import Topology

#: Largest topology file we read (bytes).
MAX_TOPOLOGY_BYTES = 512 * 1024 * 1024


def parse_edge_list(text: str, source: str = "<edge list>") -> Topology:
    """Parse the edge-list format above; errors name the line and field at fault."""
    directed = False
    switches: dict[str, int] = {}   # name -> line first declared
    seen: dict[str, None] = {}       # node names in order of first appearance
    edges: dict[tuple[str, str], int] = {}  # (u, v) -> line
    links: list[tuple[str, str, float]] = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        fields = raw.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{source}: line {lineno}"
        if fields[0] == "directed":
            if len(fields) != 1:
                raise FormatError(f"{where}: 'directed' takes no fields")
            if links:
                raise FormatError(f"{where}: 'directed' must come before the first link line")
            directed = True
            continue
        if fields[0] == "switch":
            if len(fields) < 2:
                raise FormatError(f"{where}: 'switch' needs at least one node name")
            for name in fields[1:]:
                switches.setdefault(name, lineno)
                seen.setdefault(name)
            continue
        if len(fields) not in (2, 3):
            raise FormatError(f"{where}: expected 'u v [capacity]', got {len(fields)} fields")
        u, v = fields[0], fields[1]
        if u == v:
            raise FormatError(f"{where}: self-loop {u} {v}")
        cap = 1.0
        if len(fields) == 3:
            try:
                cap = float(fields[2])
            except ValueError:
                raise FormatError(f"{where}: field 3 (capacity) {fields[2]!r} is not a number") from None
            if not (cap > 0 and math.isfinite(cap)):
                raise FormatError(f"{where}: field 3 (capacity) must be positive and finite, got {fields[2]!r}")
        key = (u, v) if directed else tuple(sorted((u, v)))
        if key in edges:
            raise FormatError(f"{where}: duplicate {'arc' if directed else 'cable'} {u} {v} (first on line {edges[key]})")
        edges[key] = lineno
        seen.setdefault(u)
        seen.setdefault(v)
        links.append((u, v, cap))
    if not links:
        raise FormatError(f"{source}: no link lines ('u v [capacity]')")
    hosts = [name for name in seen if name not in switches]
    if all(h.isascii() and h.isdigit() for h in hosts):
        hosts.sort(key=int)
    order = hosts + [name for name in seen if name in switches]
    index = {name: i for i, name in enumerate(order)}
    return Topology.from_links(
        f"file:{source}", len(hosts), [(index[u], index[v]) for u, v, _ in links],
        n_switches=len(order) - len(hosts), capacity=[c for _, _, c in links], names=order,
        undirected=not directed,
    )


def load_topology_file(path) -> Topology:
    """Read a JSON topology (first non-blank character ``{``) or an edge list.

    Raises :class:`FormatError` for a malformed file and
    :class:`~a2a_compiler.errors.DisconnectedError` if some host cannot reach another.
    """
    path = Path(path)
    text = read_text(path, MAX_TOPOLOGY_BYTES)
    if text.lstrip().startswith("{"):
        topo = Topology.from_json_dict(parse_json(text, str(path)), str(path))
    else:
        topo = parse_edge_list(text, str(path))
    if topo.n_hosts < 2:
        raise FormatError(f"{path}: needs at least 2 hosts (non-switch nodes), found {topo.n_hosts}")
    require_connected(topo)
    return topo
