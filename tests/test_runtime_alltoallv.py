"""``runtimes.mpi.Alltoallv`` and ``a2a run --demand``: real (oversubscribed) mpiexec jobs, byte-exact
against native ``MPI_Alltoallv`` on the same buffers, for every format."""

from __future__ import annotations

import json

import numpy as np
import pytest

import a2a_compiler
from a2a_compiler.demand import Demand, zipf_demand
from a2a_compiler.errors import A2AError
from a2a_compiler.solve import solve
from a2a_compiler.topology.spec import from_spec
from test_runtime_mpi import DATA, SCHEDULES, mpirun, pytestmark  # noqa: F401  (skip without mpiexec)

ZIPF = zipf_demand(8, 1.0, seed=1)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """The Zipf matrix and, compiled for it on hypercube:3, an MPI path file and a oneCCL-style file."""
    d = tmp_path_factory.mktemp("moe")
    (d / "D.csv").write_text(ZIPF.to_csv())
    for emit in ("mpi", "oneccl"):
        a2a_compiler.compile("hypercube:3", emit=emit, demand=ZIPF, max_chunks=4).write(d / f"moe.{emit}.xml")
    return d


def test_one_schedule_serves_any_counts(compiled):
    # demand-aware files, and plain all-to-all files reused: every count matrix the script tries is byte-exact
    args = [str(compiled / "moe.mpi.xml"), f"{compiled / 'moe.mpi.xml'}@direct", str(compiled / "moe.oneccl.xml"),
            str(SCHEDULES / "hypercube-3-mcf-extp.mpi.xml"), str(SCHEDULES / "hypercube-3-tsmcf.msccl.xml")]
    p = mpirun(8, str(DATA / "runtime_alltoallv_script.py"), *args, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["format"] for x in lines] == ["mpi", "mpi", "oneccl", "mpi", "msccl"]
    for x in lines:
        assert x["exact"] == [True] * 8, x["schedule"]
        # rank 1 expects one element (8 bytes) more from rank 0 than rank 0 sends: every rank says so
        assert x["mismatch"] == [f"rank 0 sends rank 1 {8 * _counts()[0, 1]} bytes but rank 1 expects "
                                 f"{8 * _counts()[0, 1] + 8}"]
        # issue 34, item 18: a negative count is named, on every rank (it said "invalid all-to-allv arguments")
        assert x["negative"] == ["rank 2: send count for rank 3 is -1; counts must be >= 0"] * 8


def _counts():
    """The third count matrix of runtime_alltoallv_script.py (numpy's default_rng(7), drawn the same way)."""
    rng = np.random.default_rng(7)
    rng.integers(0, 3000, (8, 8))
    return rng.integers(0, 40, (8, 8))


def test_msccl_all_to_allv_layout_from_the_demand(tmp_path):
    d = Demand.from_array([[0, 1, 2, 3], [3, 0, 1, 2], [2, 3, 0, 1], [1, 2, 3, 0]])
    (tmp_path / "B.csv").write_text(d.to_csv())
    a2a_compiler.compile("complete:4", emit="msccl", demand=d).write(tmp_path / "b.msccl.xml")
    p = mpirun(4, str(DATA / "runtime_alltoallv_script.py"), f"{tmp_path / 'b.msccl.xml'}#{tmp_path / 'B.csv'}",
               timeout=120)
    assert p.returncode == 0, p.stderr
    (x,) = [json.loads(line) for line in p.stdout.splitlines()]
    assert x["format"] == "msccl" and x["exact"] == [True] * 4


