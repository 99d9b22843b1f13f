"""OpenSM's ftree and MinHop on fat trees, per cable: tree construction, tables, fast path, shift congestion."""

import json

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.routes import route, route_tables
from a2a_compiler.routes.ftree import fat_tree, ftree_tables
from a2a_compiler.routes.lft import hop_links
from a2a_compiler.routes.patterns import pattern_congestion, shift_congestion
from a2a_compiler.topology import Topology, from_spec
from a2a_compiler.topology.puncture import puncture


def congestion(spec, algo):
    c = route_tables(from_spec(spec), algo).measure().shift
    return c.worst, int(round(c.per_stage.sum() * 1000))


@pytest.mark.parametrize("spec", ["fattree:4,2", "fattree:4,3", "fattree:3,3", "fattree:8,2", "vartree:4,2,4",
                                  "vartree:4,4,2", "vartree:3,2,5", "fattree:6,3"])
def test_fast_path_equals_opensms_recursion_entry_for_entry(spec):
    """On 2- and 3-level trees of single cables the vectorised tables are OpenSM's recursion's, every entry
    (switch rows the routes never use included)."""
    t = from_spec(spec)
    exact, tree, fast = ftree_tables(t, exact=True)
    quick, _, was_fast = ftree_tables(t, exact=False)
    assert not fast and was_fast
    assert np.array_equal(exact, quick)
    assert (exact[t.n_hosts:] >= 0).all()                  # complete: every switch has every host


@pytest.mark.parametrize("spec", ["fattree:4,2", "fattree:4,3", "fattree:3,3", "vartree:4,2,4"])
def test_switch_lids_from_the_fast_path_equal_opensms_recursion(spec):
    """fabric_route_to_switches continued from the fast path's ascent counts gives the recursion's entries for
    the switches' own LIDs; roots reach no other root (no up/down path: -2)."""
    from a2a_compiler.routes.ftree import _tables

    t = from_spec(spec)
    exact, fast = _tables(t, True)[3](), _tables(t, False)[3]()
    assert np.array_equal(exact, fast) and (np.diag(exact) == -1).all() and (exact == -2).any()


@pytest.mark.parametrize("spec,fast", [("fattree:4,3,merge=2", False), ("fattree:2,4", False),
                                       ("fattree:4,3,merge=2,hosts=32", False), ("fattree:4,3,hosts=48", True),
                                       ("fattree:4,3", True)])
def test_engine_takes_the_fast_path_only_where_it_applies(spec, fast):
    assert route_tables(from_spec(spec), "ftree").info["fast_path"] is fast


def test_opensm_indexing_labels_the_generators_switches():
    """OpenSM's BFS indexing from the first leaf (GUID order, ports in order) numbers the switches of our
    k-ary-n-trees as Def. 2 does: the leaves come in generator order, their hosts in host order."""
    t = from_spec("fattree:4,3")
    tree = fat_tree(t)
    assert tree.levels == 3 and tree.max_cn == 4
    assert [int(tree.node[s]) for s in tree.leaves] == list(range(64, 80))
    assert [h for hosts in tree.cns for h in hosts] == list(range(64))


@pytest.mark.parametrize("spec", ["fattree:2,4", "fattree:4,2", "fattree:4,3", "fattree:4,4", "fattree:12,2"])
def test_ftree_is_congestion_free_on_full_k_ary_n_trees(spec):
    """Table I: every shift stage has congestion 1 on 1:1-CBB trees."""
    t = from_spec(spec)
    c = route_tables(t, "ftree").measure().shift
    assert c.worst == 1.0 and c.average == 1.0 and len(c.per_stage) == t.n_hosts - 1


@pytest.mark.parametrize("spec,worst,total", [
    ("fattree:2,4", 4, 36),      # Table I row 2: 4 / 2.4
    ("fattree:4,3", 4, 204),     # row 14: 4 / 3.2
    ("fattree:4,4", 16, 3120),   # row 19: 16 / 12
    ("fattree:4,2", 1, 15),      # row 3: 1 / 1
])
def test_minhop_congests_where_table_1_says(spec, worst, total):
    c = route_tables(from_spec(spec), "minhop").measure().shift
    assert c.worst == worst and c.per_stage.sum() == total


