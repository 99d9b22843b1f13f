"""Slim Fly routing: MIN/VAL with per-hop VCs (Besta & Hoefler 2014 §IV), FatPaths layers (Besta et al. 2020)
and the deployment's layered routing (Blach et al. 2024, Alg. 1)."""

import itertools

import numpy as np
import pytest

from a2a_compiler.deadlock import find_deadlock
from a2a_compiler.errors import A2AError
from a2a_compiler.routes import route
from a2a_compiler.routes.diversity import cdp, max_disjoint, path_interference
from a2a_compiler.routes.routers import router_view
from a2a_compiler.routes.schedule import route_schedule
from a2a_compiler.topology import from_spec


def router_hops(routes):
    view = router_view(routes.topology)
    return np.array([sum(view.is_router[u] and view.is_router[v] for u, v in zip(p.nodes, p.nodes[1:]))
                     for p in routes.paths])


def router_hop_vcs_count_up(routes):
    """VC k on the k-th router hop (Besta & Hoefler §IV-D), VC 0 on host links."""
    view = router_view(routes.topology)
    for p in routes.paths:
        on_router = [bool(view.is_router[u] and view.is_router[v]) for u, v in zip(p.nodes, p.nodes[1:])]
        if [vc for vc, r in zip(p.vcs, on_router) if r] != list(range(sum(on_router))):
            return False
        if any(vc != 0 for vc, r in zip(p.vcs, on_router) if not r):
            return False
    return True


def acyclic(routes):
    return find_deadlock([p.nodes for p in routes.paths], [p.channels for p in routes.paths]) is None


@pytest.mark.parametrize("spec", ["slimfly:5", "slimfly:4", "slimfly:7,p=0"])
def test_sf_min_two_vcs_two_router_hops(spec):
    r = route(from_spec(spec), "sf-min")
    hops = router_hops(r)
    assert hops.max() == 2 and r.info["vcs"] == 2 and r.layers == 2
    assert router_hop_vcs_count_up(r) and acyclic(r)


def test_sf_min_on_the_hoffman_singleton_graph_is_optimal():
    """Unique minimal paths, arc-transitive: every router link carries 13 router pairs of p^2 = 16 host pairs."""
    r = route(from_spec("slimfly:5"), "sf-min")
    t = r.topology
    router_links = (t.src >= t.n_hosts) & (t.dst >= t.n_hosts)
    assert np.all(r.link_loads()[router_links] == 13 * 16) and r.alltoall_time == 208.0
    assert np.all(r.link_loads()[~router_links] == 199)          # every host link: the host's 199 shards


@pytest.mark.parametrize("spec", ["slimfly:5", "slimfly:4,p=0"])
def test_sf_val_four_vcs_and_a_random_intermediate(spec):
    t = from_spec(spec)
    r = route(t, "sf-val", seed=3)
    view = router_view(t)
    hops = router_hops(r)
    local = view.router_of[[p.src for p in r.paths]] == view.router_of[[p.dst for p in r.paths]]
    assert np.all(hops[local] == 0) and hops[~local].min() == 2 and hops.max() == 4
    assert r.info["vcs"] == 4 and router_hop_vcs_count_up(r) and acyclic(r)
    again = route(t, "sf-val", seed=3)
    assert [p.nodes for p in again.paths] == [p.nodes for p in r.paths]
    assert [p.nodes for p in route(t, "sf-val", seed=4).paths] != [p.nodes for p in r.paths]


def test_ugal_is_refused_with_the_reason():
    with pytest.raises(A2AError, match="ugal is adaptive .* not expressible as static routes"):
        route(from_spec("slimfly:5"), "ugal")


def per_layer_next_hops(routes):
    """(routing layer, node, destination router) -> the set of next nodes used."""
    view = router_view(routes.topology)
    seen = {}
    for p in routes.paths:
        target = view.router_of[p.dst]
        for u, v in zip(p.nodes, p.nodes[1:]):
            if view.is_router[u] and u != target:
                seen.setdefault((p.routing_layer, u, target), set()).add(v)
    return seen


def disjoint_by_brute_force(routes):
    """Largest set of pairwise link-disjoint router paths per router pair, by trying every subset."""
    view = router_view(routes.topology)
    paths = {}
    for p in routes.paths:
        r = [v for v in p.nodes if view.is_router[v]]
        if len(r) > 1:
            paths.setdefault((r[0], r[-1]), set()).add(frozenset(zip(r, r[1:])))
    best = {}
    for pair, ps in paths.items():
        ps = list(ps)
        best[pair] = max(k for k in range(len(ps) + 1) for combo in itertools.combinations(ps, k)
                         if all(not (a & b) for a, b in itertools.combinations(combo, 2)))
    return best


