#!/usr/bin/env python3
"""Run compiled MSCCL XML and MSCCL++ plans on the real executors, where a GPU exists.

    python tools/run_gpu_executors.py FILE [FILE ...] [--executor nccl|rccl] [--alltoall-perf PATH]
                                      [--mscclpp-test PATH] [--sizes 1M,64M] [--mpirun mpirun] [--dry-run]

Each file is verified first (``a2a verify``; MSCCL: the rules of ``--executor``, by default the target
the file records); ``--sizes`` are bytes per peer, and every size of the sweep (the powers of two from
the first to the second) must be one the executor selects the file at
(:func:`a2a_compiler.formats.msccl_rules.msccl_size_rule` / ``mscclpp_size_rule``), else the file fails
with the rule, before anything runs.  Then, per format:

* MSCCL XML: the file is the only one in a fresh ``MSCCL_ALGO_DIR``, and
  msccl-tests-nccl's ``alltoall_perf`` (``--alltoall-perf``; its sizes are per rank, all peers:
  ``-b``/``-e`` = ngpus x bytes per peer) runs under ``mpirun -np ngpus`` with one GPU per process
  (``NCCL_MSCCL_ENABLE=1``; for RCCL ``RCCL_MSCCL_ENABLE=1 RCCL_MSCCL_FORCE_ENABLE=1``, since RCCL
  enables MSCCL by default only on some single-node models) and ``NCCL_DEBUG=INFO
  NCCL_DEBUG_SUBSYS=INIT,NET,COLL``.  The log must show that our algorithm ran and the fallback never
  did: every ``mscclRunAlgo`` logs ``mscclSetupProxy: no capture`` (msccl-executor-nccl
  ``src/misc/msccl/msccl_setup.cc`` l.194, called from ``collectives.cc`` l.359), while the fallback's
  sends and receives (``collectives.cc`` l.298-309) log ``Send: opCount`` / ``Recv: opCount``
  (``enqueue.cc`` l.2352, ``NCCL_COLL``).
* MSCCL++ plan: MSCCL++'s own ``python/test/executor_test.py`` (``--mscclpp-test``; ``--size`` is the
  buffer, nranks x bytes per peer) runs the plan under ``mpirun -np ngpus`` at each size (the mscclpp
  Python package with its GPU library must be installed), ``--in_place`` for in-place plans.  There is
  no fallback (the executor throws at a size its rule refuses); every rank must print its
  ``Rank: R Execution time:`` line (``executor_test.py`` l.277-282), which follows the data check.

Without a GPU (no ``nvidia-smi`` / ``rocm-smi`` answering, no ``/dev/nvidia0`` or
``/dev/kfd``) it prints one line saying so and exits 0 without running anything: the
project's own tests cover everything short of the hardware (the MPI runtime executes every
format byte-exact).  ``--dry-run`` prints the commands it would run.  Exit 1 when a file is not
selected at the sizes, a run fails, or the log does not show our algorithm running; 2, in one line, for a
file that cannot be read or bad ``--sizes`` (read as ``a2a run -b/-e`` reads sizes).
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


def size_range(text: str) -> tuple[int, int]:
    """``--sizes LO,HI``: two sizes as ``a2a run -b/-e`` read them (:func:`runtimes.mpi.cli.parse_size`), LO <= HI."""
    from runtimes.mpi.cli import parse_size

    parts = text.split(",")
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"expected LO,HI (bytes per peer, e.g. 1M,64M), got {text!r}")
    lo, hi = (parse_size(x) for x in parts)
    if lo > hi:
        raise argparse.ArgumentTypeError(f"the smallest size {lo} is larger than the largest {hi}")
    return lo, hi


def sweep(args) -> list[int]:
    """Bytes per peer of the sweep: ``--sizes LO,HI`` and the powers of two times LO up to HI (``-f 2``)."""
    lo, hi = args.sizes
    sizes = [lo]
    while sizes[-1] * 2 <= hi:
        sizes.append(sizes[-1] * 2)
    return sizes


def refused_sizes(rule, sizes: list[int], element_bytes: int = 4) -> str | None:
    """Why the executor does not run the file at every size of ``sizes`` (float32), or None."""
    bad = [b for b in sizes if not rule.admits(b, element_bytes)]
    return None if not bad else f"not selected at {bad[0]} bytes per peer: {rule.describe()}"


#: Log lines of msccl-executor-nccl: one per run of a loaded MSCCL algorithm, and the fallback's.
MSCCL_RAN = "mscclSetupProxy: no capture"
FALLBACK = ("Send: opCount", "Recv: opCount")


def msccl_ran(log: str) -> str | None:
    """Why ``log`` does not show our algorithm (and only it) running, or None."""
    if MSCCL_RAN not in log:
        return f"no '{MSCCL_RAN}' in the log: the MSCCL algorithm never ran"
    fell = [f for f in FALLBACK if f in log]
    return None if not fell else f"'{fell[0]}' in the log: NCCL's own all-to-all ran for some call"


def msccl_command(program, executor: str, args, algo_dir: Path, sizes: list[int]) -> tuple[list[list[str]], dict]:
    """The run of ``program`` on ``executor`` (``--executor``, else the target its record names, else nccl)."""
    env = {"MSCCL_ALGO_DIR": str(algo_dir), "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,COLL"}
    if executor == "rccl":
        env |= {"RCCL_MSCCL_ENABLE": "1", "RCCL_MSCCL_FORCE_ENABLE": "1"}
    else:
        env["NCCL_MSCCL_ENABLE"] = "1"
    exports = [x for k in env for x in ("-x", k)]
    n = program.ngpus
    return [[args.mpirun, "-np", str(n), *exports, args.alltoall_perf, "-b", str(n * sizes[0]), "-e",
             str(n * sizes[-1]), "-f", "2", "-g", "1", "-d", "float"]], env


def mscclpp_command(path: Path, program, args, sizes: list[int]) -> tuple[list[list[str]], dict]:
    n = program.nranks
    return [[args.mpirun, "-np", str(n), sys.executable, args.mscclpp_test, "-path", str(path), "--size",
             str(n * b), "--dtype", "float32"] + (["--in_place"] if program.inplace else []) for b in sizes], {}


def mscclpp_ran(log: str, nranks: int) -> str | None:
    """Why ``log`` does not show every rank finishing (the line it prints after the data check), or None."""
    done = sum(line.startswith("Rank: ") and "Execution time:" in line for line in log.splitlines())
    return None if done == nranks else f"{done} of {nranks} ranks printed 'Rank: R Execution time:'"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("files", nargs="*", type=Path, help="MSCCL XML or MSCCL++ JSON plans")
    p.add_argument("--executor", choices=("nccl", "rccl"),
                   help="MSCCL executor: msccl-executor-nccl or RCCL (default: the target the file records, else nccl)")
    p.add_argument("--alltoall-perf", default=os.environ.get("ALLTOALL_PERF", "alltoall_perf"),
                   help="msccl-tests-nccl's alltoall_perf binary (env ALLTOALL_PERF)")
    p.add_argument("--mscclpp-test", default=os.environ.get("MSCCLPP_EXECUTOR_TEST", "executor_test.py"),
                   help="mscclpp's python/test/executor_test.py (env MSCCLPP_EXECUTOR_TEST)")
    p.add_argument("--sizes", type=size_range, default="1M,64M",
                   help="smallest,largest message per peer, bytes (default 1M,64M); the powers of two between are "
                        "run too")
    p.add_argument("--mpirun", default="mpirun")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    p.add_argument("--quick", action="store_true",
                   help=f"--dry-run on schedules/{QUICK_FILE} unless FILEs are given (tests/test_tools.py runs it)")
    args = p.parse_args(argv)
    if args.quick:
        args.dry_run, args.files = True, args.files or [ROOT / "schedules" / QUICK_FILE]
    if not args.files:
        p.error("give at least one FILE")

    from a2a_compiler.errors import A2AError
    from a2a_compiler.formats import load_program
    from a2a_compiler.verify import verify_file

    gpu = gpu_present()
    if gpu is None and not args.dry_run:
        print("skipped: no GPU on this machine (no nvidia-smi / rocm-smi answer, no /dev/nvidia0 or /dev/kfd); "
              "nothing was run")
        return 0
    from a2a_compiler.formats.msccl_rules import msccl_size_rule, mscclpp_size_rule

    sizes = sweep(args)
    failed = 0
    for path in args.files:
        try:
            report = verify_file(path, target=args.executor)
        except A2AError as exc:
            print(f"run_gpu_executors.py: error: {exc}", file=sys.stderr)
            return 2
        if not report.valid:
            print(f"{path}: does not verify for {report.target or report.format}: {report.messages()[0]}")
            failed += 1
            continue
        fmt, program = load_program(path)
        if fmt not in ("msccl", "mscclpp"):
            print(f"{path}: {fmt} files run with 'a2a run', not on a GPU executor")
            continue
        rule = msccl_size_rule(program, report.target) if fmt == "msccl" else mscclpp_size_rule(program)
        why = refused_sizes(rule, sizes)
        if why is not None:
            print(f"{path}: FAILED before running: {why}")
            failed += 1
            continue
        with tempfile.TemporaryDirectory(prefix="a2a-gpu-") as tmp:
            if fmt == "msccl":
                shutil.copy(path, Path(tmp) / path.name)
                cmds, env = msccl_command(program, report.target, args, Path(tmp), sizes)
            else:
                cmds, env = mscclpp_command(path, program, args, sizes)
            for cmd in cmds:
                print(" ".join(f"{k}={v}" for k, v in env.items()), " ".join(cmd))
                if args.dry_run:
                    continue
                run = subprocess.run(cmd, env={**os.environ, **env}, capture_output=True, text=True, timeout=3600)
                print(run.stdout[-4000:])
                log = run.stdout + run.stderr
                why = msccl_ran(log) if fmt == "msccl" else mscclpp_ran(log, program.nranks)
                if run.returncode != 0 or why:
                    print(f"{path}: FAILED (exit {run.returncode}{'' if why is None else '; ' + why})")
                    print(run.stderr[-2000:])
                    failed += 1
                    break
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
