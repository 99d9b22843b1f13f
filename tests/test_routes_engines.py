"""Routing engines against values derived by hand on symmetric graphs (Basu et al. §5.2–5.3).

Units: unit capacity per directed link, one shard per ordered host pair; a
routing's all-to-all time is its max link load.

* torus:3x3x3 (27 hosts, 162 links; every coordinate offset is 0 or ±1):
  - DOR: a link leaving x in the + direction of dimension m is used by the
    pairs whose dimension-m offset is +1, that have already corrected the
    dimensions before m (3^m choices of source there) and not yet the ones
    after (3^(2-m) choices of destination): 3^2 = 9 on every link.
  - EwSP: a pair with h non-zero offsets has h! shortest paths, weight 1/h!.
    The scheme is invariant under the torus automorphisms, which act
    transitively on links, so every link carries total hops / links =
    27 · Σ_{δ≠0} h(δ) / 162 = 27 · 54 / 162 = 9.  Path counts {1, 2, 6}: C = 6.
  - both equal the MCF optimum 1/F = 9 (known-values.md).
* hypercube:3: e-cube DOR loads link x -> x^e_m with the pairs differing in bit
  m, free in the m lower bits of the source and the 2-m higher bits of the
  destination: 2^2 = 4.  EwSP by symmetry: 8 · 12 / 24 = 4 (12 = Σ Hamming
  distances from a node), C = lcm(1, 2, 6) = 6.  MCF: 1/F = N/2 = 4.
* K_{4,4}: 32 links; cross pairs (32) need 1 hop, same-side pairs (24) need 2,
  so 80 hop-units over 32 links: every routing has max load >= 2.5 (= the MCF
  time 1/F = (3n-2)/n).  With one path per pair loads are integers, so >= 3;
  3 is reached: cross pairs direct, same-side pair (a, a') via the node
  (a + a') mod 4 of the other side, which is injective in a and in a', so each
  link gets 1 direct + 1 + 1 two-hop routes.  Single-path optimum: 3.  EwSP
  splits a same-side pair over its 4 two-hop paths: 1 + 3/4 + 3/4 = 2.5.
"""

import pytest
from scipy.sparse import csgraph

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.routes import ENGINES, RoutedPath, RouteSet, route
from a2a_compiler.topology.puncture import puncture
from a2a_compiler.topology.spec import from_spec


def test_registry_names_every_engine_of_the_issue():
    assert {"sssp", "ewsp", "ilp-disjoint", "ilp-shortest", "dor", "fptas", "mcf-extp", "pmcf-disjoint",
            "pmcf-shortest"} <= set(ENGINES)


@pytest.mark.parametrize("spec, time", [("torus:3x3x3", 9), ("hypercube:3", 4)])
def test_dor_hand_values(spec, time):
    rs = route(from_spec(spec), "dor")
    assert rs.alltoall_time == time
    assert rs.link_loads().min() == time                 # every link equally loaded
    assert rs.paths_per_pair().max() == 1


@pytest.mark.parametrize("spec, time, counts", [("torus:3x3x3", 9, {1, 2, 6}), ("hypercube:3", 4, {1, 2, 6}),
                                                ("bipartite:4", 2.5, {1, 4})])
def test_ewsp_hand_values(spec, time, counts):
    rs = route(from_spec(spec), "ewsp")
    assert rs.alltoall_time == pytest.approx(time, abs=1e-12)
    per_pair = rs.paths_per_pair()
    assert set(per_pair[per_pair > 0].tolist()) == counts


def test_host_forwarding_fabric_prices_the_host_links():
    """§5.2 fabric with host forwarding (hc = 100/25 = 4): every hop leaves a host.  DOR is
    translation-invariant, so each host sends total hops / 27 = 27·54/27 = 54 shard-hops:
    54/4 = 13.5, the MCF time 1/F = 27/2 (known-values.md), above the link load 9."""
    fabric = Fabric(link_bw=25e9 / 8, host_bw=100e9 / 8, forwarding="host")
    rs = route(from_spec("torus:3x3x3"), "dor", fabric)
    assert rs.link_loads().max() == 9 and rs.alltoall_time == 13.5


def test_dor_follows_dimension_order():
    rs = route(from_spec("torus:3x3x3"), "dor")
    path = {(p.src, p.dst): p.nodes for p in rs.paths}
    # (0,0,0) -> (1,2,1): dimension 0 first (+1), then dimension 1 (-1, wraps to 2), then dimension 2 (+1).
    assert path[(0, 9 + 6 + 1)] == (0, 9, 15, 16)
    hc = {(p.src, p.dst): p.nodes for p in route(from_spec("hypercube:3"), "dor").paths}
    assert hc[(0, 7)] == (0, 1, 3, 7) and hc[(6, 1)] == (6, 7, 5, 1)   # lowest bit first


