"""Decomposed MCF (§3.1.2): same optimum as the per-commodity LP, exact per-source split, certificates."""

import networkx as nx
import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.solve import solve
from a2a_compiler.solve.certificate import Routing, certified_flow, decompose_flow, dual_upper_bound
from a2a_compiler.topology import Topology, from_spec


def _random_topology(seed):
    g = nx.gnm_random_graph(9, 16, seed=seed)
    while not nx.is_connected(g):
        seed += 100
        g = nx.gnm_random_graph(9, 16, seed=seed)
    return Topology.from_networkx(g, spec=f"gnm:9,16,seed={seed}")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_decomp_equals_mcf_on_random_graphs(seed):
    topo = _random_topology(seed)
    a = solve(topo, method="mcf")
    b = solve(topo, method="mcf-decomp")
    c = solve(topo, method="mcf-decomp", child="lp")
    assert b.concurrent_flow == pytest.approx(a.concurrent_flow, rel=1e-6)
    assert c.concurrent_flow == pytest.approx(a.concurrent_flow, rel=1e-6)
    assert max(a.gap, b.gap, c.gap) <= 1e-6


def test_random_graph_with_switches_and_unequal_capacities():
    # 6 hosts hanging off a 4-switch ring with a fat cable: switches only forward
    g = nx.Graph()
    g.add_nodes_from(range(6), host=True)
    g.add_nodes_from(range(6, 10), host=False)
    g.add_edges_from([(h, 6 + h % 4) for h in range(6)])
    g.add_edges_from([(6, 7), (7, 8), (8, 9)])
    g.add_edge(9, 6, capacity=3.0)
    topo = Topology.from_networkx(g, spec="hosts-on-ring")
    a = solve(topo, method="mcf")
    b = solve(topo, method="mcf-decomp")
    assert b.concurrent_flow == pytest.approx(a.concurrent_flow, rel=1e-6)
    assert max(a.gap, b.gap) <= 1e-6
    # switches never source or sink: all flows are rows of host pairs only
    assert b.link_flows.shape == (36, topo.n_links)


def test_parallel_split_is_identical_to_serial():
    topo = from_spec("torus:3x3")
    serial = solve(topo, method="mcf-decomp")
    parallel = solve(topo, method="mcf-decomp", workers=2)
    assert parallel.concurrent_flow == serial.concurrent_flow
    assert (parallel.link_flows != serial.link_flows).nnz == 0


def test_decompose_flow_cancels_cycles_and_conserves_exactly():
    # source 0 delivers 1 to node 2 and 1 to node 3; the flow carries a 1->3->1 cycle of 0.3
    topo = Topology.from_links("k4", 4, [(u, v) for u in range(4) for v in range(4) if u != v], undirected=False)
    flow = np.zeros(topo.n_links)
    for (u, v), x in {(0, 1): 2.0, (1, 2): 1.5, (2, 3): 0.5, (1, 3): 0.8, (3, 1): 0.3}.items():
        flow[topo.link_index(u, v)] = x
    demand = np.array([0.0, 0.0, 1.0, 1.0])
    r = decompose_flow(topo, 0, flow, demand)
    assert np.bincount(r.commodity, weights=r.weight, minlength=16)[[2, 3]] == pytest.approx([1.0, 1.0])
    for i in range(r.n_paths):
        links = r.links[r.ptr[i]:r.ptr[i + 1]]
        nodes = [int(topo.src[links[0]])] + topo.dst[links].tolist()
        assert nodes[0] == 0 and nodes[-1] == r.commodity[i] % 4 and len(set(nodes)) == len(nodes)
    loads = r.link_loads(topo.n_links)
    assert np.all(loads <= flow + 1e-12)
    assert loads[topo.link_index(3, 1)] == 0.0


def test_normalised_routing_and_certified_flow():
    ring = from_spec("ring:4")
    # every pair routed clockwise with weight 2 (normalised to 1)
    paths = [(s, d, [ring.link_index((s + i) % 4, (s + i + 1) % 4) for i in range((d - s) % 4)])
             for s in range(4) for d in range(4) if s != d]
    r = Routing(np.array([s * 4 + d for s, d, _ in paths]), np.full(len(paths), 2.0),
                np.cumsum([0] + [len(p) for _, _, p in paths]), np.concatenate([p for _, _, p in paths]))
    F, loads = certified_flow(r.normalised(4), ring)
    # clockwise link loads: 1 + 2 + 3 = 6 per link -> F = 1/6
    assert F == pytest.approx(1 / 6)
    with pytest.raises(A2AError, match="no route carries flow from host 0 to host 1"):
        r.select(np.arange(1, r.n_paths)).normalised(4)


