"""Several jobs on one fabric (a2a_compiler.jobs, a2a solve --jobs): the file, the joint solve against an
independent path LP, the alone solutions priced together, the per-job schedules, and runs on one
communicator per job."""

import json
import sys
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from scipy.optimize import linprog

from a2a_compiler.cli import main
from a2a_compiler.errors import A2AError
from a2a_compiler.jobs import job_topology, parse_jobs, solve_demand, solve_jobs
from a2a_compiler.topology.spec import from_spec

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_runtime_mpi import MPIEXEC, run_json  # noqa: E402


def jobs_obj(*jobs, objective="fair"):
    return {"format": "a2a-jobs", "version": 1, "objective": objective,
            "jobs": [{"name": n, "hosts": h, **({"weight": w} if w is not None else {})} for n, h, w in jobs]}


def path_lp_flow(topology, D):
    """max λ: every pair ships λ·D[s,t] over all its simple paths (enumerated), links at capacity: linprog."""
    g = nx.DiGraph(list(zip(topology.src.tolist(), topology.dst.tolist())))
    pairs = [(s, t) for s, t in zip(*np.nonzero(D))]
    cols, owner = [], []
    for k, (s, t) in enumerate(pairs):
        for p in nx.all_simple_paths(g, int(s), int(t)):
            cols.append(p)
            owner.append(k)
    E, P = topology.n_links, len(cols)
    A = np.zeros((E, P + 1))                      # x_p = flow on path p; last column: -U*cap with λ = 1/U
    for j, p in enumerate(cols):
        for u, v in zip(p, p[1:]):
            A[topology.link_index(u, v), j] += D[p[0], p[-1]]
    A[:, P] = -topology.capacity
    Aeq = np.zeros((len(pairs), P + 1))
    for j, k in enumerate(owner):
        Aeq[k, j] = 1
    c = np.zeros(P + 1)
    c[P] = 1
    res = linprog(c, A_ub=A, b_ub=np.zeros(E), A_eq=Aeq, b_eq=np.ones(len(pairs)), method="highs")
    assert res.status == 0
    return 1 / res.fun


@pytest.mark.parametrize("spec, jobs", [
    ("ring:6", [("A", [0, 1, 2], None), ("B", [3, 4, 5], None)]),
    ("ring:6", [("A", [0, 3], 1), ("B", [1, 2, 4, 5], 3)]),
    ("petersen", [("A", "0-4", None), ("B", "5-9", 2)]),
])
@pytest.mark.parametrize("objective", ["fair", "weighted"])
def test_joint_solve_equals_enumerated_path_lp(spec, jobs, objective):
    t = from_spec(spec)
    js = parse_jobs(jobs_obj(*jobs, objective=objective), t.n_hosts)
    r = solve_jobs(t, None, js)
    want = path_lp_flow(t, js.demand(t.n_hosts))       # λ: every pair of job j ships λ·w_j
    assert r.joint.gap < 1e-6
    s = r.summary()
    w = js.weights()
    for j, job in enumerate(s["jobs"]):
        assert job["joint_time"] == pytest.approx(1 / (want * w[j]), rel=1e-6)
        assert job["joint_time_busiest_link"] <= job["joint_time"] * (1 + 1e-9)
        # alone, a job is at least as fast as in company; the alone routings together cannot beat the joint
        assert job["alone_time"] <= job["joint_time"] * (1 + 1e-9)
        assert job["alone_together_time"] >= job["alone_time"] * (1 - 1e-9)
    assert s["joint_over_alone_together"] >= 1 - 1e-7           # the joint F is certified to ~1e-8


def test_ring_by_hand():
    # ring of 6, jobs {0,1,2} and {3,4,5}.  Together each job keeps to its own arc: links 0->1 and 1->2 carry
    # 2 shards each (0->1 and 0->2; 1->2 and 0->2), so time 2, and the other job's arc is just as full.  Alone,
    # a job also uses the far side of the ring: time 1 (the path LP agrees).  Run together, the alone
    # routings meet on the far side: time 2 again, no better than the joint solve.
    t = from_spec("ring:6")
    js = parse_jobs(jobs_obj(("A", [0, 1, 2], None), ("B", [3, 4, 5], None)), 6)
    r = solve_jobs(t, None, js)
    s = r.summary()
    assert [j["joint_time"] for j in s["jobs"]] == pytest.approx([2.0, 2.0], rel=1e-9)
    assert [j["alone_time"] for j in s["jobs"]] == pytest.approx([1.0, 1.0], rel=1e-7)
    assert [1 / j["alone_time"] for j in s["jobs"]] == pytest.approx([path_lp_flow(t, _alone(js, 6, k))
                                                                       for k in range(2)], rel=1e-7)
    assert [j["alone_together_time"] for j in s["jobs"]] == pytest.approx([2.0, 2.0], rel=1e-7)
    assert s["joint_over_alone_together"] == pytest.approx(1.0, rel=1e-7)


