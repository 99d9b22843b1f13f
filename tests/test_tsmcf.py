"""tsMCF (Basu et al. §3.1.3, eqs. 15–20) against closed forms and the full per-commodity LP."""

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric, parse_bandwidth
from a2a_compiler.solve import solve
from a2a_compiler.solve.tsmcf import tsmcf
from a2a_compiler.topology import Topology, from_spec

GBPS = parse_bandwidth("1Gbps")


def fabric(link=None, host=None, forwarding="host"):
    return Fabric(None if link is None else link * GBPS, None if host is None else host * GBPS, forwarding)


def per_commodity_checks(topo, sol):
    """Per-commodity flows are conserved and causal; per-step loads respect U_t·cap."""
    N, E, L = topo.n_hosts, topo.n_links, sol.n_steps
    f = sol.link_flows.toarray().reshape(N, N, L, E)
    into = np.zeros((N, E))
    into[topo.dst, np.arange(E)] = 1
    out = np.zeros((N, E))
    out[topo.src, np.arange(E)] = 1
    for s in range(N):
        for d in range(N):
            if s == d:
                assert not f[s, d].any()
                continue
            arrive = f[s, d] @ into.T          # (L, N): arrivals per step and node
            leave = f[s, d] @ out.T
            present = np.cumsum(arrive - leave, axis=0)
            present[:, s] += 1
            assert np.allclose(present[-1], np.eye(N)[d], atol=1e-7)      # everything ends at d
            before = np.vstack([np.eye(N)[s], present[:-1]])
            assert np.all(leave <= before + 1e-7)                          # only send what is held
    load = f.sum(axis=(0, 1))                                              # (L, E)
    assert np.all(load <= sol.step_loads[:, None] * topo.capacity[None, :] + 1e-7)
    return load


@pytest.mark.parametrize("spec, time", [("hypercube:3", 4.0), ("bipartite:4", 2.5)])
def test_unbottlenecked_equals_link_mcf(spec, time):
    """Without a host bottleneck Σ_t U_t equals 1/F of the static MCF (4 for Q3, (3n-2)/n for K_{n,n})."""
    topo = from_spec(spec)
    dec = tsmcf(topo, Fabric())
    full = tsmcf(topo, Fabric(), decomposed=False)
    assert dec.step_loads.sum() == pytest.approx(time, abs=1e-9)
    assert full.step_loads.sum() == pytest.approx(time, abs=1e-9)
    assert dec.concurrent_flow == pytest.approx(1 / time, abs=1e-12)
    assert dec.upper_bound == dec.concurrent_flow
    assert 1 / solve(topo, Fabric(), method="mcf").concurrent_flow == pytest.approx(time, abs=1e-7)
    assert dec.n_steps == dec.info["diameter"] == {"hypercube:3": 3, "bipartite:4": 2}[spec]
    per_commodity_checks(topo, dec)
    per_commodity_checks(topo, full)


def test_torus_host_bottleneck_is_two_27ths():
    """§5.2: 3x3x3 torus, 25 Gbit/s links, 100 Gbit/s host, host forwarding -> F = 2/27 (at l_max = 3)."""
    topo = from_spec("torus:3x3x3")
    fab = fabric(25, 100, "host")
    sol = tsmcf(topo, fab)
    assert sol.n_steps == 3
    assert sol.concurrent_flow == pytest.approx(2 / 27, rel=1e-7)     # HiGHS IPM + crossover, tolerance 1e-7
    assert abs(sol.concurrent_flow / (2 / 27) - 1) < 0.01
    load = per_commodity_checks(topo, sol)
    hc = fab.host_capacity
    n_in = np.stack([np.bincount(topo.dst, weights=load[t], minlength=27) for t in range(3)])
    n_out = np.stack([np.bincount(topo.src, weights=load[t], minlength=27) for t in range(3)])
    assert np.all(n_in <= sol.step_loads[:, None] * hc + 1e-7)
    assert np.all(n_out <= sol.step_loads[:, None] * hc + 1e-7)
    # every node's host link is saturated in total: 54 hops per source / hc = 13.5 link-times
    assert n_out.sum(axis=0) == pytest.approx(np.full(27, 54.0), abs=1e-6)


@pytest.mark.parametrize("host, time", [(25, 12.0), (50, 6.0)])
def test_hypercube_host_forwarding_closed_form(host, time):
    """Host forwarding: every hop crosses two host links, so Σ U_t >= Σ dist / (N·hc) = 96 / (8·hc); tight on Q3."""
    topo = from_spec("hypercube:3")
    for decomposed in (True, False):
        sol = tsmcf(topo, fabric(25, host, "host"), decomposed=decomposed)
        assert sol.step_loads.sum() == pytest.approx(time, abs=1e-9)


def test_nic_forwarding_decomposed_matches_full_lp():
    """NIC forwarding counts only sourced/sunk bytes; the decomposed LP matches the full LP step by step."""
    topo = from_spec("hypercube:3")
    fab = fabric(25, 25, "nic")
    for L in (3, 4):
        dec = tsmcf(topo, fab, steps=L)
        full = tsmcf(topo, fab, steps=L, decomposed=False)
        assert dec.n_steps == full.n_steps == L
        assert dec.step_loads.sum() == pytest.approx(full.step_loads.sum(), abs=1e-9)
        assert dec.step_loads.sum() >= 7.0          # each host sources 7 shards through hc = 1
        per_commodity_checks(topo, dec)
    assert tsmcf(topo, fab, steps=3).step_loads.sum() == pytest.approx(9.5, abs=1e-9)


def test_automatic_steps_stop_when_no_improvement():
    sol = tsmcf(from_spec("twisted-hypercube:3"), Fabric())
    assert sol.n_steps == 2
    assert [L for L, _ in sol.info["objective_by_steps"]] == [2, 3]
    assert sol.step_loads.sum() == pytest.approx(4.0, abs=1e-9)


def test_rejects_switches_and_too_few_steps():
    star = Topology.from_links("star", 3, [(0, 3), (1, 3), (2, 3)], n_switches=1)
    with pytest.raises(A2AError, match="has 1 switch"):
        tsmcf(star, Fabric())
    with pytest.raises(A2AError, match="needs at least diameter = 3 steps"):
        tsmcf(from_spec("hypercube:3"), Fabric(), steps=2)


def test_static_mcf_bound_stops_the_step_search():
    """Summed over steps a schedule is a static flow, so the LP's link duals summed over steps certify
    1/F_MCF as a bound for every l_max: once the diameter-step optimum meets it, no more steps are tried."""
    g = from_spec("jellyfish:24,3,seed=2")
    sol = solve(g, Fabric(), "tsmcf")
    assert [L for L, _ in sol.info["objective_by_steps"]] == [6]       # diameter 6; 7 steps not solved
    mcf = solve(g, Fabric(), "mcf-decomp")
    assert sol.a2a_time == pytest.approx(mcf.a2a_time, rel=1e-7)       # 36 link-times, the MCF optimum
    assert mcf.a2a_time == pytest.approx(36, rel=1e-7)


def test_the_solver_reported_is_the_one_auto_chose():
    """auto: simplex up to SIMPLEX_MAX_COLUMNS LP columns (hypercube:3), interior point above (torus:3x3x3)."""
    assert solve(from_spec("hypercube:3"), method="tsmcf").info["solver"] == "simplex"
    assert solve(from_spec("torus:3x3x3"), method="tsmcf").info["solver"] == "ipm"
