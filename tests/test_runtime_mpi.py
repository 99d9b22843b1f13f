"""The mpi4py runtime: real (oversubscribed) mpiexec jobs on hand-built schedules of every format.

Each job has a hard subprocess timeout, so a hang fails the test instead of stalling CI.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from a2a_compiler.formats.xmlutil import parse_xml
from a2a_compiler.formats import program_to_xml
from runtimes.mpi.direct import direct_msccl

from mpijobs import DATA, MPICH, REPO, SCHEDULES, compiled_schedules, shm_segments

MPIEXEC = MPICH.argv[0] if MPICH else None
pytestmark = [pytest.mark.mpi,
              pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec next to the Python interpreter or on PATH")]


def mpirun(n: int, *args: str, timeout: float = 90) -> subprocess.CompletedProcess:
    """``mpiexec -n n python ARGS`` (MPICH) from the repository root."""
    return MPICH.run(n, *args, timeout=timeout)


def run_json(n: int, file: Path, *opts: str, cmd=("-m", "runtimes.mpi")) -> dict:
    p = mpirun(n, *cmd, str(file), "--json", "-n", "2", "-w", "1", "--timeout", "30", *opts)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


@pytest.mark.parametrize("fixture, route_mode, fmt", [
    ("runtime_relay8.msccl.xml", None, "msccl"),
    ("runtime_ecube8.oneccl.xml", None, "oneccl"),
    ("runtime_two_hop8.mpi.xml", "relay", "mpi"),
    ("runtime_two_hop8.mpi.xml", "direct", "mpi"),
])
def test_hand_built_schedules_are_byte_exact(fixture, route_mode, fmt):
    # m = 1 and 100 bytes pad every format's chunks (C = 2 or 5); 10000 divides evenly
    out = run_json(8, DATA / fixture, "-b", "1", "-e", "10000", "-f", "100", "--check", "all",
                   *(["--route-mode", route_mode] if route_mode else []))
    assert out["format"] == fmt and out["ranks"] == 8 and out["json_version"] == 1
    assert [r["size_bytes"] for r in out["results"]] == [1, 100, 10000]
    assert [r["verified"] for r in out["results"]] == [True, True, True]
    assert all(r["native_verified"] and r["error"] is None for r in out["results"])


def test_direct_schedule_via_a2a_run_reports_the_mcf_bound(tmp_path):
    path = tmp_path / "direct8.xml"
    path.write_bytes(program_to_xml(direct_msccl(8)))
    out = run_json(8, path, "-b", "4K", "-e", "8K", "--link-bw", "3.125GB/s", "--mcf-flow", "1/2",
                   cmd=("-m", "a2a_compiler", "run"))
    assert out["throughput_bound_GBps"] == pytest.approx(7 * 0.5 * 3.125)
    for r in out["results"]:
        assert r["verified"] and not r["padded"] and r["chunk_bytes"] == r["size_bytes"]
        assert r["algbw_GBps"] == pytest.approx(7 * r["size_bytes"] / r["time_median_s"] / 1e9)
        assert r["ratio_to_native"] == pytest.approx(r["algbw_GBps"] / r["native_algbw_GBps"])
        assert r["bound_fraction"] == pytest.approx(r["algbw_GBps"] / out["throughput_bound_GBps"])


def test_wrong_delivery_names_rank_source_and_offset():
    p = mpirun(8, "-m", "runtimes.mpi", str(DATA / "runtime_wrong_offset8.msccl.xml"), "--json",
               "-b", "64", "-e", "64", "-n", "1", "-w", "0", "--timeout", "30")
    assert p.returncode == 1
    (r,) = json.loads(p.stdout)["results"]
    assert not r["verified"]
    # rank 3 receives rank 0's shard into slot 1, so its slot 0 keeps the 0xa5 poison
    assert r["error"].startswith("iteration 0: rank 3: byte 0 of the shard from rank 0 is 0xa5, expected 0x")


def test_wrong_rank_count_fails_on_all_ranks_with_one_message():
    p = mpirun(4, "-m", "runtimes.mpi", str(DATA / "runtime_relay8.msccl.xml"), timeout=60)
    assert p.returncode == 2
    msg = "error: the schedule is for 8 ranks but the communicator has 4; run it with mpiexec -n 8"
    assert p.stderr.count(msg) == 1
    assert p.stdout == ""


def test_missing_file_fails_with_one_message(tmp_path):
    p = mpirun(3, "-m", "a2a_compiler", "run", str(tmp_path / "nope.xml"), timeout=60)
    assert p.returncode == 2
    assert p.stderr.count(f"a2a run: error: cannot read {tmp_path / 'nope.xml'}: No such file or directory") == 1


def test_mismatched_message_sizes_fail_with_one_message(tmp_path):
    root = parse_xml((DATA / "runtime_relay8.msccl.xml").read_bytes())
    root.find("gpu[@id='0']/tb[@id='1']/step[@s='0']").set("cnt", "3")  # rank 0's first send to rank 1
    bad = tmp_path / "bad.xml"
    bad.write_bytes(etree.tostring(root))
    p = mpirun(8, "-m", "runtimes.mpi", str(bad), timeout=60)
    assert p.returncode == 2
    assert p.stderr.count("error:") == 1
    assert ("python -m runtimes.mpi: error: MSCCL algo 'runtime-relay-8': gpu 0 tb 1 step 0 sends cnt=3 but its "
            "matching receive, gpu 1 tb 8 step 0 (message 0 on channel 0), has cnt=2") in p.stderr


def test_deadlocking_schedule_is_aborted_by_the_watchdog():
    p = mpirun(2, "-m", "runtimes.mpi", str(DATA / "runtime_deadlock2.msccl.xml"), "--timeout", "2",
               "-e", "1K", timeout=60)
    assert p.returncode != 0, p.stderr
    assert "no progress for 2 s (a rank died or the schedule deadlocks); aborting the job" in p.stderr, p.stderr


def test_alltoall_api_from_user_code():
    # two_hop8 has C = 5: the 8- and 24-byte shards are padded internally, 8000 bytes is not
    p = mpirun(8, str(DATA / "runtime_api_script.py"), str(DATA / "runtime_two_hop8.mpi.xml") + "@direct",
               str(DATA / "runtime_relay8.msccl.xml"))
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["format"] for x in lines] == ["mpi", "msccl"]
    for x in lines:
        assert x["exact"] == [True] * 8
        assert x["size_error"] == "sendbuf has 64000 bytes but recvbuf has 63992"
        assert x["inplace_error"] == "sendbuf and recvbuf overlap; in-place all-to-all is not supported"


@pytest.mark.parametrize("nranks", [8, 27])
def test_compiled_schedules_are_byte_exact(nranks):
    args = compiled_schedules(nranks)
    if not args:
        pytest.skip(f"no {nranks}-rank schedules in {SCHEDULES}")
    p = mpirun(nranks, str(DATA / "runtime_api_script.py"), *args, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    assert [x["schedule"] for x in lines] == args
    assert {x["format"] for x in lines} == {"msccl", "oneccl", "mpi"}
    for x in lines:
        assert x["exact"] == [True] * nranks, x["schedule"]


def test_bound_uses_the_fabric_and_mcf_time_recorded_in_the_file():
    # the §5.2 torus file records its fabric (25 Gbit/s links) and mcf_time = 1/F = 13.5 (F = 2/27):
    # the bound is 26 * 2/27 * 3.125 GB/s with no option
    out = run_json(27, SCHEDULES / "torus-3x3x3-tsmcf.oneccl.xml", "-b", "1K", "-e", "1K")
    assert out["link_bw_Bps"] == 3.125e9 and out["mcf_flow"] == pytest.approx(2 / 27, rel=1e-6)
    assert out["throughput_bound_GBps"] == pytest.approx(26 * 2 / 27 * 3.125, rel=1e-6)
    assert out["results"][0]["verified"]


def test_bound_flags_override_the_record_and_need_each_other():
    p = mpirun(8, "-m", "runtimes.mpi", str(SCHEDULES / "hypercube-3-tsmcf.msccl.xml"), "--link-bw", "25Gbps",
               "--mcf-flow", "1/5", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "--json", "--timeout", "30")
    assert p.returncode == 0, p.stderr
    assert p.stderr == ("python -m runtimes.mpi: warning: --mcf-flow 0.2 differs from the file's link MCF optimum F = 0.25; the "
                        "bound uses --mcf-flow\n")       # the file records no link bandwidth: --link-bw is no override
    assert json.loads(p.stdout)["throughput_bound_GBps"] == pytest.approx(7 * 0.2 * 3.125)
    p = mpirun(8, "-m", "runtimes.mpi", str(DATA / "runtime_relay8.msccl.xml"), "--link-bw", "25Gbps",
               "--timeout", "30")
    assert p.returncode == 2
    assert "--link-bw: this file does not record its link MCF optimum; give --mcf-flow F" in p.stderr
    p = mpirun(8, "-m", "runtimes.mpi", str(DATA / "runtime_ecube8.oneccl.xml"), "--mcf-flow", "1/4",
               "--timeout", "30")
    assert p.returncode == 2
    assert "--mcf-flow needs --link-bw" in p.stderr


def test_human_table_and_bound_columns():
    p = mpirun(8, "-m", "runtimes.mpi", str(DATA / "runtime_ecube8.oneccl.xml"), "-b", "2K", "-e", "4K",
               "-n", "2", "-w", "0", "--link-bw", "25Gbps", "--mcf-flow", "1/4", "--timeout", "30")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].endswith("oneccl schedule 'runtime-ecube-8', 8 ranks, 2 chunk(s)/shard, "
                             "up to 10 scratch chunk(s) per rank")
    assert "# %bound = algbw / (N-1)*F*b, the link MCF bound 5.469 GB/s (F = 0.25)" in lines
    assert "# algbw = (N-1)*m/median (what each rank sends, per second); busbw = algbw*(N-1)/N (nccl-tests' " \
           "all-to-all bus bandwidth)" in lines
    head = next(x for x in lines if x.startswith("#") and "busbw(GB/s)" in x).split()[1:]
    rows = [dict(zip(head, x.split())) for x in lines if not x.startswith("#")]
    assert [(r["bytes"], r["chunk"], r["check"]) for r in rows] == [("2048", "1024", "ok"), ("4096", "2048", "ok")]
    for r in rows:  # busbw = algbw * 7/8 (to the printed 4 digits) and %bound = algbw / 5.469 GB/s
        assert float(r["busbw(GB/s)"]) == pytest.approx(float(r["algbw(GB/s)"]) * 7 / 8, rel=1.2e-3)
        assert abs(float(r["%bound"]) - 100 * float(r["algbw(GB/s)"]) / 5.46875) <= 0.1
    assert lines[-2].startswith("# average over 2 size(s): algbw ")
    assert lines[-1] == "# all sizes verified"


def test_a_rank_that_stops_cannot_hang_user_code():
    # rank 1 leaves before the all-to-all; the others are stuck in it until the watchdog aborts the job
    code = ("import sys, numpy as np\n"
            "from mpi4py import MPI\n"
            "from runtimes.mpi import Alltoall\n"
            "from runtimes.mpi.watchdog import Watchdog\n"
            "comm = MPI.COMM_WORLD\n"
            f"a2a = Alltoall({str(DATA / 'runtime_relay8.msccl.xml')!r}, comm)\n"
            "if comm.rank == 1:\n"
            "    sys.exit(0)\n"
            "with Watchdog(2, comm, 'user-job'):\n"
            "    a2a(np.zeros(8000, np.uint8), np.zeros(8000, np.uint8))\n")
    p = mpirun(8, "-c", code, timeout=60)
    assert p.returncode != 0
    assert re.search(r"user-job: rank [02-7]: no progress for 2 s", p.stderr), p.stderr


@pytest.mark.parametrize("name", ["allpairs_4_i2_LL128", "two_step_2x2_LL", "three_step_2x2_i2"])
def test_msccl_tools_output_runs_byte_exact(name):
    """msccl-tools' own XML (tests/data/msccl_tools/README.md), as written: C = 2 files pad odd sizes."""
    out = run_json(4, DATA / "msccl_tools" / f"{name}.xml", "-b", "1", "-e", "100", "-f", "99", "--check", "all")
    assert out["format"] == "msccl" and out["chunks_per_shard"] == (2 if "_i2" in name else 1)
    assert [(r["size_bytes"], r["verified"], r["error"]) for r in out["results"]] == [(1, True, None), (99, True, None)]


