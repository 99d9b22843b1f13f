"""Automorphism groups of the solve graph, to quotient the flow LPs by symmetry.

The all-to-all flow LPs (Basu et al. eqs. 1–9, 15–20) are invariant under every
automorphism ``γ`` of the solve graph that maps hosts to hosts and keeps link
capacities: moving every source's flow by ``γ`` gives another feasible flow
with the same ``F``.  Averaging an optimum over a group ``Γ`` of automorphisms
therefore gives a ``Γ``-invariant optimum, whose flow from source ``γ(r)`` is
``γ`` applied to the flow from ``r``.  When ``Γ`` acts *freely* on the hosts
(no host fixed by any ``γ != id``), the LP only needs

* one source per host orbit (``N/|Γ|`` flows instead of ``N``), and
* one capacity row per link orbit: the load of a link orbit's representative
  ``ε`` is ``Σ_r Σ_γ f_r(γ⁻¹ε)``, i.e. flow ``f_r(e)`` counts ``|Γ|/|orbit(e)|``
  times in the row of ``orbit(e)`` (:attr:`Symmetry.link_mult`), and every
  other link of the orbit carries the same load.

This *quotient LP* has the full LP's optimum.  Its capacity duals, spread over
each orbit (:meth:`Symmetry.lengths`), are ``Γ``-invariant link lengths that
are optimal for the full LP's dual, so the weak-duality certificate
(:func:`~a2a_compiler.solve.certificate.dual_upper_bound`) stays as tight as
without the reduction; the primal is expanded to every source
(:meth:`Symmetry.expand_routing`) and certified on the full graph.

Automorphisms are never assumed from a family's name.  Candidate permutations
come from two families and each is checked against the link set and
capacities (:func:`automorphisms`):

* ``cyclic``: ``i -> ±i + b (mod n)`` on node ids of a switchless topology —
  rotations and reflections of rings, circulants and complete graphs, and the
  generalized Kautz digraph GK(N, d) (arcs ``i -> -d·i - j``), where
  ``i -> i + c`` is an automorphism iff ``(d+1)·c ≡ 0 (mod N)`` and
  ``i -> -i + b`` iff ``(d+1)·(b+1) ≡ 0 (mod N)``; so every GK(N, d) has the
  reversal ``i -> -i - 1``, and GK(1000, 4) a dihedral group of order 10;
* ``coordinates``: translations of the coordinate group ``Z_k1 x Z_k2 x ...`` of
  topologies with coordinates (tori; hypercubes, where it is XOR), which act
  regularly: one source's flow gives all.

Of the verified groups the largest acting freely on the hosts is used (a
``cyclic`` group with reflections that fix a host falls back to its
rotations).  Host–NIC augmented graphs (:func:`a2a_compiler.fabric.augment`)
inherit each base permutation on their NIC nodes and are checked again.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import A2AError
from ..topology.model import Topology
from .certificate import Routing

#: Candidates screened at once against a sample of links before the full check (bounds memory).
_BATCH = 4096
_SAMPLE = 64
#: Largest group stored, in permutation entries ``|Γ|·(nodes + links)`` (8 bytes each).
MAX_GROUP_ENTRIES = 100_000_000
#: ``symmetry="auto"`` quotients an LP only above this many columns (plain).  Smaller LPs
#: solve in well under a second and keep the solutions (and chunkings) they always had:
#: the quotient's vertex may differ, e.g. tsMCF on hypercube:3 chunks exactly at C=6
#: instead of C=3.
AUTO_MIN_COLUMNS = 20_000
#: Values of the ``symmetry`` option.
SYMMETRY_MODES = ("auto", "on", "off")


def wanted(mode: str | bool, plain_columns: int) -> bool:
    """Whether to look for symmetry: ``"on"``/``True``, ``"off"``/``False``, or
    ``"auto"`` when the plain LP has more than :data:`AUTO_MIN_COLUMNS` columns."""
    if mode in (True, False):
        return bool(mode)
    if mode not in SYMMETRY_MODES:
        raise A2AError(f"unknown symmetry mode {mode!r}; choose one of {', '.join(SYMMETRY_MODES)}")
    return mode == "on" or (mode == "auto" and plain_columns > AUTO_MIN_COLUMNS)


@dataclass(frozen=True, eq=False)
class Symmetry:
    """A group ``Γ`` of automorphisms acting freely on the hosts, and its orbits.

    ``node_perm[g]`` / ``link_perm[g]`` map node / link ids under element ``g``
    (element 0 is the identity).  Host ``s`` is ``node_perm[source_elem[s]][reps[source_rep[s]]]``.
    ``link_class[e]`` numbers the orbit of link ``e`` (classes in order of
    their smallest link) and ``link_mult[e] = |Γ| / |orbit(e)|``; likewise
    ``node_class`` / ``node_mult`` / ``class_node`` for nodes.
    """

    family: str
    node_perm: np.ndarray
    link_perm: np.ndarray
    reps: np.ndarray
    source_rep: np.ndarray
    source_elem: np.ndarray
    link_class: np.ndarray
    link_mult: np.ndarray
    class_link: np.ndarray
    node_class: np.ndarray
    node_mult: np.ndarray
    class_node: np.ndarray

    @property
    def order(self) -> int:
        return len(self.node_perm)

    @property
    def n_classes(self) -> int:
        return len(self.class_link)

    @classmethod
    def of_group(cls, graph: Topology, family: str, node_perm: np.ndarray, link_perm: np.ndarray) -> "Symmetry":
        """Orbits of a group (rows of the permutation arrays, identity first) acting freely on hosts."""
        nh, G = graph.n_hosts, len(node_perm)
        source_rep = np.full(nh, -1, dtype=np.int64)
        source_elem = np.zeros(nh, dtype=np.int64)
        reps = []
        for r in range(nh):
            if source_rep[r] < 0:
                images = node_perm[:, r]
                source_rep[images] = len(reps)
                source_elem[images] = np.arange(G)
                reps.append(r)
        return cls(family, node_perm, link_perm, np.asarray(reps, dtype=np.int64), source_rep, source_elem,
                   *_orbits(link_perm), *_orbits(node_perm))

    @classmethod
    def trivial(cls, graph: Topology) -> "Symmetry":
        """The identity alone: every host its own orbit (the plain LP)."""
        return cls.of_group(graph, "none", np.arange(graph.n_nodes)[None, :], np.arange(graph.n_links)[None, :])

    def stabiliser(self, demand) -> "Symmetry":
        """The subgroup of elements ``γ`` with ``D[γ(s), γ(d)] = D[s, d]`` for every host pair (checked).

        The LPs with demand ``D`` are invariant under exactly these; the stabiliser of ``D``
        is a subgroup, so it still acts freely on the hosts.  The identity alone gives
        :meth:`trivial`-like orbits (one source per host).
        """
        keep = [g for g in range(self.order) if demand.invariant_under(self.node_perm[g])]
        if len(keep) == self.order:
            return self
        graph_hosts = len(self.source_rep)
        fake = _HostCount(graph_hosts)
        family = "none" if len(keep) == 1 else f"{self.family}, stabiliser of the demand, order {len(keep)}"
        return Symmetry.of_group(fake, family, self.node_perm[keep], self.link_perm[keep])

    def summary(self) -> dict:
        return {"family": self.family, "order": self.order, "source_orbits": len(self.reps),
                "link_orbits": self.n_classes}

    def expand_sources(self, values: np.ndarray, axis_map) -> np.ndarray:
        """Per-source arrays from per-representative ones: ``out[s] = γ_s`` applied to ``values[rep(s)]``.

        ``axis_map(g)`` gives, for element ``g``, the index array that moves the
        last axis of a representative's values (``node_perm[g]`` or ``link_perm[g]``).
        """
        values = np.asarray(values)
        out = np.zeros((len(self.source_rep), *values.shape[1:]), dtype=values.dtype)
        for s, (r, g) in enumerate(zip(self.source_rep.tolist(), self.source_elem.tolist())):
            out[s][..., axis_map(g)] = values[r]
        return out

    def lengths(self, class_duals: np.ndarray) -> np.ndarray:
        """Link lengths from the quotient LP's capacity duals (one per link orbit), ``Γ``-invariant."""
        return self.link_mult * np.abs(np.asarray(class_duals, dtype=float))[self.link_class]

    def expand_routing(self, routing: Routing, n_hosts: int) -> Routing:
        """Paths of every source from the paths of the orbit representatives.

        Source ``s = γ(r)`` gets ``γ`` applied to each path of ``r`` (links and
        destination); the result is in source order.
        """
        rep_index = np.full(n_hosts, -1, dtype=np.int64)
        rep_index[self.reps] = np.arange(len(self.reps))
        owner = rep_index[routing.commodity // n_hosts]
        order = np.argsort(owner, kind="stable")
        start = np.searchsorted(owner[order], np.arange(len(self.reps) + 1))
        parts = []
        for s in range(n_hosts):
            r, g = int(self.source_rep[s]), int(self.source_elem[s])
            sub = routing.select(order[start[r]:start[r + 1]])
            dest = self.node_perm[g][sub.commodity % n_hosts]
            parts.append(Routing(s * n_hosts + dest, sub.weight, sub.ptr, self.link_perm[g][sub.links]))
        return Routing.concat(parts)


@dataclass(frozen=True)
class _HostCount:
    """What :meth:`Symmetry.of_group` reads of a graph: its host count."""

    n_hosts: int


def _orbits(perm: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(class, multiplicity |Γ|/|orbit|, first member of each class)`` of the points ``perm`` acts on."""
    first = perm.min(axis=0)                            # smallest point of each point's orbit
    members, klass, size = np.unique(first, return_inverse=True, return_counts=True)
    return klass.astype(np.int64), (len(perm) // size)[klass].astype(float), members.astype(np.int64)


def _link_keys(graph: Topology) -> np.ndarray:
    return graph.src * graph.n_nodes + graph.dst


def automorphisms(graph: Topology, batches) -> tuple[np.ndarray, np.ndarray]:
    """The candidate node permutations that are automorphisms of ``graph``, with their link maps.

    ``batches`` yields arrays of candidates (one permutation of the node ids
    per row).  A candidate qualifies if it maps hosts to hosts and every link
    ``u -> v`` to a link ``p(u) -> p(v)`` of the same capacity (links are
    unique, so this is a bijection of the link set); a sample of links screens
    each batch first.  Returns ``(node_perm, link_perm)`` in candidate order,
    or nothing if the group would exceed :data:`MAX_GROUP_ENTRIES`.
    """
    n, nh, E = graph.n_nodes, graph.n_hosts, graph.n_links
    key = _link_keys(graph)
    last = max(E - 1, 0)
    sample = np.linspace(0, last, min(E, _SAMPLE)).astype(np.int64)
    found_nodes, found_links = [], []
    for batch in batches:
        k = batch[:, graph.src[sample]] * n + batch[:, graph.dst[sample]]
        idx = np.minimum(np.searchsorted(key, k), last)
        ok = (np.all(batch[:, :nh] < nh, axis=1) & np.all(key[idx] == k, axis=1)
              & np.all(graph.capacity[idx] == graph.capacity[sample], axis=1))
        for p in batch[ok]:
            k = p[graph.src] * n + p[graph.dst]
            idx = np.minimum(np.searchsorted(key, k), last)
            if np.array_equal(key[idx], k) and np.array_equal(graph.capacity[idx], graph.capacity):
                found_nodes.append(p)
                found_links.append(idx)
        if len(found_nodes) * (n + E) > MAX_GROUP_ENTRIES:
            found_nodes = []
            break
    if not found_nodes:
        return np.zeros((0, n), np.int64), np.zeros((0, E), np.int64)
    return np.stack(found_nodes), np.stack(found_links)


def _batched(count: int, make):
    """``make(rows)`` for consecutive index ranges of at most :data:`_BATCH` rows."""
    for b in range(0, count, _BATCH):
        yield make(np.arange(b, min(b + _BATCH, count)))


def cyclic_candidates(topology: Topology, reflections: bool = True):
    """Batches of ``i -> i + b`` (and with ``reflections`` ``i -> -i - 1 + b``) mod ``n``, identity first.

    Switchless topologies only (node ids are host ids).
    """
    n = topology.n_nodes
    if topology.n_switches:
        return
    i = np.arange(n)
    yield from _batched(n, lambda b: (i[None, :] + b[:, None]) % n)
    if reflections:
        yield from _batched(n, lambda b: (b[:, None] - i[None, :] - 1) % n)


def coordinate_candidates(topology: Topology):
    """Batches of the translations of the coordinate group ``Z_k1 x ... x Z_km``, identity first.

    ``k`` is the largest coordinate + 1 per axis; nothing unless the
    coordinates enumerate that whole group exactly once.
    """
    n = topology.n_nodes
    if topology.coords is None or topology.n_switches:
        return
    x = np.asarray(topology.coords, dtype=np.int64).reshape(n, -1)
    radix = x.max(axis=0) + 1
    strides = np.concatenate([np.cumprod(radix[::-1])[::-1][1:], [1]])
    index = x @ strides
    if int(np.prod(radix)) != n or len(np.unique(index)) != n:
        return
    node_of = np.empty(n, dtype=np.int64)
    node_of[index] = np.arange(n)
    by_index = x[node_of]
    yield from _batched(n, lambda b: node_of[((x[None, :, :] + by_index[b][:, None, :]) % radix) @ strides])


def _lift(candidates: np.ndarray, node_origin: np.ndarray) -> np.ndarray:
    """Extend base-node permutations to a graph whose node ``k`` copies base node ``node_origin[k]``.

    Copies of one base node are told apart by their rank among that node's
    copies (host, then its NIC nodes in order); a permutation maps the ``j``-th
    copy of ``u`` to the ``j``-th copy of ``p(u)``.
    """
    order = np.lexsort((np.arange(len(node_origin)), node_origin))
    first = np.searchsorted(node_origin[order], node_origin[order], side="left")
    rank = np.empty(len(node_origin), dtype=np.int64)
    rank[order] = np.arange(len(node_origin)) - first
    table = {(int(o), int(r)): k for k, (o, r) in enumerate(zip(node_origin, rank))}
    width = int(rank.max()) + 1
    lookup = np.full((int(node_origin.max()) + 1, width), -1, dtype=np.int64)
    for (o, r), k in table.items():
        lookup[o, r] = k
    lifted = lookup[candidates[:, node_origin], rank[None, :]]
    return lifted[np.all(lifted >= 0, axis=1)]


def _acts_freely(node_perm: np.ndarray, n_hosts: int) -> bool:
    hosts = np.arange(n_hosts)
    return not np.any(node_perm[1:, :n_hosts] == hosts[None, :])


def find_symmetry(topology: Topology, graph: Topology | None = None,
                  node_origin: np.ndarray | None = None) -> Symmetry:
    """The largest checked automorphism group of ``graph`` acting freely on its hosts.

    ``graph`` (default ``topology``) is the solve graph; when it is an
    augmentation of ``topology``, ``node_origin`` maps its nodes to base nodes.
    Returns :meth:`Symmetry.trivial` when no candidate family yields a group of
    order > 1.
    """
    graph = topology if graph is None else graph
    families = (("rotations and reflections", cyclic_candidates(topology)),
                ("rotations", cyclic_candidates(topology, reflections=False)),
                ("coordinate translations", coordinate_candidates(topology)))
    best = None
    for family, batches in families:
        if node_origin is not None:
            origin = np.asarray(node_origin, dtype=np.int64)
            batches = (_lift(b, origin) for b in batches)
        nodes, links = automorphisms(graph, batches)     # the verified candidates of a family form a group
        if len(nodes) > 1 and _acts_freely(nodes, graph.n_hosts) and (best is None or len(nodes) > len(best[1])):
            best = (family, nodes, links)
    if best is None:
        return Symmetry.trivial(graph)
    family, nodes, links = best
    return Symmetry.of_group(graph, f"{family}, order {len(nodes)}", nodes, links)
