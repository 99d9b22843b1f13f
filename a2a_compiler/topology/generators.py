"""Topology generators, one documented function per family.

Definitions follow ``shared/reference/topologies.md`` exactly.  Every generator
returns a :class:`~a2a_compiler.topology.model.Topology` with unit capacities and
hosts numbered first.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from ..errors import SpecError
from .gf import field, prime_power
from .model import MAX_LINKS, MAX_NODES, Topology


def power(base: int, exp: int) -> int:
    """``base ** exp``, or ``MAX_NODES + 1`` as soon as it exceeds :data:`MAX_NODES` (a size check of a spec
    like ``hypercube:100000000000`` must not compute a 12 GB integer)."""
    if base <= 1 or exp <= 0:
        return base ** max(exp, 0)
    result = 1
    for _ in range(exp):
        result *= base
        if result > MAX_NODES:
            return MAX_NODES + 1
    return result


def _require(cond: bool, param: str, rule: str, spec: str) -> None:
    if not cond:
        raise SpecError(f"{spec}: parameter {param} {rule}")


def complete(n: int) -> Topology:
    """Complete graph K_n: every ordered pair of hosts is linked."""
    spec = f"complete:{n}"
    _require(2 <= n and n * (n - 1) <= MAX_LINKS, "N", f"must be >= 2 with N*(N-1) <= {MAX_LINKS}", spec)
    i, j = np.triu_indices(n, 1)
    return Topology.from_links(spec, n, np.stack([i, j], 1))


def ring(n: int) -> Topology:
    """Bidirectional ring C_n (n >= 3)."""
    spec = f"ring:{n}"
    _require(3 <= n <= MAX_NODES, "N", f"must be in 3..{MAX_NODES}", spec)
    i = np.arange(n)
    return Topology.from_links(spec, n, np.stack([i, (i + 1) % n], 1))


def complete_bipartite(n: int) -> Topology:
    """Complete bipartite K_{n,n}: hosts 0..n-1 on one side, n..2n-1 on the other."""
    spec = f"bipartite:{n}"
    _require(1 <= n and 2 * n * n <= MAX_LINKS, "n", f"must be >= 1 with 2n^2 <= {MAX_LINKS}", spec)
    i, j = np.meshgrid(np.arange(n), np.arange(n, 2 * n), indexing="ij")
    return Topology.from_links(spec, 2 * n, np.stack([i.ravel(), j.ravel()], 1))


def _hypercube_pairs(d: int) -> np.ndarray:
    i = np.repeat(np.arange(2**d), d)
    bit = np.tile(np.arange(d), 2**d)
    j = i ^ (1 << bit)
    keep = i < j
    return np.stack([i[keep], j[keep]], 1)


def hypercube(d: int) -> Topology:
    """Hypercube Q_d: 2^d hosts, i ~ j iff popcount(i xor j) = 1."""
    spec = f"hypercube:{d}"
    _require(1 <= d and power(2, d) <= MAX_NODES, "d", f"must be in 1..16 (2^d <= {MAX_NODES} hosts)", spec)
    return Topology.from_links(spec, 2**d, _hypercube_pairs(d), coords=[tuple((i >> b) & 1 for b in range(d)) for i in range(2**d)])


def twisted_hypercube(d: int) -> Topology:
    """Twisted d-cube: Q_d with links 0-1 and 2-3 replaced by 0-3 and 1-2.

    d-regular with diameter d-1 for d >= 3.
    """
    spec = f"twisted-hypercube:{d}"
    _require(3 <= d and power(2, d) <= MAX_NODES, "d", f"must be in 3..16 (2^d <= {MAX_NODES} hosts)", spec)
    pairs = {tuple(p) for p in _hypercube_pairs(d).tolist()}
    pairs -= {(0, 1), (2, 3)}
    pairs |= {(0, 3), (1, 2)}
    return Topology.from_links(spec, 2**d, sorted(pairs))


def torus(dims: tuple[int, ...], p: int = 0) -> Topology:
    """Mixed-radix torus k1 x k2 x ...: neighbours differ by ±1 mod k_m in one dimension.

    A dimension of size 2 gives one cable (not two); a dimension of size 1 gives none.
    Node ids are row-major over the coordinates (last dimension fastest).  With
    ``p > 0`` the torus nodes are routers (switches) carrying ``p`` hosts each,
    as in an InfiniBand torus (router ``r`` is node ``p * N + r``); ``coords`` are
    then given for the routers, hosts get their router's, and a router's ports
    are its hosts' (``1..p``), then dimension by dimension the ``+`` and the
    ``-`` neighbour (the cabling OpenSM's ``dor`` engine reads dimensions from).
    """
    spec = "torus:" + "x".join(str(k) for k in dims) + (f",p={p}" if p else "")
    _require(p >= 0, "p", "must be >= 0", spec)
    _require(len(dims) >= 1, "dims", "must list at least one dimension", spec)
    for m, k in enumerate(dims):
        _require(k >= 1, f"k{m + 1}", "must be >= 1", spec)
    n = int(np.prod(dims))
    _require(2 <= n <= MAX_NODES, "dims", f"must give 2..{MAX_NODES} hosts", spec)
    coords = np.array(list(itertools.product(*[range(k) for k in dims])), dtype=np.int64)
    strides = np.array([int(np.prod(dims[m + 1:])) for m in range(len(dims))], dtype=np.int64)
    pairs, ports, slot = [], [], p + 1
    for m, k in enumerate(dims):
        if k == 1:
            continue
        nxt = coords.copy()
        nxt[:, m] = (nxt[:, m] + 1) % k
        pairs.append(np.stack([coords @ strides, nxt @ strides], 1))
        # ports in dimension order (+ then -), as OpenSM's dor expects them cabled; k = 2: one cable, port +
        ports += [(slot, slot if k == 2 else slot + 1)] * n
        slot += 1 if k == 2 else 2
    pairs = np.concatenate(pairs) if pairs else np.zeros((0, 2), dtype=np.int64)
    if p:
        _require(n * (p + 1) <= MAX_NODES, "p", f"must keep (p+1)*N <= {MAX_NODES} nodes", spec)
        names = ["r" + ".".join(map(str, c)) for c in coords.tolist()]
        t = _hosts_on_routers(spec, n, pairs, p, names, router_ports=ports)
        return dataclasses.replace(t, coords=tuple(tuple(c) for c in np.concatenate([np.repeat(coords, p, 0), coords])
                                                   .tolist()))
    return Topology.from_links(spec, n, pairs, coords=coords.tolist())


def petersen() -> Topology:
    """The Petersen graph (10 hosts, 3-regular, diameter 2)."""
    outer = [(i, (i + 1) % 5) for i in range(5)]
    spokes = [(i, i + 5) for i in range(5)]
    inner = [(5 + i, 5 + (i + 2) % 5) for i in range(5)]
    return Topology.from_links("petersen", 10, outer + spokes + inner)


def genkautz(n: int, d: int) -> Topology:
    """Generalized Kautz digraph GK(N, d) (Imase & Itoh 1983; Basu et al. §5.4).

    Arc i -> (-d*i - j) mod N for j = 1..d; self-loops dropped, so out-degree is d
    (d-1 at nodes that had a loop).  Directed: links are one-way.
    """
    spec = f"genkautz:{n},{d}"
    _require(n >= 2, "N", "must be >= 2", spec)
    _require(d >= 1, "d", "must be >= 1", spec)
    _require(d < n, "d", "must be < N", spec)
    _require(n <= MAX_NODES and n * d <= MAX_LINKS, "N", f"must be <= {MAX_NODES} with N*d <= {MAX_LINKS}", spec)
    i = np.repeat(np.arange(n), d)
    j = np.tile(np.arange(1, d + 1), n)
    return Topology.from_links(spec, n, np.stack([i, (-d * i - j) % n], 1), undirected=False)


# ------------------------------------------------------- hosts on routers
def _hosts_on_routers(spec: str, n_routers: int, router_pairs, p: int, router_names, notes=(),
                      router_ports=None) -> Topology:
    """Attach ``p`` hosts to every router by one cable (hosts first: host h sits on router h // p).

    ``p = 0`` collapses the model: the routers themselves are the hosts, which
    topologies.md allows when stated, so the topology's notes say so.
    ``router_ports`` (with ``p > 0``) numbers the router cables' ports, one
    ``(u_port, v_port)`` per pair, after the hosts' ports ``1..p``.
    """
    pairs = np.asarray(router_pairs, dtype=np.int64).reshape(-1, 2)
    if p == 0:
        notes = ("collapsed: routers are the hosts (p=0); use p=P to attach P hosts per router",) + tuple(notes)
        return Topology.from_links(spec, n_routers, pairs, names=router_names, notes=notes)
    nh = p * n_routers
    hosts = np.arange(nh)
    host_pairs = np.stack([hosts, nh + hosts // p], 1)
    notes = (f"{p} host(s) per router, each attached by one cable; routers only forward",) + tuple(notes)
    ports = None
    if router_ports is not None:
        ports = [((1,), (1 + h % p,)) for h in range(nh)] + [((a,), (b,)) for a, b in router_ports]
    return Topology.from_links(
        spec, nh, np.concatenate([host_pairs, pairs + nh]), n_switches=n_routers,
        names=[f"h{h}" for h in range(nh)] + list(router_names), notes=notes, ports=ports,
    )


# ---------------------------------------------------------------- Slim Fly
def slimfly_hosts_per_router(q: int) -> int:
    """Slim Fly's default concentration p = ceil(k'/2), k' = (3q - δ)/2, q = 4w + δ (:func:`slimfly`)."""
    delta = q - 4 * ((q + 1) // 4)
    return -(-(3 * q - delta) // 4)


def slimfly(q: int, p: int | None = None) -> Topology:
    """Slim Fly / MMS(q) (Besta & Hoefler 2014 §II-B), over real GF(q) arithmetic.

    q = 4w + δ is a prime power, δ in {-1, 0, 1}; ξ is a primitive element of
    GF(q).  Routers (0, x, y) get ids ``x*q + y`` and (1, m, c) ids
    ``q^2 + m*q + c``; (0,x,y) ~ (0,x,y') iff y - y' ∈ X, (1,m,c) ~ (1,m,c') iff
    c - c' ∈ X', and (0,x,y) ~ (1,m,c) iff y = m*x + c, with the generator sets X,
    X' of topologies.md.  The result is k'-regular with k' = (3q - δ)/2, diameter 2,
    on 2q^2 routers.  ``p`` hosts hang off each router; the default is the
    paper's full-global-bandwidth concentration p = ceil(k'/2) (§II-B2), so
    slimfly:5 has 50 routers and 200 hosts.  ``p = 0`` keeps the routers as hosts.
    """
    _require(3 <= q <= 128 and prime_power(q) is not None and q % 4 != 2, "q",
             f"must be a prime power q = 4w + δ with δ in {{-1, 0, 1}}, 3 <= q <= 128, got {q}", f"slimfly:{q}")
    w, delta = (q + 1) // 4, q - 4 * ((q + 1) // 4)
    full = slimfly_hosts_per_router(q)
    spec = f"slimfly:{q}" + ("" if p is None or p == full else f",p={p}")
    if p is None:
        p = full
        _require(2 * q * q * p <= MAX_NODES, "p", f"(default ceil(k'/2) = {p}) gives {2 * q * q * p} hosts > {MAX_NODES}; "
                 "pass a smaller p=P (p=0: routers are hosts)", spec)
    _require(0 <= p and 2 * q * q * max(p, 1) <= MAX_NODES, "p", f"must be >= 0 with 2q^2*max(p,1) <= {MAX_NODES}", spec)
    F = field(q)
    if delta == 1:
        xs, xps = range(0, q - 2, 2), range(1, q - 1, 2)
    elif delta == 0:
        xs, xps = range(0, q - 1, 2), range(1, q, 2)
    else:
        xs = list(range(0, 2 * w - 1, 2)) + list(range(2 * w - 1, 4 * w - 2, 2))
        xps = list(range(1, 2 * w, 2)) + list(range(2 * w, 4 * w - 1, 2))
    X = np.array(sorted({F.power(k) for k in xs}))
    Xp = np.array(sorted({F.power(k) for k in xps}))
    e = np.arange(q)
    # intra-group: (0,x,y) ~ (0,x,y-s) for s in X; (1,m,c) ~ (1,m,c-s) for s in X'
    pairs = []
    for side, gen_set in ((0, X), (1, Xp)):
        a, b, s = np.meshgrid(e, e, gen_set, indexing="ij")
        base = side * q * q + a * q
        pairs.append(np.stack([(base + b).ravel(), (base + F.sub[b, s]).ravel()], 1))
    # inter-group: (0,x,m*x+c) ~ (1,m,c)
    m, c, x = np.meshgrid(e, e, e, indexing="ij")
    y = F.add[F.mul[m, x], c]
    pairs.append(np.stack([(x * q + y).ravel(), (q * q + m * q + c).ravel()], 1))
    names = [f"r{s},{i},{j}" for s in (0, 1) for i in range(q) for j in range(q)]
    field_note = f"GF({q}) = Z_{F.p}" + (f"[x]/({_poly_str(F)})" if F.n > 1 else "") + f", primitive element {F.primitive}"
    return _hosts_on_routers(spec, 2 * q * q, np.concatenate(pairs), p, names, (field_note,))


def _poly_str(F) -> str:
    """The field's modulus as text, e.g. ``x^3 + x + 1``."""
    terms = [f"x^{F.n}"] + [
        ("" if c == 1 and k else str(c)) + ("x" if k == 1 else f"x^{k}" if k else "")
        for k, c in reversed(list(enumerate(F.modulus))) if c
    ]
    return " + ".join(terms)


# ------------------------------------------------------- random expanders
def _connected(n: int, pairs: np.ndarray) -> bool:
    a = sp.coo_array((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return csgraph.connected_components(a, directed=False)[0] == 1


_MAX_TRIES = 100


def xpander(d: int, lift: int, seed: int = 0) -> Topology:
    """Xpander: a random ``lift``-lift of K_{d+1} (Valadarsky et al. 2016).

    Host ``a*lift + i`` is node (a, i), a in 0..d, i in 0..lift-1.  For each pair
    a < b (in lexicographic order) a permutation π is drawn from
    ``numpy.random.default_rng(seed)`` and (a, i) ~ (b, π(i)).  d-regular on
    (d+1)*lift hosts.  A disconnected draw is discarded and the next one taken
    from the same generator, so the seed still fixes the graph.
    """
    spec = f"xpander:{d},{lift},seed={seed}"
    _require(d >= 2, "d", "must be >= 2", spec)
    _require(lift >= 1, "l", "must be >= 1", spec)
    _require(seed >= 0, "seed", "must be >= 0", spec)
    _require((d + 1) * lift <= MAX_NODES, "l", f"must keep (d+1)*l <= {MAX_NODES} hosts", spec)
    rng = np.random.default_rng(seed)
    a, b = np.triu_indices(d + 1, 1)
    i = np.arange(lift)
    for _ in range(_MAX_TRIES):
        perms = np.stack([rng.permutation(lift) for _ in range(len(a))])
        pairs = np.stack([(a[:, None] * lift + i).ravel(), (b[:, None] * lift + perms).ravel()], 1)
        if _connected((d + 1) * lift, pairs):
            return Topology.from_links(spec, (d + 1) * lift, pairs)
    raise SpecError(f"{spec}: no connected lift in {_MAX_TRIES} draws; try another seed")


def _random_regular_pairs(n: int, d: int, rng: np.random.Generator) -> np.ndarray | None:
    """One draw of the pairing algorithm of Steger and Wormald (1999), batched.

    Every node starts with ``d`` stubs.  Each round shuffles the remaining stubs and
    pairs them in order; a pair becomes a cable unless it is a loop, repeats an
    earlier cable or an earlier pair of the same round; the others' stubs go to the
    next round.  Returns the (N*d/2, 2) cables, sorted, or None when the remaining
    stubs can form no cable.  Only ``rng.permutation`` and integer arithmetic decide,
    so the seed fixes the graph on every machine and library version.
    """
    stubs = np.repeat(np.arange(n, dtype=np.int64), d)
    keys = np.zeros(0, dtype=np.int64)                     # cables as lo * n + hi
    while stubs.size:
        pair = rng.permutation(stubs).reshape(-1, 2)
        lo, hi = pair.min(1), pair.max(1)
        key = lo * n + hi
        ok = np.zeros(len(key), dtype=bool)
        ok[np.unique(key, return_index=True)[1]] = True    # the first of equal pairs this round
        ok &= (lo != hi) & ~np.isin(key, keys)
        keys = np.concatenate([keys, key[ok]])
        stubs = np.sort(pair[~ok].ravel())
        left = np.unique(stubs)
        # A node with stubs left has < d cables, so it can still reach one of > d others.
        if 0 < left.size <= d:
            made = set(keys.tolist())
            if all(u * n + v in made for u, v in itertools.combinations(left.tolist(), 2)):
                return None
    keys.sort()
    return np.stack([keys // n, keys % n], 1)


def jellyfish(n: int, d: int, seed: int = 0) -> Topology:
    """Jellyfish: random d-regular graph RRG(N, d) (Singla et al. 2012).

    Drawn with the Steger–Wormald pairing algorithm (asymptotically uniform,
    :func:`_random_regular_pairs`) driven by ``numpy.random.default_rng(seed)``;
    draws that get stuck or come out disconnected are discarded and the next one
    taken from the same generator, so the seed fixes the graph.
    """
    spec = f"jellyfish:{n},{d},seed={seed}"
    _require(n >= 3, "N", "must be >= 3", spec)
    _require(n <= MAX_NODES, "N", f"must be <= {MAX_NODES}", spec)
    _require(2 <= d < n and n * d <= MAX_LINKS, "d", f"must satisfy 2 <= d < N and N*d <= {MAX_LINKS}", spec)
    _require(n * d % 2 == 0, "N*d", "must be even (a d-regular graph has N*d/2 cables)", spec)
    _require(seed >= 0, "seed", "must be >= 0", spec)
    rng = np.random.default_rng(seed)
    for _ in range(_MAX_TRIES):
        pairs = _random_regular_pairs(n, d, rng)
        if pairs is not None and _connected(n, pairs):
            return Topology.from_links(spec, n, pairs)
    raise SpecError(f"{spec}: no connected draw in {_MAX_TRIES} tries; try another seed")


# --------------------------------------------------------------- Dragonfly
def dragonfly(a: int, h: int, p: int) -> Topology:
    """Dragonfly (a, h, p) (Kim et al. 2008): g = a*h + 1 groups of a routers.

    Each group is a clique; each router has h global links and every pair of
    groups is joined by exactly one global link.  Router r of group G has id
    ``G*a + r`` and owns the group's global ports ``r*h .. r*h + h-1``.  Global
    arrangement (circulant): port k of group G connects to group (G + k + 1) mod g,
    arriving on that group's port ``a*h - 1 - k``.  ``p`` hosts per router
    (p = 0: routers are hosts).  Balanced when a = 2p = 2h.
    """
    spec = f"dragonfly:{a},{h},{p}"
    _require(a >= 1, "a", "must be >= 1", spec)
    _require(h >= 1, "h", "must be >= 1", spec)
    _require(p >= 0, "p", "must be >= 0", spec)
    g = a * h + 1
    _require(g * a * max(p, 1) <= MAX_NODES, "a,h,p", f"must keep (a*h+1)*a*max(p,1) <= {MAX_NODES} nodes", spec)
    grp = np.arange(g)
    li, lj = np.triu_indices(a, 1)
    local = np.stack([(grp[:, None] * a + li).ravel(), (grp[:, None] * a + lj).ravel()], 1)
    G, k = np.meshgrid(grp, np.arange(a * h), indexing="ij")
    other, k2 = (G + k + 1) % g, a * h - 1 - k
    glob = np.stack([(G * a + k // h).ravel(), (other * a + k2 // h).ravel()], 1)
    names = [f"g{G}r{r}" for G in range(g) for r in range(a)]
    return _hosts_on_routers(spec, g * a, np.concatenate([local, glob]), p, names)


# ------------------------------------------------------------------ HyperX
def hyperx(s: int, dims: int, p: int = 1) -> Topology:
    """HyperX (S, L) (Ahn et al. 2009): the Hamming graph H(L, S) of routers.

    A router per point of [S]^L (id = the point read as a base-S number, last
    coordinate fastest); routers are adjacent iff they differ in exactly one
    coordinate.  ``p`` hosts per router (p = 0: routers are hosts).
    """
    spec = f"hyperx:{s},{dims},p={p}"
    _require(s >= 2, "S", "must be >= 2", spec)
    _require(dims >= 1, "L", "must be >= 1", spec)
    _require(p >= 0, "p", "must be >= 0", spec)
    _require(power(s, dims) * max(p, 1) <= MAX_NODES and power(s, dims) * dims * (s - 1) <= MAX_LINKS, "S,L",
             f"must keep S^L*max(p,1) <= {MAX_NODES} nodes and S^L*L*(S-1) <= {MAX_LINKS} links", spec)
    n = s**dims
    pts = np.array(list(itertools.product(range(s), repeat=dims)), dtype=np.int64).reshape(n, dims)
    weights = s ** np.arange(dims - 1, -1, -1)
    pairs = []
    for m, t in itertools.product(range(dims), range(1, s)):
        other = pts.copy()
        other[:, m] = (other[:, m] + t) % s
        pairs.append(np.stack([np.arange(n), other @ weights], 1))
    names = ["r" + ".".join(map(str, pt)) for pt in pts.tolist()]
    return _hosts_on_routers(spec, n, np.concatenate(pairs), p, names)


# ---------------------------------------------------------------- fat tree
def var_ary_tree(k0: int, arities: tuple[int, ...], width=1, *, merge: int = 1, hosts: int | None = None,
                 spec: str | None = None) -> Topology:
    """var-ary-n-tree (Zahavi et al. 2009, Def. 2): fat trees of varying arity.

    ``n = len(arities) + 1`` switch levels, each with ``prod(arities)`` switches
    ``(r, S_{n-2} .. S_0)``, ``S_j in 0..M_j-1`` (``M_j = arities[j]``).  Switches
    at levels r and r+1 are joined iff their digits agree except digit r, by a
    port group of ``width`` parallel cables (one link of capacity ``width``
    carrying ``cables = width``, see :mod:`..topology.model`;
    ``width`` may also give one value per level pair, so a tree can have a
    reduced CBB on one stage only).  Leaf switch ``I_S = sum_i S_i P_i``
    (``P_i = prod_{j<i} M_j``) carries hosts ``K_0 I_S .. K_0 I_S + K_0 - 1``
    (the Definition's ``j = p + sum_i S_i P_i`` with the host digits shifted by
    one, the only reading that gives distinct hosts).  Switch ``(r, I_S)`` has id
    ``n_hosts + (switches below level r) + I_S``; switches only forward.

    Two variants of Table I (Zahavi et al. §4.1):

    * ``merge = M`` **merges roots**: the M top-level switches whose digit
      ``S_{n-2}`` differs only in ``S_{n-2} // M`` have the same neighbours and
      become one switch with M times the ports (digit ``S_{n-2}`` of a root
      runs over ``0..M_{n-2}/M - 1``), so each root port group has M times the
      cables.
    * ``hosts = H`` **populates the tree partially** (§3.2): only hosts
      ``0..H-1`` exist (the leaves fill in index order) and switches with no
      host below them are left out, so ``fattree:4,3,hosts=32`` is the half
      4-ary-3-tree of 8 leaves.  Random partial population: ``--remove-nodes``.
    """
    arities = tuple(int(m) for m in arities)
    widths = tuple(int(x) for x in width) if isinstance(width, (tuple, list)) else (int(width),) * len(arities)
    if spec is None:
        wtext = "" if set(widths) <= {1} else f",w={widths[0]}" if len(set(widths)) == 1 else \
            ",w=" + "x".join(map(str, widths))
        spec = "vartree:" + ",".join(str(x) for x in (k0, *arities)) + wtext
        spec += (f",merge={merge}" if merge != 1 else "") + (f",hosts={hosts}" if hosts is not None else "")
    _require(k0 >= 1, "K0", "(hosts per leaf switch) must be >= 1", spec)
    for j, m in enumerate(arities):
        _require(m >= 1, f"M{j}", "(port groups per switch) must be >= 1", spec)
    _require(len(widths) == len(arities), "w", f"must give one width or {len(arities)} (one per level pair)", spec)
    _require(min(widths, default=1) >= 1, "w", "(cables per port group) must be >= 1", spec)
    per = int(np.prod(arities, dtype=np.int64)) if arities else 1
    n = len(arities) + 1
    _require(merge >= 1 and (merge == 1 or (arities and arities[-1] % merge == 0)), "merge",
             "(roots merged into one) must be >= 1 and divide the top arity M_{n-2}", spec)
    _require(k0 * per <= MAX_NODES and n * per <= MAX_NODES, "K0,M", f"must keep hosts and switches <= {MAX_NODES}", spec)
    nh = k0 * per
    _require(hosts is None or 1 <= hosts <= nh, "hosts", f"must be in 1..{nh}", spec)
    place = np.concatenate([[1], np.cumprod(arities, dtype=np.int64)])  # P_i
    count = [per] * (n - 1) + [per // merge]                           # switches per level
    first = nh + np.concatenate([[0], np.cumsum(count)])                # id of switch (r, 0)
    idx = np.arange(per)
    pairs = [np.stack([np.arange(nh), nh + np.arange(nh) // k0], 1)]
    caps = [np.ones(nh)]
    for r, m in enumerate(arities):
        digit = (idx // place[r]) % m
        top = r == n - 2 and merge > 1
        for t in range(0, m, merge if top else 1):  # upper switch with digit r set to t (t // merge if merged)
            upper = idx % place[r] + (t // merge) * place[r] if top else idx + (t - digit) * place[r]
            pairs.append(np.stack([first[r] + idx, first[r + 1] + upper], 1))
            caps.append(np.full(per, float(widths[r] * (merge if top else 1))))
    names = [f"h{j}" for j in range(nh)] + [f"s{r}:{i}" for r in range(n) for i in range(count[r])]
    pairs, caps = np.concatenate(pairs), np.concatenate(caps)
    notes = ["hosts hang off leaf switches; switches only forward"]
    if hosts is not None and hosts < nh:
        # keep hosts 0..H-1 and every switch with a host below it: switch (r, I) sees the
        # leaves that share its digits r..n-2, the first of which is (I // P_r) * P_r
        level = np.repeat(np.arange(n), count)
        below = (np.concatenate([np.arange(c) for c in count]) // place[level]) * place[level]
        keep = np.concatenate([np.arange(nh) < hosts, k0 * below < hosts])
        new_id = np.cumsum(keep) - 1
        ok = keep[pairs[:, 0]] & keep[pairs[:, 1]]
        pairs, caps = new_id[pairs[ok]], caps[ok]
        names = [nm for nm, k in zip(names, keep) if k]
        notes.append(f"partially populated: hosts 0..{hosts - 1} of {nh}; switches without hosts below left out")
        nh, n_sw = hosts, int(keep[nh:].sum())
    else:
        n_sw = sum(count)
    cables = caps.astype(np.int64) if np.any(caps > 1) else None
    return Topology.from_links(spec, nh, pairs, n_switches=n_sw, capacity=caps, names=names, notes=notes,
                               cables=cables)


def fattree(k: int, n: int, *, merge: int = 1, hosts: int | None = None) -> Topology:
    """k-ary n-tree (Petrini & Vanneschi 1997; Zahavi et al. 2009, Def. 1).

    k^n hosts and n*k^(n-1) switches: the var-ary-n-tree with ``K_0 = M_j = k``
    (:func:`var_ary_tree`, which also explains ``merge`` (merged roots) and
    ``hosts`` (partial population)).
    """
    spec = f"fattree:{k},{n}" + (f",merge={merge}" if merge != 1 else "") + (f",hosts={hosts}" if hosts is not None else "")
    _require(k >= 2, "k", "must be >= 2", spec)
    _require(n >= 1, "n", "must be >= 1", spec)
    _require(power(k, n) <= MAX_NODES, "k,n", f"must keep k^n <= {MAX_NODES} hosts", spec)
    return var_ary_tree(k, (k,) * (n - 1), merge=merge, hosts=hosts, spec=spec)


#: Direct-connect fabrics of servers :func:`nvswitch` accepts besides rail switches (``fabric=``).
SERVER_FABRICS = ("rail", "ring", "complete", "hypercube", "torus<K1>x<K2>...")


def nvswitch(nodes: int, gpus: int, fabric: str = "rail") -> Topology:
    """GPU cluster: ``nodes`` servers of ``gpus`` GPUs on an NVSwitch, one NIC per GPU.

    GPU ``g`` of server ``a`` is host ``a·G + g``; it has an NVLink (link class ``"nvlink"``)
    to its server's NVSwitch (switch ``nvsw<a>``) and a NIC link.  With ``fabric="rail"``
    (rail-optimized, as in DGX SuperPODs) NIC ``g`` of every server joins rail switch
    ``rail<g>``; otherwise the servers form the direct-connect topology ``fabric``
    (``ring``, ``complete``, ``hypercube``, ``torus2x2``, ...: one per server) and each of
    its cables joins GPU ``g`` of one server to GPU ``g`` of the other (rail-aligned NIC
    cables, no switch).  Capacities are 1; :func:`~a2a_compiler.fabric.apply_link_classes`
    gives NVLinks their bandwidth relative to the NICs' (``--nvlink-bw``).
    """
    spec = f"nvswitch:{nodes},{gpus}" + ("" if fabric == "rail" else f",fabric={fabric}")
    _require(nodes >= 1 and gpus >= 1 and nodes * gpus >= 2, "NODES,GPUS", "must be >= 1 with at least 2 GPUs", spec)
    _require(nodes * gpus <= MAX_NODES, "NODES*GPUS", f"must be <= {MAX_NODES}", spec)
    n = nodes * gpus
    gpu = np.arange(n)
    pairs = [np.stack([gpu, n + gpu // gpus], 1)]           # NVLink to the server's NVSwitch
    classes = ["nvlink"] * n
    names = [f"s{a}g{g}" for a in range(nodes) for g in range(gpus)] + [f"nvsw{a}" for a in range(nodes)]
    if fabric == "rail":
        _require(nodes >= 2, "NODES", "must be >= 2 for rail switches", spec)
        pairs.append(np.stack([gpu, n + nodes + gpu % gpus], 1))
        classes += ["nic"] * n
        names += [f"rail{g}" for g in range(gpus)]
        n_switches = nodes + gpus
    else:
        servers = _server_fabric(fabric, nodes, spec)
        su, sv = servers.src[servers.src < servers.dst], servers.dst[servers.src < servers.dst]
        g = np.arange(gpus)
        pairs.append(np.stack([(su[:, None] * gpus + g).ravel(), (sv[:, None] * gpus + g).ravel()], 1))
        classes += ["nic"] * len(pairs[-1])
        n_switches = nodes
    return Topology.from_links(spec, n, np.concatenate(pairs), n_switches=n_switches, names=names, classes=classes,
                               notes=(f"{nodes} servers x {gpus} GPUs; NVLink links have class nvlink "
                                      f"(--nvlink-bw), NIC links the link bandwidth",))


def _server_fabric(fabric: str, nodes: int, spec: str) -> Topology:
    """The direct-connect topology over the servers named by ``fabric=``."""
    if fabric == "ring":
        return ring(nodes)
    if fabric == "complete":
        return complete(nodes)
    if fabric == "hypercube":
        d = nodes.bit_length() - 1
        _require(nodes == 2**d and d >= 1, "NODES", "must be a power of 2 for fabric=hypercube", spec)
        return hypercube(d)
    if fabric.startswith("torus") and fabric[5:]:
        try:
            dims = tuple(int(k) for k in fabric[5:].split("x"))
        except ValueError:
            dims = ()
        _require(bool(dims) and int(np.prod(dims)) == nodes, "fabric", f"torus{fabric[5:]} must have NODES={nodes} "
                 f"servers", spec)
        return torus(dims)
    raise SpecError(f"{spec}: fabric={fabric!r} must be one of {', '.join(SERVER_FABRICS)}")