def test_dual_bound_is_the_distance_bound_for_unit_lengths():
    # K_4: |A| / sum dist = 12 / 12; Q3: 24 / (8 * 12) = 1/4 (tight, known-values.md)
    assert dual_upper_bound(from_spec("complete:4"), np.ones(12)) == pytest.approx(1.0)
    q3 = from_spec("hypercube:3")
    assert dual_upper_bound(q3, np.ones(q3.n_links)) == pytest.approx(0.25)
    # any nonnegative lengths give a valid bound, never below the optimum
    rng = np.random.default_rng(0)
    assert dual_upper_bound(q3, rng.random(q3.n_links)) >= 0.25 - 1e-12


def test_bad_options():
    with pytest.raises(A2AError, match="unknown child mode 'tree'"):
        solve(from_spec("ring:4"), Fabric(), method="mcf-decomp", child="tree")
    with pytest.raises(A2AError, match="--workers must be >= 1"):
        solve(from_spec("ring:4"), method="mcf-decomp", workers=0)


def test_conservation_check_catches_a_broken_flow():
    from a2a_compiler.solve.certificate import conservation_error

    topo = from_spec("ring:5")
    sol = solve(topo, method="mcf-decomp")
    assert sol.info["conservation_error"] <= 1e-12
    broken = sol.link_flows.tolil()
    broken[0 * 5 + 2, topo.link_index(0, 1)] += 0.25  # extra flow 0->1 that goes nowhere
    assert conservation_error(broken.tocsr(), topo) == pytest.approx(0.25)


def test_workers_are_capped_at_the_work(monkeypatch):
    """issue #18: --workers 1000 started about 120 processes for 8 sources."""
    import multiprocessing
    import os

    from a2a_compiler.solve import decomp

    cpus = len(os.sched_getaffinity(0))
    assert decomp.useful_workers(1000, 8) == min(8, cpus) and decomp.useful_workers(3, 1) == 1
    started = []
    real = multiprocessing.get_context

    class Context:
        def __init__(self, method):
            self.ctx = real(method)

        def Pool(self, n, **kw):
            started.append(n)
            return self.ctx.Pool(n, **kw)

    monkeypatch.setattr(decomp.multiprocessing, "get_context", Context)
    sol = solve(from_spec("hypercube:3"), method="mcf-decomp", workers=1000, symmetry="off")
    assert sol.lp_time == pytest.approx(4.0, rel=1e-9)
    assert started == ([min(8, cpus)] if cpus > 1 else [])       # 8 sources: at most 8, never 1000


def test_child_lp_split_of_an_interior_master_flow_delivers_every_destination():
    # jellyfish:128's master flow of source 0 leaves its child LP (eqs. 10-14) barely feasible (IPX
    # without presolve stopped outside its own tolerances there, which stopped `--child lp`): the
    # split's paths deliver 1 to each destination within the flow (the certified F is recomputed on them)
    import scipy.sparse as sp

    from a2a_compiler.solve.certificate import solve_graph
    from a2a_compiler.solve.decomp import split_source
    from a2a_compiler.solve.mcf import solve_flow_lp
    from a2a_compiler.solve.symmetry import Symmetry

    _, aug, _, _ = solve_graph(from_spec("jellyfish:128,4,seed=1"), None)
    g = aug.topology
    n = g.n_hosts
    s, d = np.divmod(np.arange(n * n), n)
    sinks = sp.coo_array((np.ones(n * n - n), (s[s != d], d[s != d])), shape=(n, g.n_nodes))
    _, flows, _, _, _, _ = solve_flow_lp(g, np.arange(n), sinks, solver="auto", symmetry=Symmetry.trivial(g))
    r = split_source(g, 0, flows[0], "lp", "auto")
    delivered = np.bincount(r.commodity, weights=r.weight, minlength=n)
    assert delivered[0] == 0 and np.abs(delivered[1:] - 1).max() <= 1e-6
    used = np.bincount(r.links, weights=np.repeat(r.weight, np.diff(r.ptr)), minlength=g.n_links)
    # within the child LP's capacities (the flow, 1e-7 relative and 1e-9 of its largest entry over)
    assert (used <= flows[0] * (1 + 1e-6) + 1e-8 * flows[0].max()).all()


def test_child_lps_by_a_vertex_solver_reach_the_optimum():
    # jellyfish:64's child LPs (eqs. 10-14) are barely feasible: HiGHS's presolve called their
    # canonical-vertex LP infeasible, which stopped `--child lp --solver simplex` (and ipm-crossover)
    topo = from_spec("jellyfish:64,4,seed=1")
    sol = solve(topo, method="mcf-decomp", child="lp", solver="simplex")
    assert sol.info["lp_concurrent_flow"] == pytest.approx(1 / 55.5, rel=1e-12)
    assert sol.concurrent_flow == pytest.approx(1 / 55.5, rel=1e-6) and sol.gap <= 1e-6
