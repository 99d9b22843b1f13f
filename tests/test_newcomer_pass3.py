"""The third newcomer pass (issue 34's acceptance): bad input found in it, one exact line and exit 2 each."""

import pytest

from a2a_compiler.cli import main
from test_hardening import _error


@pytest.mark.parametrize("argv, message", [
    # an empty input path (an unset shell variable) was ignored (--demand, --jobs: exit 0) or read as "."
    (["solve", "hypercube:3", "--demand", ""], "a2a solve: error: --demand: the path is empty"),
    (["solve", "hypercube:3", "--jobs", ""], "a2a solve: error: --jobs: the path is empty"),
    (["routes", "hypercube:3", "--algo", "file", "--lft-in", ""], "a2a routes: error: --lft-in: the path is empty"),
    (["compile", "--from-ir", "", "--emit", "msccl", "-o", "x.xml"],
     "a2a compile: error: --from-ir: the path is empty"),
    (["testbed", "bench", "hypercube:2", "--schedule", ""], "a2a testbed: error: --schedule: the path is empty"),
    (["verify", ""], "a2a verify: error: cannot read '': the path is empty"),
    (["demand", "show", ""], "a2a demand: error: cannot read '': the path is empty"),
])
def test_empty_input_path(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert _error(capsys, argv) == message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    # --instances 100000 placed 100000 copies before the channel limit was checked (over a minute)
    (["compile", "hypercube:3", "--emit", "msccl", "-o", "x.xml", "--instances", "100000"],
     "a2a compile: error: hypercube:3 (--channels x --instances) needs 100000 channels, over the 32 "
     "msccl-executor-nccl (NCCL 2.23) builds; use fewer --channels or --instances"),
    (["compile", "hypercube:3", "--emit", "msccl", "-o", "x.xml", "--instances", "64", "--channels", "4",
      "--target", "rccl"],
     "a2a compile: error: hypercube:3 (--channels x --instances) needs 256 channels, over the 128 RCCL (ROCm) "
     "builds; use fewer --channels or --instances"),
])
def test_channels_refused_before_solving(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert _error(capsys, argv) == message
    assert list(tmp_path.iterdir()) == []


def test_instances_refused_from_ir(capsys, tmp_path):
    ir = tmp_path / "ir.json"
    assert main(["schedule", "hypercube:3", "-o", str(ir), "-q"]) == 0
    capsys.readouterr()
    out = tmp_path / "x.xml"
    assert _error(capsys, ["compile", "--from-ir", str(ir), "--emit", "msccl", "-o", str(out),
                           "--instances", "100000"]) == (
        "a2a compile: error: hypercube:3 (--channels x --instances) needs 100000 channels, over the 32 "
        "msccl-executor-nccl (NCCL 2.23) builds; use fewer --channels or --instances")
    assert not out.exists()


def test_run_names_the_rank_count_before_the_demand(tmp_path):
    """A job with too few ranks was told its (right-sized) demand matrix was wrong: 'there are 1 hosts'."""
    import subprocess
    import sys
    from pathlib import Path

    schedule = Path(__file__).resolve().parents[1] / "schedules" / "hypercube-3-mcf-extp.mpi.xml"
    demand = tmp_path / "D.csv"
    demand.write_text("\n".join(",".join("0" if i == j else "1" for j in range(8)) for i in range(8)) + "\n")
    r = subprocess.run([sys.executable, "-m", "a2a_compiler", "run", str(schedule), "--demand", str(demand)],
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (2, "a2a run: error: the schedule is for 8 ranks but the communicator has 1; "
                                           "run it with mpiexec -n 8\n")


@pytest.mark.parametrize("argv, message", [
    # the MPI run's options were silently ignored with --no-run, and checked only after compiling without it
    (["demo", "--no-run", "-n", "4"], "a2a demo: error: --iters does not apply with --no-run"),
    (["demo", "--no-run", "--timeout", "5"], "a2a demo: error: --timeout does not apply with --no-run"),
    (["demo", "--no-run", "--dir", ""], "a2a demo: error: --dir: the path is empty"),
    (["demo", "-b", "1M", "-e", "1K"], "a2a demo: error: -b 1048576 is larger than -e 1024"),
])
def test_demo_run_options(capsys, tmp_path, monkeypatch, argv, message):
    monkeypatch.chdir(tmp_path)
    assert _error(capsys, argv) == message
    assert list(tmp_path.iterdir()) == []


def test_demo_checks_the_run_sizes_on_the_command_line(tmp_path):
    """-b was a string passed on to the MPI run: '1KB' failed there, after both files were compiled."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "a2a_compiler", "demo", "-b", "1KB"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert (r.returncode, r.stderr) == (2, "a2a demo: error: argument -b/--minbytes: size '1KB' is ambiguous: KB may "
                                           "mean 1000s or 1024s; sizes are bytes: write 1K or 1KiB (powers of 1024) "
                                           "(see 'a2a demo --help')\n")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("spec, kind", [(None, "NoneType"), (5, "int")])
def test_compile_names_a_spec_that_is_no_string(spec, kind):
    """compile(None) said "unknown topology family 'none' in 'None'"."""
    import a2a_compiler

    with pytest.raises(a2a_compiler.A2AError) as e:
        a2a_compiler.compile(spec, emit="mpi")
    assert str(e.value) == f"the topology must be a spec string (e.g. 'torus:3x3x3') or a Topology, got {kind}"


def test_verify_refuses_nvlink_bw_without_nvlinks(capsys):
    """solve and compile refuse --nvlink-bw on a topology without NVLinks; verify took it and showed it (with a
    warning) as the fabric the times were predicted on."""
    from pathlib import Path

    schedule = Path(__file__).resolve().parents[1] / "schedules" / "hypercube-3-tsmcf.msccl.xml"
    assert _error(capsys, ["verify", str(schedule), "--link-bw", "25Gbps", "--nvlink-bw", "1Tbps"]) == (
        "a2a verify: error: --nvlink-bw: hypercube:3 has no nvlink links (only nvswitch:... topologies have them)")


@pytest.mark.parametrize("second", ["0,1", "1,0"])
def test_a_cable_named_twice(capsys, second):
    """A second --remove-cable of the same cable removed nothing more, silently."""
    assert _error(capsys, ["topo", "hypercube:3", "--remove-cable", "0,1", "--remove-cable", second]) == (
        f"a2a topo: error: --remove-cable {second}: names the same cable(s) as --remove-cable 0,1 did")


def test_bench_refuses_sizes_with_fft(capsys):
    """--sizes was ignored under --fft (its help said so); refused before any testbed is built."""
    assert _error(capsys, ["testbed", "bench", "hypercube:2", "--fft", "4", "--sizes", "1K"]) == (
        "a2a testbed: error: --sizes does not apply with --fft")


def test_a_spec_parameter_given_twice(capsys):
    """torus:3x3,p=1,p=2 built p=2, silently."""
    assert _error(capsys, ["topo", "torus:3x3,p=1,p=2"]) == (
        "a2a topo: error: torus:3x3,p=1,p=2: parameter p is given twice")


def test_write_refuses_an_empty_path(tmp_path, monkeypatch):
    """CompileResult.write('') said "cannot write .: it is a directory"."""
    import a2a_compiler

    monkeypatch.chdir(tmp_path)
    r = a2a_compiler.compile("ring:4", emit="mpi")
    with pytest.raises(a2a_compiler.A2AError) as e:
        r.write("")
    assert str(e.value) == "cannot write '': the path is empty"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("specs, message", [
    (["hypercube:3", "ring:8"], "a2a compare: error: --nvlink-bw: none of hypercube:3, ring:8 has such links (only "
                                "nvswitch:... topologies have them)"),
    (["hypercube:3"], "a2a compare: error: --nvlink-bw: hypercube:3 has no nvlink links (only nvswitch:... "
                      "topologies have them)"),
])
def test_compare_refuses_nvlink_bw_without_nvlinks(capsys, specs, message):
    """--nvlink-bw with no NVSwitch row was ignored (exit 0); beside one, it applies to that row."""
    assert _error(capsys, ["compare", *specs, "--link-bw", "25Gbps", "--nvlink-bw", "1Tbps"]) == message


def test_compare_applies_nvlink_bw_to_the_rows_with_nvlinks(capsys):
    assert main(["compare", "nvswitch:2,4", "complete:8", "--link-bw", "25Gbps", "--nvlink-bw", "10Gbps",
                 "--json", "-q"]) == 0
    import json

    rows = {r["spec"]: r["lp_time"] for r in json.loads(capsys.readouterr().out)["rows"]}
    assert rows == {"nvswitch:2,4": pytest.approx(15), "complete:8": pytest.approx(1)}


@pytest.mark.parametrize("extra, message", [
    (["--pricing", "on"], "a2a solve: error: --pricing does not apply with --jobs (its solves are the demand-aware "
                          "MCF-extP's, with their defaults)"),
    (["--workers", "2", "--symmetry", "off"], "a2a solve: error: --workers, --symmetry do not apply with --jobs (its "
                                              "solves are the demand-aware MCF-extP's, with their defaults)"),
    (["--solver", "ipm"], "a2a solve: error: --solver does not apply with --jobs (its solves are the demand-aware "
                          "MCF-extP's, with their defaults)"),
    (["--schedules", ""], "a2a solve: error: --schedules: the path is empty"),
])
def test_solve_jobs_refuses_the_single_solve_options(capsys, tmp_path, extra, message):
    """With --jobs, --pricing, --workers, --symmetry and --solver were ignored (exit 0), and --schedules ''."""
    jobs = tmp_path / "j.json"
    jobs.write_text('{"format": "a2a-jobs", "version": 1, "jobs": [{"hosts": "0-3"}, {"hosts": "4-7"}]}')
    assert _error(capsys, ["solve", "hypercube:3", "--jobs", str(jobs), *extra]) == message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.json"]


def test_bench_jobs_refuses_demand(capsys, tmp_path):
    """bench --jobs ran every job's all-to-all and ignored --demand."""
    jobs = tmp_path / "j.json"
    jobs.write_text('{"format": "a2a-jobs", "version": 1, "jobs": [{"hosts": "0-1"}, {"hosts": "2-3"}]}')
    demand = tmp_path / "D.csv"
    demand.write_text("0,1,1,1\n1,0,1,1\n1,1,0,1\n1,1,1,0\n")
    assert _error(capsys, ["testbed", "bench", "hypercube:2", "--forwarding", "nic", "--jobs", str(jobs),
                           "--demand", str(demand), "--schedule", "a.xml,b.xml"]) == (
        "a2a testbed: error: --demand does not apply with --jobs")


@pytest.mark.parametrize("args, code, err", [
    (["--help"], 0, ""),  # said "SKIP: ... needs torch", exit 77, without torch
    (["--quick", "--steps", "3"], 2, "torch_moe.py: error: --steps: --quick sets it itself\n"),
    (["--quick", "--schedule", "x.xml", "--compare"], 2,
     "torch_moe.py: error: --schedule, --compare: --quick sets them itself\n"),
])
def test_torch_moe_options_need_no_torch(args, code, err):
    """tools/torch_moe.py's --help and option errors come before torch is imported; --quick replaced a given
    --schedule, --compare, --steps or --tokens silently."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "tools" / "torch_moe.py"
    r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=120)
    assert r.returncode == code
    assert r.stderr.splitlines()[-1:] == err.splitlines()
    assert ("usage: torch_moe.py" in r.stdout) == (code == 0)
