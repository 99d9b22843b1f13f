"""Benchmark the MPI runtime's overhead: the direct all-to-all schedule vs native MPI_Alltoall.

The direct (single-hop, complete-graph) schedule moves exactly the bytes
``MPI_Alltoall`` moves, so the ratio of their algorithm bandwidths isolates
what executing a schedule file costs (plan dispatch, one nonblocking message
per peer, the event loop).  For each format (MSCCL, oneCCL-style, MPI path)
it writes the direct schedule, runs ``mpiexec -n N python -m runtimes.mpi FILE
--json`` over a size sweep (both timed in the same job, on the same
communicator, every received byte checked after the first and last
iterations) and prints one table.

    python tools/bench_runtime.py -n 8 -b 1K -e 8M --iters 10
    python tools/bench_runtime.py -n 8 --mpich-alltoall scattered

Sizes are per-peer shard bytes; each rank holds 2*N*m bytes of buffers.
MPICH picks MPI_Alltoall's algorithm by size (pairwise exchange for large
shards); ``--mpich-alltoall scattered`` makes it post every Isend/Irecv at
once like the direct schedule does, so the ratio compares equal traffic
patterns.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from a2a_compiler.files import atomic_write
from a2a_compiler.formats import program_to_xml
from runtimes.mpi.direct import DIRECT

from _quick import apply_quick   # tools/_quick.py: the scripts' shared --quick


#: Exit status of a run whose prerequisites are missing (automake's "skipped"; tests/test_tools.py skips it).
SKIP = 77


def mpiexec() -> str:
    beside = Path(sys.executable).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    if not found:
        print("bench_runtime: SKIP: no mpiexec next to the Python interpreter or on PATH", file=sys.stderr)
        sys.exit(SKIP)
    return found


def run_format(fmt: str, args, workdir: Path) -> dict:
    path = atomic_write(workdir / f"direct-{args.nranks}.{fmt}.xml", program_to_xml(DIRECT[fmt](args.nranks)))
    cmd = [mpiexec(), "-n", str(args.nranks), sys.executable, "-m", "runtimes.mpi", str(path), "--json",
           "-b", args.minbytes, "-e", args.maxbytes, "-f", str(args.stepfactor), "-n", str(args.iters),
           "-w", str(args.warmup), "--timeout", "120"] + (["--route-mode", "direct"] if fmt == "mpi" else [])
    print(f"# {' '.join(cmd)}", file=sys.stderr, flush=True)
    env = dict(os.environ)
    if args.mpich_alltoall:
        env["MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM"] = args.mpich_alltoall
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"bench_runtime: {fmt} run failed ({p.returncode}):\n{p.stderr}")
    return json.loads(p.stdout)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--nranks", type=int, default=8, help="MPI ranks (default 8)")
    ap.add_argument("-b", "--minbytes", default="1K", help="smallest per-peer shard (default 1K)")
    ap.add_argument("-e", "--maxbytes", default="8M", help="largest per-peer shard (default 8M)")
    ap.add_argument("-f", "--stepfactor", type=int, default=4, help="size multiplier (default 4)")
    ap.add_argument("--iters", type=int, default=10, help="timed iterations per size (default 10)")
    ap.add_argument("--warmup", type=int, default=3, help="warm-up iterations per size (default 3)")
    ap.add_argument("--formats", default="msccl,oneccl,mpi", help="comma-separated formats (default all three)")
    ap.add_argument("--mpich-alltoall", metavar="ALG",
                    help="MPICH's MPI_Alltoall algorithm (MPIR_CVAR_ALLTOALL_INTRA_ALGORITHM: auto, scattered, "
                         "pairwise, brucks, ...); default: MPICH's choice")
    ap.add_argument("--json", action="store_true", help="print the raw per-format JSON results")
    ap.add_argument("--quick", action="store_true",
                    help="4 ranks, 1K shards, 2 iterations after 1 warm-up, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    apply_quick(ap, args, nranks=4, minbytes="1K", maxbytes="1K", iters=2, warmup=1)
    formats = args.formats.split(",")
    if unknown := set(formats) - set(DIRECT):
        ap.error(f"unknown format(s): {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory() as tmp:
        out = {fmt: run_format(fmt, args, Path(tmp)) for fmt in formats}
    if args.json:
        json.dump(out, sys.stdout, indent=1)
        print()
        return 0
    print(f"# direct all-to-all, {args.nranks} ranks: algorithm bandwidth (N-1)*m/T_median in GB/s; "
          f"ratio = ours / native MPI_Alltoall (algorithm: {args.mpich_alltoall or 'MPICH default'}) in the same job")
    print(f"{'bytes':>10}" + "".join(f"{f + ' GB/s':>14}{'native':>9}{'ratio':>7}" for f in formats) + "  verified")
    for i, rec in enumerate(out[formats[0]]["results"]):
        cells = [out[f]["results"][i] for f in formats]
        print(f"{rec['size_bytes']:>10}" + "".join(
            f"{c['algbw_GBps']:>14.4g}{c['native_algbw_GBps']:>9.4g}{c['ratio_to_native']:>7.2f}" for c in cells)
            + ("  yes" if all(c["verified"] for c in cells) else "  NO"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
