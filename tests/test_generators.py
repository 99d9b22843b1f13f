"""Generators and spec strings: every family of topologies.md, checked against its definition."""

import itertools

import networkx as nx
import numpy as np
import pytest

from a2a_compiler.errors import SpecError
from a2a_compiler.topology import from_spec
from a2a_compiler.topology import generators as gen
from a2a_compiler.topology.gf import field, prime_power
from a2a_compiler.topology.metrics import distance_stats
from a2a_compiler.topology.spec import FAMILIES, spec_hosts


def undirected(t):
    """networkx Graph of the cables (asserts every link has its reverse)."""
    assert t.is_symmetric()
    return nx.Graph(t.to_networkx())


def links_set(t):
    return set(zip(t.src.tolist(), t.dst.tolist()))


# ------------------------------------------------------------------ GF(q)
def test_prime_power():
    assert prime_power(9) == (3, 2)
    assert prime_power(128) == (2, 7)
    assert prime_power(19) == (19, 1)
    assert prime_power(6) is None and prime_power(12) is None and prime_power(1) is None


@pytest.mark.parametrize("q", [4, 8, 9, 16, 25])
def test_gf_is_a_field(q):
    F = field(q)
    e = np.arange(q)
    x, y, z = np.meshgrid(e, e, e, indexing="ij")
    assert np.array_equal(F.mul[x, F.add[y, z]], F.add[F.mul[x, y], F.mul[x, z]])  # distributive
    assert np.array_equal(F.mul[F.mul[x, y], z], F.mul[x, F.mul[y, z]])            # associative
    assert np.array_equal(F.mul, F.mul.T) and np.array_equal(F.add, F.add.T)
    assert np.all(F.mul[1:, 1:] != 0)                                               # no zero divisors
    assert np.array_equal(F.add[F.sub, e[None, :]], np.broadcast_to(e[:, None], (q, q)))
    assert sorted(F.powers.tolist()) == list(range(1, q))                           # ξ generates GF(q)*
    # characteristic p: p * a = 0; not integers mod q
    a = e.copy()
    for _ in range(F.p - 1):
        a = F.add[a, e]
    assert np.all(a == 0)
    assert not np.array_equal(F.mul, np.outer(e, e) % q)


def test_gf4_and_gf9_tables():
    F4 = field(4)  # x^2 + x + 1 over Z_2; element 2 = x, 3 = x + 1
    assert F4.modulus == (1, 1)
    assert F4.mul[2, 2] == 3 and F4.mul[2, 3] == 1 and F4.add[2, 3] == 1
    F9 = field(9)  # x^2 + 1 over Z_3; element 3 = x, so x*x = -1 = 2
    assert F9.modulus == (1, 0)
    assert F9.mul[3, 3] == 2 and F9.primitive == 4


# ---------------------------------------------------------- small families
def test_complete_ring_bipartite_petersen():
    k = from_spec("complete:8")
    assert (k.n_hosts, k.n_links) == (8, 56) and set(k.out_degree()) == {7}
    r = from_spec("ring:8")
    assert r.n_links == 16 and distance_stats(r).diameter == 4
    b = from_spec("bipartite:4")
    assert b.n_hosts == 8 and set(b.out_degree()) == {4}
    assert all((u < 4) != (v < 4) for u, v in links_set(b))
    p = undirected(from_spec("petersen"))
    assert nx.is_isomorphic(p, nx.petersen_graph())


def test_hypercube():
    t = from_spec("hypercube:4")
    assert t.n_hosts == 16 and t.n_links == 64
    assert all(bin(u ^ v).count("1") == 1 for u, v in links_set(t))
    assert distance_stats(t).diameter == 4


@pytest.mark.parametrize("d", [3, 4, 5])
def test_twisted_hypercube(d):
    t = from_spec(f"twisted-hypercube:{d}")
    q = from_spec(f"hypercube:{d}")
    assert set(t.out_degree()) == {d}
    assert links_set(q) - links_set(t) == {(0, 1), (1, 0), (2, 3), (3, 2)}
    assert links_set(t) - links_set(q) == {(0, 3), (3, 0), (1, 2), (2, 1)}
    assert distance_stats(t).diameter == d - 1


