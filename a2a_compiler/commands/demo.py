"""``a2a demo``: the whole pipeline on an embedded default, end to end.

compile torus:3x3x3 (tsMCF under the §5.2 bottleneck fabric) to MSCCL XML and
to oneCCL-style XML (each with the chunk count chosen on its own program, as
``a2a compile`` does) -> verify both (against the topology and fabric they
record) -> run both on 27 local MPI ranks (``mpiexec`` from the ``mpich``
wheel) with a byte-exact check and a timing comparison against native
``MPI_Alltoall`` and the MCF bound.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from runtimes.mpi.cli import parse_size, parse_timeout, sweep_sizes

from ..cli import command_parser
from ..errors import A2AError
from ..options import ABSENT
from .common import applies_only, positive_int

DEFAULT_SPEC = "torus:3x3x3"
DEFAULT_LINK_BW = "25Gbps"
DEFAULT_HOST_BW = "100Gbps"

EPILOG = f"""\
what it does (each step is also a command of its own):
  1. a2a compile {DEFAULT_SPEC} --link-bw {DEFAULT_LINK_BW} --host-bw {DEFAULT_HOST_BW} --emit msccl --target nccl \
         -o DIR/msccl.xml
     a2a compile {DEFAULT_SPEC} --link-bw {DEFAULT_LINK_BW} --host-bw {DEFAULT_HOST_BW} --emit oneccl -o DIR/oneccl.xml
     (each picks the smallest chunk count whose *program* reaches fidelity 0.97: the MSCCL
     dataflow differs from the oneCCL steps, so lowering one shared schedule IR would not;
     for MSCCL a power of two, so that NCCL's MSCCL executor selects the file at the
     power-of-two sizes users send)
  2. a2a verify DIR/msccl.xml DIR/oneccl.xml   (the topology and fabric the files record)
  3. mpiexec -n 27 python -m runtimes.mpi DIR/msccl.xml -b 1K -e 256K ...  (3a; 3b: oneccl.xml;
     the MCF bound from the files' records)

The fabric is the paper's 27-node testbed (Basu et al. §5.2): 25 Gbit/s links,
100 Gbit/s host injection, host (store-and-forward) forwarding, so the optimal
concurrent flow is F = 2/27.  On one machine the MPI ranks share its cores, so
the measured bandwidths say nothing about a real fabric; the byte-exact check
is what the run proves.
"""


def register(sub) -> None:
    """Add ``a2a demo`` to the subcommands."""
    p = command_parser(sub, "demo", "compile torus:3x3x3, verify it and run it on local MPI ranks",
                       "Run the whole pipeline on an embedded default: compile, verify, execute on local MPI ranks.",
                       EPILOG)
    p.add_argument("--spec", default=DEFAULT_SPEC, help=f"topology (default {DEFAULT_SPEC})")
    p.add_argument("--dir", default="a2a-demo", metavar="DIR", help="where to write the files (default ./a2a-demo)")
    p.add_argument("-b", "--minbytes", type=parse_size, default=parse_size("1K"), metavar="SIZE",
                   help="smallest per-peer shard size (default 1K)")
    p.add_argument("-e", "--maxbytes", type=parse_size, default=parse_size("256K"), metavar="SIZE",
                   help="largest per-peer shard size (default 256K)")
    p.add_argument("-n", "--iters", type=positive_int, default=5, metavar="I",
                   help="timed iterations per size (default 5)")
    p.add_argument("--no-run", action="store_true", default=None, help="stop after compiling and verifying")
    p.add_argument("--timeout", type=parse_timeout, default=120.0, metavar="SECONDS",
                   help="MPI watchdog per run (default 120)")
    applies_only(p, {d: ("no_run", ABSENT) for d in ("minbytes", "maxbytes", "iters", "timeout")})
    p.set_defaults(func=run)


def find_mpiexec() -> str:
    """``mpiexec`` beside this Python (the ``mpich`` wheel puts it there), else on ``PATH``."""
    here = Path(sys.executable).parent / "mpiexec"
    if here.exists():
        return str(here)
    found = shutil.which("mpiexec")
    if not found:
        raise A2AError("mpiexec not found: install the MPI wheel with 'pip install mpich' (a2a-compiler depends on it)")
    return found


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _a2a(argv: list[str]) -> None:
    from ..cli import main

    code = main(argv)
    if code:
        raise A2AError(f"'a2a {' '.join(argv)}' failed with exit code {code}")


def run(args) -> int:
    """``a2a demo``: compile, verify and run the §5.2 torus end to end."""
    from ..topology.spec import from_spec

    from_spec(args.spec)  # a bad spec: one line, before any header or directory
    if args.dir == "":
        raise A2AError("--dir: the path is empty")
    if not args.no_run:  # the run's sweep, checked before compiling
        sweep_sizes(argparse.Namespace(minbytes=args.minbytes, maxbytes=args.maxbytes, stepfactor=2,
                                       iters=args.iters, warmup=2))
    out = Path(args.dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise A2AError(f"--dir {out}: cannot create the directory: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK):
        raise A2AError(f"--dir {out}: the directory is not writable")
    fabric = ["--link-bw", DEFAULT_LINK_BW, "--host-bw", DEFAULT_HOST_BW]

    files = []
    for i, emit in enumerate(("msccl", "oneccl")):
        path = out / f"{emit}.xml"
        _step(f"1{'ab'[i]}. compile {args.spec} ({' '.join(fabric)}, tsMCF) to {emit}")
        target = ["--target", "nccl"] if emit == "msccl" else []
        _a2a(["compile", args.spec, *fabric, "--emit", emit, *target, "-o", str(path)])
        files.append(path)

    _step("2. verify against the topology and fabric the files record")
    _a2a(["verify", *map(str, files)])

    if args.no_run:
        return 0
    mpiexec = find_mpiexec()
    from ..formats import load_program

    for i, path in enumerate(files):
        program = load_program(path)[1]
        n = getattr(program, "ngpus", None) or program.nranks
        _step(f"3{'ab'[i]}. run {path} on {n} local MPI ranks")
        cmd = [mpiexec, "-n", str(n), sys.executable, "-m", "runtimes.mpi", str(path),
               "-b", str(args.minbytes), "-e", str(args.maxbytes), "-n", str(args.iters), "-w", "2",
               "--timeout", f"{args.timeout:g}"]
        print("$ " + " ".join(cmd), flush=True)
        code = subprocess.call(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if code:
            raise A2AError(f"the MPI run of {path} failed with exit code {code}")
    print(f"\ndemo complete: every schedule verified and delivered byte-exact; files in {out}/")
    return 0
