"""Host distances, the distance bound on F and the Theorem 1 lower bound (Basu et al. §5.4)."""

from fractions import Fraction

import networkx as nx
import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.topology import Topology, from_spec
from a2a_compiler.topology.files import parse_edge_list
from a2a_compiler.topology.metrics import (
    DistanceStats, arborescence_depth_sum, distance_bound, distance_stats, host_distances, hosts_connected, thm1_lower_bound,
)


def nx_host_distances(t):
    lengths = dict(nx.all_pairs_shortest_path_length(t.to_networkx()))
    return np.array([[lengths[s].get(d, np.inf) for d in range(t.n_hosts)] for s in range(t.n_hosts)])


@pytest.mark.parametrize("spec", [
    "torus:3x4", "genkautz:20,3", "dragonfly:2,1,2", "fattree:2,3", "slimfly:3,p=2", "hyperx:3,2,p=2", "petersen",
])
def test_host_distances_match_bfs(spec):
    t = from_spec(spec)
    d = host_distances(t)
    ref = nx_host_distances(t)
    assert np.array_equal(d, ref)
    s = distance_stats(t)
    assert s.diameter == ref.max() and s.total == ref.sum() and s.pairs == t.n_hosts * (t.n_hosts - 1)


@pytest.mark.parametrize("spec", ["genkautz:130,3", "slimfly:5", "fattree:4,3", "jellyfish:70,3,seed=2"])
def test_streamed_bfs_blocks_match_the_table(spec, monkeypatch):
    """distance_stats streams a bit-parallel BFS (64 sources per word) in blocks; with one word per block
    (the smallest memory) it still gives the numbers of the full distance table."""
    from a2a_compiler.topology import metrics

    t = from_spec(spec)
    ref = nx_host_distances(t) if t.n_nodes < 300 else host_distances(t)
    monkeypatch.setattr(metrics, "BFS_MEMORY", 1)
    progress = []
    s = distance_stats(t, progress.append)
    assert (s.diameter, s.total) == (ref.max(), ref.sum())
    points = len(np.unique(metrics.attachment(t)[0]))
    assert len(progress) == -(-points // 64) and progress[-1] == f"distances: BFS from {points}/{points} attachment points"


def test_huge_specs_are_refused_with_the_estimate():
    """issue #18: 'a2a topo genkautz:20000,4' peaked at 16.1 GB; the statistics now stream (289 MB, 14 s:
    docs/results.md), and what would take minutes is refused at once, naming the estimate."""
    with pytest.raises(A2AError, match=r"^torus:300x300: the distance statistics need a BFS from each of 90000 "
                                       r"attachment points over 360000 links \(about 1\.5e\+11 link visits of 64 "
                                       r"sources, over the limit 6e\+09: more than a minute\); too large for 'a2a "
                                       r"topo' \(a2a_compiler\.topology\.metrics\.MAX_BFS_WORDS\)$"):
        distance_stats(from_spec("torus:300x300"))


def test_mixed_leaf_and_direct_hosts():
    # a and b hang off switch s; c is a host that also relays (two cables); d hangs off c
    t = parse_edge_list("switch s\na s\nb s\ns c\nc d\n")
    assert np.array_equal(host_distances(t), nx_host_distances(t))
    # a-b 2, a-c 2, a-d 3 (a-s-c-d), b-c 2, b-d 3, c-d 1, each both ways
    assert host_distances(t)[0, 3] == 3
    assert distance_stats(t) == DistanceStats(diameter=3.0, total=26.0, pairs=12)


# exact F of known-values.md where the distance bound is tight (arc-transitive graphs)
@pytest.mark.parametrize("spec,F", [
    ("torus:3x3x3", Fraction(1, 9)), ("hypercube:3", Fraction(1, 4)), ("hypercube:4", Fraction(1, 8)),
    ("complete:6", Fraction(1)), ("bipartite:4", Fraction(2, 5)), ("petersen", Fraction(1, 5)),
    ("ring:8", Fraction(2, 16)), ("torus:4x4x4", Fraction(8, 4**4)),
])
def test_distance_bound_equals_known_F(spec, F):
    assert distance_bound(from_spec(spec)) == pytest.approx(float(F), rel=1e-12)


def test_torus_3x3x3_distances():
    t = from_spec("torus:3x3x3")
    s = distance_stats(t)
    assert s.diameter == 3 and s.total == 27 * 54 and s.mean == pytest.approx(54 / 26)
    assert distance_bound(t, s) == pytest.approx(162 / (27 * 54))


def test_distance_bound_counts_capacities():
    t = Topology.from_links("cap", 3, [(0, 1), (1, 2)], capacity=[2.0, 3.0])
    # sum of capacities 2*(2+3) = 10; distances 1,2,1 each way: 8
    assert distance_bound(t) == pytest.approx(10 / 8)


@pytest.mark.parametrize("d,k", [(2, 3), (3, 4), (4, 2), (7, 3)])
def test_arborescence_depth_sum_closed_form(d, k):
    """Full k-layer tree: N = (d^k - 1)/(d - 1), depth sum = (d^(k+1)(k-1) - d^k k + d)/(d-1)^2 (eq. after 25)."""
    n = (d**k - 1) // (d - 1)
    assert arborescence_depth_sum(n, d) == (d ** (k + 1) * (k - 1) - d**k * k + d) // (d - 1) ** 2


def test_arborescence_depth_sum_partial_level():
    assert arborescence_depth_sum(5, 2) == 1 * 2 + 2 * 2
    assert arborescence_depth_sum(27, 6) == 6 + 2 * 20
    assert arborescence_depth_sum(4, 1) == 0 + 1 + 2 + 3
    assert arborescence_depth_sum(1, 3) == 0


def test_thm1_bound_values():
    assert thm1_lower_bound(from_spec("torus:3x3x3")) == pytest.approx(46 / 6)
    assert thm1_lower_bound(from_spec("genkautz:64,4")) == pytest.approx(arborescence_depth_sum(64, 4) / 4)
    # Moore graphs meet Theorem 1 with equality: BFS trees are full arborescences
    for spec in ["petersen", "slimfly:5,p=0"]:
        t = from_spec(spec)
        assert thm1_lower_bound(t) == pytest.approx(1 / distance_bound(t))


@pytest.mark.parametrize("spec", ["torus:3x3x3", "hypercube:5", "slimfly:7,p=0", "jellyfish:40,5,seed=3", "xpander:3,6,seed=2"])
def test_distance_bound_dominates_thm1_on_regular_graphs(spec):
    """For d-regular graphs each source's BFS levels hold at most d^k nodes, so Σdist/|A| >= Thm. 1."""
    t = from_spec(spec)
    assert 1 / distance_bound(t) >= thm1_lower_bound(t) - 1e-12


def test_thm1_undefined_with_switches_or_capacities():
    assert thm1_lower_bound(from_spec("fattree:2,2")) is None
    assert thm1_lower_bound(Topology.from_links("c", 3, [(0, 1), (1, 2), (0, 2)], capacity=2.0)) is None


def test_hosts_connected():
    assert hosts_connected(from_spec("genkautz:10,2"))
    assert not hosts_connected(Topology.from_links("oneway", 3, [(0, 1), (1, 2)], undirected=False))
    # an isolated switch does not matter; only hosts must be connected
    assert hosts_connected(Topology.from_links("sw", 2, [(0, 1)], n_switches=1))
