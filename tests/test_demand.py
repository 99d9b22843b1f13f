"""All-to-allv demand matrices: reading and validation, generators, and the flow solvers with demands."""

import json
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog

from a2a_compiler.chunk.cost import flow_time
from a2a_compiler.cli import main
from a2a_compiler.demand import Demand, as_demand, read_demand, router_demand, zipf_demand
from a2a_compiler.fabric import Fabric
from a2a_compiler.solve import solve
from a2a_compiler.topology.spec import from_spec


# ------------------------------------------------------------------ reading and validation
BAD = [
    ("ragged.csv", "0,1,2\n1,0\n1,1,0\n", "line 2 has 2 entries, the first row 3; the demand matrix must be N x N"),
    ("wide.csv", "0,1,2\n1,0,1\n", "the demand matrix must be square (N x N), got shape 2 x 3"),
    ("negative.csv", "0,1,2\n1,0,1\n-1,1,0\n", "entry (2, 0) is negative (-1); demands are volumes >= 0"),
    ("nan.csv", "0,1,2\n1,0,nan\n1,1,0\n", "entry (1, 2) is nan; demands must be finite numbers"),
    ("inf.csv", "0,1,inf\n1,0,1\n1,1,0\n", "entry (0, 2) is inf; demands must be finite numbers"),
    ("zero.csv", "5,0,0\n0,7,0\n0,0,1\n", "every off-diagonal entry is zero; there is nothing to send"),
    ("text.csv", "0,a,2\n1,0,1\n1,1,0\n", "line 1: 'a' is not a number"),
    ("underscore.csv", "0,3_78,2\n1,0,1\n1,1,0\n", "line 1: '3_78' is not a number"),   # float() read 378
    ("empty.csv", "# nothing\n\n", "no numbers in the file; a demand matrix is N lines of N comma-separated numbers"),
    ("size.csv", "0,1\n1,0\n", "the demand matrix is 2 x 2, but there are 3 hosts; it must be 3 x 3"),
    ("huge.csv", "0,1e308,1e308\n1e308,0,1e308\n1e308,1e308,0\n", "the entries sum to inf; scale the matrix down"),
    ("range.csv", "0,1,1e-12\n1,0,1\n1,1,0\n", "entry (0, 2) = 1e-12 is below 1e-9 of the largest (1); the flow LPs cannot resolve it (make it 0 or larger)"),
]