@pytest.mark.parametrize("spec,row,worst,total", [
    ("fattree:2,4,merge=2", 6, 4, 36),     # 4 / 2.4
    ("fattree:4,3,merge=4", 15, 4, 204),   # 4 / 3.2
    ("fattree:4,3,merge=2", 16, 4, 204),   # 4 / 3.2
])
def test_merged_roots_per_cable_reproduce_table_1(spec, row, worst, total):
    """Counted per cable, as a forwarding entry pins one cable of a merged root's port group, MinHop congests
    Table I's merged-root rows as the paper prints them (a port group counted as one link gave 2/1.68, 1/1)."""
    c = route_tables(from_spec(spec), "minhop").measure().shift
    assert (c.worst, c.per_stage.sum()) == (worst, total)


@pytest.mark.parametrize("spec,ftree_c,minhop_c", [
    ("fattree:4,3,hosts=32", (1, 31000), (4, 76000)),   # half 4-ary-3-tree; Table I row 12: 1/1 and 4/2.5
    ("fattree:4,3,hosts=48", (1, 47000), (4, 140000)),  # row 13: 1/1 and 4/3
    ("vartree:4,4,2", (2, 46000), (4, 76000)),          # row 11, CBB 1/2 on the second stage
    ("vartree:6,2,w=3", (1, 11000), (1, 11000)),        # row 1: 3-cable groups, balanced per cable
])
def test_partial_and_reduced_trees(spec, ftree_c, minhop_c):
    assert congestion(spec, "ftree") == ftree_c
    assert congestion(spec, "minhop") == minhop_c


def test_parallel_cables_are_balanced_cable_by_cable():
    """Two 3-cable groups from a leaf to the spines: ftree's and MinHop's entries for the other leaf's 6 hosts
    take each of the 6 up ports once, and a cable's load is counted alone (the MCF still sees capacity 3)."""
    t = from_spec("vartree:6,2,w=3")
    assert t.cables.max() == 3 and t.capacity.max() == 3.0
    for algo in ("ftree", "minhop"):
        tab = route_tables(t, algo)
        up = tab.cable[0, 12][6:]                            # switch s0:0's entries for the other leaf's hosts
        assert sorted(t.cable_port[up].tolist()) == [7, 8, 9, 10, 11, 12]
        assert tab.measure().loads.max() == 11.0             # host cables; each up cable carries 6 x 6 / 6


@pytest.mark.parametrize("algo,spec", [("ftree", "fattree:4,3"), ("minhop", "fattree:2,4"), ("ftree", "vartree:4,4,2")])
def test_congestion_equals_what_the_traced_routes_give(algo, spec):
    t = from_spec(spec)
    routes = route(t, algo)
    assert len(routes.paths) == t.n_hosts * (t.n_hosts - 1)
    assert all(p.weight == 1.0 and p.layer == 0 for p in routes.paths)
    # the routes counted link by link (no port groups here) give the tables' per-cable congestion
    nodes = np.full((len(routes.paths), max(len(p.nodes) for p in routes.paths)), -1)
    for i, p in enumerate(routes.paths):
        nodes[i, :len(p.nodes)] = p.nodes
    src, dst = np.array([p.src for p in routes.paths]), np.array([p.dst for p in routes.paths])
    by_link = shift_congestion(t.n_hosts, t.capacity, src, dst, hop_links(t, nodes))
    assert np.array_equal(by_link.per_stage, routes.tables.measure().shift.per_stage)
    assert np.array_equal(pattern_congestion(routes).per_stage, by_link.per_stage)
    hops = np.array([len(p.nodes) - 1 for p in routes.paths])
    assert hops.max() == 2 * fat_tree(t).levels


