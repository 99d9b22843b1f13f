"""First-order master LPs (PDLP on the CPU, cuPDLPx on a GPU): one certification path, tested on every machine.

cuPDLPx runs where the ``cupdlpx`` package imports and a CUDA device answers.  Elsewhere the tests use
HiGHS's PDLP through the same tolerance schedule and certificate, and a stand-in ``cupdlpx`` package
(tests/data/fake_cupdlpx: cuPDLPx's Python API and log rows, solving by HiGHS's PDLP) for the GPU plumbing:
the child process, the warm start, the progress ticks and the error lines.
"""

import json
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from a2a_compiler.cli import main
from a2a_compiler.errors import A2AError
from a2a_compiler.solve import first_order, gpu, solve
from a2a_compiler.solve.decomp import choose_master
from a2a_compiler.solve.mcf import pick_solver
from a2a_compiler.solve.symmetry import Symmetry
from a2a_compiler.topology.spec import from_spec

FAKE = Path(__file__).parent / "data" / "fake_cupdlpx"
HAS_GPU = gpu.unavailable() is None


@pytest.fixture
def no_package(monkeypatch):
    """``import cupdlpx`` fails as it does where the package is not installed."""
    monkeypatch.setitem(sys.modules, "cupdlpx", None)


@pytest.fixture
def stand_in(monkeypatch):
    """The stand-in package, importable here and in solver children, and a device that answers."""
    monkeypatch.syspath_prepend(str(FAKE))
    monkeypatch.setenv("PYTHONPATH", str(FAKE))
    monkeypatch.delitem(sys.modules, "cupdlpx", raising=False)
    monkeypatch.setattr(gpu, "cuda_device", lambda: ("Stand-in GPU", 80 * 2**30))


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_without_the_package_cupdlpx_is_refused_in_one_line(no_package, capsys):
    assert main(["solve", "hypercube:3", "--solver", "cupdlpx"]) == 2
    assert capsys.readouterr().err == (
        "a2a solve: error: --solver cupdlpx needs the cupdlpx package and a CUDA device: the cupdlpx package is "
        "not installed: pip install 'a2a-compiler[gpu]' (builds from source: nvcc >= 12.4 and CMake; "
        "docs/solver.md, \"On a GPU\")\n")


def test_without_a_device_cupdlpx_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "cupdlpx", types.ModuleType("cupdlpx"))
    monkeypatch.setattr(gpu, "CUDA_DRIVER", "libcuda-absent.so.1")
    assert main(["solve", "hypercube:3", "--solver", "cupdlpx"]) == 2
    assert capsys.readouterr().err == (
        "a2a solve: error: --solver cupdlpx needs the cupdlpx package and a CUDA device: no CUDA device answers: "
        "the CUDA driver (libcuda-absent.so.1) is not installed\n")


def test_auto_falls_back_to_pdlp_with_one_line_saying_why(no_package):
    said = []
    assert pick_solver("auto", 3_000_000, said.append, "master LP") == "pdlp"
    assert said == ["master LP: not on a GPU (the cupdlpx package is not installed); solving with pdlp"]
    assert pick_solver("auto", 2_000_000, said.append) == "ipm" and len(said) == 1   # small: no fallback


def test_auto_picks_cupdlpx_for_a_large_lp_where_it_runs(stand_in):
    assert pick_solver("auto", 2_000_001) == "cupdlpx"
    assert pick_solver("auto", 2_000_000) == "ipm"


def test_an_lp_over_the_gpu_memory_is_refused_with_the_estimate(stand_in, monkeypatch):
    monkeypatch.setattr(gpu, "cuda_device", lambda: ("Stand-in GPU", 2**30))
    with pytest.raises(A2AError) as e:
        solve(from_spec("hypercube:3"), method="mcf-decomp", solver="cupdlpx", symmetry="off")
    # 8 sources x 7 other nodes + 24 links = 80 rows, 1 + 8 x 24 columns; nonzeros: 24 + 8 x 24 in the
    # capacity rows, 8 x (48 - 6) in the conservation rows (a source's own row is left out)
    assert str(e.value) == ("master LP: 80 rows, 193 columns, 552 nonzeros need about 1.0 GiB of GPU memory, more "
                            "than the 1.0 GiB of Stand-in GPU (a2a_compiler.solve.gpu.gpu_bytes); use --solver "
                            "pdlp or --pricing on")
    assert gpu.gpu_bytes(80, 193, 552) == 552 * 36 + 193 * 128 + 80 * 128 + 2**30


