"""Topology model: canonical form, conversions, JSON round trip and its errors, edge-list files."""

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp

from a2a_compiler.errors import DisconnectedError, FormatError
from a2a_compiler.topology import Topology, from_spec
from a2a_compiler.topology.files import load_topology_file, parse_edge_list


def same(a: Topology, b: Topology) -> bool:
    return (
        a.spec == b.spec and a.n_hosts == b.n_hosts and a.n_switches == b.n_switches
        and np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
        and np.array_equal(a.capacity, b.capacity) and a.names == b.names
        and a.coords == b.coords and a.notes == b.notes
    )


def test_from_links_canonical_form():
    t = Topology.from_links("t", 3, [(2, 0), (0, 1), (1, 0), (1, 1)], capacity=[1.0, 2.0, 2.0, 5.0])
    # cables 2-0 and 0-1 (twice: the duplicate collapses), loop dropped; sorted by (src, dst)
    assert list(zip(t.src.tolist(), t.dst.tolist())) == [(0, 1), (0, 2), (1, 0), (2, 0)]
    assert t.capacity.tolist() == [2.0, 1.0, 2.0, 1.0]
    assert t.link_index(2, 0) == 3
    with pytest.raises(KeyError):
        t.link_index(1, 2)
    assert not t.src.flags.writeable
    inc = t.incidence().toarray()
    assert inc.sum() == 0 and inc[:, 0].tolist() == [-1, 1, 0]


def test_unsorted_links_are_refused():
    with pytest.raises(FormatError, match="links must be sorted, unique and loop-free"):
        Topology("x", 2, 0, np.array([1, 0]), np.array([0, 1]), np.ones(2), ("a", "b"))


@pytest.mark.parametrize("spec", ["torus:3x3x3", "genkautz:20,3", "fattree:2,3", "slimfly:4,p=2", "hypercube:3"])
def test_json_round_trip_is_exact(spec, tmp_path):
    t = from_spec(spec)
    path = t.save(tmp_path / "t.json")
    back = Topology.load(path)
    assert same(t, back)
    assert back.to_json_dict() == t.to_json_dict()
    assert load_topology_file(path).to_json_dict() == t.to_json_dict()
    assert path.read_text() == back.save(tmp_path / "again.json").read_text()


def test_json_round_trip_keeps_fractional_capacities(tmp_path):
    t = Topology.from_links("caps", 2, [(0, 1)], n_switches=1, capacity=0.1 + 0.2)
    back = Topology.load(t.save(tmp_path / "c.json"))
    assert back.capacity.tolist() == [0.1 + 0.2, 0.1 + 0.2] and back.n_switches == 1


def test_networkx_and_scipy_round_trip():
    t = from_spec("dragonfly:2,1,1")
    g = t.to_networkx()
    assert g.number_of_edges() == t.n_links and g.nodes[0]["host"] and not g.nodes[t.n_nodes - 1]["host"]
    back = Topology.from_networkx(g, spec=t.spec)
    assert np.array_equal(back.src, t.src) and np.array_equal(back.dst, t.dst) and back.n_hosts == t.n_hosts
    und = Topology.from_networkx(nx.cycle_graph(5))
    assert und.n_links == 10
    a = t.adjacency()
    assert isinstance(a, sp.csr_array) and a.sum() == t.capacity.sum()
    again = Topology.from_adjacency(a, n_hosts=t.n_hosts)
    assert np.array_equal(again.src, t.src) and np.array_equal(again.dst, t.dst) and again.n_switches == t.n_switches