def _alone(js, n, k):
    D = np.zeros((n, n))
    h = np.asarray(js.jobs[k].hosts)
    D[np.ix_(h, h)] = 1
    np.fill_diagonal(D, 0)
    return D


def test_file_errors():
    with pytest.raises(A2AError, match="host 3 is already in job A; jobs must not share hosts"):
        parse_jobs(jobs_obj(("A", [0, 3], None), ("B", [3, 4], None)), 8)
    with pytest.raises(A2AError, match=r"host 8 outside 0\.\.7"):
        parse_jobs(jobs_obj(("A", "7-9", None)), 8)
    with pytest.raises(A2AError, match="needs at least 2 hosts, got 1"):
        parse_jobs(jobs_obj(("A", [1], None)), 8)
    with pytest.raises(A2AError, match="weight must be a positive number"):
        parse_jobs(jobs_obj(("A", [0, 1], -2)), 8)
    with pytest.raises(A2AError, match="objective 'fastest'"):
        parse_jobs(jobs_obj(("A", [0, 1], None), objective="fastest"), 8)
    with pytest.raises(A2AError, match="not an a2a-jobs file"):
        parse_jobs({"jobs": []}, 8)
    with pytest.raises(A2AError, match="is not an id or a range"):
        parse_jobs(jobs_obj(("A", "0-x", None)), 8)


def test_job_topology_numbers_the_job_first():
    t = from_spec("ring:6")
    jt, new = job_topology(t, parse_jobs(jobs_obj(("B", [4, 1], None)), 6).jobs[0])
    assert jt.n_hosts == 2 and jt.n_switches == 4
    assert new.tolist() == [2, 0, 3, 4, 1, 5]          # hosts 1, 4 first, then 0, 2, 3, 5
    assert jt.n_links == t.n_links


def test_demand_solve_is_certified_without_jobs():
    t = from_spec("hypercube:3")
    D = np.ones((8, 8)) - np.eye(8)
    f = solve_demand(t, None, D)
    assert f.time(0, 7) == pytest.approx(4.0, rel=1e-7)      # the all-to-all MCF of Q3: 4 link-times
    assert f.gap < 1e-6


def test_cli_writes_verified_job_schedules_that_run(tmp_path, capsys):
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps(jobs_obj(("A", [0, 3, 5, 6], None), ("B", [1, 2, 4, 7], None))))
    out = tmp_path / "new"  # created
    assert main(["solve", "hypercube:3", "--forwarding", "nic", "--jobs", str(jobs), "--schedules", str(out),
                 "--json", "-q"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert [j["joint_time"] for j in s["jobs"]] == pytest.approx([2.0, 2.0]) and len(s["schedules"]) == 6
    assert sorted(p.name for p in out.iterdir()) == ["A-alone.xml", "A.topology.json", "A.xml", "B-alone.xml",
                                                     "B.topology.json", "B.xml"]
    for name in ("A", "A-alone", "B", "B-alone"):
        job = name[0]
        assert main(["verify", str(out / f"{name}.xml"), "--topology", f"file:{out / job}.topology.json",
                     "--forwarding", "nic", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["valid"]
    assert main(["solve", "hypercube:3", "--jobs", str(jobs), "--method", "pmcf"]) == 2
    assert "--method does not apply with --jobs" in capsys.readouterr().err
    if MPIEXEC is not None:      # a job's schedule is an all-to-all on its own 4 ranks
        run = run_json(4, out / "A.xml", "-b", "64", "-e", "4096", "-f", "64", "--check", "all",
                       "--route-mode", "direct")
        assert [r["verified"] for r in run["results"]] == [True, True]