def test_pdlp_master_is_certified_within_the_gap_on_the_first_order_path():
    topo = from_spec("jellyfish:16,4,seed=1")
    said = []
    pdlp = solve(topo, method="mcf-decomp", solver="pdlp", progress=said.append)
    ipm = solve(topo, method="mcf-decomp", solver="ipm")
    assert pdlp.info["solver"] == "pdlp" and pdlp.info["lp_solves"] == 1 and pdlp.info["lp_tolerance"] == 1e-6
    assert pdlp.gap <= first_order.GAP
    assert abs(pdlp.concurrent_flow - ipm.concurrent_flow) <= 1e-6 * ipm.upper_bound
    assert pdlp.concurrent_flow <= ipm.upper_bound and ipm.concurrent_flow <= pdlp.upper_bound
    assert any(m.startswith("master LP: tolerance 1e-06: certified F = ") and "tightening" not in m for m in said)
    loads = pdlp.link_flows.sum(axis=0)          # the saved flows: conservation was checked; capacity here
    assert float(np.max(loads)) * pdlp.concurrent_flow <= 1 + 1e-12


def test_the_schedule_tightens_only_while_the_certified_gap_needs_it(monkeypatch):
    monkeypatch.setattr(first_order, "TOLERANCES", (1e-2, 1e-7))
    said = []
    sol = solve(from_spec("jellyfish:16,4,seed=1"), method="mcf-decomp", solver="pdlp", progress=said.append)
    assert sol.info["lp_solves"] == 2 and sol.info["lp_tolerance"] == 1e-7 and sol.gap <= 1e-6
    first = [m for m in said if m.startswith("master LP: tolerance 0.01: ")]
    assert len(first) == 1 and first[0].endswith("; tightening to 1e-07")
    gap = float(first[0].split("gap ")[1].split(";")[0])
    assert gap > first_order.GAP


def test_mcf_by_pdlp_goes_through_the_same_schedule():
    sol = solve(from_spec("hypercube:3"), method="mcf", solver="pdlp")
    assert sol.info["lp_solves"] >= 1 and sol.gap <= 1e-6
    assert sol.concurrent_flow == pytest.approx(0.25, rel=1e-6)


def test_cupdlpx_plumbing_with_the_stand_in(stand_in, monkeypatch, tmp_path):
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_CUPDLPX_LOG", str(log))
    monkeypatch.setattr(first_order, "TOLERANCES", (1e-2, 1e-7))
    said = []
    sol = solve(from_spec("jellyfish:16,4,seed=1"), method="mcf-decomp", solver="cupdlpx", progress=said.append)
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["params"]["OptimalityTol"] for c in calls] == [1e-2, 1e-7]
    assert all(c["params"]["Presolve"] is False and c["params"]["FeasibilityTol"] == c["params"]["OptimalityTol"]
               for c in calls)
    rows, cols = sol.info["lp_rows"], sol.info["lp_columns"]
    assert [c["warm"] for c in calls] == [None, [cols, rows]]      # the second solve starts from the first
    assert sol.info["solver"] == "cupdlpx" and sol.info["lp_device_seconds"] == 0.5 and sol.gap <= 1e-6
    assert any(m.startswith("master LP: iteration ") and m.endswith(", gap 1.0e-07 (GPU)") for m in said)


def test_a_cuda_error_in_the_child_is_one_line(stand_in, monkeypatch):
    monkeypatch.setenv("FAKE_CUPDLPX_EXIT", "1")
    with pytest.raises(A2AError) as e:
        solve(from_spec("hypercube:3"), method="mcf-decomp", solver="cupdlpx", symmetry="off")
    assert str(e.value) == ("master LP: the cuPDLPx process ended without an answer (exit status 1): "
                            "CUDA Error at src/solver.cu:366: cudaErrorNoDevice")


def test_the_cupdlpx_log_row_becomes_a_tick_with_the_gap():
    row = "  4400 9.5e+00 |  -1.4e+03  -1.4e+03 | 2.1e-04 3.3e-06 4.0e-03 | 1.2e-06 3.4e-07 8.9e-07 \n"
    assert gpu.cupdlpx_tick("master LP", row) == "master LP: iteration 4400, objective -1400, gap 8.9e-07 (GPU)"
    assert gpu.cupdlpx_tick("master LP", "Problem: 3 rows, 4 columns, 5 nonzeros\n") is None


# ------------------------------------------------------------------ which master LP (issue 34, item 11)

@pytest.mark.parametrize("spec,master,why", [
    ("jellyfish:72,4,seed=1", "priced", "no symmetry found: arc pricing"),
    ("torus:10x10", "quotient", "symmetry of order 100"),
    ("jellyfish:32,4,seed=1", "full", "4096 columns, at most 20000: no symmetry search"),
])
def test_the_default_master_lp_is_chosen_and_said(capsys, spec, master, why):
    said = []
    sol = solve(from_spec(spec), method="mcf-decomp", progress=said.append)
    assert f"master LP: {master} ({why})" in said
    assert sol.info["master"] == master and sol.info["master_choice"] == why and sol.gap <= 1e-6
    s = _json(capsys, ["solve", spec, "--json", "-q"])
    assert (s["master"], s["master_choice"]) == (master, why)


