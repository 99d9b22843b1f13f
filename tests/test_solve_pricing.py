"""The master LP by arc pricing (free-energy seed, restricted master, reduced-cost pricing): same optimum."""

import json
import re

import numpy as np
import pytest
from scipy.sparse import csgraph

from a2a_compiler.demand import zipf_demand
from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.solve import solve
from a2a_compiler.solve.certificate import dual_upper_bound
from a2a_compiler.solve.free_energy import free_energy, free_energy_lengths
from a2a_compiler.solve.lp import hipo_available
from a2a_compiler.solve.pricing import PDLP_FINAL_TOLERANCE, PDLP_TOLERANCE, WIDEN_GAP, round_options, seed_arcs
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.puncture import puncture
from solvers import needs_hipo


def test_free_energy_gradient_matches_finite_differences():
    g = from_spec("jellyfish:12,3,seed=5")
    rng = np.random.default_rng(0)
    l = 1 + rng.random(g.n_links)
    volumes = 1 + rng.random((12, 12))
    value, grad = free_energy(g, l, 0.3, volumes)
    for e in (0, 7, 20):
        step = np.zeros(g.n_links)
        step[e] = 1e-6
        numeric = (free_energy(g, l + step, 0.3, volumes)[0] - free_energy(g, l - step, 0.3, volumes)[0]) / 2e-6
        assert grad[e] == pytest.approx(numeric, rel=1e-6)


def test_free_energy_is_below_the_distances_and_tends_to_them():
    g = from_spec("jellyfish:12,3,seed=5")
    l = np.ones(g.n_links)
    dist = csgraph.shortest_path(g.adjacency("capacity") > 0, unweighted=True)[:12, :12].sum()
    coarse, fine, finer = (free_energy(g, l, mu)[0] for mu in (0.5, 0.05, 0.01))
    assert coarse < fine < finer < dist
    assert dist - fine < 0.05 * 132          # less than mu per ordered pair (132 of them)
    assert dist - finer < (dist - fine) / 4


def test_free_energy_lengths_bound_the_optimum_closely():
    g = from_spec("jellyfish:24,3,seed=2")
    exact = solve(g, method="mcf-decomp", pricing="off").concurrent_flow
    lengths, bound = free_energy_lengths(g)
    unit = dual_upper_bound(g, np.ones(g.n_links))           # 0.0443: hop counts are far from optimal here
    assert exact * (1 - 1e-9) <= bound <= exact * 1.02 and bound < 0.64 * unit
    assert (g.capacity @ lengths) == pytest.approx(g.capacity.sum())


@pytest.mark.parametrize("lengths", ["free energy", "mostly zero"])
def test_seed_arcs_reach_every_node_from_each_source(lengths):
    g = from_spec("jellyfish:24,3,seed=2")
    if lengths == "free energy":
        mask = seed_arcs(g, free_energy_lengths(g)[0])
    else:   # a round's capacity duals, as widening may use them: 0 off the bottleneck links
        l = np.zeros(g.n_links)
        l[:5] = 1.0
        mask = seed_arcs(g, l, 0.1)
        assert mask[:, :5].sum() == 3           # a long link only where the zero-length links do not reach
    for s in range(24):
        reached = np.zeros(24, bool)
        reached[g.dst[mask[s]]] = True
        assert reached.sum() == 23 and not reached[s]


@pytest.mark.parametrize("case", ["jellyfish", "punctured", "host-nic", "demand"])
def test_priced_master_equals_the_full_master(case):
    topo = from_spec("genkautz:32,4") if case == "punctured" else from_spec("jellyfish:24,3,seed=2")
    if case == "punctured":
        topo = puncture(topo, remove_links=2, seed=1)
    fabric = Fabric(link_bw=1e9, host_bw=2.5e9, forwarding="nic") if case == "host-nic" else None
    demand = zipf_demand(24, 1.0, seed=3) if case == "demand" else None
    full = solve(topo, fabric, "mcf-decomp", demand=demand, pricing="off")
    priced = solve(topo, fabric, "mcf-decomp", demand=demand, pricing="on")
    assert priced.info["master"] == "priced" and full.info["master"] == "full"
    assert priced.info["priced_columns"] < priced.info["lp_columns"]
    assert priced.concurrent_flow == pytest.approx(full.concurrent_flow, rel=1e-6)
    assert priced.gap <= 1e-6 and priced.info["conservation_error"] <= 1e-12