@pytest.mark.parametrize("payload,message", [
    ('{"format": "other"}', 'not an a2a-topology file'),
    ('{"format": "a2a-topology", "hosts": 2}', "bad or missing field: 'links'"),
    ('{"format": "a2a-topology", "hosts": 2, "links": [[0, 1]]}', "links[0] must be [src, dst, capacity]"),
    ('{"format": "a2a-topology", "hosts": 2, "links": [[0, 1, 1], [0, 1, 1]]}', "duplicate links or self-loops"),
    ('{"format": "a2a-topology", "hosts": 2, "links": [[0, 5, 1]]}', "link endpoint outside 0..1"),
    ('{"format": "a2a-topology", "hosts": 2, "links": [[0, 1.5, 1]]}', "link endpoints must be integers"),
    ('{"format": "a2a-topology", "hosts": 2, "links": [[0, 1, -1]]}', "capacities must be finite and >= 0"),
    ('{"format": "a2a-topology", "hosts": 2, "switches": -1, "links": []}', '"switches" must be >= 0'),
    ('{"format": "a2a-topology",\n "hosts": 2,,}', "invalid JSON at line 2, column 13"),
])
def test_bad_json_files(payload, message, tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(payload)
    with pytest.raises(FormatError) as exc:
        load_topology_file(path)
    assert message in str(exc.value)


EDGES = """\
# two hosts on a switch, plus a direct cable to a third host
switch s
a s
b s 2.5   # a fat cable
c a
"""


def test_edge_list_reader(tmp_path):
    path = tmp_path / "net.txt"
    path.write_text(EDGES)
    t = load_topology_file(path)
    assert (t.n_hosts, t.n_switches) == (3, 1) and t.names == ("a", "b", "c", "s")
    assert t.spec == f"file:{path}" and t.is_symmetric()
    assert t.capacity[t.link_index(1, 3)] == 2.5 and t.capacity[t.link_index(3, 1)] == 2.5
    assert t.capacity[t.link_index(2, 0)] == 1.0 and t.n_links == 6


def test_edge_list_integer_names_and_directed():
    t = parse_edge_list("directed\n10 2\n2 1\n1 10\n")
    assert t.names == ("1", "2", "10")              # all-integer host names sort numerically
    assert list(zip(t.src.tolist(), t.dst.tolist())) == [(0, 2), (1, 0), (2, 1)]
    assert not t.is_symmetric()


@pytest.mark.parametrize("text,message", [
    ("a b\nc\n", "line 2: expected 'u v [capacity]', got 1 fields"),
    ("a b x\n", "line 1: field 3 (capacity) 'x' is not a number"),
    ("a b 0\n", "line 1: field 3 (capacity) must be positive and finite, got '0'"),
    ("a b\n\nb a\n", "line 3: duplicate cable b a (first on line 1)"),
    ("a a\n", "line 1: self-loop a a"),
    ("a b\ndirected\n", "line 2: 'directed' must come before the first link line"),
    ("switch\n", "line 1: 'switch' needs at least one node name"),
    ("# nothing\n", "no link lines"),
])
def test_edge_list_errors(text, message):
    with pytest.raises(FormatError) as exc:
        parse_edge_list(text, "net.txt")
    assert str(exc.value).startswith("net.txt") and message in str(exc.value)


def test_disconnected_file_is_refused(tmp_path):
    path = tmp_path / "two.txt"
    path.write_text("a b\nc d\n")
    with pytest.raises(DisconnectedError, match="is disconnected"):
        load_topology_file(path)
    one_way = tmp_path / "oneway.txt"
    one_way.write_text("directed\na b\nb c\n")
    with pytest.raises(DisconnectedError):
        load_topology_file(one_way)


def test_too_few_hosts(tmp_path):
    path = tmp_path / "one.txt"
    path.write_text("switch s\na s\n")
    with pytest.raises(FormatError, match="needs at least 2 hosts \\(non-switch nodes\\), found 1"):
        load_topology_file(path)
    path = tmp_path / "one.json"
    path.write_text('{"format": "a2a-topology", "hosts": 1, "links": []}')
    with pytest.raises(FormatError, match="found 1"):
        load_topology_file(path)


def test_file_spec_and_missing_file(tmp_path):
    path = tmp_path / "ring.json"
    from_spec("ring:5").save(path)
    assert from_spec(f"file:{path}").n_links == 10
    with pytest.raises(FormatError, match="cannot read"):
        from_spec(f"file:{tmp_path / 'missing.json'}")