@pytest.mark.parametrize("name, chunks", [("alltoall-8n-7mb-43mb", 8)])
def test_rccl_shipped_files_run_byte_exact(name, chunks):
    """RCCL's own all-to-all files (tests/data/rccl/README.md): 999 bytes pad the C = 8 chunks."""
    out = run_json(8, DATA / "rccl" / f"{name}.xml", "-b", "1", "-e", "999", "-f", "999", "--check", "all")
    assert (out["format"], out["ranks"], out["chunks_per_shard"]) == ("msccl", 8, chunks)
    assert [(r["size_bytes"], r["verified"], r["error"]) for r in out["results"]] == [(1, True, None), (999, True, None)]


@pytest.mark.parametrize("name", ["alltoall-4", "alltoall_pipeline-4"])
def test_mscclpp_dsl_plans_run_byte_exact(name):
    """The MSCCL++ DSL's own plans (tests/data/mscclpp/README.md): in place, and with device semaphores."""
    out = run_json(4, DATA / "mscclpp" / f"{name}.json", "-b", "1", "-e", "999", "-f", "999", "--check", "all")
    assert out["format"] == "mscclpp"
    assert [(r["size_bytes"], r["verified"], r["error"]) for r in out["results"]] == [(1, True, None), (999, True, None)]


