"""The runtime as on a cluster: rank maps checked against real processor names, Open MPI as well as
MPICH, flags that do not apply, and a rank that dies.

Ranks get distinct processor names from their own UTS namespaces (``unshare --uts``, root), so the
rank map is checked against real ``MPI_Get_processor_name`` answers, not a stand-in.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from mpijobs import (DATA, SCHEDULES, compiled_schedules, kill_rank, launcher, own_hostnames, ranks,
                     uts_namespaces_missing)

pytestmark = pytest.mark.mpi
needs_uts = pytest.mark.skipif(uts_namespaces_missing() is not None, reason=uts_namespaces_missing() or "")

#: The topology host MPI rank r plays in the permuted maps below.
PERM = [3, 0, 5, 1, 7, 2, 6, 4]


def write_map(path, ranks_per_host: int = 1):
    """A rank map for own_hostnames(ranks_per_host): the r-th rank plays host PERM[r]."""
    path.write_text("# machine          host\n" + "".join(
        f"a2a-cluster-{r // ranks_per_host}   {node}\n" for r, node in enumerate(PERM)))
    return path


def test_openmpi_runs_every_shipped_schedule_byte_exact():
    """Every 8-rank file of schedules/ (all three formats, path files relayed and direct) under Open MPI."""
    job = launcher("openmpi")
    args = compiled_schedules(8)
    p = job.run(8, str(DATA / "runtime_api_script.py"), *args, timeout=180)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["schedule"] for x in lines] == args
    assert {x["format"] for x in lines} == {"msccl", "oneccl", "mpi"}
    for x in lines:
        assert x["library"].startswith("Open MPI v"), x["library"]
        assert x["exact"] == [True] * 8, x["schedule"]


@needs_uts
@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_a_permuted_rank_map_moves_every_host_and_stays_byte_exact(tmp_path, mpi):
    """Rank r runs on machine a2a-cluster-r (MPICH) or a2a-cluster-(r//2) (Open MPI: two ranks per machine)
    and plays host PERM[r]: the plans follow the map (nodes), and every byte still arrives (exact)."""
    job = launcher(mpi)
    per_host = 1 if mpi == "mpich" else 2
    rmap = write_map(tmp_path / "cluster.map", per_host)
    files = [str(SCHEDULES / f) for f in ("hypercube-3-tsmcf.msccl.xml", "hypercube-3-tsmcf.oneccl.xml",
                                          "twisted-hypercube-3-mcf-extp.mpi.xml")]
    p = job.run(8, str(DATA / "runtime_api_script.py"), "--rank-map", str(rmap), *files,
                wrap=own_hostnames(per_host), timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["format"] for x in lines] == ["msccl", "oneccl", "mpi"]
    for x in lines:
        assert x["nodes"] == PERM and x["exact"] == [True] * 8, x


@needs_uts
def test_a2a_run_with_a_rank_map_reports_and_checks_the_placement(tmp_path):
    rmap = write_map(tmp_path / "cluster.map")
    p = launcher("mpich").run(8, "-m", "a2a_compiler", "run", str(SCHEDULES / "hypercube-3-mcf-extp.mpi.xml"),
                              "--rank-map", str(rmap), "--json", "-b", "1", "-e", "4K", "-f", "64", "-n", "2",
                              "-w", "1", "--check", "all", wrap=own_hostnames())
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["rank_map"] == str(rmap) and out["rank_nodes"] == PERM
    assert out["mpi_library"].startswith("MPICH Version:")
    assert [(r["size_bytes"], r["verified"]) for r in out["results"]] == [(1, True), (64, True), (4096, True)]


@needs_uts
def test_a_wrong_rank_map_is_refused_in_one_line_on_every_rank(tmp_path):
    rmap = tmp_path / "wrong.map"
    rmap.write_text(write_map(tmp_path / "m").read_text().replace("a2a-cluster-6 ", "a2a-cluster-9 "))
    p = launcher("mpich").run(8, "-m", "runtimes.mpi", str(SCHEDULES / "hypercube-3-tsmcf.msccl.xml"),
                          "--rank-map", str(rmap), wrap=own_hostnames())
    assert p.returncode != 0 and p.stdout == ""
    line = (f"python -m runtimes.mpi: error: {rmap}: rank 6 runs on 'a2a-cluster-6', which the rank map does not "
            f"list; the map expects a process on 'a2a-cluster-9' (line 8), where none runs")
    assert [x for x in p.stderr.splitlines() if "error" in x] == [line], p.stderr


def test_flags_that_do_not_apply_are_refused_in_one_line():
    p = launcher("mpich").run(8, "-m", "a2a_compiler", "run", str(SCHEDULES / "hypercube-3-tsmcf.oneccl.xml"),
                              "--route-mode", "direct")
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == ("a2a run: error: --route-mode does not apply to this oneccl schedule: route modes apply "
                        "to MPI path schedules only\n")


@pytest.mark.parametrize("opts, message", [
    (["--timeout", "-5"], "argument --timeout: must be a number of seconds > 0 (or 0 for no watchdog), got '-5' "
                          "(see 'a2a run --help')"),
    (["--topology", "hypercube:3"], "--topology needs --rank-map: it only names the hosts a rank map uses"),
])
def test_bad_runtime_flags_are_refused_before_mpi_starts(opts, message):
    p = subprocess.run([sys.executable, "-m", "a2a_compiler", "run", str(SCHEDULES / "hypercube-3-tsmcf.msccl.xml"),
                        *opts], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == f"a2a run: error: {message}\n"


@pytest.mark.parametrize("mpi", ["mpich", "openmpi"])
def test_a_killed_rank_ends_the_job_without_tracebacks(mpi):
    """SIGKILL rank 3 mid-sweep.  MPICH's hydra SIGKILLs the others at once and prints its own banner
    (stdout); Open MPI sends them SIGTERM first, and the lowest survivor on the machine names the dead
    rank in one line beside Open MPI's own report.  No rank prints a traceback or blames another rank."""
    job = launcher(mpi)
    p = job.popen(8, "-m", "runtimes.mpi", str(SCHEDULES / "bipartite-4-tsmcf.msccl.xml"), "-b", "1K", "-e", "1M",
                  "-n", "1000")
    try:
        assert p.stdout.readline().startswith("# ")   # the sweep has started
        pid = kill_rank(p, 3)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, 9)
            p.wait()
    assert p.returncode != 0
    assert "Traceback" not in err + out
    ours = [x for x in err.splitlines() if x.startswith("python -m runtimes.mpi:")]
    assert ours in ([], [f"python -m runtimes.mpi: rank 3 (pid {pid} on {socket.gethostname()}) died; ending the job"]), err
    if mpi == "openmpi":
        assert f"process rank 3 with PID {pid} on node" in err
    else:
        assert "BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES" in out