@pytest.mark.parametrize("topology", [from_spec("petersen"), from_spec("genkautz:16,2"),
                                      puncture(from_spec("torus:3x3x3"), remove_links=2, seed=1)])
def test_dor_refuses_other_topologies_in_one_line(topology):
    with pytest.raises(A2AError) as exc:
        route(topology, "dor")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("dor: dimension-order routing needs a torus or a hypercube")
    assert topology.spec in msg


@pytest.mark.parametrize("algo", ["ilp-disjoint", "ilp-shortest"])
def test_ilp_single_path_optimum_of_k44(algo):
    rs = route(from_spec("bipartite:4"), algo, time_limit=30)
    assert rs.alltoall_time == 3
    assert rs.optimal is True and rs.mip_gap == pytest.approx(0, abs=1e-9)
    assert rs.bound == pytest.approx(3)
    assert rs.paths_per_pair().max() == 1


def test_ilp_eps_tolerance_is_reported():
    rs = route(from_spec("torus:3x3x3"), "ilp-shortest", eps=0.1, time_limit=30)
    assert 9 <= rs.alltoall_time <= rs.bound * 1.1 + 1e-9
    assert rs.info["eps"] == 0.1 and rs.mip_gap <= 0.1 + 1e-9


def test_sssp_is_single_path_and_congestion_aware():
    t = from_spec("bipartite:4")
    rs = route(t, "sssp")
    assert rs.paths_per_pair().max() == 1 and len(rs.paths) == 56
    # SSSP ignores the global optimum but balances: at least the integral single-path optimum 3
    assert 3 <= rs.alltoall_time <= 4
    assert route(from_spec("torus:3x3x3"), "sssp").alltoall_time == 9
    # weights start at P^2 (OpenSM), so routes are shortest paths; the route counts pick among them
    gk = from_spec("genkautz:32,4")
    hops = csgraph.shortest_path(gk.adjacency(), unweighted=True)
    assert all(len(p.nodes) - 1 == hops[p.src, p.dst] for p in route(gk, "sssp").paths)


def test_fptas_certified_bound_brackets_the_optimum():
    rs = route(from_spec("hypercube:3"), "fptas", eps=0.1)
    assert rs.bound <= 4 + 1e-9 <= rs.alltoall_time + 1e-9       # bound <= MCF time 4 <= FPTAS time
    assert rs.alltoall_time <= rs.bound / (1 - 0.1) + 1e-9        # certified within eps
    assert rs.info["stop"] == "certified within eps"
    full = route(from_spec("hypercube:3"), "fptas", eps=0.1, early_stop=False)
    assert full.info["stop"] == "D(l) >= 1" and full.info["phases"] > rs.info["phases"]
    assert full.bound <= 4 + 1e-9 <= full.alltoall_time + 1e-9


@pytest.mark.parametrize("algo", ["mcf-extp", "pmcf-disjoint", "pmcf-shortest"])
def test_mcf_schemes_reach_the_optimum_on_k44(algo):
    rs = route(from_spec("bipartite:4"), algo)
    assert rs.alltoall_time == pytest.approx(2.5, rel=1e-6)
    assert rs.lp_time == pytest.approx(2.5, rel=1e-6) and rs.bound <= 2.5 + 1e-9


def test_validation_names_the_bad_path():
    t = from_spec("ring:4")
    good = [RoutedPath(s, d, (s, d) if (d - s) % 4 in (1, 3) else (s, (s + 1) % 4, d), 1.0)
            for s in range(4) for d in range(4) if s != d]
    RouteSet("x", t, Fabric(), tuple(good)).validate()
    with pytest.raises(A2AError, match="hop that is not a link"):
        RouteSet("x", t, Fabric(), tuple(good[:-1] + [RoutedPath(3, 2, (3, 1, 2), 1.0)])).validate()
    with pytest.raises(A2AError, match="pair 3->2 carry 0.5 of its shard"):
        RouteSet("x", t, Fabric(), tuple(good[:-1] + [RoutedPath(3, 2, (3, 2), 0.5)])).validate()
    with pytest.raises(A2AError, match="one channel >= 0 per hop"):
        RouteSet("x", t, Fabric(), tuple(good[:-1] + [RoutedPath(3, 2, (3, 2), 1.0, vcs=(0, 1))])).validate()