def test_torus_counts_and_small_dimensions():
    t = from_spec("torus:3x3x3")
    assert (t.n_hosts, t.n_links) == (27, 162) and set(t.out_degree()) == {6}
    # node id is row-major over coordinates; neighbours differ by ±1 mod k in one dimension
    for u, v in links_set(t):
        diff = [(a - b) % 3 for a, b in zip(t.coords[u], t.coords[v])]
        assert sorted(diff) == [0, 0, 1] or sorted(diff) == [0, 0, 2]
    # a dimension of size 2 gives one cable, of size 1 none
    t2 = from_spec("torus:2x3")
    assert t2.n_links == 2 * (3 + 6) and set(t2.out_degree()) == {3}
    t1 = from_spec("torus:1x5")
    assert t1.n_links == 10 and set(t1.out_degree()) == {2}
    assert distance_stats(from_spec("torus:4x4")).mean == pytest.approx(32 / 15)


def test_genkautz_arcs_match_formula():
    n, d = 64, 4
    t = from_spec(f"genkautz:{n},{d}")
    expect = {(i, (-d * i - j) % n) for i in range(n) for j in range(1, d + 1)}
    expect = {(u, v) for u, v in expect if u != v}
    assert links_set(t) == expect
    assert not t.is_symmetric()
    deg = t.out_degree()
    loops = {i for i in range(n) for j in range(1, d + 1) if (-d * i - j) % n == i}
    assert loops  # this instance has self-loops to drop
    assert all(deg[i] == (d - 1 if i in loops else d) for i in range(n))


# -------------------------------------------------------------- Slim Fly
SLIMFLY_TABLE = [(5, 50, 7, 175, 1.8571), (7, 98, 11, 539, 1.8866), (11, 242, 17, 2057, 1.9295)]


@pytest.mark.parametrize("q,nr,k,cables,mean", SLIMFLY_TABLE)
def test_slimfly_table(q, nr, k, cables, mean):
    t = from_spec(f"slimfly:{q},p=0")
    assert (t.n_hosts, t.n_switches, t.n_links) == (nr, 0, 2 * cables)
    assert set(t.out_degree()) == {k}
    s = distance_stats(t)
    assert s.diameter == 2 and round(s.mean, 4) == mean
    assert any("collapsed: routers are the hosts" in n for n in t.notes)


def test_slimfly_5_is_hoffman_singleton():
    g = undirected(from_spec("slimfly:5,p=0"))
    assert g.number_of_nodes() == 50 and set(dict(g.degree()).values()) == {7}
    assert nx.diameter(g) == 2 and nx.girth(g) == 5
    assert nx.is_isomorphic(g, nx.hoffman_singleton_graph())


