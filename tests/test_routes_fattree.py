"""Zahavi et al. 2009 fat-tree routing (ftree) and OpenSM MinHop: tree extraction, tables, shift congestion."""

import json

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.routes import route
from a2a_compiler.routes.ftree import extract_tree, ftree_tables
from a2a_compiler.routes.lft import all_pairs, hop_links, trace
from a2a_compiler.routes.minhop import minhop_tables
from a2a_compiler.routes.patterns import pattern_congestion, shift_congestion
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.puncture import puncture


def table_congestion(spec, tables):
    t = from_spec(spec)
    src, dst = all_pairs(t.n_hosts)
    links = hop_links(t, trace(t, tables(t), src, dst))
    return shift_congestion(t.n_hosts, t.capacity, src, dst, links)


def ftree_tables_of(t):
    return ftree_tables(extract_tree(t))


@pytest.mark.parametrize("spec,radix", [
    ("fattree:2,3", (2, 2)), ("fattree:3,3", (3, 3)), ("vartree:4,2,2", (2, 2)), ("vartree:4,4,2,w=1x2", (4, 2)),
    ("fattree:4,3,merge=2,hosts=32", (4, 4)), ("fattree:2,4,merge=2", (2, 2, 2)), ("fattree:4,3,hosts=30", (4, 4)),
])
def test_extraction_recovers_the_generators_tuples(spec, radix):
    """Algorithm 1 labels every switch (r, S) exactly as Def. 2 numbers it (the generator names it s<r>:<I_S>)."""
    t = from_spec(spec)
    order = extract_tree(t)
    assert order.levels == len(radix) + 1
    place = np.concatenate([[1], np.cumprod(radix)])[:-1]
    for v in range(t.n_hosts, t.n_nodes):
        r, index = map(int, t.names[v][1:].split(":"))
        assert order.level[v] == r and order.digits[v] @ place == index
    assert np.array_equal(order.leaves, np.flatnonzero(order.level == 0))
    assert sorted(order.slots[order.slots >= 0]) == list(range(t.n_hosts))


@pytest.mark.parametrize("spec", ["fattree:2,4", "fattree:4,2", "fattree:4,3", "fattree:4,4", "fattree:12,2",
                                  "fattree:12,3"])
def test_ftree_is_congestion_free_on_full_k_ary_n_trees(spec):
    """Table I: Zahavi's routing gives every shift stage congestion 1 on 1:1-CBB trees, 1728 hosts included."""
    c = table_congestion(spec, ftree_tables_of)
    assert c.worst == 1.0 and c.average == 1.0


@pytest.mark.parametrize("spec,worst,total", [
    ("fattree:2,4", 4, 36),      # Table I: 4 / 2.4
    ("fattree:4,3", 4, 204),     # Table I: 4 / 3.2
    ("fattree:4,4", 16, 3120),   # Table I: 16 / 12
    ("fattree:4,2", 1, 15),      # Table I: 1 / 1
])
def test_minhop_congests_where_table_1_says(spec, worst, total):
    c = table_congestion(spec, minhop_tables)
    assert c.worst == worst and c.per_stage.sum() == total


@pytest.mark.parametrize("spec,ftree_c,minhop_c", [
    ("fattree:4,3,hosts=32", (1, 31), (4, 76)),   # half 4-ary-3-tree; Table I: 1/1 and 4/2.5
    ("fattree:4,3,hosts=48", (1, 47), (4, 140)),  # 3/4 of a 4-ary-3-tree; Table I: 1/1 and 4/3
    ("vartree:4,4,2", (2, 46), (4, 76)),          # CBB 1/2 on the second stage: ftree's constant 2
    ("fattree:4,3,merge=2", (1, 63), (2, 106)),   # merged roots
])
def test_partial_and_reduced_trees(spec, ftree_c, minhop_c):
    for tables, (worst, total) in ((ftree_tables_of, ftree_c), (minhop_tables, minhop_c)):
        c = table_congestion(spec, tables)
        assert (c.worst, c.per_stage.sum()) == (worst, total)


@pytest.mark.parametrize("algo,spec", [("ftree", "fattree:4,3"), ("minhop", "fattree:2,4"), ("ftree", "vartree:4,4,2")])
def test_congestion_equals_what_the_emitted_routes_give(algo, spec):
    t = from_spec(spec)
    routes = route(t, algo)
    assert len(routes.paths) == t.n_hosts * (t.n_hosts - 1)
    assert all(p.weight == 1.0 and p.layer == 0 for p in routes.paths)
    tables = ftree_tables_of if algo == "ftree" else minhop_tables
    assert np.array_equal(pattern_congestion(routes).per_stage, table_congestion(spec, tables).per_stage)
    # minimal routes: up to the nearest common ancestor and down
    hops = np.array([len(p.nodes) - 1 for p in routes.paths])
    assert hops.max() == 2 * extract_tree(t).levels


