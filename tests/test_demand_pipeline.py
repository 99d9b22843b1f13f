"""All-to-allv through the pipeline: chunking, lowering, verifying, routes, warm re-solves (no MPI here)."""

import json

import numpy as np
import pytest

import a2a_compiler
from a2a_compiler.chunk import load_schedule, predicted_time, save_schedule
from a2a_compiler.chunk.counts import msccl_counts
from a2a_compiler.chunk.ir import dumps
from a2a_compiler.cli import main
from a2a_compiler.demand import Demand, zipf_demand
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import parse_program
from a2a_compiler.routes import route
from a2a_compiler.solve import solve
from a2a_compiler.solve.resolve import Resolver
from a2a_compiler.topology.spec import from_spec
from a2a_compiler.verify import verify_bytes
from a2a_compiler.verify.simulate import simulate_msccl

ZIPF = zipf_demand(8, 1.0, seed=1)
#: Every rank sends 6 and receives 6: a balanced integer matrix (MSCCL's fixed-size buffers).
BALANCED = np.array([[0, 1, 2, 3], [3, 0, 1, 2], [2, 3, 0, 1], [1, 2, 3, 0]])


def test_path_schedule_carries_the_volumes_and_verifies_against_them(tmp_path):
    r = a2a_compiler.compile("bipartite:4", emit="mpi", forwarding="nic", demand=ZIPF)
    want = solve(from_spec("bipartite:4"), Fabric(forwarding="nic"), "mcf-decomp", demand=ZIPF).lp_time
    assert r.lp_time == pytest.approx(want, rel=1e-6) and r.mcf_time == pytest.approx(want, rel=1e-6)
    assert 0.97 <= r.fidelity <= 1 and r.chunks_per_shard == 4
    program = parse_program(r.data)[1]
    assert np.array_equal(np.array(program.volumes), ZIPF.volumes)   # each rank's row, exactly
    # the plain all-to-all, reused for this matrix, is slower; verify prices it the same way
    s = r.summary()
    assert s["uniform_reused"]["slowdown"] > 1.1
    uniform = a2a_compiler.compile("bipartite:4", emit="mpi", forwarding="nic")
    rep = verify_bytes(uniform.data, "u.xml", from_spec("bipartite:4"), Fabric(forwarding="nic"), demand=ZIPF)
    assert rep.valid and rep.perf.predicted_time == pytest.approx(s["uniform_reused"]["predicted_time"], rel=1e-12)
    assert rep.fidelity is None and "plain all-to-all: priced for" in rep.warnings[0]
    # the file against another matrix: one data-movement error naming both hashes
    other = zipf_demand(8, 1.0, seed=2)
    bad = verify_bytes(r.data, "moe.xml", demand=other)
    assert bad.errors["data movement"] == [
        f"the file was compiled for another demand matrix (volumes sha256 {ZIPF.sha256[:12]}), not "
        f"{other.source} ({other.sha256[:12]})"]
    # the schedule IR round trip keeps the demand
    path = tmp_path / "s.json"
    save_schedule(r.schedule, path)
    again = load_schedule(path)
    assert dumps(again) == dumps(r.schedule) and again.demand.sha256 == ZIPF.sha256
    assert predicted_time(again) == predicted_time(r.schedule)


def test_oneccl_file_records_whole_chunk_counts():
    r = a2a_compiler.compile("hypercube:3", emit="oneccl", demand=ZIPF, max_chunks=8)
    T = np.array(parse_program(r.data)[1].chunk_counts)
    assert np.array_equal(T, np.ceil(ZIPF.volumes * r.chunks_per_shard).astype(int))   # rounded up, 0 diagonal
    assert r.fidelity <= 1 and r.report.valid
    # a link schedule's chunk is max D/T of a unit: its predicted time covers the demand
    assert r.predicted_time >= r.lp_time


def test_msccl_only_for_balanced_matrices(tmp_path, capsys):
    path = tmp_path / "D.csv"
    path.write_text(ZIPF.to_csv())
    assert main(["compile", "bipartite:4", "--emit", "msccl", "--demand", str(path), "-q",
                 "-o", str(tmp_path / "x.xml")]) == 2
    assert capsys.readouterr().err == (
        f"a2a compile: error: {path}: MSCCL's fixed-size buffers need every rank to send and receive the same "
        "total, and this matrix's rows and columns differ; use the MPI path format (--emit mpi) or oneCCL-style "
        "XML (--emit oneccl)\n")
    assert not (tmp_path / "x.xml").exists()
    idle = tmp_path / "idle.csv"                    # rank 0 sends nothing: refused for MSCCL, fine for paths
    idle.write_text("0,0,0,0\n1,0,2,1\n3,1,0,1\n1,2,1,0\n")
    assert main(["compile", "complete:4", "--emit", "msccl", "--demand", str(idle), "-q", "-o",
                 str(tmp_path / "x.xml")]) == 2
    assert capsys.readouterr().err == (
        f"a2a compile: error: {idle}: rank 0 sends nothing, and MSCCL's fixed-size buffers need every rank to "
        "send and receive the same total; use the MPI path format (--emit mpi) or oneCCL-style XML (--emit oneccl)\n")
    assert main(["compile", "complete:4", "--emit", "mpi", "--demand", str(idle), "-q", "-o",
                 str(tmp_path / "x.xml")]) == 1
    assert capsys.readouterr().err == (
        "a2a compile: warning: fidelity 0.9545 is below the default target 0.97: the best chunk count tried is "
        "C = 12; the file is written; --min-fidelity F sets a target it meets\n")