@pytest.mark.parametrize("q,delta", [(3, -1), (4, 0), (8, 0), (9, 1), (13, 1), (16, 0)])
def test_slimfly_every_delta_and_non_prime_q(q, delta):
    assert q - 4 * round(q / 4) == delta
    t = from_spec(f"slimfly:{q},p=0")
    assert t.n_hosts == 2 * q * q
    assert set(t.out_degree()) == {(3 * q - delta) // 2}
    assert distance_stats(t).diameter == 2


@pytest.mark.parametrize("spec,hosts,routers,p", [
    ("slimfly:5", 200, 50, 4), ("slimfly:7", 588, 98, 6), ("slimfly:3", 54, 18, 3), ("slimfly:19", 10830, 722, 15),
    ("slimfly:5,p=0", 50, 0, 0), ("slimfly:5,p=2", 100, 50, 2),
])
def test_slimfly_default_concentration(spec, hosts, routers, p):
    """Besta & Hoefler §II-B2: p = ceil(k'/2) hosts per router by default; p=0 keeps routers as hosts."""
    t = from_spec(spec)
    assert (t.n_hosts, t.n_switches) == (hosts, routers)
    assert t.spec == spec
    if p:
        assert t.notes[0].startswith(f"{p} host(s) per router")
    assert from_spec(spec.split(",")[0] + f",p={p}").spec == spec  # the default p is left out of the spec


def test_slimfly_hosts_on_routers():
    t = from_spec("slimfly:5,p=4")
    assert (t.n_hosts, t.n_switches) == (200, 50)
    assert np.all(t.out_degree()[:200] == 1) and np.all(t.out_degree()[200:] == 7 + 4)
    assert t.link_index(7, 200 + 7 // 4) >= 0
    assert distance_stats(t).diameter == 4


# ---------------------------------------------------------- random families
def test_xpander_structure_and_determinism():
    d, lift = 4, 8
    t = from_spec(f"xpander:{d},{lift},seed=1")
    assert t.n_hosts == (d + 1) * lift and set(t.out_degree()) == {d}
    for a, b in itertools.combinations(range(d + 1), 2):  # one perfect matching per block pair
        block = {(u, v) for u, v in links_set(t) if u // lift == a and v // lift == b}
        assert len(block) == lift and len({u for u, _ in block}) == len({v for _, v in block}) == lift
    assert all(u // lift != v // lift for u, v in links_set(t))
    again = from_spec(f"xpander:{d},{lift},seed=1")
    assert np.array_equal(t.src, again.src) and np.array_equal(t.dst, again.dst)
    other = from_spec(f"xpander:{d},{lift},seed=2")
    assert links_set(other) != links_set(t)


def test_jellyfish_structure_and_determinism():
    t = from_spec("jellyfish:64,4,seed=1")
    assert t.n_hosts == 64 and set(t.out_degree()) == {4} and t.is_symmetric()
    assert np.isfinite(distance_stats(t).diameter)
    again = from_spec("jellyfish:64,4,seed=1")
    assert np.array_equal(t.src, again.src) and np.array_equal(t.dst, again.dst)
    assert links_set(from_spec("jellyfish:64,4,seed=2")) != links_set(t)
    assert from_spec("jellyfish:64,4").spec == "jellyfish:64,4,seed=0"


def test_jellyfish_seed_fixes_the_graph_on_every_machine():
    """The sampler is ours (numpy permutations and integer arithmetic), not a library's, so these are the
    cables of jellyfish:12,3,seed=5 whatever the networkx or Python version."""
    t = from_spec("jellyfish:12,3,seed=5")
    assert sorted((a, b) for a, b in zip(t.src.tolist(), t.dst.tolist()) if a < b) == [
        (0, 5), (0, 6), (0, 7), (1, 3), (1, 6), (1, 10), (2, 3), (2, 9), (2, 10), (3, 8), (4, 7), (4, 8),
        (4, 10), (5, 7), (5, 11), (6, 9), (8, 11), (9, 11)]


# ---------------------------------------------------------- router families
def test_dragonfly_balanced_counts_and_global_links():
    a, h, p = 4, 2, 2
    t = from_spec(f"dragonfly:{a},{h},{p}")
    g = a * h + 1
    nr, nh = g * a, g * a * p
    assert (t.n_hosts, t.n_switches) == (nh, nr)
    cables = g * a * (a - 1) // 2 + g * (g - 1) // 2 + nh
    assert t.n_links == 2 * cables
    deg = t.out_degree()
    assert np.all(deg[:nh] == 1) and np.all(deg[nh:] == (a - 1) + h + p)
    group = lambda v: (v - nh) // a  # noqa: E731
    between = [(group(u), group(v)) for u, v in links_set(t) if u >= nh and v >= nh and group(u) < group(v)]
    assert sorted(between) == [(x, y) for x in range(g) for y in range(x + 1, g)]  # exactly one per pair
    assert distance_stats(t).diameter == 5  # host, router, local, global, local, router, host
    collapsed = from_spec("dragonfly:4,2,0")
    assert (collapsed.n_hosts, collapsed.n_switches) == (nr, 0) and distance_stats(collapsed).diameter == 3


def test_hyperx():
    t = from_spec("hyperx:4,2,p=1")
    assert (t.n_hosts, t.n_switches) == (16, 16)
    assert np.all(t.out_degree()[16:] == 2 * 3 + 1)
    assert distance_stats(t).diameter == 2 + 2
    r = from_spec("hyperx:3,3,p=0")
    assert nx.is_isomorphic(undirected(r), nx.Graph(nx.cartesian_product(
        nx.cartesian_product(nx.complete_graph(3), nx.complete_graph(3)), nx.complete_graph(3))))
    assert from_spec("hyperx:4,2").n_hosts == 16  # default p=1


@pytest.mark.parametrize("k,n", [(2, 3), (4, 3), (3, 2)])
def test_fattree_k_ary_n_tree(k, n):
    t = from_spec(f"fattree:{k},{n}")
    nh, per = k**n, k ** (n - 1)
    assert (t.n_hosts, t.n_switches) == (nh, n * per)
    assert t.n_links == 2 * n * nh  # k^n host cables + (n-1) levels of k^n up-cables
    deg = t.out_degree()
    assert np.all(deg[:nh] == 1)
    assert np.all(deg[nh:nh + (n - 1) * per] == 2 * k) and np.all(deg[nh + (n - 1) * per:] == k)
    assert all(t.link_index(j, nh + j // k) >= 0 for j in range(nh))
    # Def. 1: switches at levels r, r+1 linked iff their digits agree except digit r
    for u, v in links_set(t):
        if nh <= u < v:
            r, i, j = (u - nh) // per, (u - nh) % per, (v - nh) % per
            assert (v - nh) // per == r + 1
            assert all((i // k**m) % k == (j // k**m) % k for m in range(n - 1) if m != r)
    assert distance_stats(t).diameter == 2 * n



def test_var_ary_tree_def2():
    """Zahavi Def. 2: vartree:4,2,2 (the paper's Fig. 2 var-4-2-2ary-3-tree)."""
    t = from_spec("vartree:4,2,2")
    per = 2 * 2
    assert (t.n_hosts, t.n_switches, t.n_links) == (16, 3 * per, 2 * (16 + 2 * 2 * per))
    deg = t.out_degree()
    assert np.all(deg[16:16 + per] == 4 + 2) and np.all(deg[16 + per:16 + 2 * per] == 2 + 2)
    assert np.all(deg[16 + 2 * per:] == 2)
    assert distance_stats(t).diameter == 6
    # a k-ary n-tree is the var-ary tree with every arity k
    a, b = from_spec("fattree:3,3"), from_spec("vartree:3,3,3")
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    # port groups of width w are links of capacity w between switches, hosts keep 1
    w = from_spec("vartree:4,2,2,w=3")
    assert np.array_equal(np.unique(w.capacity[(w.src >= 16) & (w.dst >= 16)]), [3.0])
    assert np.all(w.capacity[(w.src < 16) | (w.dst < 16)] == 1.0)



def test_fattree_merged_roots_and_partial_population():
    """Table I's variants: merged roots (one switch per root neighbour set) and partially populated trees."""
    t = from_spec("fattree:4,2,merge=4")                      # one 16-port root, a port group of 4 per leaf
    assert (t.n_hosts, t.n_switches) == (16, 5)
    root = t.n_nodes - 1
    assert sorted(t.src[t.dst == root]) == [16, 17, 18, 19] and np.all(t.capacity[t.dst == root] == 4.0)
    half = from_spec("fattree:4,3,hosts=32")                  # half 4-ary-3-tree: 8 leaves, 8 middle, 16 roots
    assert (half.n_hosts, half.n_switches, half.n_links) == (32, 32, 2 * (32 + 32 + 32))
    assert half.names[32:40] == tuple(f"s0:{i}" for i in range(8)) and half.names[-1] == "s2:15"
    fig5 = from_spec("fattree:4,3,merge=2,hosts=32")           # Zahavi Fig. 5: roots merged in pairs
    assert (fig5.n_switches, fig5.spec) == (24, "fattree:4,3,merge=2,hosts=32")
    roots = fig5.src >= fig5.n_hosts + 16
    assert np.all(fig5.capacity[roots] == 2.0) and np.all(np.bincount(fig5.src[roots])[fig5.n_hosts + 16:] == 2)
    assert "partially populated: hosts 0..31 of 64" in fig5.notes[1]
    assert from_spec("fattree:4,3,hosts=48").n_switches == 12 + 12 + 16   # 3/4 tree: 12 leaves, 12 middle, 16 roots
    stage = from_spec("vartree:4,4,2,w=1x2")                  # CBB per stage: width 1 below, 2 above
    mid_up = (stage.src >= 32 + 8) & (stage.src < 32 + 16) & (stage.dst >= 32 + 16)
    assert np.all(stage.capacity[mid_up] == 2.0) and np.all(stage.capacity[(stage.src >= 32) & (stage.dst >= 32)
                                                                           & ~mid_up & (stage.src < 32 + 8)] == 1.0)


# ------------------------------------------------------------- bad specs
@pytest.mark.parametrize("spec,message", [
    ("slimfly:6", "slimfly:6: parameter q must be a prime power"),
    ("slimfly:2", "parameter q must be a prime power q = 4w + δ"),
    ("torus:0x3", "torus:0x3: parameter k1 must be >= 1"),
    ("torus:3xax3", "parameter k2 must be an integer, got 'a'"),
    ("genkautz:5,0", "genkautz:5,0: parameter d must be >= 1"),
    ("genkautz:5", "expected N,d, got 1 positional parameter(s)"),
    ("jellyfish:9,3", "parameter N*d must be even"),
    ("xpander:4,8,seed=-1", "parameter seed must be >= 0"),
    ("hyperx:4,2,q=1", "unknown option(s) q; allowed: p"),
    ("fattree:1,3", "fattree:1,3: parameter k must be >= 2"),
    ("vartree:4,0,2", "vartree:4,0,2: parameter M0 (port groups per switch) must be >= 1"),
    ("vartree:", "expected vartree:K0,M0,M1,...[,w=W][,merge=M][,hosts=H]"),
    ("fattree:4,3,merge=3", "parameter merge (roots merged into one) must be >= 1 and divide the top arity"),
    ("fattree:4,3,hosts=0", "fattree:4,3,hosts=0: parameter hosts must be in 1..64"),
    ("vartree:4,2,2,w=1x2x3", "parameter w must give one width or 2 (one per level pair)"),
    ("fattree:4,3,root=2", "unknown option(s) root; allowed: merge, hosts"),
    ("dragonfly:4,2", "expected a,h,p"),
    ("mesh:3", "unknown topology family 'mesh'"),
    ("complete:100000", "complete:100000: parameter N must be >= 2 with N*(N-1) <= 20000000"),
    ("slimfly:19,p=200", "parameter p must be >= 0 with 2q^2*max(p,1) <= 100000"),
    ("slimfly:41", "slimfly:41: parameter p (default ceil(k'/2) = 31) gives 104222 hosts > 100000; pass a smaller p=P"),
])
def test_bad_specs(spec, message):
    with pytest.raises(SpecError) as exc:
        from_spec(spec)
    assert message in str(exc.value)


def test_unknown_family_lists_families():
    with pytest.raises(SpecError) as exc:
        from_spec("mesh:3")
    for name in ["slimfly:q", "dragonfly:a,h,p", "fattree:k,n", "file:PATH", "torus:K1xK2x..."]:
        assert name in str(exc.value)


def test_generator_functions_match_specs():
    assert links_set(gen.slimfly(7)) == links_set(from_spec("slimfly:7"))
    assert gen.hyperx(3, 2, p=0).spec == "hyperx:3,2,p=0"


@pytest.mark.parametrize("spec", [f.example for f in FAMILIES.values() if f.hosts] + [
    "torus:3x3,p=2", "slimfly:5,p=0", "slimfly:4,p=3", "dragonfly:4,2,0", "hyperx:3,2,p=0", "fattree:4,3,hosts=30",
    "fattree:4,3,merge=2", "vartree:4,2,2,w=2,hosts=9", "nvswitch:4,2,fabric=ring"])
def test_spec_hosts_is_the_built_topologys_host_count(spec):
    assert spec_hosts(spec) == from_spec(spec).n_hosts


@pytest.mark.parametrize("spec, hosts", [("complete:4000", 4000), ("bogus:3", None), ("file:t.json", None),
                                         ("complete:x", None), ("hypercube:100000000000", None),
                                         ("hyperx:1000000000,1000000000", None)])
def test_spec_hosts_without_building(spec, hosts):
    assert spec_hosts(spec) == hosts


@pytest.mark.parametrize("spec, message", [
    ("hypercube:100000000000", "hypercube:100000000000: parameter d must be in 1..16 (2^d <= 100000 hosts)"),
    ("fattree:1000000000,1000000000", "fattree:1000000000,1000000000: parameter k,n must keep k^n <= 100000 hosts"),
])
def test_huge_exponents_are_refused_without_computing_the_power(spec, message):
    with pytest.raises(SpecError) as exc:
        from_spec(spec)
    assert str(exc.value) == message
