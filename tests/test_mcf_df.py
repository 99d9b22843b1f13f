"""mcf-df: deadlock-free MCF over K channel orders (a2a_compiler.deadlock.orders, solve.dfmcf, routes.mcf_df).

The LP's optimum is checked against an independent path LP (every simple path
enumerated by networkx, kept if monotone in some layer, solved by
scipy.optimize.linprog), the routes against the channel dependency graph,
and the file against ``a2a verify --deadlock-free``.
"""

import json

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog

from a2a_compiler.cli import main
from a2a_compiler.deadlock import find_deadlock
from a2a_compiler.deadlock.orders import channel_orders, coordinate_orders, is_monotone, transitions, updown_orders
from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.routes import route
from a2a_compiler.routes.schedule import route_schedule
from a2a_compiler.solve.dfmcf import deadlock_free_mcf
from a2a_compiler.topology.spec import from_spec


def path_lp_time(topology, keys, fabric=Fabric()):
    """Optimal time over every simple path monotone in one of ``keys``: an LP over enumerated paths (linprog)."""
    g = nx.DiGraph(list(zip(topology.src.tolist(), topology.dst.tolist())))
    nh, E = topology.n_hosts, topology.n_links
    paths, pair = [], []
    for s in range(nh):
        for t in range(nh):
            if s != t:
                for p in nx.all_simple_paths(g, s, t):
                    if any(is_monotone(topology, p, k) for k in keys):
                        paths.append(p)
                        pair.append(s * nh + t)
    P = len(paths)
    hc = fabric.host_capacity
    hosted = fabric.host_bw is not None
    rows = E + (2 * nh if hosted else 0)
    A = np.zeros((rows, P + 1))
    for j, p in enumerate(paths):
        for u, v in zip(p, p[1:]):
            A[topology.link_index(u, v), j] += 1
        if hosted:
            if fabric.forwarding == "nic":
                A[E + p[0], j] += 1
                A[E + nh + p[-1], j] += 1
            else:
                for u in p[:-1]:
                    A[E + u, j] += u < nh
                for v in p[1:]:
                    A[E + nh + v, j] += v < nh
    A[:E, P] = -topology.capacity
    if hosted:
        A[E:, P] = -hc
    pairs = sorted(set(pair))
    Aeq = np.zeros((len(pairs), P + 1))
    for j, k in enumerate(pair):
        Aeq[pairs.index(k), j] = 1
    c = np.zeros(P + 1)
    c[P] = 1
    res = linprog(c, A_ub=A, b_ub=np.zeros(rows), A_eq=Aeq, b_eq=np.ones(len(pairs)), method="highs")
    assert res.status == 0 and len(pairs) == nh * (nh - 1)
    return res.fun


@pytest.mark.parametrize("spec, family, layers", [
    ("torus:6", "coordinate", 1),     # a ring of 6 cut at node 0: the pairs around node 0 go the long way
    ("torus:6", "coordinate", 2),
    ("petersen", "updown", 1),
    ("petersen", "updown", 2),
    ("torus:2x4", "coordinate", 2),
])
def test_lp_optimum_equals_enumerated_path_lp(spec, family, layers):
    t = from_spec(spec)
    orders = channel_orders(t, family, layers)
    r = deadlock_free_mcf(t, None, orders.keys)
    want = path_lp_time(t, orders.keys)
    assert 1 / r.lp_concurrent_flow == pytest.approx(want, rel=1e-7)
    assert r.a2a_time == pytest.approx(want, rel=1e-7)                # certified on the decomposed routes
    assert r.bound_time == pytest.approx(want, rel=1e-6)              # the restricted dual bound is tight
    assert r.bound_time <= r.a2a_time * (1 + 1e-9)


def test_ring_values_by_hand():
    # ring of 6, unit links: MCF time 4.5 (distances summing to 6*9 over 12 links).  Two layers with datelines
    # 0 and 3: every minimal route avoids one of them, so 4.5.  One layer cut at node 0 in both directions: no
    # route passes through 0, so the pairs among hosts 1..5 ride the line 1-2-3-4-5, 2*3 = 6 shards on each
    # middle link, and 0's shards to 3 (3 hops either way) add 1/2 on 2->3: 6.5.
    t = from_spec("torus:6")
    one = deadlock_free_mcf(t, None, coordinate_orders(t, 1).keys)
    two = deadlock_free_mcf(t, None, coordinate_orders(t, 2).keys)
    assert two.a2a_time == pytest.approx(4.5, rel=1e-9)
    assert one.a2a_time == pytest.approx(6.5, rel=1e-9)
    assert one.bound_time == pytest.approx(6.5, rel=1e-7)