def test_balanced_integer_matrix_in_the_msccl_layout():
    d = Demand.from_array(BALANCED)
    r = a2a_compiler.compile("complete:4", emit="msccl", demand=d)
    program = r.program
    c = program.nchunksperloop // 4
    T = msccl_counts(d, c)
    assert np.all(T.sum(axis=0) == program.nchunksperloop) and np.all(T.sum(axis=1) == program.nchunksperloop)
    assert np.array_equal(T * 6, BALANCED * program.nchunksperloop)        # exact: T proportional to D
    assert simulate_msccl(program, T).errors == []                          # the all-to-allv layout
    assert simulate_msccl(program).errors                                   # not a plain all-to-all
    rep = verify_bytes(r.data, "b.xml", from_spec("complete:4"), demand=d)
    assert rep.valid and rep.mcf_time == pytest.approx(solve(from_spec("complete:4"), demand=d).lp_time, rel=1e-9)
    assert rep.lp_time == r.lp_time and rep.fidelity == pytest.approx(r.fidelity, rel=1e-12)   # the record's
    assert rep.mcf_ratio == pytest.approx(r.mcf_ratio, rel=1e-12) and rep.mcf_ratio >= 0.97


def test_routes_with_a_demand(tmp_path, capsys):
    topo = from_spec("bipartite:4")
    sssp = route(topo, "sssp", demand=ZIPF)
    plain = route(topo, "sssp")
    assert [p.nodes for p in sssp.paths] == [p.nodes for p in plain.paths]           # the same routes ...
    loads = np.zeros(topo.n_links)
    for p in plain.paths:
        for u, v in zip(p.nodes, p.nodes[1:]):
            loads[topo.link_index(u, v)] += ZIPF.volumes[p.src, p.dst]
    assert sssp.alltoall_time == pytest.approx(loads.max(), rel=1e-12)               # ... priced under D
    assert sssp.bound is None and sssp.lp_time is None
    path = tmp_path / "D.csv"
    path.write_text(ZIPF.to_csv())
    assert main(["routes", "bipartite:4", "--algo", "mcf-extp", "--json", "-q", "--demand", str(path),
                 "-o", str(tmp_path / "r.xml")]) == 0
    s = json.loads(capsys.readouterr().out)
    best = solve(topo, demand=ZIPF).a2a_time
    assert s["mcf_time"] == pytest.approx(best, rel=1e-6) and s["route_time"] == pytest.approx(best, rel=1e-6)
    assert 0.99 < s["mcf_ratio"] <= 1 and s["demand"]["sha256"] == ZIPF.sha256
    program = parse_program((tmp_path / "r.xml").read_bytes())[1]
    assert np.array_equal(np.array(program.volumes), ZIPF.volumes)


def test_warm_resolve_is_certified_and_optimal():
    topo = from_spec("hypercube:4")
    r = Resolver(topo)
    for batch in range(3):
        d = zipf_demand(16, 1.0, seed=4, batch=batch, tokens=256)
        warm = r.solve(d)
        cold = solve(topo, demand=d)
        assert warm.concurrent_flow == pytest.approx(cold.concurrent_flow, rel=1e-7)
        assert warm.gap < 1e-7 and warm.info["warm"] == (batch > 0)
    assert r.solve(d, certify=False).info["lp_iterations"] == 0      # the same matrix again: the basis is optimal


def test_demand_json_is_recorded_in_solve_and_schedule(tmp_path, capsys):
    path = tmp_path / "D.csv"
    path.write_text(ZIPF.to_csv())
    assert main(["schedule", "hypercube:3", "--demand", str(path), "-q", "--json", "-o",
                 str(tmp_path / "s.json")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["demand"] == {"source": "D.csv", "ranks": 8, "sha256": ZIPF.sha256}
    assert s["fidelity"] <= 1 and s["kind"] == "link"
    saved = json.loads((tmp_path / "s.json").read_text())
    assert saved["demand"]["volumes"] == ZIPF.volumes.tolist() and len(saved["chunk_counts"]) == 8


def test_testbed_predicts_each_links_bytes_for_the_counts():
    from runtimes.testbed.bench import link_bytes

    r = a2a_compiler.compile("bipartite:4", emit="mpi", forwarding="nic", demand=ZIPF)
    counts = ZIPF.pair_bytes(1 << 20)
    got = link_bytes(r.program, counts)
    want: dict = {}
    sent = np.zeros((8, 8), dtype=np.int64)
    C = r.program.chunks_per_shard
    for s in r.program.sends:                      # chunk k of a pair of c bytes: floor((k+1)c/C) - floor(kc/C)
        c = int(counts[s.src, s.dst])
        nbytes = sum((k + 1) * c // C - k * c // C for k in s.chunks)
        sent[s.src, s.dst] += nbytes
        for u, v in zip(s.nodes, s.nodes[1:]):
            want[(u, v)] = want.get((u, v), 0) + nbytes
    assert got == want
    assert np.array_equal(sent, counts)            # every pair's bytes, split over its routes, exactly once
    # a link program's chunks are padded to the largest ceil(c/T)
    one = a2a_compiler.compile("hypercube:3", emit="oneccl", demand=ZIPF, max_chunks=2)
    T = one.program.counts()
    cb = int(max(-(-counts[T > 0] // T[T > 0])))
    padded = link_bytes(one.program, counts, T)
    assert all(v % cb == 0 for v in padded.values()) and sum(padded.values()) >= counts.sum()


def test_a_matrix_and_its_multiples_compile_to_the_same_bytes():
    tripled = Demand.from_array(ZIPF.matrix * 3)
    assert tripled.sha256 == ZIPF.sha256
    for emit in ("mpi", "oneccl"):
        assert a2a_compiler.compile("hypercube:3", emit=emit, demand=tripled, max_chunks=4).data == \
            a2a_compiler.compile("hypercube:3", emit=emit, demand=ZIPF, max_chunks=4).data
