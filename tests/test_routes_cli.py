"""``a2a routes``: chunked MPI path files, the numbers reported from them, layers, errors."""

import json
from collections import defaultdict

import pytest
from lxml import etree

from a2a_compiler.cli import main
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import load_program
from a2a_compiler.routes import RoutedPath, RouteSet
from a2a_compiler.routes.schedule import chunk_routes, route_schedule
from a2a_compiler.topology.spec import from_spec


def run(capsys, *argv):
    code = main(["routes", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def file_max_load(path) -> float:
    """Max link load of an MPI path file, counted directly from its XML (unit capacities)."""
    root = etree.parse(str(path)).getroot()
    C = int(root.get("chunks_per_shard"))
    load = defaultdict(int)
    for send in root.iter("send"):
        nodes = send.get("route").split()
        for u, v in zip(nodes, nodes[1:]):
            load[(u, v)] += len(send.get("chunks").split())
    return max(load.values()) / C


@pytest.mark.parametrize("spec, algo, time, chunks", [
    ("torus:3x3x3", "dor", 9, 1), ("torus:3x3x3", "ewsp", 9, 6),
    ("hypercube:3", "dor", 4, 1), ("hypercube:3", "ewsp", 4, 6), ("bipartite:4", "ewsp", 2.5, 4),
])
def test_hand_values_from_the_written_file(tmp_path, capsys, spec, algo, time, chunks):
    out_file = tmp_path / "r.xml"
    code, out, _ = run(capsys, spec, "--algo", algo, "-o", str(out_file), "--json", "-q")
    assert code == 0
    s = json.loads(out)
    assert s["algo"] == algo and s["predicted_time"] == time and file_max_load(out_file) == time
    assert (s["chunks_per_shard"], s["chunks_exact"]) == (chunks, True)
    assert s["mcf_time"] == pytest.approx(time, rel=1e-6) and s["mcf_ratio"] == pytest.approx(1, rel=1e-6)
    assert s["lp_time"] is None and s["fidelity"] is None and s["optimal"] is None
    record = load_program(out_file)[1].record                  # verify and run measure against the MCF bound
    assert (record.spec, record.method, record.lp_time, record.mcf_time) == (spec, algo, None, s["mcf_time"])


def test_ilp_json_reports_proof_and_gap(tmp_path, capsys):
    out_file = tmp_path / "k44.xml"
    code, out, _ = run(capsys, "bipartite:4", "--algo", "ilp-disjoint", "--time-limit", "30", "-o", str(out_file),
                       "--json", "-q")
    assert code == 0
    s = json.loads(out)
    assert (s["predicted_time"], s["optimal"], s["mip_gap"], s["bound"]) == (3, True, 0, 3)
    assert s["mcf_ratio"] == pytest.approx(2.5 / 3, rel=1e-6) and file_max_load(out_file) == 3


def test_weighted_routes_are_rounded_and_say_so(tmp_path, capsys):
    out_file = tmp_path / "t.xml"
    code, out, err = run(capsys, "torus:3x3x3", "--algo", "mcf-extp", "--max-chunks", "4", "-o", str(out_file),
                         "--json")
    assert code == 0
    s = json.loads(out)
    assert s["chunks_exact"] is False and s["chunks_per_shard"] == 4
    assert "need more than --max-chunks 4 chunks per shard to be exact; rounded to multiples of 1/4" in err
    assert s["predicted_time"] == file_max_load(out_file) >= s["route_time"] - 1e-9
    assert s["lp_time"] == pytest.approx(9, rel=1e-6)


def test_lp_weights_are_rebalanced_after_rounding(tmp_path, capsys):
    """issue #18: K4,4 MCF-extP gave 2.515625 (rounded to 1/64 without rebalancing) where compile reaches 2.5."""
    out_file = tmp_path / "k44.xml"
    code, out, err = run(capsys, "bipartite:4", "--algo", "mcf-extp", "-o", str(out_file), "--json")
    s = json.loads(out)
    assert code == 0 and s["chunks_exact"] is False and s["chunks_per_shard"] == 4
    assert s["predicted_time"] == 2.5 == file_max_load(out_file) and s["mcf_ratio"] == 1.0
    assert "rounded to multiples of 1/4 (all-to-all time 2.5 -> 2.5)" in err


def test_chunk_counts_exact_lcm_or_largest_remainder():
    """Pair 0->2 of ring:4 split 1/5 + 4/5, every other pair on one path: exact with C = 5,
    else rounded on the cap's grid by largest remainder (4/5 -> 1, 16/5 -> 3)."""
    t = from_spec("ring:4")
    paths = [RoutedPath(s, d, (s, d) if (d - s) % 4 in (1, 3) else (s, (s + 1) % 4, d), 1.0)
             for s in range(4) for d in range(4) if s != d and (s, d) != (0, 2)]
    paths += [RoutedPath(0, 2, (0, 1, 2), 1 / 5), RoutedPath(0, 2, (0, 3, 2), 4 / 5)]
    rs = RouteSet("x", t, Fabric(), tuple(paths)).validate()
    counts = lambda sch: [len(r.chunks) for r in sch.routes if (r.src, r.dst) == (0, 2)]
    sch, exact = chunk_routes(rs, max_chunks=6)
    assert (exact, sch.chunks_per_shard, counts(sch)) == (True, 5, [1, 4])
    sch, exact = chunk_routes(rs, max_chunks=4)
    assert (exact, sch.chunks_per_shard, counts(sch)) == (False, 4, [1, 3])


def test_deadlock_scheme_layers_the_file(tmp_path, capsys):
    out_file = tmp_path / "t.xml"
    code, out, _ = run(capsys, "torus:3x3x3", "--algo", "mcf-extp", "--deadlock", "lash-seq", "--max-layers", "4",
                       "-o", str(out_file), "--json", "-q")
    assert code == 0
    s = json.loads(out)
    assert s["deadlock"] == "lash-seq" and s["deadlock_free"] is True and 2 <= s["layers"] <= 4
    layers = {int(e.get("layer")) for e in etree.parse(str(out_file)).getroot().iter("send")}
    assert layers == set(range(s["layers"]))
    code, out, _ = run(capsys, "torus:3x3x3", "--algo", "mcf-extp", "--json", "-q")
    s = json.loads(out)
    assert (s["layers"], s["deadlock_free"], s["deadlock"]) == (1, False, None)


def test_human_summary(capsys):
    code, out, _ = run(capsys, "bipartite:4", "--algo", "ilp-shortest", "-q")
    assert code == 0
    assert "MCF ratio 0.8333" in out and "proved optimal, MIP gap 0" in out
    assert "layers     1, NOT deadlock-free (cyclic channel dependencies)" in out


def test_same_input_same_bytes(tmp_path, capsys):
    a, b = tmp_path / "a.xml", tmp_path / "b.xml"
    for f in (a, b):
        assert run(capsys, "genkautz:16,2", "--algo", "sssp", "--deadlock", "dfsssp", "-o", str(f), "-q")[0] == 0
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("argv, message", [
    (["petersen", "--algo", "dor"], "dor: dimension-order routing needs a torus or a hypercube"),
    (["torus:3x3x3", "--algo", "sssp", "--time-limit", "5"], "--time-limit does not apply to --algo sssp (only to "
                                                              "--algo ilp-disjoint / ilp-shortest)"),
    (["torus:3x3x3", "--algo", "ewsp", "--deadlock", "lash", "--max-layers", "1"],
     "lash: the routes need more than --max-layers 1 virtual layers"),
    (["bipartite:4", "--algo", "fptas", "--eps", "1.5"], "fptas: --eps must be in (0, 1)"),
])
def test_errors_are_one_line_and_leave_no_file(tmp_path, capsys, argv, message):
    out_file = tmp_path / "x.xml"
    code, out, err = run(capsys, *argv, "-o", str(out_file), "-q")
    assert code == 2 and out == "" and not out_file.exists()
    assert err.count("\n") == 1 and message in err


def test_unwritable_output_is_refused_before_routing(tmp_path, capsys):
    code, out, err = run(capsys, "genkautz:64,4", "--algo", "ilp-disjoint", "-o", str(tmp_path / "no" / "x.xml"))
    assert code == 2 and out == "" and err.count("\n") == 1 and "does not exist" in err


@pytest.fixture(scope="module")
def gk64():
    t = from_spec("genkautz:64,4")
    from a2a_compiler.solve import solve

    return t, solve(t, None, "mcf-decomp").lp_time


@pytest.mark.parametrize("algo, lo, hi", [
    ("sssp", 1.05, 2.0), ("pmcf-disjoint", 1.0, 1.05), ("pmcf-shortest", 1.1, 10), ("fptas", 1.0, 1.10),
])
def test_genkautz_64_bands(gk64, algo, lo, hi):
    """The issue's acceptance bands on GenKautz(64,4), after chunking, against link MCF (46.07)."""
    topology, mcf = gk64
    r = route_schedule(topology, algo, mcf_time=mcf, **({"eps": 0.05} if algo == "fptas" else {}))
    assert lo - 1e-9 <= r.predicted_time / mcf <= hi, (algo, r.predicted_time, mcf)


def test_routes_per_pair_are_the_files():
    """issue 34, item 19: at C = 1 the file carries one route per pair, whatever the flow's paths were."""
    r = route_schedule(from_spec("hypercube:3"), "mcf-extp", max_chunks=1)
    s = r.summary()
    assert r.routes.paths_per_pair().max() == 4                  # the flow decomposition's paths
    assert (s["routes"], s["max_paths_per_pair"], s["chunks_per_shard"]) == (56, 1, 1)