def test_sf_layers_deployment_acceptance():
    """Blach et al. on the deployed 50-router Slim Fly: 4 layers, each a forwarding tree per destination,
    >= 90% of router pairs with >= 3 link-disjoint paths, deadlock-free by DFSSSP's virtual lanes."""
    r = route(from_spec("slimfly:5,p=0"), "sf-layers", layers=4)
    assert r.info["layers"] == 4 and {p.routing_layer for p in r.paths} == {0, 1, 2, 3}
    assert all(len(v) == 1 for v in per_layer_next_hops(r).values())          # destination-based per layer
    disjoint = disjoint_by_brute_force(r)
    assert len(disjoint) == 2450
    assert np.bincount(list(disjoint.values())).tolist() == r.info["disjoint_paths_histogram"] == [0, 0, 9, 1213, 1228]
    assert r.info["pairs_with_3_disjoint"] == (2450 - 9) / 2450 >= 0.9
    assert r.info["vls"] == r.layers and acyclic(r)
    # layer 0 is minimal: every pair's first route is a shortest one
    hops = router_hops(r)
    assert all(hops[i] <= 2 for i, p in enumerate(r.paths) if p.routing_layer == 0)
    weights = {}
    for p in r.paths:
        weights[(p.src, p.dst)] = weights.get((p.src, p.dst), 0) + p.weight
    assert np.allclose(list(weights.values()), 1.0)


def test_sf_layers_with_hosts_and_one_layer():
    t = from_spec("slimfly:4")
    one = route(t, "sf-layers", layers=1)
    assert one.info["paths_per_pair"] == 1.0 and one.info["vls"] == one.layers == 2 and acyclic(one)
    assert np.array_equal(one.link_loads(), route(t, "sf-min").link_loads())   # layer 0 = balanced MIN
    r = route(t, "sf-layers", layers=3, seed=1)
    assert all(len(v) == 1 for v in per_layer_next_hops(r).values()) and acyclic(r)
    assert r.info["vls"] == r.layers


@pytest.mark.parametrize("variant,routes", [("random", 24141), ("balanced", 11676)])
def test_fatpaths_layers_and_reported_time(variant, routes):
    """4 layers on slimfly:4 (96 hosts, 9120 pairs), seed 2: the random layers give 2.65 routes per pair."""
    t = from_spec("slimfly:4")
    r = route(t, "fatpaths", layers=4, variant=variant, seed=2)
    pairs = t.n_hosts * (t.n_hosts - 1)
    assert len(r.paths) == routes and r.info["paths_per_pair"] == routes / pairs
    if variant == "random":
        assert routes / pairs >= 2.0
        assert {p.routing_layer for p in r.paths} == {0, 1, 2, 3}
    assert all(len(v) == 1 for v in per_layer_next_hops(r).values())
    sched = route_schedule(t, "fatpaths", layers=4, variant=variant, seed=2, mcf_time=1.0)
    assert sched.chunks_exact and sched.predicted_time == pytest.approx(r.alltoall_time)
    assert r.alltoall_time == pytest.approx(r.link_loads().max()) and sched.deadlock_free


def test_fatpaths_rejects_bad_options():
    t = from_spec("slimfly:4,p=0")
    with pytest.raises(A2AError, match="fatpaths: --rho must be in"):
        route(t, "fatpaths", rho=0)
    with pytest.raises(A2AError, match="no connected layer of 4 of the 96 cables"):
        route(t, "fatpaths", rho=0.05)
    with pytest.raises(A2AError, match="unknown variant 'x'"):
        route(t, "fatpaths", variant="x")


def test_cdp_and_path_interference_on_the_hoffman_singleton_graph():
    """c_l of FatPaths §IV-B1 on known structure: neighbours have 1 path of <= 3 hops (girth 5), distance-2
    routers have 7 edge-disjoint paths of <= 3 hops (the 2-hop path and one 3-hop path per other neighbour)."""
    view = router_view(from_spec("slimfly:5,p=0"))
    a = 0
    nbr = int(view.topology.dst[view.topology.src == a][0])
    far = next(v for v in range(50) if v != a and not np.any((view.topology.src == a) & (view.topology.dst == v))
               and v != nbr)
    assert cdp(view, a, nbr, 3) == 1 and cdp(view, a, nbr, 4) == 7
    assert cdp(view, a, far, 2) == 1 and cdp(view, a, far, 3) == 7
    assert path_interference(view, a, far, nbr, far, 3) >= 0


def test_max_disjoint():
    f = frozenset
    assert max_disjoint([f({1, 2}), f({2, 3}), f({4}), f({5, 1})]) == 3
    assert max_disjoint([f({1}), f({1}), f({1, 2})]) == 1
    assert max_disjoint([]) == 0


def test_cli_layered_routes_verify_deadlock_free(tmp_path, capsys):
    import json

    from a2a_compiler.cli import main

    out = tmp_path / "sf.xml"
    assert main(["routes", "slimfly:4,p=0", "--algo", "sf-layers", "--layers", "3", "--route-seed", "1",
                 "-o", str(out), "--json", "-q"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["info"]["layers"] == 3 and s["info"]["seed"] == 1 and s["deadlock_free"]
    assert s["layers"] == s["info"]["vls"] and s["max_paths_per_pair"] == 3
    assert main(["verify", str(out), "--deadlock-free", "--topology", "slimfly:4,p=0"]) == 0
    capsys.readouterr()
    assert main(["routes", "slimfly:4,p=0", "--algo", "sf-min", "--layers", "2"]) == 2
    assert "--layers does not apply to --algo sf-min (only to --algo fatpaths / sf-layers / mcf-df)" in \
        capsys.readouterr().err
