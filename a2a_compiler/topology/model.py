"""The :class:`Topology` object every stage consumes.

Conventions (relied on throughout the pipeline):

* Nodes are numbered ``0 .. n_nodes-1`` with **hosts first**: node ``i < n_hosts``
  is host/rank ``i``; nodes ``n_hosts ..`` are switches/routers, which forward
  traffic but never source or sink all-to-all traffic.
* Links are directed channels ``src[e] -> dst[e]`` with ``capacity[e]`` in units of
  the fabric's link bandwidth (generators use 1).  An undirected cable is two
  links.  Links are stored sorted by ``(src, dst)``; there are no self-loops and
  no parallel links.
* **Cables and ports** (InfiniBand port groups).  Link ``e`` may stand for a
  group of ``cables[e]`` parallel cables (default one); the flow solvers see
  the group's full ``capacity[e]``, while single-path table routing pins one
  cable (one port), each of capacity ``capacity[e] / cables[e]``.  The
  *directed cables* are numbered link by link (``cable_ptr[e] ..
  cable_ptr[e+1]-1``); ``port[k]`` is cable ``k``'s port number at its
  source node.  Cable ``i`` of ``u -> v`` and cable ``i`` of ``v -> u`` are
  one physical cable.  Without explicit ports, a node numbers its cables
  ``1, 2, ..`` in link order (by neighbour id), as a switch numbers its ports.
* ``guids`` (optional) are the fabric's identifiers of the nodes: a
  switch's node GUID, a host's port GUID (InfiniBand), e.g. from
  ``ibnet:PATH``; ``n_ports`` the number of ports each node has (default: the
  highest port number it uses).
* ``notes`` record modelling choices a reader must know (e.g. a Slim Fly whose
  routers double as hosts); they travel with the JSON file.
* ``classes`` optionally names each link's class (``"nvlink"`` for a GPU's NVLink to its
  server's NVSwitch); a :class:`~a2a_compiler.fabric.Fabric` with a bandwidth for a class
  scales those links' capacities (:func:`~a2a_compiler.fabric.apply_link_classes`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import networkx as nx
import numpy as np
import scipy.sparse as sp

from ..errors import FormatError
from ..files import atomic_write, read_json

JSON_FORMAT = "a2a-topology"
JSON_VERSION = 1
#: Size limits that keep a typo (a spec, a file) from exhausting memory (the flow solvers need far less).
MAX_NODES = 100_000
MAX_LINKS = 20_000_000


def _frozen(a, dtype) -> np.ndarray:
    arr = np.array(a, dtype=dtype, copy=True).reshape(-1)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Topology:
    """An immutable directed network of hosts and (optional) switches.

    Build one with :meth:`from_links` (which canonicalises link order), a
    generator in :mod:`a2a_compiler.topology.generators`, or
    :func:`a2a_compiler.topology.from_spec`.
    """

    spec: str
    n_hosts: int
    n_switches: int
    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    names: tuple[str, ...]
    coords: tuple[tuple[int, ...], ...] | None = None
    notes: tuple[str, ...] = ()
    cables: np.ndarray | None = None
    ports: np.ndarray | None = None
    guids: tuple[int, ...] | None = None
    n_ports: np.ndarray | None = None
    classes: tuple[str, ...] = ()   # per link, or empty (every link plain)

    # ----------------------------------------------------------- construction
    @classmethod
    def from_links(
        cls,
        spec: str,
        n_hosts: int,
        links,
        *,
        n_switches: int = 0,
        capacity=None,
        names=None,
        coords=None,
        notes=(),
        undirected: bool = True,
        cables=None,
        ports=None,
        guids=None,
        n_ports=None,
        classes=None,
    ) -> "Topology":
        """Build a topology from ``(u, v)`` pairs.

        With ``undirected=True`` each pair is a cable and yields both ``u->v`` and
        ``v->u``; duplicate cables collapse to one (so a torus dimension of size 2
        gives one cable).  ``capacity`` is a scalar or one value per pair.
        Self-loops are dropped.  ``cables`` (scalar or per pair) makes a pair a
        group of parallel cables; ``ports`` gives, per pair, the port numbers of its
        cables at ``u`` (and, with ``undirected``, a second sequence: at ``v``), as
        ``[(u_ports, v_ports), ...]``; ``guids`` and ``n_ports`` are per node
        (module docstring).
        """
        n = n_hosts + n_switches
        pairs = np.asarray(list(links), dtype=np.int64).reshape(-1, 2)
        cap = np.broadcast_to(np.asarray(1.0 if capacity is None else capacity, dtype=float), (len(pairs),))
        width = np.broadcast_to(np.asarray(1 if cables is None else cables, dtype=np.int64), (len(pairs),))
        kinds = np.array(list(classes) if classes is not None else [""] * len(pairs), dtype=object).reshape(-1)
        if ports is not None:
            ports = [tuple(map(tuple, p)) if undirected else (tuple(p),) for p in ports]
            if len(ports) != len(pairs):
                raise FormatError(f"{spec}: ports must give one entry per link pair")
        pidx = np.arange(len(pairs))
        side = np.zeros(len(pairs), dtype=np.int64)
        if undirected:
            pairs = np.concatenate([pairs, pairs[:, ::-1]])
            cap, width, kinds = np.concatenate([cap, cap]), np.concatenate([width, width]), np.concatenate([kinds, kinds])
            pidx, side = np.concatenate([pidx, pidx]), np.concatenate([side, side + 1])
        keep = pairs[:, 0] != pairs[:, 1]
        pairs, cap, width, kinds = pairs[keep], cap[keep], width[keep], kinds[keep]
        pidx, side = pidx[keep], side[keep]
        if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
            raise FormatError(f"{spec}: link endpoint outside 0..{n - 1}")
        key = pairs[:, 0] * n + pairs[:, 1]
        key, first = np.unique(key, return_index=True)
        if names is None:
            names = tuple([str(i) for i in range(n_hosts)] + [f"sw{i}" for i in range(n_switches)])
        port_arr = None
        if ports is not None:
            groups = [ports[pidx[i]][side[i]] if side[i] < len(ports[pidx[i]]) else () for i in first.tolist()]
            if any(len(g) != w for g, w in zip(groups, width[first].tolist())):
                raise FormatError(f"{spec}: ports must give one port number per cable of each link")
            port_arr = np.array([x for g in groups for x in g], dtype=np.int64)
        return cls(
            spec=spec,
            n_hosts=int(n_hosts),
            n_switches=int(n_switches),
            src=_frozen(key // n, np.int64),
            dst=_frozen(key % n, np.int64),
            capacity=_frozen(cap[first], float),
            names=tuple(names),
            coords=None if coords is None else tuple(tuple(int(x) for x in c) for c in coords),
            notes=tuple(str(x) for x in notes),
            cables=None if cables is None else _frozen(width[first], np.int64),
            ports=None if port_arr is None else _frozen(port_arr, np.int64),
            guids=None if guids is None else tuple(int(g) for g in guids),
            n_ports=None if n_ports is None else _frozen(n_ports, np.int64),
            classes=() if classes is None else tuple(str(c) for c in kinds[first]),
        )

    def __post_init__(self):
        n = self.n_nodes
        if self.n_hosts < 1:
            raise FormatError(f"{self.spec}: a topology needs at least one host")
        if len(self.names) != n or (self.coords is not None and len(self.coords) != n):
            raise FormatError(f"{self.spec}: names/coords must have one entry per node ({n} nodes)")
        if not (len(self.src) == len(self.dst) == len(self.capacity)):
            raise FormatError(f"{self.spec}: src/dst/capacity lengths differ")
        if self.classes and len(self.classes) != len(self.src):
            raise FormatError(f"{self.spec}: classes must name one class per link")
        if np.any(self.capacity < 0) or not np.all(np.isfinite(self.capacity)):
            raise FormatError(f"{self.spec}: link capacities must be finite and >= 0")
        key = self.src * n + self.dst
        if len(key) and (np.any(np.diff(key) <= 0) or np.any(self.src == self.dst)):
            raise FormatError(f"{self.spec}: links must be sorted, unique and loop-free (use Topology.from_links)")
        self._check_cables()

    def _check_cables(self) -> None:
        """Cables, ports, GUIDs and port counts are consistent (module docstring)."""
        if self.cables is not None:
            if len(self.cables) != self.n_links or np.any(self.cables < 1):
                raise FormatError(f"{self.spec}: cables must give one count >= 1 per link")
            rev = self.reverse_link
            has = rev >= 0
            bad = np.flatnonzero(has & (self.cables != self.cables[np.maximum(rev, 0)]))
            if len(bad):
                e = int(bad[0])
                raise FormatError(f"{self.spec}: link {self.names[self.src[e]]} -> {self.names[self.dst[e]]} has "
                                  f"{self.cables[e]} cables but its reverse {self.cables[rev[e]]}")
        if self.ports is not None:
            if len(self.ports) != self.n_cables or np.any(self.ports < 1) or np.any(self.ports > 255):
                raise FormatError(f"{self.spec}: ports must give one port number in 1..255 per cable")
            node = self.src[self.cable_link]
            key = node * 256 + self.ports
            uniq, count = np.unique(key, return_counts=True)
            if np.any(count > 1):
                k = int(uniq[np.argmax(count > 1)])
                raise FormatError(f"{self.spec}: node {self.names[k // 256]} uses port {k % 256} for two cables")
        if self.guids is not None:
            if len(self.guids) != self.n_nodes or any(not (0 < x < 1 << 64) for x in self.guids) \
                    or len(set(self.guids)) != len(self.guids):
                raise FormatError(f"{self.spec}: guids must give one distinct 64-bit GUID > 0 per node")
        if self.n_ports is not None:
            if len(self.n_ports) != self.n_nodes or np.any(self.n_ports < self.ports_used):
                raise FormatError(f"{self.spec}: n_ports must give each node at least the ports its cables use")

    # ------------------------------------------------------------- cables
    @cached_property
    def link_cables(self) -> np.ndarray:
        """Cables in each link's port group (ones when the topology has no parallel cables)."""
        return np.ones(self.n_links, dtype=np.int64) if self.cables is None else self.cables

    @cached_property
    def cable_ptr(self) -> np.ndarray:
        """Link ``e``'s directed cables are ``cable_ptr[e] .. cable_ptr[e+1]-1``."""
        return np.concatenate([[0], np.cumsum(self.link_cables)]).astype(np.int64)

    @property
    def n_cables(self) -> int:
        """Number of directed cables (equals :attr:`n_links` without parallel cables)."""
        return int(self.cable_ptr[-1])

    @cached_property
    def cable_link(self) -> np.ndarray:
        """The link of every directed cable."""
        return np.repeat(np.arange(self.n_links), self.link_cables)

    @cached_property
    def cable_capacity(self) -> np.ndarray:
        """Each directed cable's share of its group's capacity."""
        return self.capacity[self.cable_link] / self.link_cables[self.cable_link]

    @cached_property
    def cable_port(self) -> np.ndarray:
        """Port number of every directed cable at its source node (explicit, or numbered in link order)."""
        if self.ports is not None:
            return self.ports
        node = self.src[self.cable_link]
        first = np.searchsorted(node, np.arange(self.n_nodes))
        return np.arange(self.n_cables) - first[node] + 1

    @cached_property
    def reverse_link(self) -> np.ndarray:
        """Index of link ``v -> u`` for every link ``u -> v`` (``-1`` where there is none)."""
        key = self._link_keys
        if not len(key):
            return np.zeros(0, dtype=np.int64)
        want = self.dst * self.n_nodes + self.src
        pos = np.minimum(np.searchsorted(key, want), len(key) - 1)
        return np.where(key[pos] == want, pos, -1)

    @cached_property
    def cable_reverse(self) -> np.ndarray:
        """The same physical cable in the other direction (``-1`` for a one-way link)."""
        link = self.cable_link
        rev = self.reverse_link[link]
        within = np.arange(self.n_cables) - self.cable_ptr[link]
        return np.where(rev >= 0, self.cable_ptr[np.maximum(rev, 0)] + within, -1)

    @cached_property
    def ports_used(self) -> np.ndarray:
        """The highest port number each node's cables use (0 for none)."""
        out = np.zeros(self.n_nodes, dtype=np.int64)
        np.maximum.at(out, self.src[self.cable_link], self.cable_port)
        return out

    @property
    def port_count(self) -> np.ndarray:
        """Ports each node has: :attr:`n_ports`, else the highest port it uses."""
        return self.ports_used if self.n_ports is None else self.n_ports

    def cable_of_port(self) -> np.ndarray:
        """``(n_nodes, max port + 1)`` table: the directed cable leaving node ``u`` by port ``p`` (``-1``: none)."""
        table = np.full((self.n_nodes, int(self.ports_used.max(initial=0)) + 1), -1, dtype=np.int64)
        table[self.src[self.cable_link], self.cable_port] = np.arange(self.n_cables)
        return table

    # ------------------------------------------------------------- properties
    @property
    def n_nodes(self) -> int:
        """Hosts plus switches."""
        return self.n_hosts + self.n_switches

    @property
    def n_links(self) -> int:
        """Number of directed links."""
        return len(self.src)

    def out_degree(self) -> np.ndarray:
        """Links leaving each node."""
        return np.bincount(self.src, minlength=self.n_nodes)

    def in_degree(self) -> np.ndarray:
        """Links entering each node."""
        return np.bincount(self.dst, minlength=self.n_nodes)

    @cached_property
    def _link_keys(self) -> np.ndarray:
        """``src·n_nodes + dst`` per link: sorted, since :meth:`from_links` orders links by (src, dst)."""
        return self.src * self.n_nodes + self.dst

    def link_index(self, u: int, v: int) -> int:
        """Index of link ``u->v`` (O(log E)); raises ``KeyError`` if there is none."""
        key = self._link_keys
        i = int(np.searchsorted(key, u * self.n_nodes + v))
        if i < len(key) and key[i] == u * self.n_nodes + v:
            return i
        raise KeyError((u, v))

    def adjacency(self, weight: str = "capacity") -> sp.csr_array:
        """Sparse ``n_nodes x n_nodes`` matrix with capacities (or ones) on links."""
        data = self.capacity if weight == "capacity" else np.ones(self.n_links)
        return sp.csr_array((data, (self.src, self.dst)), shape=(self.n_nodes, self.n_nodes))

    def incidence(self) -> sp.csr_array:
        """Node-link incidence matrix: +1 where a link enters a node, -1 where it leaves."""
        e = np.arange(self.n_links)
        data = np.concatenate([np.ones(self.n_links), -np.ones(self.n_links)])
        return sp.csr_array(
            (data, (np.concatenate([self.dst, self.src]), np.concatenate([e, e]))),
            shape=(self.n_nodes, self.n_links),
        )

    # ------------------------------------------------------------ conversions
    @classmethod
    def from_adjacency(cls, matrix, n_hosts: int | None = None, spec: str = "adjacency") -> "Topology":
        """Build from a (sparse) matrix: entry ``[u, v] > 0`` is a link ``u->v`` of that capacity.

        The first ``n_hosts`` rows are hosts (default: all), the rest switches.
        """
        coo = sp.coo_array(matrix)
        n = coo.shape[0]
        nh = n if n_hosts is None else int(n_hosts)
        keep = coo.data != 0
        pairs = np.stack([coo.row[keep], coo.col[keep]], 1)
        return cls.from_links(spec, nh, pairs, n_switches=n - nh, capacity=coo.data[keep], undirected=False)

    def is_symmetric(self) -> bool:
        """True when every link has a reverse link of the same capacity (the graph is made of cables)."""
        a = self.adjacency()
        return (a != a.T).nnz == 0

    def to_networkx(self) -> nx.DiGraph:
        """A ``networkx.DiGraph`` with ``capacity`` on edges and ``host`` on nodes."""
        g = nx.DiGraph(spec=self.spec, notes=self.notes)
        for i, name in enumerate(self.names):
            attrs = {"name": name, "host": i < self.n_hosts}
            if self.coords is not None:
                attrs["coord"] = self.coords[i]
            g.add_node(i, **attrs)
        g.add_weighted_edges_from(zip(self.src.tolist(), self.dst.tolist(), self.capacity.tolist()), weight="capacity")
        return g

    @classmethod
    def from_networkx(cls, g: nx.Graph, spec: str = "networkx", hosts=None) -> "Topology":
        """Convert a networkx graph; undirected edges become two links.

        ``hosts`` selects the host nodes (default: nodes whose ``host`` attribute is
        not False).  Edge attribute ``capacity`` defaults to 1.
        """
        nodes = list(g.nodes)
        if hosts is None:
            hosts = [v for v in nodes if g.nodes[v].get("host", True)]
        host_set = set(hosts)
        order = list(hosts) + [v for v in nodes if v not in host_set]
        index = {v: i for i, v in enumerate(order)}
        edges = [(index[u], index[v], d.get("capacity", 1.0)) for u, v, d in g.edges(data=True)]
        links = [(u, v) for u, v, _ in edges]
        caps = [c for _, _, c in edges]
        return cls.from_links(
            spec,
            len(hosts),
            links,
            n_switches=len(order) - len(hosts),
            capacity=caps if caps else None,
            names=[str(g.nodes[v].get("name", v)) for v in order],
            undirected=not g.is_directed(),
        )

    def to_json_dict(self) -> dict:
        """The JSON topology format (docs/formats.md)."""
        d = {
            "format": JSON_FORMAT,
            "version": JSON_VERSION,
            "spec": self.spec,
            "hosts": self.n_hosts,
            "switches": self.n_switches,
            "names": list(self.names),
            "links": [[int(u), int(v), float(c)] for u, v, c in zip(self.src, self.dst, self.capacity)],
        }
        if self.coords is not None:
            d["coords"] = [list(c) for c in self.coords]
        if self.notes:
            d["notes"] = list(self.notes)
        if self.cables is not None:
            d["cables"] = self.cables.tolist()
        if self.ports is not None:
            d["ports"] = [self.ports[a:b].tolist() for a, b in zip(self.cable_ptr[:-1], self.cable_ptr[1:])]
        if self.guids is not None:
            d["guids"] = [f"0x{g:016x}" for g in self.guids]
        if self.n_ports is not None:
            d["n_ports"] = self.n_ports.tolist()
        if self.classes:
            d["classes"] = list(self.classes)
        return d

    @classmethod
    def from_json_dict(cls, d: dict, source: str = "<json>") -> "Topology":
        """Build from the JSON topology format; problems raise :class:`FormatError` naming ``source``."""
        if not isinstance(d, dict) or d.get("format") != JSON_FORMAT:
            raise FormatError(f"{source}: not an {JSON_FORMAT} file (missing \"format\": \"{JSON_FORMAT}\")")
        try:
            hosts, switches = int(d["hosts"]), int(d.get("switches", 0))
            if switches < 0:
                raise FormatError(f"{source}: \"switches\" must be >= 0, got {switches}")
            if hosts + switches > MAX_NODES:
                raise FormatError(f"{source}: {hosts + switches} nodes, over the limit of {MAX_NODES} "
                                  f"(a2a_compiler.topology.model.MAX_NODES)")
            links = d["links"]
            if not isinstance(links, list) or len(links) > MAX_LINKS:
                raise FormatError(f"{source}: \"links\" must be a list of at most {MAX_LINKS} links")
            for i, link in enumerate(links):
                if len(link) != 3 or any(isinstance(x, (bool, str)) for x in link):
                    raise FormatError(f"{source}: links[{i}] must be [src, dst, capacity] numbers, got {link!r}")
            ends = np.array([[l[0], l[1]] for l in links], dtype=float).reshape(-1, 2)
            if not np.all(ends == np.round(ends)):
                raise FormatError(f"{source}: link endpoints must be integers")
            arr = ends.astype(np.int64)
            cap = np.array([l[2] for l in links], dtype=float)
            if not isinstance(d.get("names", []), list):
                raise FormatError(f"{source}: \"names\" must be a list of strings")
            notes = d.get("notes", [])
            if not isinstance(notes, list):
                raise FormatError(f"{source}: \"notes\" must be a list of strings")
            cables, ports, guids = d.get("cables"), d.get("ports"), d.get("guids")
            if ports is not None and not (isinstance(ports, list) and all(isinstance(p, list) for p in ports)):
                raise FormatError(f"{source}: \"ports\" must list, per link, the port numbers of its cables")
            if guids is not None:
                if not isinstance(guids, list) or not all(isinstance(g, str) for g in guids):
                    raise FormatError(f"{source}: \"guids\" must be a list of hex strings, one per node")
                guids = [int(g, 16) for g in guids]
            classes = d.get("classes")
            if classes is not None and (not isinstance(classes, list) or len(classes) != len(links)
                                        or not all(isinstance(c, str) for c in classes)):
                raise FormatError(f"{source}: \"classes\" must be a list of strings, one per link")
            topo = cls.from_links(
                str(d.get("spec", source)), hosts, arr, n_switches=switches, capacity=cap,
                names=d.get("names"), coords=d.get("coords"), notes=notes, undirected=False,
                cables=cables, ports=ports, guids=guids, n_ports=d.get("n_ports"), classes=classes,
            )
        except FormatError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"{source}: bad or missing field: {exc}") from None
        if topo.n_links != len(arr):
            raise FormatError(f"{source}: duplicate links or self-loops in \"links\"")
        return topo

    def save(self, path) -> Path:
        """Write the JSON format atomically (see docs/formats.md)."""
        return atomic_write(path, json.dumps(self.to_json_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path) -> "Topology":
        """Read the JSON format (for edge lists too, use :func:`.files.load_topology_file`)."""
        return cls.from_json_dict(read_json(path), str(path))