def test_an_mscclpp_all_to_allv_plan_runs_byte_exact(tmp_path):
    """A balanced all-to-allv compiled to MSCCL++ on hypercube:3 runs under MPICH in its recorded layout, with
    --demand and without, every byte checked against MPI_Alltoallv on the same buffers."""
    from test_mscclpp_ordering import BALANCED8

    (tmp_path / "D.csv").write_text(BALANCED8)
    d = Demand.from_array(np.loadtxt(tmp_path / "D.csv", delimiter=","))
    a2a_compiler.compile("hypercube:3", emit="mscclpp", demand=d).write(tmp_path / "p.json")
    opts = ("-n", "2", "-w", "1", "--check", "all", "--json", "--timeout", "60")
    p = mpirun(8, "-m", "a2a_compiler", "run", str(tmp_path / "p.json"), "--demand", str(tmp_path / "D.csv"),
               "-b", "1K", "-e", "64K", "-f", "64", *opts, timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["demand"]["sha256"] == d.sha256 and [r["size_bytes"] for r in out["results"]] == [1024, 65536]
    assert all(r["verified"] and r["native_verified"] for r in out["results"])
    p = mpirun(8, "-m", "a2a_compiler", "run", str(tmp_path / "p.json"), "-b", "4K", "-e", "4K", *opts,
               timeout=120)                                       # the demand the plan records
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    (r,) = out["results"]
    assert out["demand"]["sha256"] == d.sha256 and r["verified"] and r["native_verified"]


def test_a2a_run_demand_is_byte_exact_for_the_schedule_and_native(compiled):
    p = mpirun(8, "-m", "a2a_compiler", "run", str(compiled / "moe.mpi.xml"), "--demand", str(compiled / "D.csv"),
               "-b", "1K", "-e", "64K", "-f", "64", "-n", "2", "-w", "1", "--check", "all", "--json",
               "--link-bw", "25Gbps", "--timeout", "60", timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["demand"] == {"source": "D.csv", "ranks": 8, "sha256": ZIPF.sha256}
    F = solve(from_spec("hypercube:3"), demand=ZIPF).concurrent_flow
    assert out["mcf_flow"] == pytest.approx(F, rel=1e-6)                  # 1/F(D) recorded by compile
    assert [r["size_bytes"] for r in out["results"]] == [1024, 65536]
    for r in out["results"]:
        assert r["verified"] and r["native_verified"] and r["chunk_bytes"] is None
        total = ZIPF.pair_bytes(r["size_bytes"]).sum()
        assert r["algbw_GBps"] == pytest.approx(total / 8 / r["time_median_s"] / 1e9)
        assert r["native_algbw_GBps"] == pytest.approx(total / 8 / r["native_time_median_s"] / 1e9)


def test_a2a_run_takes_the_recorded_demand(compiled):
    """An all-to-allv file runs as the all-to-allv it was compiled for without --demand (the file records it)."""
    p = mpirun(8, "-m", "a2a_compiler", "run", str(compiled / "moe.mpi.xml"), "-b", "4K", "-e", "4K", "-n", "1",
               "-w", "0", "--check", "all", "--json", "--link-bw", "25Gbps", "--timeout", "60", timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["demand"]["sha256"] == ZIPF.sha256 and out["demand"]["ranks"] == 8
    assert out["mcf_flow"] == pytest.approx(solve(from_spec("hypercube:3"), demand=ZIPF).concurrent_flow, rel=1e-6)
    (r,) = out["results"]
    assert r["verified"] and r["native_verified"] and r["chunk_bytes"] is None


def test_a2a_run_demand_under_a_permuted_rank_map(compiled, tmp_path):
    """Rank r plays host PERM[r] (tests/test_runtime_cluster.py): the counts stay in rank order, the plans
    follow the hosts, every byte still arrives, against MPI_Alltoallv on the same buffers."""
    from mpijobs import launcher, own_hostnames, uts_namespaces_missing
    from test_runtime_cluster import PERM, write_map

    if uts_namespaces_missing():
        pytest.skip(uts_namespaces_missing())
    rmap = write_map(tmp_path / "cluster.map")
    p = launcher("mpich").run(8, "-m", "a2a_compiler", "run", str(compiled / "moe.mpi.xml"), "--rank-map", str(rmap),
                              "--demand", str(compiled / "D.csv"), "--json", "-b", "1K", "-e", "1K", "-n", "2",
                              "-w", "1", "--check", "all", wrap=own_hostnames(), timeout=120)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["rank_nodes"] == PERM
    (r,) = out["results"]
    assert r["verified"] and r["native_verified"]


def test_bound_of_a_plain_file_run_under_a_demand_needs_its_flow():
    """A plain file's recorded mcf_time is the uniform optimum: under --demand D the bound needs F(D)."""
    from argparse import Namespace

    from a2a_compiler.fabric import Fabric
    from a2a_compiler.formats.record import Record
    from runtimes.mpi.cli import bound_inputs

    plain = Record("hypercube:3", "tsmcf", Fabric(link_bw=3.125e9), 4.0, 4.0)
    args = Namespace(link_bw=None, mcf_flow=None)
    assert bound_inputs(args, plain)[:2] == (3.125e9, 0.25)                    # the plain all-to-all: recorded
    assert bound_inputs(args, plain, ZIPF)[:2] == (None, None)                 # under D: no bound, no guess
    with pytest.raises(A2AError, match="the link MCF optimum of another demand"):
        bound_inputs(Namespace(link_bw="25Gbps", mcf_flow=None), plain, ZIPF)
    assert bound_inputs(Namespace(link_bw=None, mcf_flow=0.2), plain, ZIPF)[:2] == (3.125e9, 0.2)
    made = Record("hypercube:3", "tsmcf", Fabric(link_bw=3.125e9), 5.0, 5.0, {"ranks": 8, "sha256": ZIPF.sha256})
    assert bound_inputs(args, made, ZIPF)[:2] == (3.125e9, 0.2)                # the file's own demand
