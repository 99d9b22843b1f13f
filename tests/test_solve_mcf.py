"""Link-based MCF (eqs. 1-5) and decomposed MCF (eqs. 6-9) against the closed forms of known-values.md."""

import math

import numpy as np
import pytest

from a2a_compiler.errors import A2AError, DisconnectedError
from a2a_compiler.fabric import Fabric, parse_bandwidth
from a2a_compiler.solve import FlowSolution, solve
from a2a_compiler.topology import Topology, from_spec

CLOSED_FORMS = [
    ("complete:5", 1.0),
    ("hypercube:3", 2 / 8),
    ("hypercube:4", 2 / 16),
    ("torus:3x3x3", 8 / (3 ** 2 * (3 ** 2 - 1))),   # odd k: 1/9
    ("torus:4x4", 8 / 4 ** 3),                      # even k: 8/64
    ("ring:7", 2 / math.floor(7 ** 2 / 4)),
    ("ring:8", 2 / math.floor(8 ** 2 / 4)),
    ("bipartite:3", 3 / (3 * 3 - 2)),
    ("bipartite:4", 4 / (3 * 4 - 2)),               # 2/5
    ("petersen", 1 / 5),
    ("vartree:4,2,2", 1 / 24),     # 2:1 oversubscribed leaves: 4 hosts x 12 remote peers over 2 up-links
    ("vartree:4,2,2,w=2", 1 / 15),  # full bisection: each host's single link carries 15 shards
]


@pytest.mark.parametrize("method,spec,expected",
                         [(m, s, f) for m in ("mcf", "mcf-decomp") for s, f in CLOSED_FORMS]
                         + [("mcf-decomp", "torus:5x5", 8 / (5 * (5 ** 2 - 1)))])  # odd k, n=2: 1/15
def test_closed_forms(method, spec, expected):
    sol = solve(from_spec(spec), method=method)
    assert sol.concurrent_flow == pytest.approx(expected, rel=1e-6)
    assert sol.upper_bound == pytest.approx(expected, rel=1e-6)
    assert sol.gap <= 1e-6
    assert sol.concurrent_flow <= sol.upper_bound


def _flows_are_feasible(sol: FlowSolution, topo: Topology):
    """Per-unit flows deliver exactly one unit per commodity and respect F·load <= capacity."""
    N = topo.n_hosts
    flows = sol.link_flows.toarray()
    inc = topo.incidence().toarray()        # +1 into a node, -1 out of it
    net = flows @ inc.T                     # (N*N) x nodes
    for k in range(N * N):
        s, d = divmod(k, N)
        want = np.zeros(topo.n_nodes)
        if s != d:
            want[s], want[d] = -1.0, 1.0
        np.testing.assert_allclose(net[k], want, atol=1e-9)
    assert np.all(flows >= 0)
    loads = flows.sum(axis=0)
    assert np.max(loads / topo.capacity) * sol.concurrent_flow <= 1 + 1e-9


@pytest.mark.parametrize("method", ["mcf", "mcf-decomp"])
def test_flows_are_per_unit_demand_and_feasible(method):
    topo = from_spec("torus:3x3")
    sol = solve(topo, method=method)
    assert sol.link_flows.shape == (81, topo.n_links)
    _flows_are_feasible(sol, topo)


def _fabric(forwarding):
    return Fabric(parse_bandwidth("25Gbps"), parse_bandwidth("100Gbps"), forwarding)


@pytest.mark.parametrize("method", ["mcf-decomp", "pmcf", "mcf-extp"])
def test_torus_host_nic_bottleneck_nic_forwarding(method):
    # design source §5.2: NIC forwarding keeps F = 1/9, throughput bound 26 * 1/9 * 3.125 GB/s
    sol = solve(from_spec("torus:3x3x3"), _fabric("nic"), method=method)
    assert sol.concurrent_flow == pytest.approx(1 / 9, rel=1e-6)
    assert sol.throughput_bound() / 1e9 == pytest.approx(26 / 9 * 3.125, rel=1e-6)
    assert round(sol.throughput_bound() / 1e9, 2) == 9.03
    assert sol.gap <= 1e-6