@pytest.mark.parametrize("spec, ranks", [("hypercube:3", 8)])  # torus:3x3x3 (27 ranks, 18 s): docs/results.md
def test_compiled_mscclpp_plans_run_byte_exact(tmp_path, spec, ranks):
    import a2a_compiler

    path = a2a_compiler.compile(spec, "mscclpp", max_chunks=3).write(tmp_path / "plan.json")
    out = run_json(ranks, path, "-b", "1", "-e", "999", "-f", "999", "--check", "all", "-n", "1")
    assert (out["format"], out["ranks"]) == ("mscclpp", ranks)
    assert out["link_bw_Bps"] is None and out["mcf_flow"] is None          # compiled without --link-bw
    assert [(r["size_bytes"], r["verified"], r["error"]) for r in out["results"]] == [(1, True, None), (999, True, None)]


def test_ctrl_c_during_a_run_is_one_line():
    """SIGINT to the whole job (what a terminal's Ctrl-C does) mid-sweep: rank 0 prints one line, every
    rank ends at once (the launcher reports 130, or 9 when it kills a rank that was still exiting), and the
    job's MPICH shared-memory segment is gone from /dev/shm (issue 34, item 4: 8.4 MB leaked per run)."""
    import os
    import signal
    import time

    p = subprocess.Popen([MPIEXEC, "-n", "8", sys.executable, "-m", "a2a_compiler", "run",
                          str(SCHEDULES / "bipartite-4-tsmcf.msccl.xml"), "-b", "1K", "-e", "1M", "-n", "500"],
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert p.stdout.readline().startswith("# ")  # running: the header is out
    time.sleep(1)
    segments = shm_segments(p)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert err == "a2a run: interrupted\n" and p.returncode in (130, 9)
    assert segments and not any(os.path.exists(s) for s in segments), segments


def test_rcs_program_is_byte_exact(tmp_path):
    import a2a_compiler

    path = a2a_compiler.compile("genkautz:8,2", "msccl", rcs=True, channels=1).write(tmp_path / "gk8-rcs.xml")
    assert path.read_bytes().count(b'type="rcs"') == 3
    out = run_json(8, path, "-b", "98", "-e", "98", "--check", "all")   # C = 2 divides 98 bytes
    assert [(r["size_bytes"], r["verified"], r["padded"]) for r in out["results"]] == [(98, True, False)]


RANK1_SIGTERM_BEFORE_INIT = {
    "a2a run": ("import os, signal, sys; import runtimes.mpi.cli as r; from a2a_compiler.cli import main; "
                "run = r.main; r.main = lambda *a: (os.kill(os.getpid(), signal.SIGTERM), run(*a)); "
                "sys.exit(main(['run', FILE]))"),
    "python -m runtimes.mpi": ("import os, runpy, signal, sys; import a2a_compiler.cli as c; sys.argv = ['x', FILE]; "
                               "parse = c.Parser.parse_args; c.Parser.parse_args = lambda self, *a: "
                               "(os.kill(os.getpid(), signal.SIGTERM), parse(self, *a))[1]; "
                               "runpy.run_module('runtimes.mpi', run_name='__main__')"),
}


@pytest.mark.parametrize("entry", RANK1_SIGTERM_BEFORE_INIT)
def test_a_rank_interrupted_before_mpi_init_still_joins_it(entry):
    """Rank 1 gets SIGTERM before MPI_Init; rank 0 is already waiting in MPI_Init, which needs every rank,
    and a signal cannot end it there.  Rank 1 joins MPI_Init before it exits (status 130), so rank 0 gets
    past it: before, the job hung for good."""
    file = SCHEDULES / "bipartite-4-tsmcf.msccl.xml"
    rank0 = "import os; from mpi4py import MPI; print('rank 0 past MPI_Init', flush=True); os._exit(0)"
    rank1 = RANK1_SIGTERM_BEFORE_INIT[entry].replace("FILE", repr(str(file)))
    p = subprocess.run([MPIEXEC, "-n", "1", sys.executable, "-c", rank0, ":", "-n", "1", sys.executable, "-c", rank1],
                       cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "rank 0 past MPI_Init" in p.stdout, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
