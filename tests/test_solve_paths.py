"""Candidate path sets, pMCF (eqs. 21-24) and MCF-extP widest-path extraction (§3.2.1)."""

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric, augment, parse_bandwidth
from a2a_compiler.solve import solve
from a2a_compiler.solve.paths import all_shortest_paths, candidate_paths, disjoint_paths, k_shortest_paths, route_links
from a2a_compiler.solve.widest_paths import widest_paths
from a2a_compiler.topology import Topology, from_spec


def _links(path):
    return list(zip(path[:-1], path[1:]))


def test_disjoint_paths_hypercube_has_degree_many_link_disjoint_paths():
    q3 = from_spec("hypercube:3")
    sets = disjoint_paths(q3)
    assert len(sets) == 56
    for (s, d), paths in sets.items():
        assert len(paths) == 3  # Menger: 3-regular, 3-connected
        used = [l for p in paths for l in _links(p)]
        assert len(used) == len(set(used))
        for p in paths:
            assert p[0] == s and p[-1] == d and len(set(p)) == len(p)
            assert all(bin(u ^ v).count("1") == 1 for u, v in _links(p))  # every hop flips one bit: a cube link
        # Saad & Schultz: h = Hamming distance; h paths of length h, 3 - h of length h + 2 (no shorter set exists)
        h = bin(s ^ d).count("1")
        assert sorted(len(p) - 1 for p in paths) == [h] * h + [h + 2] * (3 - h)


def test_all_shortest_paths_counts():
    t = from_spec("torus:3x3x3")
    sets = all_shortest_paths(t)
    # (1,1,1) away: 3! orderings; one hop away: 1
    assert len(sets[(0, 13)]) == 6
    assert len(sets[(0, 1)]) == 1
    assert all(len(p) == 4 for p in sets[(0, 13)])
    assert len(set(sets[(0, 13)])) == 6


def test_shortest_paths_explosion_is_a_clear_error():
    # antipode (3,3) of a 6x6 torus: C(6,3) orderings x 2 directions per dimension = 80
    with pytest.raises(A2AError, match=r"host pair 0->21 has 80 shortest paths, more than --max-paths 10"):
        all_shortest_paths(from_spec("torus:6x6"), max_paths=10)


def test_k_shortest_paths_and_bad_kind():
    sets = k_shortest_paths(from_spec("ring:6"), 3)
    assert sets[(0, 3)] in ([(0, 1, 2, 3), (0, 5, 4, 3)], [(0, 5, 4, 3), (0, 1, 2, 3)])  # a ring has only 2
    assert sets[(0, 1)][0] == (0, 1) and len(sets[(0, 1)]) == 2
    with pytest.raises(A2AError, match="--paths must be disjoint, shortest or ksp:K"):
        candidate_paths(from_spec("ring:6"), "widest")


def test_route_links_inserts_host_nic_links():
    ring = from_spec("ring:4")
    fabric = Fabric(parse_bandwidth("25Gbps"), parse_bandwidth("50Gbps"), "host")
    aug = augment(ring, fabric)
    r = route_links(aug, ring, [0 * 4 + 2], [(0, 1, 2)])
    g = aug.topology
    seq = [(int(g.src[e]), int(g.dst[e])) for e in r.links]
    names = [(g.names[u], g.names[v]) for u, v in seq]
    assert names == [("0", "nic-out:0"), ("nic-out:0", "nic-in:1"), ("nic-in:1", "1"), ("1", "nic-out:1"),
                     ("nic-out:1", "nic-in:2"), ("nic-in:2", "2")]


@pytest.mark.parametrize("spec,optimum", [("torus:3x3x3", 1 / 9), ("hypercube:3", 1 / 4), ("bipartite:4", 2 / 5),
                                          ("petersen", 1 / 5)])
@pytest.mark.parametrize("paths", ["disjoint", "shortest", "ksp:4"])
def test_pmcf_reaches_the_optimum_on_symmetric_graphs(spec, optimum, paths):
    sol = solve(from_spec(spec), method="pmcf", paths=paths)
    assert sol.concurrent_flow == pytest.approx(optimum, rel=1e-6)
    assert sol.gap <= 1e-6
    for p in sol.paths:
        assert p.nodes[0] == p.src and p.nodes[-1] == p.dst


def test_pmcf_and_extp_never_exceed_mcf():
    topo = from_spec("genkautz:20,3")
    mcf = solve(topo, method="mcf-decomp")
    disjoint = solve(topo, method="pmcf", paths="disjoint")
    shortest = solve(topo, method="pmcf", paths="shortest")
    extp = solve(topo, method="mcf-extp")
    for sol in (disjoint, shortest, extp):
        assert sol.concurrent_flow <= mcf.upper_bound * (1 + 1e-9)
        assert sol.upper_bound >= mcf.concurrent_flow * (1 - 1e-6)  # still a bound on the true optimum
    # shortest paths alone are visibly suboptimal on an expander (design source §5.3)
    assert shortest.concurrent_flow < mcf.concurrent_flow * 0.99
    assert shortest.gap > 0.01
    assert extp.concurrent_flow == pytest.approx(mcf.concurrent_flow, rel=1e-4)


def test_mcf_extp_reaches_two_fifths_on_k44():
    sol = solve(from_spec("bipartite:4"), method="mcf-extp")
    assert sol.concurrent_flow == pytest.approx(2 / 5, rel=1e-6)
    assert sol.gap <= 1e-6
    weights = np.zeros(64)
    for p in sol.paths:
        weights[p.src * 8 + p.dst] += p.weight
    s, d = np.divmod(np.arange(64), 8)
    np.testing.assert_allclose(weights[s != d], 1.0)


def test_mcf_extp_with_mcf_base_and_nic_fabric():
    fabric = Fabric(parse_bandwidth("25Gbps"), parse_bandwidth("100Gbps"), "nic")
    sol = solve(from_spec("torus:3x3"), fabric, method="mcf-extp", base="mcf")
    assert sol.concurrent_flow == pytest.approx(1 / 3, rel=1e-6)  # odd k, n=2: 8/(3*8)
    assert sol.info["base"] == "mcf"


def test_widest_paths_greedy_order():
    # diamond 0->1->3 (width 0.7) and 0->2->3 (0.3), plus a 1->2 cross link of 0.2
    topo = Topology.from_links("diamond", 4, [(0, 1), (1, 3), (0, 2), (2, 3), (1, 2)], undirected=False)
    flow = {(0, 1): 0.7, (1, 3): 0.5, (0, 2): 0.3, (2, 3): 0.5, (1, 2): 0.2}
    links = np.array([topo.link_index(u, v) for u, v in flow])
    got = widest_paths(topo, links, np.array(list(flow.values())), 0, 3)
    assert [p for p, _ in got] == [(0, 1, 3), (0, 2, 3), (0, 1, 2, 3)]
    assert [w for _, w in got] == pytest.approx([0.5, 0.3, 0.2])
    # residue below tol is ignored
    assert widest_paths(topo, links, np.array(list(flow.values())), 0, 3, tol=0.25) == got[:2]