def test_the_full_master_goes_to_the_gpu_instead_of_pricing(monkeypatch):
    trivial = Symmetry.trivial(from_spec("jellyfish:72,4,seed=1"))
    monkeypatch.setitem(sys.modules, "cupdlpx", None)
    assert choose_master("auto", "auto", True, trivial, "auto", 1_000_000) == (   # no package: pricing, and why
        "priced", "no symmetry found: arc pricing (not on a GPU: the cupdlpx package is not installed)")
    assert choose_master("auto", "auto", True, trivial, "ipm", 1_000_000) == (
        "priced", "no symmetry found: arc pricing")
    monkeypatch.setitem(sys.modules, "cupdlpx", types.ModuleType("cupdlpx"))
    monkeypatch.setattr(gpu, "cuda_device", lambda: ("Stand-in GPU", 80 * 2**30))
    assert choose_master("auto", "auto", True, trivial, "auto", 1_000_000) == (
        "full", "no symmetry found; the full master LP on the GPU")
    assert choose_master("auto", "auto", True, trivial, "auto", 600_000)[0] == "priced"   # small: the CPU prices
    assert choose_master("auto", "off", False, trivial, "auto", 1_000_000) == ("full", "--symmetry off")
    assert choose_master("auto", "auto", True, trivial, "simplex", 1_000_000) == (
        "full", "no symmetry found; --solver simplex does not price")


@pytest.mark.skipif(not HAS_GPU, reason=f"cuPDLPx does not run here: {gpu.unavailable()}")
def test_cupdlpx_on_the_gpu_meets_the_certified_gap():
    topo = from_spec("jellyfish:16,4,seed=1")
    sol = solve(topo, method="mcf-decomp", solver="cupdlpx")
    ipm = solve(topo, method="mcf-decomp", solver="ipm")
    assert sol.info["solver"] == "cupdlpx" and sol.gap <= 1e-6
    assert abs(sol.concurrent_flow - ipm.concurrent_flow) <= 1e-6 * ipm.upper_bound


def test_the_host_memory_guard_counts_the_gpu_path_at_its_own_rate(stand_in, capsys):
    assert main(["solve", "torus:100x100", "--solver", "cupdlpx"]) == 2
    assert capsys.readouterr().err == (
        "a2a solve: error: torus:100x100: the mcf-decomp LP would have about 1.2e+09 nonzeros (10000 commodity "
        "group(s) x 40000 links) and need about 101 GiB, over the 16 GiB limit (a2a_compiler.solve.MAX_LP_BYTES)\n")


def test_the_host_limit_follows_a2a_max_lp_gib(tmp_path):
    import os
    import subprocess

    r = subprocess.run([sys.executable, "-m", "a2a_compiler", "solve", "jellyfish:1000,4,seed=1", "--solver", "ipm"],
                       capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "A2A_MAX_LP_GIB": "2"},
                       timeout=120)
    assert r.returncode == 2 and r.stderr == (
        "a2a solve: error: jellyfish:1000,4,seed=1: the mcf-decomp LP would have about 1.2e+07 nonzeros (1000 "
        "commodity group(s) x 4000 links) and need about 3 GiB, over the 2 GiB limit "
        "(a2a_compiler.solve.MAX_LP_BYTES)\n")


def test_ctrl_c_stops_a_cupdlpx_solve_within_two_seconds(tmp_path):
    """cuPDLPx polls no interrupt: its child (here the stand-in, iterating for a minute) is killed at once."""
    import os
    import subprocess

    from terminal import session_ends, sigint_default, stop

    script = tmp_path / "solve.py"
    script.write_text("import sys\nfrom a2a_compiler.solve import gpu\n"
                      "gpu.cuda_device = lambda: ('Stand-in GPU', 80 * 2**30)\n"
                      "from a2a_compiler.cli import main\n"
                      "sys.exit(main(['solve', 'hypercube:3', '--symmetry', 'off', '--solver', 'cupdlpx', "
                      "'--save', 'never.npz']))\n")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": f"{FAKE}{os.pathsep}{root}", "FAKE_CUPDLPX_SLEEP": "60"}
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         cwd=tmp_path, env=env, preexec_fn=sigint_default, start_new_session=True)
    for line in p.stderr:                                      # a tick of the child's log (after 2 s)
        if "master LP: iteration" in line:
            assert line.rstrip().endswith("gap 1.0e-03 (GPU)")
            break
    stdout, rest, waited = stop(p)
    assert p.returncode == 130 and waited <= 4.5, (p.returncode, waited)
    assert rest.splitlines()[-1] == "a2a solve: interrupted" and stdout == ""
    assert sorted(f.name for f in tmp_path.iterdir()) == ["solve.py"]
    session_ends(p)                                            # the child is gone with its command


def test_tsmcf_refuses_cupdlpx_in_one_line(stand_in, capsys):
    assert main(["solve", "hypercube:3", "--method", "tsmcf", "--solver", "cupdlpx"]) == 2
    assert capsys.readouterr().err == (
        "a2a solve: error: --solver cupdlpx is for the flow LPs of mcf, mcf-decomp, mcf-extp and pmcf, whose "
        "first-order answers are certified by weak duality; tsmcf needs simplex, ipm or pdlp\n")
