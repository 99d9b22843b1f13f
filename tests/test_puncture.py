"""Punctured topologies: K random cables/arcs or hosts removed, seeded, disconnection reported."""

import networkx as nx
import numpy as np
import pytest

from a2a_compiler.errors import DisconnectedError, SpecError
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.puncture import puncture


def named_links(t):
    return {(t.names[u], t.names[v]) for u, v in zip(t.src.tolist(), t.dst.tolist())}


def test_remove_cables_both_directions():
    t = from_spec("torus:3x3x3")
    p = puncture(t, remove_links=3, seed=1)
    assert p.spec == "torus:3x3x3 -links 3 seed=1"
    assert p.n_hosts == 27 and p.n_links == t.n_links - 6 and p.is_symmetric()
    gone = named_links(t) - named_links(p)
    assert len(gone) == 6 and all((v, u) in gone for u, v in gone)
    assert named_links(p) <= named_links(t)


def test_seeded_and_deterministic():
    t = from_spec("hypercube:4")
    a, b = puncture(t, remove_links=4, seed=7), puncture(t, remove_links=4, seed=7)
    assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
    c = puncture(t, remove_links=4, seed=8)
    assert named_links(c) != named_links(a)


def test_directed_graphs_lose_single_arcs():
    t = from_spec("genkautz:64,4")
    p = puncture(t, remove_links=5, seed=2)
    assert p.n_links == t.n_links - 5 and named_links(p) < named_links(t)


def test_remove_hosts_renumbers_hosts_first():
    t = from_spec("fattree:2,3")
    p = puncture(t, remove_nodes=2, seed=3)
    assert p.spec == "fattree:2,3 -nodes 2 seed=3"
    assert (p.n_hosts, p.n_switches) == (6, 12)
    removed = set(t.names[:8]) - set(p.names[:6])
    assert len(removed) == 2 and all(n.startswith("h") for n in p.names[:6])
    assert [int(n[1:]) for n in p.names[:6]] == sorted(int(n[1:]) for n in p.names[:6])  # order kept
    assert p.names[6:] == t.names[8:]
    assert named_links(p) == {(u, v) for u, v in named_links(t) if u not in removed and v not in removed}


def test_both_kinds_and_spec_record():
    p = puncture(from_spec("torus:4x4"), remove_links=2, remove_nodes=1, seed=5)
    assert p.spec == "torus:4x4 -nodes 1 -links 2 seed=5"
    assert p.n_hosts == 15 and p.n_links == 64 - 8 - 4


@pytest.mark.parametrize("spec,kwargs,directed", [
    ("ring:8", {"remove_nodes": 2}, False),
    ("torus:2x4", {"remove_links": 4}, False),
    ("genkautz:12,2", {"remove_links": 3}, True),
])
def test_disconnection_detected_exactly(spec, kwargs, directed):
    """Over many seeds: an error iff networkx finds the hosts (strongly) disconnected."""
    t = from_spec(spec)
    outcomes = set()
    for seed in range(25):
        try:
            p = puncture(t, seed=seed, **kwargs)
        except DisconnectedError as exc:
            assert f"{spec} is disconnected after removing" in str(exc) and f"(seed {seed})" in str(exc)
            outcomes.add("disconnected")
            continue
        g = p.to_networkx()
        assert nx.is_strongly_connected(g) if directed else nx.is_connected(g.to_undirected())
        outcomes.add("connected")
    assert outcomes == {"connected", "disconnected"}


def test_disconnected_message():
    with pytest.raises(DisconnectedError) as exc:
        puncture(from_spec("ring:8"), remove_links=2, seed=0)
    assert str(exc.value).startswith("ring:8 is disconnected after removing 2 random cables (seed 0)")


def test_bad_counts():
    t = from_spec("ring:5")
    with pytest.raises(SpecError, match="K=6 exceeds the 5 cables of ring:5"):
        puncture(t, remove_links=6)
    with pytest.raises(SpecError, match="K=4 would leave fewer than 2 of the 5 hosts"):
        puncture(t, remove_nodes=4)
    with pytest.raises(SpecError, match="K must be >= 0"):
        puncture(t, remove_links=-1)
    with pytest.raises(SpecError, match="--seed: must be >= 0"):
        puncture(t, remove_links=1, seed=-1)
    assert puncture(t) is t
