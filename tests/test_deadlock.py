"""Channel dependency graphs and the layer schemes (LASH, LASH-sequential, DFSSSP)."""

import numpy as np
import pytest

from a2a_compiler.deadlock import SCHEMES, assign_layers, channel_dependency_graph, find_deadlock
from a2a_compiler.errors import A2AError
from a2a_compiler.routes import route
from a2a_compiler.topology.spec import from_spec

# The four two-hop routes around a unidirectional 4-ring: each waits on the next one's channel,
# a cycle of 4 dependencies 0->1 => 1->2 => 2->3 => 3->0 => 0->1.
RING = [(0, 1, 2), (1, 2, 3), (2, 3, 0), (3, 0, 1)]


def classes(paths, layers):
    return [(int(k),) * (len(p) - 1) for p, k in zip(paths, layers)]


def test_cdg_finds_the_ring_cycle_and_layers_break_it():
    g = channel_dependency_graph(RING, classes(RING, [0, 0, 0, 0]))
    assert g.n_dependencies == 4 and len(g.channels) == 4
    assert g.find_cycle() == [(0, 1, 0), (1, 2, 0), (2, 3, 0), (3, 0, 0)]
    assert find_deadlock(RING, classes(RING, [0] * 4)) == \
        "0->1 (vc 0) -> 1->2 (vc 0) -> 2->3 (vc 0) -> 3->0 (vc 0) -> back to 0->1"
    assert find_deadlock(RING, classes(RING, [0, 0, 0, 1])) is None
    # per-hop virtual channels: one route switching to vc 1 after the wrap (a dateline) breaks it
    assert find_deadlock(RING, [(0, 0), (0, 0), (0, 0), (0, 1)]) is None
    assert find_deadlock(RING, [(1, 1)] * 4) == \
        "0->1 (vc 1) -> 1->2 (vc 1) -> 2->3 (vc 1) -> 3->0 (vc 1) -> back to 0->1"


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_every_scheme_breaks_the_ring_with_two_layers(scheme):
    layers = assign_layers(RING, scheme)
    assert layers.max() == 1
    assert find_deadlock(RING, classes(RING, layers)) is None
    with pytest.raises(A2AError, match=f"^{scheme}: the routes need more than --max-layers 1 virtual layers"):
        assign_layers(RING, scheme, max_layers=1)


def test_lash_keeps_pairs_together_and_lash_seq_splits_them():
    # two routes of pair (0, 2) that together with the rest close the ring
    paths = [(0, 1, 2), (0, 3, 2), (1, 2, 3), (2, 3, 0), (3, 0, 1)]
    pairs = [(0, 2), (0, 2), (1, 3), (2, 0), (3, 1)]
    lash = assign_layers(paths, "lash", pairs=pairs)
    assert lash[0] == lash[1]
    seq = assign_layers(paths, "lash-seq", pairs=pairs)
    for layers in (lash, seq):
        assert find_deadlock(paths, classes(paths, layers)) is None
    assert seq.max() <= lash.max()


def test_unknown_scheme_and_bad_max_layers():
    with pytest.raises(A2AError, match="unknown deadlock scheme 'updn'"):
        assign_layers(RING, "updn")
    with pytest.raises(A2AError, match="--max-layers must be >= 1"):
        assign_layers(RING, "lash", max_layers=0)


@pytest.fixture(scope="module")
def routed():
    """Routes of several engines on small topologies (paths, pairs)."""
    out = {}
    for spec, algo in [("torus:3x3x3", "mcf-extp"), ("torus:3x3x3", "ewsp"), ("hypercube:4", "ewsp"),
                       ("torus:4x4", "mcf-extp"), ("genkautz:32,3", "pmcf-disjoint"), ("bipartite:4", "sssp")]:
        rs = route(from_spec(spec), algo)
        out[(spec, algo)] = ([p.nodes for p in rs.paths], [(p.src, p.dst) for p in rs.paths])
    return out


def test_schemes_are_acyclic_and_lash_seq_never_needs_more_than_lash(routed):
    for key, (paths, pairs) in routed.items():
        counts = {}
        for scheme in SCHEMES:
            layers = assign_layers(paths, scheme, pairs=pairs)
            assert find_deadlock(paths, classes(paths, layers)) is None, (key, scheme)
            counts[scheme] = int(layers.max()) + 1
        assert counts["lash-seq"] <= counts["lash"], (key, counts)


def test_torus_mcf_extp_needs_at_most_four_lash_seq_layers(routed):
    """Basu et al. §5.5: LASH-sequential needed no more than 4 layers."""
    paths, pairs = routed[("torus:3x3x3", "mcf-extp")]
    assert find_deadlock(paths, classes(paths, np.zeros(len(paths)))) is not None   # one layer is not enough
    assert 2 <= assign_layers(paths, "lash-seq", pairs=pairs).max() + 1 <= 4


def test_a_long_cycle_is_described_by_its_first_channels_and_length():
    from a2a_compiler.deadlock.cdg import describe_cycle

    assert describe_cycle([(0, 1, 0), (1, 2, 0), (2, 0, 1)]) == "0->1 (vc 0) -> 1->2 (vc 0) -> 2->0 (vc 1) -> back to 0->1"
    assert describe_cycle([(i, i + 1, 0) for i in range(20)]) == (
        "0->1 (vc 0) -> 1->2 (vc 0) -> 2->3 (vc 0) -> 3->4 (vc 0) -> 4->5 (vc 0) -> 5->6 (vc 0) -> 6->7 (vc 0) -> "
        "7->8 (vc 0) -> ... (20 channels) -> back to 0->1")