@pytest.mark.parametrize("method", ["mcf-decomp"])
def test_torus_host_nic_bottleneck_host_forwarding(method):
    sol = solve(from_spec("torus:3x3x3"), _fabric("host"), method=method)
    assert sol.concurrent_flow == pytest.approx(2 / 27, rel=1e-6)
    assert sol.throughput_bound() / 1e9 == pytest.approx(26 * 2 / 27 * 3.125, rel=1e-6)
    assert math.floor(sol.throughput_bound() / 1e7) / 100 == 6.01
    assert sol.gap <= 1e-6
    # flows are projected onto the base topology's links
    assert sol.link_flows.shape == (27 * 27, from_spec("torus:3x3x3").n_links)


@pytest.mark.parametrize("forwarding", ["nic", "host"])
@pytest.mark.parametrize("spec", ["torus:3x3", "hypercube:3"])
def test_mcf_equals_decomp_under_host_nic_bottleneck(spec, forwarding):
    # host link 50 Gbit/s = 2 link units: the host-NIC links bind in host forwarding
    fabric = Fabric(parse_bandwidth("25Gbps"), parse_bandwidth("50Gbps"), forwarding)
    a = solve(from_spec(spec), fabric, method="mcf")
    b = solve(from_spec(spec), fabric, method="mcf-decomp")
    assert a.concurrent_flow == pytest.approx(b.concurrent_flow, rel=1e-6)
    assert max(a.gap, b.gap) <= 1e-6
    unlimited = solve(from_spec(spec), method="mcf-decomp").concurrent_flow
    if forwarding == "host":
        assert a.concurrent_flow < unlimited * (1 - 1e-3)


def test_solution_file_round_trip(tmp_path):
    sol = solve(from_spec("hypercube:3"), _fabric("nic"), method="mcf")
    path = sol.save(tmp_path / "q3.npz")
    back = FlowSolution.load(path)
    timed = ("timings", "solve_seconds")  # not stored: the file is deterministic
    assert {k: v for k, v in back.summary().items() if k not in timed} == \
        {k: v for k, v in sol.summary().items() if k not in timed}
    assert back.timings == {}
    assert (back.link_flows != sol.link_flows).nnz == 0
    assert np.array_equal(back.link_flows.toarray(), sol.link_flows.toarray())
    assert back.fabric == sol.fabric


def test_single_host_is_refused():
    topo = Topology.from_links("one", 1, [])
    with pytest.raises(A2AError, match="at least 2 hosts"):
        solve(topo, method="mcf")


@pytest.mark.parametrize("method", ["mcf", "mcf-decomp", "pmcf", "mcf-extp"])
def test_disconnected_topology_is_refused(method):
    topo = Topology.from_links("two-rings", 6, [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)])
    with pytest.raises(DisconnectedError, match="host 3 is unreachable from host 0"):
        solve(topo, method=method)


def test_zero_capacity_link_making_pair_unreachable_is_refused():
    # a path 0 - 1 - 2 whose 1 -> 2 direction has no capacity
    topo = Topology.from_links("oneway", 3, [(0, 1), (1, 0), (1, 2), (2, 1)], capacity=[1, 1, 0, 1],
                               undirected=False)
    with pytest.raises(DisconnectedError, match="unreachable"):
        solve(topo, method="mcf-decomp")


def test_unknown_method_and_solver():
    with pytest.raises(A2AError, match="unknown method 'lp'"):
        solve(from_spec("ring:4"), method="lp")
    with pytest.raises(A2AError, match="unknown LP solver 'cplex'"):
        solve(from_spec("ring:4"), method="mcf", solver="cplex")


@pytest.mark.parametrize("solver", ["simplex", "ipm-crossover", "auto"])
def test_other_lp_solvers_agree(solver):
    sol = solve(from_spec("petersen"), method="mcf-decomp", solver=solver)
    assert sol.concurrent_flow == pytest.approx(0.2, rel=1e-9)
    assert sol.gap <= 1e-9


def test_pdlp_primal_is_repaired_and_certified():
    # first-order solution (tolerance 1e-5): F is recomputed from repaired flows, never above the optimum
    sol = solve(from_spec("torus:3x3x3"), method="mcf-decomp", solver="pdlp")
    assert 1 / 9 * (1 - 1e-4) <= sol.concurrent_flow <= 1 / 9 * (1 + 1e-12)
    assert sol.upper_bound >= 1 / 9 * (1 - 1e-12)
    assert sol.gap <= 1e-4
    assert sol.info["conservation_error"] <= 1e-9
