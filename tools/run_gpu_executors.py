#!/usr/bin/env python3
"""Run compiled MSCCL XML and MSCCL++ plans on the real executors, where a GPU exists.

    python tools/run_gpu_executors.py FILE [FILE ...] [--executor nccl|rccl] [--alltoall-perf PATH]
                                      [--mscclpp-test PATH] [--sizes 1M,64M] [--mpirun mpirun] [--dry-run]

Each file is verified first (``a2a verify``, executor rules for the chosen ``--executor``);
then, per format:

* MSCCL XML: the file is the only one in a fresh ``MSCCL_ALGO_DIR``, and
  msccl-tests-nccl's ``alltoall_perf`` (``--alltoall-perf``) runs under ``mpirun -np
  ngpus`` with one GPU per process (``NCCL_MSCCL_ENABLE=1``; for RCCL
  ``RCCL_MSCCL_ENABLE=1 RCCL_MSCCL_FORCE_ENABLE=1``, since RCCL enables MSCCL by
  default only on some single-node models) and ``NCCL_DEBUG=INFO``, whose log must show
  the algorithm loaded; sizes are rounded to multiples of ``nchunksperloop`` elements.
* MSCCL++ plan: MSCCL++'s own ``python/test/executor_test.py`` (``--mscclpp-test``) runs the
  plan under ``mpirun -np ngpus`` (the mscclpp Python package with its GPU library must be
  installed), ``--in_place`` for in-place plans.

Without a GPU (no ``nvidia-smi`` / ``rocm-smi`` answering, no ``/dev/nvidia0`` or
``/dev/kfd``) it prints one line saying so and exits 0 without running anything: the
project's own tests cover everything short of the hardware (the MPI runtime executes every
format byte-exact).  ``--dry-run`` prints the commands it would run.  Exit 1 when a run
fails or an executor does not load the algorithm.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: The shipped schedule ``--quick`` prints the executor's command for.
QUICK_FILE = "hypercube-3-tsmcf.msccl.xml"
sys.path.insert(0, str(ROOT))


def gpu_present() -> str | None:
    """A short description of the GPU found, or None."""
    for tool, args in (("nvidia-smi", ["-L"]), ("rocm-smi", ["--showproductname"])):
        if shutil.which(tool):
            p = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30)
            if p.returncode == 0 and p.stdout.strip():
                return p.stdout.strip().splitlines()[0]
    for dev in ("/dev/nvidia0", "/dev/kfd"):
        if os.path.exists(dev):
            return dev
    return None


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1].upper()] if text[-1].upper() in units else int(text)


def msccl_command(path: Path, program, args, algo_dir: Path) -> tuple[list[str], dict]:
    env = {"MSCCL_ALGO_DIR": str(algo_dir), "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,COLL"}
    if args.executor == "rccl":
        env |= {"RCCL_MSCCL_ENABLE": "1", "RCCL_MSCCL_FORCE_ENABLE": "1"}
    else:
        env["NCCL_MSCCL_ENABLE"] = "1"
    quantum = program.nchunksperloop * 4  # float32 elements per peer must divide into chunks
    lo, hi = (max(quantum, parse_size(s) // quantum * quantum) for s in args.sizes.split(","))
    exports = [x for k in env for x in ("-x", k)]
    cmd = [args.mpirun, "-np", str(program.ngpus), *exports, args.alltoall_perf, "-b", str(lo), "-e", str(hi),
           "-f", "2", "-g", "1", "-d", "float"]
    return cmd, env


def mscclpp_command(path: Path, program, args) -> tuple[list[str], dict]:
    size = args.sizes.split(",")[-1]
    cmd = [args.mpirun, "-np", str(program.nranks), sys.executable, args.mscclpp_test, "-path", str(path),
           "--size", size, "--dtype", "float32"] + (["--in_place"] if program.inplace else [])
    return cmd, {}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("files", nargs="*", type=Path, help="MSCCL XML or MSCCL++ JSON plans")
    p.add_argument("--executor", choices=("nccl", "rccl"), default="nccl",
                   help="MSCCL executor: msccl-executor-nccl (default) or RCCL")
    p.add_argument("--alltoall-perf", default=os.environ.get("ALLTOALL_PERF", "alltoall_perf"),
                   help="msccl-tests-nccl's alltoall_perf binary (env ALLTOALL_PERF)")
    p.add_argument("--mscclpp-test", default=os.environ.get("MSCCLPP_EXECUTOR_TEST", "executor_test.py"),
                   help="mscclpp's python/test/executor_test.py (env MSCCLPP_EXECUTOR_TEST)")
    p.add_argument("--sizes", default="1M,64M", help="smallest,largest message per rank (default 1M,64M)")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--quick", action="store_true",
                   help=f"--dry-run on schedules/{QUICK_FILE} unless FILEs are given (tests/test_tools.py runs it)")
    args = p.parse_args(argv)
    if args.quick:
        args.dry_run, args.files = True, args.files or [ROOT / "schedules" / QUICK_FILE]
    if not args.files:
        p.error("give at least one FILE")

    from a2a_compiler.formats import load_program
    from a2a_compiler.verify import verify_file

    gpu = gpu_present()
    if gpu is None and not args.dry_run:
        print("skipped: no GPU on this machine (no nvidia-smi / rocm-smi answer, no /dev/nvidia0 or /dev/kfd); "
              "nothing was run")
        return 0
    failed = 0
    for path in args.files:
        report = verify_file(path, target=args.executor)
        if not report.valid:
            print(f"{path}: does not verify for {args.executor}: {report.messages()[0]}")
            failed += 1
            continue
        fmt, program = load_program(path)
        with tempfile.TemporaryDirectory(prefix="a2a-gpu-") as tmp:
            if fmt == "msccl":
                shutil.copy(path, Path(tmp) / path.name)
                cmd, env = msccl_command(path, program, args, Path(tmp))
            elif fmt == "mscclpp":
                cmd, env = mscclpp_command(path, program, args)
            else:
                print(f"{path}: {fmt} files run with 'a2a run', not on a GPU executor")
                continue
            print(" ".join(f"{k}={v}" for k, v in env.items()), " ".join(cmd))
            if args.dry_run:
                continue
            run = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=3600)
            print(run.stdout[-4000:])
            loaded = fmt != "msccl" or "MSCCL" in run.stdout + run.stderr
            if run.returncode != 0 or not loaded:
                print(f"{path}: FAILED (exit {run.returncode}{'' if loaded else ', no MSCCL algorithm in the log'})")
                print(run.stderr[-2000:])
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