def test_ftree_routes_are_destination_based_up_down():
    t = from_spec("fattree:4,3")
    order = extract_tree(t)
    nxt = ftree_tables(order)
    routes = route(t, "ftree")
    for p in routes.paths[::97]:
        assert all(nxt[u, p.dst] == v for u, v in zip(p.nodes, p.nodes[1:]))
        lv = order.level[list(p.nodes[1:-1])]
        top = int(np.argmax(lv))
        assert np.all(np.diff(lv[:top + 1]) == 1) and np.all(np.diff(lv[top:]) == -1)


def test_place_keepers_for_missing_hosts():
    """§3.2: a punctured tree keeps its slots (missing hosts are routed as place keepers), so each remaining
    host is routed exactly like the host on the same leaf port of the full tree."""
    full = from_spec("fattree:4,3")
    t = puncture(full, remove_nodes=5, seed=2)
    order = extract_tree(t)
    assert order.slots.shape == (16, 4) and (order.slots < 0).sum() == 5
    leaf, port = np.nonzero(order.slots >= 0)
    slot_host = np.empty(t.n_hosts, dtype=np.int64)
    slot_host[order.slots[leaf, port]] = 4 * leaf + port        # the full tree's host on that leaf port
    to_full = np.concatenate([slot_host, np.arange(64, full.n_nodes)])
    nxt, nxt_full = ftree_tables(order), ftree_tables(extract_tree(full))
    sw = nxt[t.n_hosts:]
    assert np.array_equal(np.where(sw >= 0, to_full[sw], -1), nxt_full[64:][:, slot_host])


@pytest.mark.parametrize("spec,message", [
    ("torus:3x3x3", "ftree: torus:3x3x3 has no switches"),
    ("slimfly:5", "are linked but not on adjacent levels"),
    ("dragonfly:4,2,2", "are linked but not on adjacent levels"),
])
def test_ftree_refuses_non_trees(spec, message):
    with pytest.raises(A2AError, match=message):
        route(from_spec(spec), "ftree")


def test_ftree_names_a_missing_link():
    t = puncture(from_spec("fattree:4,3"), remove_links=1, seed=4)
    with pytest.raises(A2AError, match="ftree: .* is not a var-ary-n-tree .*has no link"):
        route(t, "ftree")


def test_minhop_routes_any_topology_minimally():
    """The Hoffman–Singleton graph has one shortest path per pair: every link carries 1 + 6 + 6 of them."""
    routes = route(from_spec("slimfly:5,p=0"), "minhop", Fabric())
    assert max(len(p.nodes) - 1 for p in routes.paths) == 2
    assert np.all(routes.link_loads() == 13.0)


def test_cli_pattern_shift(capsys):
    from a2a_compiler.cli import main

    assert main(["routes", "fattree:2,4", "--algo", "minhop", "--pattern", "shift", "--json", "-q"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["pattern"], d["congestion_worst"], d["stages"]) == ("shift", 4.0, 15)
    assert d["congestion_avg"] == pytest.approx(36 / 15)
    assert main(["routes", "fattree:2,4", "--algo", "ftree", "--pattern", "shift", "-q"]) == 0
    assert "pattern    shift: congestion worst 1, average 1 over 15 stages" in capsys.readouterr().out


def test_ftree_names_a_leaf_without_hosts():
    """A leaf switch whose hosts are all gone looks like a root to the level BFS; Def. 2's check names it."""
    from a2a_compiler.topology import Topology

    t = from_spec("fattree:4,3")
    keep = np.ones(t.n_nodes, dtype=bool)
    keep[60:64] = False                                    # the last leaf's four hosts
    new = np.cumsum(keep) - 1
    ok = keep[t.src] & keep[t.dst]
    holey = Topology.from_links("holey", 60, np.stack([new[t.src[ok]], new[t.dst[ok]]], 1),
                                n_switches=t.n_switches, undirected=False)
    with pytest.raises(A2AError, match=r"linked switches sw15 \(4, 0\) and sw29 \(3, 1\) differ in more than digit 1 "
                                       r"\(a leaf switch without hosts cannot be ranked"):
        route(holey, "ftree")
