"""``a2a solve``: JSON summary, fabric cases of the design source, saved files, errors."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from a2a_compiler.cli import main
from a2a_compiler.solve import FlowSolution

FABRIC = ["--link-bw", "25Gbps", "--host-bw", "100Gbps"]


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_summary_nic_forwarding(capsys):
    s = _json(capsys, ["solve", "torus:3x3x3", *FABRIC, "--forwarding", "nic", "--json"])
    assert s["method"] == "mcf-decomp" and s["hosts"] == 27 and s["solver"] == "ipm"  # auto: small LP
    assert s["concurrent_flow"] == pytest.approx(1 / 9, rel=1e-6)
    assert s["flow_time"] == pytest.approx(9, rel=1e-6) and s["lp_time"] == pytest.approx(9, rel=1e-6)
    assert s["upper_bound"] == pytest.approx(1 / 9, rel=1e-6)
    assert 0 <= s["gap"] <= 1e-6
    assert s["throughput_bound_GBps"] == pytest.approx(9.03, abs=5e-3)
    assert s["solve_seconds"] > 0


def test_json_summary_host_forwarding(capsys):
    s = _json(capsys, ["solve", "torus:3x3x3", *FABRIC, "--forwarding", "host", "--json"])
    assert s["concurrent_flow"] == pytest.approx(2 / 27, rel=1e-6)
    assert s["throughput_bound_GBps"] == pytest.approx(6.0185, abs=1e-3)  # reported as 6.01 GB/s


@pytest.mark.parametrize("argv,expected", [
    (["--method", "mcf"], 1 / 4),
    (["--method", "pmcf", "--paths", "ksp:3"], 1 / 4),
    (["--method", "mcf-extp", "--base", "mcf"], 1 / 4),
    (["--method", "mcf-decomp", "--child", "lp", "--solver", "simplex"], 1 / 4),
    (["--method", "tsmcf"], 1 / 4),  # Q3 schedules optimally in diameter = 3 steps
])
def test_methods_from_the_command_line(capsys, argv, expected):
    s = _json(capsys, ["solve", "hypercube:3", *argv, "--json"])
    assert s["concurrent_flow"] == pytest.approx(expected, rel=1e-6)
    assert s["throughput_bound_GBps"] is None


def test_save_round_trip_and_text_output(tmp_path, capsys):
    out = tmp_path / "p.npz"
    assert main(["solve", "petersen", "--method", "mcf-extp", "--save", str(out)]) == 0
    text = capsys.readouterr().out
    assert "concurrent flow F = 0.2" in text and "certified upper bound" in text and "weighted paths" in text
    sol = FlowSolution.load(out)
    assert sol.method == "mcf-extp" and sol.concurrent_flow == pytest.approx(0.2)
    again = tmp_path / "q.npz"
    assert main(["solve", "petersen", "--method", "mcf-extp", "-q", "--save", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()  # deterministic: no timings or zip timestamps inside
    assert len(sol.paths) == 90  # one shortest path per pair suffices on the Petersen graph
    assert abs(sum(p.weight for p in sol.paths if (p.src, p.dst) == (0, 7)) - 1) < 1e-12


def _run(args, cwd):
    return subprocess.run([sys.executable, "-m", "a2a_compiler", *args], capture_output=True, text=True, cwd=cwd)


def test_user_errors_exit_2_without_traceback_or_output_file(tmp_path):
    out = tmp_path / "never.npz"
    r = _run(["solve", "torus:8x8", "--method", "pmcf", "--paths", "shortest", "--max-paths", "5",
              "--save", str(out)], tmp_path)
    assert r.returncode == 2
    assert r.stderr.strip() == ("a2a solve: error: shortest paths: host pair 0->36 has 280 shortest paths, "
                                "more than --max-paths 5; use --paths disjoint or --paths ksp:K, or raise --max-paths")
    assert "Traceback" not in r.stderr and not out.exists() and r.stdout == ""


@pytest.mark.parametrize("argv,message", [
    (["ring:4", "--host-bw", "100Gbps"], "--host-bw needs --link-bw"),
    (["ring:4", "--workers", "0"], "--workers must be >= 1"),
    (["ring:4", "--method", "pmcf", "--paths", "widest"], "--paths must be disjoint, shortest or ksp:K"),
    (["ring:4", "--method", "mcf-extp", "--tol", "2"], "--tol must be in (0, 1)"),
])
def test_bad_options(capsys, argv, message):
    assert main(["solve", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("a2a solve: error: ") and message in err


def test_help_documents_methods_and_parallel_launches(capsys):
    with pytest.raises(SystemExit):
        main(["solve", "--help"])
    text = capsys.readouterr().out
    for needle in ("mpiexec -n 8 python -m mpi4py.futures -m a2a_compiler solve", "--workers 2", "--mpi",
                   "mcf-extp", "tsmcf", "(N-1)*F*b", "--max-paths", "--solver"):
        assert needle in text


def _mpiexec():
    beside = Path(sys.executable).with_name("mpiexec")
    return str(beside) if beside.exists() else shutil.which("mpiexec")


@pytest.mark.mpi
@pytest.mark.skipif(_mpiexec() is None, reason="mpiexec not installed")
def test_mpi_pool_launch(tmp_path):
    # the documented launch: rank 0 runs the command, the other ranks split sources
    r = subprocess.run([_mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py.futures", "-m", "a2a_compiler",
                        "solve", "torus:3x3", "--mpi", "--method", "mcf-extp", "--json", "--quiet"],
                       capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["mpi"] is True and s["concurrent_flow"] == pytest.approx(1 / 3, rel=1e-6)


@pytest.mark.mpi
@pytest.mark.skipif(_mpiexec() is None, reason="mpiexec not installed")
def test_mpi_child_lps_give_the_serial_flows(tmp_path):
    # issue #22 part 4: the paper's per-source child LPs (eqs. 10-14) on 2 MPI worker ranks
    # (mpi4py.futures) save the same flows, bit for bit, as in one process
    base = ["solve", "jellyfish:16,4,seed=1", "--child", "lp", "--json", "--quiet"]
    serial = subprocess.run([sys.executable, "-m", "a2a_compiler", *base, "--save", "serial.npz"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    ranks = subprocess.run([_mpiexec(), "-n", "3", sys.executable, "-m", "mpi4py.futures", "-m", "a2a_compiler",
                            *base, "--mpi", "--save", "mpi.npz"], capture_output=True, text=True, cwd=tmp_path,
                           timeout=120)
    assert serial.returncode == 0 and ranks.returncode == 0, serial.stderr + ranks.stderr
    a, b = json.loads(serial.stdout), json.loads(ranks.stdout)
    assert b["mpi"] is True and b["child"] == "lp" and b["gap"] <= 1e-6
    assert b["concurrent_flow"] == a["concurrent_flow"]
    with np.load(tmp_path / "serial.npz") as x, np.load(tmp_path / "mpi.npz") as y:
        for key in ("flow_row", "flow_col", "flow_val"):
            assert np.array_equal(x[key], y[key])


def test_json_stdout_is_pure_json_in_a_real_process():
    # HiGHS writes its banner with C stdio, which capsys cannot see: check a real process
    r = subprocess.run([sys.executable, "-m", "a2a_compiler", "solve", "hypercube:3", "--json", "--quiet"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["concurrent_flow"] == pytest.approx(0.25, rel=1e-7)
    assert "HiGHS" not in r.stdout + r.stderr


def test_solve_names_an_unknown_option():
    from a2a_compiler.errors import A2AError
    from a2a_compiler.solve import method_options, solve
    from a2a_compiler.topology.spec import from_spec

    assert method_options("mcf-extp") == ["base", "tol", "workers", "mpi", "progress", "solver", "child", "symmetry",
                                            "pricing"]
    with pytest.raises(A2AError, match=r"^pmcf does not take option 'path'; it takes paths, max_paths, solver, "
                                       r"progress$"):
        solve(from_spec("ring:4"), None, "pmcf", path="shortest")


@pytest.mark.parametrize("argv, message", [
    (["solve", "hypercube:3", "--method", "mcf", "--paths", "ksp:2", "--steps", "7", "--base", "mcf", "--child", "lp"],
     "a2a solve: error: --child, --paths, --base, --steps do not apply to --method mcf (--child: --method mcf-decomp "
     "/ mcf-extp; --paths: --method pmcf; --base: --method mcf-extp; --steps: --method tsmcf)"),
    (["solve", "hypercube:3", "--workers", "2", "--method", "pmcf"],
     "a2a solve: error: --workers does not apply to --method pmcf (only to --method mcf-decomp / mcf-extp)"),
    (["solve", "hypercube:3", "--child", "paths", "--method", "tsmcf"],     # a default value given is given
     "a2a solve: error: --child does not apply to --method tsmcf (only to --method mcf-decomp / mcf-extp)"),
    (["schedule", "hypercube:3", "--steps", "4", "--method", "mcf-extp", "-o", "-"],
     "a2a schedule: error: --steps does not apply to --method mcf-extp (only to --method tsmcf)"),
    (["routes", "hypercube:3", "--algo", "sssp", "--eps", "0.1", "--layers", "2"],
     "a2a routes: error: --eps, --layers do not apply to --algo sssp (--eps: --algo ilp-disjoint / ilp-shortest / "
     "fptas; --layers: --algo fatpaths / sf-layers / mcf-df)"),
    (["solve", "hypercube:3", "--schedules", "jobs/"],
     "a2a solve: error: --schedules applies only with --jobs"),
    (["solve", "hypercube:3", "--jobs", "jobs.json", "--method", "mcf", "--save", "x.npz"],
     "a2a solve: error: --method, --save do not apply with --jobs (--method: not with --jobs; --save: not with --jobs)"),
    (["routes", "hypercube:3", "--algo", "mcf-extp", "--lft", "x.dump", "--vls", "4"],
     "a2a routes: error: --lft, --vls do not apply to --algo mcf-extp (--lft: --algo sssp / dfsssp / dor / ftree / "
     "minhop / sf-min / fatpaths / sf-layers / file; --vls: --algo sssp / dfsssp / dor / ftree / minhop / sf-min / "
     "fatpaths / sf-layers / file)"),
    (["compile", "hypercube:3", "--emit", "mpi", "--method", "mcf-extp", "--target", "rccl", "-o", "-"],
     "a2a compile: error: --target does not apply to --emit mpi (only to --emit msccl)"),
])
def test_inapplicable_options_are_refused_in_one_line(capsys, argv, message):
    """issue #18: 'solve --method mcf --paths ksp:2 --steps 7 --base mcf --child lp' ignored every flag."""
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", message + "\n")
