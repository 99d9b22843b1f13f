"""The :class:`Topology` object every stage consumes.

Conventions (relied on throughout the pipeline):

* Nodes are numbered ``0 .. n_nodes-1`` with **hosts first**: node ``i < n_hosts``
  is host/rank ``i``; nodes ``n_hosts ..`` are switches/routers, which forward
  traffic but never source or sink all-to-all traffic.
* Links are directed channels ``src[e] -> dst[e]`` with ``capacity[e]`` in units of
  the fabric's link bandwidth (generators use 1).  An undirected cable is two
  links.  Links are stored sorted by ``(src, dst)``; there are no self-loops and
  no parallel links.
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
        classes=None,
    ) -> "Topology":
        """Build a topology from ``(u, v)`` pairs.

        With ``undirected=True`` each pair is a cable and yields both ``u->v`` and
        ``v->u``; duplicate cables collapse to one (so a torus dimension of size 2
        gives one cable).  ``capacity`` is a scalar or one value per pair.
        Self-loops are dropped.
        """
        n = n_hosts + n_switches
        pairs = np.asarray(list(links), dtype=np.int64).reshape(-1, 2)
        cap = np.broadcast_to(np.asarray(1.0 if capacity is None else capacity, dtype=float), (len(pairs),))
        kinds = np.array(list(classes) if classes is not None else [""] * len(pairs), dtype=object).reshape(-1)
        if undirected:
            pairs = np.concatenate([pairs, pairs[:, ::-1]])
            cap = np.concatenate([cap, cap])
            kinds = np.concatenate([kinds, kinds])
        keep = pairs[:, 0] != pairs[:, 1]
        pairs, cap, kinds = pairs[keep], cap[keep], kinds[keep]
        if len(pairs) and (pairs.min() < 0 or pairs.max() >= n):
            raise FormatError(f"{spec}: link endpoint outside 0..{n - 1}")
        key = pairs[:, 0] * n + pairs[:, 1]
        key, first = np.unique(key, return_index=True)
        if names is None:
            names = tuple([str(i) for i in range(n_hosts)] + [f"sw{i}" for i in range(n_switches)])
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
            links = d["links"]
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
            classes = d.get("classes")
            if classes is not None and (not isinstance(classes, list) or len(classes) != len(links)
                                        or not all(isinstance(c, str) for c in classes)):
                raise FormatError(f"{source}: \"classes\" must be a list of strings, one per link")
            topo = cls.from_links(
                str(d.get("spec", source)), hosts, arr, n_switches=switches, capacity=cap,
                names=d.get("names"), coords=d.get("coords"), notes=notes, undirected=False, classes=classes,
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
