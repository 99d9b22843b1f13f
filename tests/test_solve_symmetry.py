"""Symmetry reduction of the flow LPs: checked automorphism groups, quotient LPs with the plain optimum."""

import numpy as np
import pytest

from a2a_compiler.fabric import Fabric, augment, parse_bandwidth
from a2a_compiler.solve import solve
from a2a_compiler.solve.symmetry import Symmetry, automorphisms, find_symmetry, wanted
from a2a_compiler.solve.tsmcf import tsmcf
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.puncture import puncture

GBPS = parse_bandwidth("1Gbps")


@pytest.mark.parametrize("spec, family, order, orbits", [
    ("genkautz:256,4", "rotations and reflections", 2, 128),     # only i -> -i-1: 5c = 0 mod 256 forces c = 0
    ("genkautz:1000,4", "rotations and reflections", 10, 100),   # i -> ±i + 200k (-1): dihedral of order 10
    ("genkautz:255,4", "rotations", 5, 51),                       # odd N: the reflections fix a host
    ("hypercube:6", "coordinate translations", 64, 1),            # XOR by every vertex
    ("torus:16x16", "coordinate translations", 256, 1),
    ("ring:9", "rotations", 9, 1),
])
def test_groups_found(spec, family, order, orbits):
    sym = find_symmetry(from_spec(spec))
    assert sym.family == f"{family}, order {order}"
    assert (sym.order, len(sym.reps)) == (order, orbits)
    # every source is its representative moved by its element
    assert np.array_equal(sym.node_perm[sym.source_elem, sym.reps[sym.source_rep]], np.arange(sym.node_perm.shape[1]))


@pytest.mark.parametrize("spec", ["jellyfish:64,4,seed=1", "xpander:4,16,seed=1", "slimfly:5", "petersen"])
def test_no_group_on_asymmetric_or_unsupported(spec):
    sym = find_symmetry(from_spec(spec))
    assert sym.family == "none" and sym.order == 1 and len(sym.reps) == from_spec(spec).n_hosts


def test_candidates_are_checked_not_assumed():
    topo = from_spec("torus:4x4")
    shift = (np.arange(16) + 1) % 16          # a rotation of the ids is not a torus automorphism
    nodes, links = automorphisms(topo, [np.stack([np.arange(16), shift])])
    assert nodes.shape == (1, 16) and np.array_equal(nodes[0], np.arange(16))
    punctured = puncture(topo, remove_links=1, seed=3)
    assert find_symmetry(punctured).order < 16


def test_link_orbits_and_multiplicities():
    sym = find_symmetry(from_spec("hypercube:3"))
    assert sym.n_classes == 3                 # one orbit of 8 links per dimension: XOR fixes no link
    assert np.all(sym.link_mult == 1)
    assert sorted(np.bincount(sym.link_class).tolist()) == [8, 8, 8]


def test_host_nic_augmentation_inherits_the_group():
    topo = from_spec("torus:3x3x3")
    for forwarding in ("host", "nic"):
        aug = augment(topo, Fabric(25 * GBPS, 100 * GBPS, forwarding))
        sym = find_symmetry(topo, aug.topology, aug.node_origin)
        assert sym.order == 27 and len(sym.reps) == 1
        assert sym.n_classes == 8             # 6 link directions + host->NIC + NIC->host


def test_auto_mode_by_size():
    assert not wanted("auto", 20_000) and wanted("auto", 20_001)
    assert wanted("on", 1) and not wanted("off", 10**9) and wanted(True, 1)


@pytest.mark.parametrize("spec, fabric", [
    ("genkautz:40,4", Fabric()),                                   # order 10
    ("genkautz:30,3", Fabric()),                                   # order 2: the order-4 group fixes hosts 7, 22
    ("torus:4x4", Fabric(25 * GBPS, 50 * GBPS, "host")),           # regular: one source, with host-NIC links
    ("hypercube:4", Fabric(25 * GBPS, 50 * GBPS, "nic")),
])
def test_quotient_master_lp_has_the_plain_optimum(spec, fabric):
    topo = from_spec(spec)
    plain = solve(topo, fabric, "mcf-decomp", symmetry="off")
    quot = solve(topo, fabric, "mcf-decomp", symmetry="on")
    assert quot.info["symmetry"]["order"] > 1 and plain.info["symmetry"]["order"] == 1
    assert quot.info["lp_columns"] < plain.info["lp_columns"]
    assert quot.concurrent_flow == pytest.approx(plain.concurrent_flow, rel=1e-7)
    assert quot.gap <= 1e-6                   # orbit duals are optimal lengths for the full dual
    # every commodity is routed, conserving (finish() checks), and loads fit F
    assert quot.link_flows.shape == (topo.n_hosts ** 2, topo.n_links)
    rows = np.asarray(quot.link_flows.sum(axis=1)).ravel()
    assert np.count_nonzero(rows) == topo.n_hosts * (topo.n_hosts - 1)


def test_quotient_on_known_closed_forms():
    assert solve(from_spec("hypercube:5"), method="mcf-decomp", symmetry="on").concurrent_flow == \
        pytest.approx(2 / 32, rel=1e-7)
    assert solve(from_spec("torus:5x5"), method="mcf-decomp", symmetry="on").concurrent_flow == \
        pytest.approx(8 / (5 * (25 - 1)), rel=1e-7)


@pytest.mark.parametrize("spec, fabric", [
    ("hypercube:4", Fabric()),
    ("torus:3x3", Fabric(25 * GBPS, 50 * GBPS, "host")),
    ("torus:3x3", Fabric(25 * GBPS, 50 * GBPS, "nic")),
    ("genkautz:20,3", Fabric()),
])
def test_tsmcf_quotient_matches_plain(spec, fabric):
    from test_tsmcf import per_commodity_checks

    topo = from_spec(spec)
    plain = tsmcf(topo, fabric, symmetry="off")
    quot = tsmcf(topo, fabric, symmetry="on")
    assert quot.info["symmetry"]["order"] > 1
    assert [L for L, _ in quot.info["objective_by_steps"]] == [L for L, _ in plain.info["objective_by_steps"]]
    assert [t for _, t in quot.info["objective_by_steps"]] == \
        pytest.approx([t for _, t in plain.info["objective_by_steps"]], abs=1e-7)
    assert quot.a2a_time == pytest.approx(plain.a2a_time, abs=1e-7)
    per_commodity_checks(topo, quot)


def test_trivial_symmetry_is_the_identity():
    topo = from_spec("petersen")
    sym = Symmetry.trivial(topo)
    assert sym.order == 1 and np.array_equal(sym.reps, np.arange(10)) and sym.n_classes == topo.n_links
