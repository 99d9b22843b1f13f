"""tools/run_gpu_executors.py without a GPU: --dry-run's commands, and bad input in one line (exit 2)."""

import subprocess
import sys
from pathlib import Path

import a2a_compiler

ROOT = Path(__file__).resolve().parents[1]


def tool(*args):
    return subprocess.run([sys.executable, "tools/run_gpu_executors.py", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_a_file_recording_rccl_runs_with_rccls_msccl_switches(tmp_path):
    """--executor defaults to the recorded target for the run too (the command enabled NCCL's MSCCL only)."""
    f = tmp_path / "hc2.xml"
    a2a_compiler.compile("hypercube:2", "msccl", target="rccl").write(f)
    p = tool("--dry-run", "--sizes", "1M,2M", f)
    assert p.returncode == 0, p.stderr
    env = p.stdout.split(" mpirun ")[0].split()
    assert env[1:] == ["NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=INIT,NET,COLL", "RCCL_MSCCL_ENABLE=1",
                       "RCCL_MSCCL_FORCE_ENABLE=1"]
    assert p.stdout.split(" mpirun ")[1].endswith("alltoall_perf -b 4194304 -e 8388608 -f 2 -g 1 -d float\n")
    assert "NCCL_MSCCL_ENABLE=1" in tool("--dry-run", "--executor", "nccl", f).stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    p = tool("--dry-run", tmp_path / "none.xml")
    assert (p.returncode, p.stdout, p.stderr) == (
        2, "", f"run_gpu_executors.py: error: cannot read {tmp_path / 'none.xml'}: No such file or directory\n")
    for sizes, why in (("1M", "expected LO,HI (bytes per peer, e.g. 1M,64M), got '1M'"),
                       ("64M,1M", "the smallest size 67108864 is larger than the largest 1048576"),
                       ("1KB,2K", "size '1KB' is ambiguous: KB may mean 1000s or 1024s; sizes are bytes: write 1K "
                                  "or 1KiB (powers of 1024)")):
        p = tool("--dry-run", "--sizes", sizes, tmp_path / "none.xml")
        assert p.returncode == 2
        assert p.stderr.splitlines()[-1] == f"run_gpu_executors.py: error: argument --sizes: {why}"