@pytest.mark.parametrize("name,text,message", BAD, ids=[b[0] for b in BAD])
def test_every_bad_matrix_is_one_line(tmp_path, capsys, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    assert main(["solve", "complete:3", "--demand", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"a2a solve: error: {path}: {message}\n"


def test_bad_npy_files_are_one_line(tmp_path, capsys):
    cases = [(np.array([["a", "b"], ["c", "d"]]), "the demand matrix must hold numbers, got <U1 entries"),
             (np.zeros((2, 2, 2)), "the demand matrix must be square (N x N), got shape 2 x 2 x 2"),
             (np.array([[0, 1], [2, 0]], dtype=object), "the .npy array holds Python objects; save numbers")]
    for i, (array, message) in enumerate(cases):
        path = tmp_path / f"bad{i}.npy"
        np.save(path, array)
        assert main(["solve", "complete:2", "--demand", str(path)]) == 2
        assert capsys.readouterr().err == f"a2a solve: error: {path}: {message}\n"


def test_csv_and_npy_read_alike_and_canonicalise(tmp_path):
    m = np.array([[9, 1, 2], [3, 9, 4], [5, 6, 9]])
    (tmp_path / "d.csv").write_text("# a comment\n" + "\n".join(",".join(map(str, r)) for r in m) + "\n")
    np.save(tmp_path / "d.npy", m.astype(np.int32))
    a, b = read_demand(tmp_path / "d.csv", 3), read_demand(tmp_path / "d.npy", 3)
    assert np.array_equal(a.volumes, b.volumes) and a.sha256 == b.sha256
    assert a.matrix[0, 0] == 0 and a.volumes[1, 1] == 0          # the diagonal is ignored
    assert math.fsum(a.volumes.ravel()) == pytest.approx(6)       # mean 1 over the 6 pairs
    assert a.volumes[2, 1] == pytest.approx(6 * 6 / 21)
    twice = Demand.from_array(2 * m)                               # any multiple: the same canonical form
    assert np.array_equal(twice.volumes, a.volumes) and twice.sha256 == a.sha256
    assert as_demand(np.full((3, 3), 7.0), 3) is None              # uniform: the plain all-to-all
    assert a.to_csv() == "0,1,2\n3,0,4\n5,6,0\n"


def test_the_diagonal_is_ignored_and_subnormal_entries_scale(tmp_path, capsys):
    """issue 34, item 18: a NaN or negative diagonal is ignored as documented; subnormal entries gave inf."""
    d = read_demand(_write(tmp_path / "diag.csv", "nan,1,2\n1,-4,1\n1,1,inf\n"), 3)
    assert d.matrix.tolist() == [[0, 1, 2], [1, 0, 1], [1, 1, 0]]
    tiny = read_demand(_write(tmp_path / "tiny.csv", "0,5e-324,0\n0,0,5e-324\n0,0,0\n"), 3)
    assert tiny.volumes.tolist() == [[0, 3, 0], [0, 0, 3], [0, 0, 0]]
    assert main(["demand", "show", str(tmp_path / "tiny.csv"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and json.loads(out)["max"] == 3.0


def _write(path, text):
    path.write_text(text)
    return path


def test_zipf_generator_is_seeded_and_skewed():
    d = zipf_demand(8, 1.0, seed=1)
    again = zipf_demand(8, 1.0, seed=1)
    assert np.array_equal(d.matrix, again.matrix) and d.sha256 == again.sha256
    assert d.sha256 != zipf_demand(8, 1.0, seed=2).sha256
    # 4096 tokens x top-2 per rank: rows (with the local tokens on the diagonal) sum to 8192
    raw = zipf_demand(8, 1.0, seed=1, tokens=100, top_k=3)
    assert raw.matrix.sum() < 8 * 300 and np.all(raw.matrix == np.floor(raw.matrix))
    none, strong = zipf_demand(8, 0.0, seed=1).stats(), zipf_demand(8, 2.0, seed=1).stats()
    assert none["receive_skew"] < 1.05 < 2.5 < strong["receive_skew"]


def test_router_dump(tmp_path, capsys):
    ids = np.array([[[0, 1], [2, 3]], [[1, 0], [3, 2]]])          # 2 ranks, 2 tokens, top-2; experts 0,1 | 2,3
    np.save(tmp_path / "r.npy", ids)
    d = router_demand(tmp_path / "r.npy", experts=4)
    assert d.matrix.tolist() == [[0, 2], [2, 0]]
    np.save(tmp_path / "bad.npy", np.array([[[0, 5]], [[1, 2]]]))
    assert main(["demand", "router", str(tmp_path / "bad.npy"), "--experts", "4", "-o", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err.endswith("expert id 5 is outside 0 .. 3 (4 experts)\n")
    np.save(tmp_path / "twice.npy", np.array([[[0, 1], [2, 3]], [[1, 0], [3, 3]]]))   # issue 34, item 18
    assert main(["demand", "router", str(tmp_path / "twice.npy"), "-o", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err == (f"a2a demand: error: {tmp_path / 'twice.npy'}: token 1 of rank 1 chose "
                                       f"expert 3 twice; a router's top-k experts of a token are distinct\n")
    (tmp_path / "ids.csv").write_text("0,1\n2,3\n")
    assert main(["demand", "router", str(tmp_path / "ids.csv"), "-o", str(tmp_path / "x.csv")]) == 2
    assert capsys.readouterr().err == (f"a2a demand: error: {tmp_path / 'ids.csv'}: not a .npy file; a router dump "
                                       f"is an integer array saved by numpy.save\n")
    assert not (tmp_path / "x.csv").exists()


def test_demand_command_writes_what_solve_reads(tmp_path, capsys):
    out = tmp_path / "D.csv"
    assert main(["demand", "zipf", "8", "--alpha", "1", "--seed", "1", "-o", str(out)]) == 0
    assert np.array_equal(read_demand(out).volumes, zipf_demand(8, 1.0, seed=1).volumes)
    assert main(["demand", "show", str(out), "--json"]) == 0
    assert '"balanced": false' in capsys.readouterr().out


# ------------------------------------------------------------------ solvers
def reference_demand_mcf(topology, volumes) -> float:
    """Independent max concurrent flow with demands: the link formulation over networkx edges, scipy's linprog.

    Variables ``f[k, e] >= 0`` per commodity ``k = (s, d)`` with ``D[s, d] > 0`` and edge ``e``, and ``F``;
    maximise ``F`` subject to ``out - in = F·D[s, d]·([v = s] - [v = d])`` at every node and
    ``Σ_k f[k, e] <= cap_e``.
    """
    g = topology.to_networkx()
    edges = list(g.edges(data="capacity", default=1.0))
    nodes = list(g.nodes)
    index = {v: i for i, v in enumerate(nodes)}
    pairs = [(s, d) for s in range(topology.n_hosts) for d in range(topology.n_hosts)
             if s != d and volumes[s, d] > 0]
    K, E, V = len(pairs), len(edges), len(nodes)
    F = K * E
    rows, cols, vals = [], [], []
    for k, (s, d) in enumerate(pairs):
        for e, (u, v, _) in enumerate(edges):
            rows += [k * V + index[u], k * V + index[v]]
            cols += [k * E + e, k * E + e]
            vals += [1.0, -1.0]
        rows += [k * V + index[s], k * V + index[d]]
        cols += [F, F]
        vals += [-volumes[s, d], volumes[s, d]]
    A_eq = sp.csr_array((vals, (rows, cols)), shape=(K * V, F + 1))
    A_ub = sp.csr_array((np.ones(F), (np.tile(np.arange(E), K), np.arange(F))), shape=(E, F + 1))
    c = np.zeros(F + 1)
    c[F] = -1.0
    res = linprog(c, A_ub=A_ub, b_ub=[cap for _, _, cap in edges], A_eq=A_eq, b_eq=np.zeros(K * V),
                  bounds=(0, None), method="highs")
    assert res.status == 0
    return -res.fun


@pytest.mark.parametrize("spec", ["bipartite:4", "hypercube:3"])
def test_solve_with_demand_equals_an_independent_lp(spec, capsys, tmp_path):
    topo = from_spec(spec)
    demand = zipf_demand(8, 1.0, seed=1)
    want = reference_demand_mcf(topo, demand.volumes)
    for method in ("mcf", "mcf-decomp", "pmcf", "mcf-extp", "tsmcf"):
        sol = solve(topo, Fabric(), method, demand=demand)
        assert sol.concurrent_flow == pytest.approx(want, rel=1e-6), method
        assert sol.upper_bound >= want * (1 - 1e-6) and sol.gap < 1e-6, method
        assert flow_time(sol, topo, demand) == pytest.approx(1 / sol.concurrent_flow, rel=1e-9)
    path = tmp_path / "D.csv"
    path.write_text(demand.to_csv())
    assert main(["solve", spec, "--demand", str(path), "--json"]) == 0
    import json

    s = json.loads(capsys.readouterr().out)
    assert s["concurrent_flow"] == pytest.approx(want, rel=1e-6)
    assert s["demand"]["sha256"] == demand.sha256 and s["demand"]["source"] == "D.csv"
    uniform = solve(topo, Fabric(), "mcf-decomp")
    assert s["uniform_reused"]["flow_time"] == pytest.approx(flow_time(uniform, topo, demand), rel=1e-9)
    assert s["uniform_reused"]["slowdown"] >= 1 - 1e-9


def test_zero_pairs_get_a_route_and_cost_nothing():
    topo = from_spec("ring:4")
    m = np.ones((4, 4))
    m[0, 2] = m[2, 0] = 0.0
    demand = Demand.from_array(m)
    want = reference_demand_mcf(topo, demand.volumes)
    sol = solve(topo, Fabric(), "mcf-extp", demand=demand)
    assert sol.concurrent_flow == pytest.approx(want, rel=1e-6)
    assert {(p.src, p.dst) for p in sol.paths} == {(s, d) for s in range(4) for d in range(4) if s != d}
    assert [p.nodes for p in sol.paths if (p.src, p.dst) == (0, 2)] in ([(0, 1, 2)], [(0, 3, 2)])


def test_symmetry_quotient_only_where_the_demand_is_invariant():
    topo = from_spec("torus:4x4")
    ids = np.asarray(topo.coords) @ [4, 1]
    assert np.array_equal(ids, np.arange(16))
    # hot destinations: the first row of the torus; invariant under the translations along rows only
    shift = np.array([[1.0 + (d // 4 == 0) for d in range(16)] for s in range(16)])
    skewed = zipf_demand(16, 1.0, seed=3)
    for m, orbits in ((Demand.from_array(shift), None), (skewed, 16)):
        sol = solve(topo, Fabric(), "mcf-decomp", demand=m, symmetry="on")
        plain = solve(topo, Fabric(), "mcf-decomp", demand=m, symmetry="off")
        assert sol.concurrent_flow == pytest.approx(plain.concurrent_flow, rel=1e-6)
        sym = sol.info["symmetry"]
        if orbits is None:
            assert sym["order"] == 4 and sym["source_orbits"] == 4 and "stabiliser" in sym["family"]
        else:
            assert sym["order"] == 1 and sym["source_orbits"] == orbits