@pytest.mark.parametrize("fabric", [Fabric(25e9 / 8, 100e9 / 8, "nic"), Fabric(25e9 / 8, 30e9 / 8, "host")])
def test_host_bandwidth_rows(fabric):
    t = from_spec("torus:2x3")
    orders = updown_orders(t, 1)
    r = deadlock_free_mcf(t, fabric, orders.keys)
    assert r.a2a_time == pytest.approx(path_lp_time(t, orders.keys, fabric), rel=1e-7)


def test_routes_are_monotone_and_deadlock_free():
    t = from_spec("torus:4x4")
    orders = channel_orders(t, "coordinate", 2)
    r = deadlock_free_mcf(t, None, orders.keys)
    for p in r.routes:
        assert is_monotone(t, p.nodes, orders.keys[p.layer])
        assert len(set(p.nodes)) == len(p.nodes)
    paths = [p.nodes for p in r.routes]
    assert find_deadlock(paths, [(p.layer,) * (len(p.nodes) - 1) for p in r.routes]) is None
    # merged into one layer they would deadlock: the orders are what makes them safe
    assert find_deadlock(paths, [(0,) * (len(p.nodes) - 1) for p in r.routes]) is not None


def test_transitions_never_turn_back_and_follow_the_key():
    t = from_spec("torus:3x3")
    key = coordinate_orders(t, 1).keys[0]
    tr = transitions(t, key)
    assert np.all(t.dst[tr.first] == t.src[tr.second])
    assert np.all(key[tr.first] < key[tr.second])
    assert not np.any(t.dst[tr.second] == t.src[tr.first])


def test_torus_4x4_two_layers_optimal_and_verified(tmp_path, capsys):
    out = tmp_path / "t44.xml"
    assert main(["routes", "torus:4x4", "--algo", "mcf-df", "--layers", "2", "--json", "-o", str(out)]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["route_time"] == pytest.approx(8.0, rel=1e-7) and s["mcf_time"] == pytest.approx(8.0, rel=1e-7)
    assert s["bound"] == pytest.approx(8.0, rel=1e-6)
    assert s["deadlock_free"] and s["layers"] <= 2 and s["info"]["orders"] == "mcf"
    assert main(["verify", str(out), "--topology", "torus:4x4", "--deadlock-free", "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["valid"]


def test_genkautz_directed_three_layers():
    # GenKautz is directed: up*/down* is not enough, the MCF-guided orders are
    t = from_spec("genkautz:16,3")
    rs = route(t, "mcf-df", layers=3)
    assert rs.layers <= 3
    assert rs.alltoall_time <= rs.info["mcf_time"] * 1.02
    assert find_deadlock([p.nodes for p in rs.paths], [p.channels for p in rs.paths]) is None


def test_deterministic_bytes():
    t = from_spec("torus:4x4")
    a = route_schedule(t, "mcf-df", layers=2, mcf_time=8.0)
    b = route_schedule(t, "mcf-df", layers=2, mcf_time=8.0)
    assert a.xml == b.xml


def test_errors(capsys):
    with pytest.raises(A2AError, match="coordinate orders need a torus or a hypercube"):
        channel_orders(from_spec("petersen"), "coordinate", 2)
    with pytest.raises(A2AError, match="unknown channel order family"):
        channel_orders(from_spec("petersen"), "zigzag", 2)
    t = from_spec("torus:4")
    blocked = np.ones((1, t.n_links))                      # equal keys: no route has two links
    with pytest.raises(A2AError, match="no route from host 0 to host 2 is monotone"):
        deadlock_free_mcf(t, None, blocked)
    assert main(["routes", "torus:4x4", "--algo", "sssp", "--orders", "mcf"]) == 2
    assert "--orders does not apply to --algo sssp (only to --algo mcf-df)" in capsys.readouterr().err
    # refused before any solving: 3 x 4 layers x 1000 sources x (16000 moves + 2 x 4000 links) nonzeros
    assert main(["routes", "genkautz:1000,4", "--algo", "mcf-df", "--layers", "4", "-q"]) == 2
    assert "would have about 2.9e+08 nonzeros" in capsys.readouterr().err
