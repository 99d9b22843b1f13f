"""tools/bench_gpu.py's quick mode (PDLP on the CPU, the GPU's code path) and tools/gpu_session.sh, so neither rots."""

import json
import subprocess
import sys
from pathlib import Path

from a2a_compiler.solve import solve
from a2a_compiler.topology.spec import from_spec

ROOT = Path(__file__).resolve().parents[1]


def test_the_quick_benchmark_certifies_and_checks_the_saved_flows():
    r = subprocess.run([sys.executable, "tools/bench_gpu.py", "--quick", "--quiet", "--json",
                        "--cases", "jellyfish16,compile-jellyfish16"], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    solved, compiled = (json.loads(line) for line in r.stdout.splitlines())
    assert solved["case"] == "jellyfish16" and solved["command"].startswith("a2a solve jellyfish:16,4,seed=1 --json")
    assert (solved["solver"], solved["master"], solved["lp_tolerance"]) == ("pdlp", "full", 1e-6)
    assert solved["gap"] <= 1e-6 and solved["lp_device_seconds"] is None
    assert solved["check"]["ok"] and solved["check"]["conservation_error"] <= 1e-9
    assert solved["check"]["F_times_max_utilisation"] <= 1 + 1e-9
    ipm = solve(from_spec("jellyfish:16,4,seed=1"), method="mcf-decomp", solver="ipm")
    assert abs(solved["concurrent_flow"] - ipm.concurrent_flow) <= 1e-6 * ipm.upper_bound
    assert compiled["case"] == "compile-jellyfish16" and compiled["valid"] is True


def test_an_unknown_case_is_one_line():
    r = subprocess.run([sys.executable, "tools/bench_gpu.py", "--cases", "nope"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == ("bench_gpu.py: error: unknown case(s) nope; choose from gk1000-10, "
                                         "jellyfish1000, jellyfish2000, jellyfish4000, gk4000-40, "
                                         "compile-jellyfish1000")


def test_the_gpu_session_script_parses():
    assert subprocess.run(["bash", "-n", "tools/gpu_session.sh"], cwd=ROOT).returncode == 0