def test_pricing_widens_the_seed_dags_while_a_round_is_far_below_the_bound():
    # genkautz:32,4 minus 2 arcs: the seed DAGs leave round 1 ~35% below the bound (a bottleneck arc)
    topo = puncture(from_spec("genkautz:32,4"), remove_links=2, seed=1)
    said = []
    priced = solve(topo, method="mcf-decomp", pricing="on", progress=said.append)
    rounds = [m for m in said if re.match(r"master LP: round \d+ \(ipm\):", m)]
    assert rounds[0].endswith(", DAGs widened to slack 0.1")
    assert float(re.search(r"gap ([0-9.e+-]+)\)", rounds[0])[1]) > WIDEN_GAP
    full = solve(topo, method="mcf-decomp", pricing="off")
    assert priced.concurrent_flow == pytest.approx(full.concurrent_flow, rel=1e-6)
    assert priced.gap <= 1e-6


def test_pricing_refuses_what_it_cannot_do():
    topo = from_spec("jellyfish:24,3,seed=2")
    with pytest.raises(A2AError, match="--pricing on prices the plain master LP; it excludes --symmetry on"):
        solve(topo, method="mcf-decomp", pricing="on", symmetry="on")
    with pytest.raises(A2AError, match="excludes --solver simplex"):
        solve(topo, method="mcf-decomp", pricing="on", solver="simplex")
    with pytest.raises(A2AError, match=r"^--solver hipo is for --pricing on's restricted master LPs, whose source "
                       r"blocks are near-trees; on a full flow LP its factor grows about as N\^3 .*: add --pricing on, "
                       r"or use ipm$"):
        solve(topo, method="mcf-decomp", solver="hipo")
    with pytest.raises(A2AError, match="unknown pricing mode 'maybe'; choose one of auto, off, on"):
        solve(topo, method="mcf-decomp", pricing="maybe")


def test_cli_prices_the_master_lp(capsys):
    from a2a_compiler.cli import main

    assert main(["solve", "jellyfish:24,3,seed=2", "--pricing", "on", "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["master"] == "priced" and out["pricing_rounds"] >= 1 and out["gap"] <= 1e-6
    assert out["concurrent_flow"] == pytest.approx(1 / 36, rel=1e-6)      # jellyfish:24,3,seed=2: 1/F = 36
    assert main(["solve", "jellyfish:24,3,seed=2", "--pricing", "on", "--symmetry", "on"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "a2a solve: error: --pricing on prices the plain master LP; it excludes --symmetry on"]


def test_priced_master_by_pdlp_on_the_presolved_lp():
    topo = from_spec("jellyfish:24,3,seed=2")
    full = solve(topo, method="mcf-decomp", pricing="off")
    priced = solve(topo, method="mcf-decomp", pricing="on", solver="pdlp")
    assert priced.info["solver"] == "pdlp" and priced.info["master"] == "priced"
    assert priced.concurrent_flow == pytest.approx(full.concurrent_flow, rel=1e-6) == 1 / 36
    assert priced.gap <= 1e-6 and priced.info["conservation_error"] <= 1e-12


def test_round_options_tighten_pdlp_near_the_bound():
    assert round_options("ipm", 1.0) == {"presolve": "on"}
    assert round_options("pdlp", 1e-4)["pdlp_optimality_tolerance"] == PDLP_TOLERANCE == 1e-7
    assert round_options("pdlp", 1e-5)["primal_feasibility_tolerance"] == PDLP_FINAL_TOLERANCE == 3e-8


@pytest.mark.parametrize("solver", [pytest.param("hipo", marks=needs_hipo)])
def test_priced_master_by_hipo(solver):
    topo = puncture(from_spec("genkautz:32,4"), remove_links=2, seed=1)
    said = []
    full = solve(topo, method="mcf-decomp", pricing="off")
    priced = solve(topo, method="mcf-decomp", pricing="on", solver=solver, progress=said.append)
    assert priced.info["solver"] == "hipo" and priced.info["master"] == "priced"
    assert any(re.match(r"master LP: round 1 \(hipo\):", m) for m in said)
    assert priced.concurrent_flow == pytest.approx(full.concurrent_flow, rel=1e-6)
    assert priced.gap <= 1e-6 and priced.info["conservation_error"] <= 1e-12


@pytest.mark.skipif(hipo_available(), reason="highspy-extras is installed, so HiPO is not missing")
def test_cli_says_hipo_is_missing(capsys):
    from a2a_compiler.cli import main

    assert main(["solve", "jellyfish:24,3,seed=2", "--pricing", "on", "--solver", "hipo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and re.fullmatch(
        r"a2a solve: error: the hipo solver needs highspy-extras of highspy's own release \(highspy [0-9.]+ is "
        r"installed\): install the hipo extra, pip install '\.\[hipo\]' in the a2a-compiler checkout", err[0])