def test_ctrl_c_under_open_mpi():
    """Open MPI's mpiexec puts every rank in its own process group, so a terminal's Ctrl-C reaches mpiexec
    alone, and PRRTE's clean_abort (prterun.c) ends the job quietly with status 1: the ranks get SIGTERM and
    their output is no longer forwarded (issue 34, item 3; docs/runtime.md).  No traceback, no rank left.
    SIGINT to the ranks themselves gives our one line and 130, as under MPICH."""
    import signal
    import time

    job = launcher("openmpi")
    for target, status in (("mpiexec", 1), ("ranks", 130)):
        p = job.popen(8, "-m", "a2a_compiler", "run", str(SCHEDULES / "bipartite-4-tsmcf.msccl.xml"), "-b", "1K",
                      "-e", "1M", "-n", "500")
        try:
            assert p.stdout.readline().startswith("# ")      # the sweep has started
            time.sleep(1)
            pids = ranks(p)
            if target == "mpiexec":
                os.killpg(p.pid, signal.SIGINT)               # what a terminal's Ctrl-C does
            else:
                for pid in pids.values():
                    os.kill(pid, signal.SIGINT)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
        assert p.returncode == status, err
        assert "Traceback" not in out + err
        ours = [x for x in err.splitlines() if x.startswith("a2a run")]
        assert ours == ([] if target == "mpiexec" else ["a2a run: interrupted"]), err
        deadline = time.monotonic() + 10
        while any(os.path.exists(f"/proc/{pid}") for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(os.path.exists(f"/proc/{pid}") for pid in pids.values())