def test_ftree_routes_are_destination_based_up_down():
    t = from_spec("fattree:4,3")
    tree = fat_tree(t)
    rank = np.full(t.n_nodes, -1)
    rank[tree.node] = tree.rank
    routes = route(t, "ftree")
    nxt = routes.tables.next_node()
    for p in routes.paths[::97]:
        assert all(nxt[u, p.dst] == v for u, v in zip(p.nodes, p.nodes[1:]))
        lv = -rank[list(p.nodes[1:-1])]                      # rank 0 = root: up then down
        top = int(np.argmax(lv))
        assert np.all(np.diff(lv[:top + 1]) == 1) and np.all(np.diff(lv[top:]) == -1)


def test_missing_hosts_are_routed_as_dummies_after_the_leafs_own():
    """OpenSM routes, on a leaf with fewer hosts than the fullest, dummy destinations after the real ones
    (counted, no entry): a punctured 4-ary-3-tree stays congestion-free in every shift stage it has."""
    t = puncture(from_spec("fattree:4,3"), remove_nodes=5, seed=2)
    tab = route_tables(t, "ftree")
    assert not tab.info["fast_path"] and tab.info["max_hosts_per_leaf"] == 4
    assert (tab.cable[0, t.n_hosts:] >= 0).all()
    assert tab.measure().shift.worst <= 2


@pytest.mark.parametrize("spec,message", [
    ("torus:3x3x3", "ftree: torus:3x3x3 is not a fat tree OpenSM's ftree engine routes .it has 0 switch"),
    ("slimfly:5", r"it has 1 switch level\(s\); OpenSM's ftree needs 2..8"),
    ("dragonfly:4,2,2", r"it has 1 switch level\(s\)"),
])
def test_ftree_refuses_non_trees(spec, message):
    with pytest.raises(A2AError, match=message):
        route_tables(from_spec(spec), "ftree")


def test_ftree_names_switches_that_break_the_tree():
    t = puncture(from_spec("fattree:4,3"), remove_links=1, seed=4)
    with pytest.raises(A2AError, match=r"ftree: .* \(switch s\d:\d+ and switch s\d:\d+ on rank \d have \d and \d "
                                       r"(up|down) port groups\); OpenSM would fall back to minhop"):
        route_tables(t, "ftree")


def test_minhop_routes_any_topology_minimally():
    """The Hoffman–Singleton graph has one shortest path per pair: every link carries 1 + 6 + 6 of them."""
    routes = route(from_spec("slimfly:5,p=0"), "minhop", Fabric())
    assert max(len(p.nodes) - 1 for p in routes.paths) == 2
    assert np.all(routes.link_loads() == 13.0)


def test_cli_reports_congestion_per_cable(capsys):
    from a2a_compiler.cli import main

    assert main(["routes", "fattree:2,4", "--algo", "minhop", "--pattern", "shift", "--json", "-q"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["pattern"], d["congestion_worst"], d["stages"], d["per_cable"]) == ("shift", 4.0, 15, True)
    assert d["congestion_avg"] == pytest.approx(36 / 15)
    assert main(["routes", "fattree:2,4", "--algo", "ftree", "-q"]) == 0
    assert "pattern    shift: congestion worst 1, average 1 over 15 stages (per cable)" in capsys.readouterr().out


def test_ftree_names_a_leaf_without_hosts():
    """A leaf switch whose hosts are all gone is ranked as a root by OpenSM's BFS from the hosts' switches."""
    t = from_spec("fattree:4,3")
    keep = np.ones(t.n_nodes, dtype=bool)
    keep[60:64] = False                                    # the last leaf's four hosts
    new = np.cumsum(keep) - 1
    ok = keep[t.src] & keep[t.dst]
    holey = Topology.from_links("holey", 60, np.stack([new[t.src[ok]], new[t.dst[ok]]], 1),
                                n_switches=t.n_switches, undirected=False)
    with pytest.raises(A2AError, match=r"ftree: holey is not a fat tree .*OpenSM would fall back to minhop"):
        route_tables(holey, "ftree")
