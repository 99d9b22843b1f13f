"""``a2a demo``: the whole pipeline on an embedded default, end to end.

compile torus:3x3x3 (tsMCF under the §5.2 bottleneck fabric) -> lower to MSCCL
XML and oneCCL-style XML -> verify both against the topology -> run both on 27
local MPI ranks (``mpiexec`` from the ``mpich`` wheel) with a byte-exact check
and a timing comparison against native ``MPI_Alltoall``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from ..cli import command_parser
from ..errors import A2AError
from .common import progress

DEFAULT_SPEC = "torus:3x3x3"
DEFAULT_LINK_BW = "25Gbps"
DEFAULT_HOST_BW = "100Gbps"

EPILOG = f"""\
what it does (each step is also a command of its own):
  1. a2a schedule {DEFAULT_SPEC} --link-bw {DEFAULT_LINK_BW} --host-bw {DEFAULT_HOST_BW} -o DIR/schedule.json
  2. a2a compile --from-ir DIR/schedule.json --emit msccl  -o DIR/msccl.xml
     a2a compile --from-ir DIR/schedule.json --emit oneccl -o DIR/oneccl.xml
  3. a2a verify DIR/msccl.xml --topology {DEFAULT_SPEC}   (and the same for oneccl.xml)
  4. mpiexec -n 27 python -m runtimes.mpi DIR/msccl.xml -b 1K -e 256K ...  (and oneccl.xml)

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
    p.add_argument("-b", "--minbytes", default="1K", metavar="SIZE", help="smallest per-peer shard size (default 1K)")
    p.add_argument("-e", "--maxbytes", default="256K", metavar="SIZE", help="largest per-peer shard size (default 256K)")
    p.add_argument("-n", "--iters", default="5", metavar="I", help="timed iterations per size (default 5)")
    p.add_argument("--no-run", action="store_true", help="stop after compiling and verifying")
    p.add_argument("--timeout", default="120", metavar="SECONDS", help="MPI watchdog per run (default 120)")
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
    """``a2a demo``: schedule, lower, verify and run the §5.2 torus end to end."""
    from ..chunk import build_schedule, save_schedule
    from ..fabric import Fabric, parse_bandwidth
    from ..topology import from_spec

    out = Path(args.dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise A2AError(f"--dir {out}: cannot create the directory: {exc.strerror or exc}") from None
    if not os.access(out, os.W_OK):
        raise A2AError(f"--dir {out}: the directory is not writable")
    topology = from_spec(args.spec)
    fabric = Fabric(parse_bandwidth(DEFAULT_LINK_BW), parse_bandwidth(DEFAULT_HOST_BW), "host")

    _step(f"1. solve tsMCF and chunk: {topology.spec}, {fabric.describe()}")
    schedule = build_schedule(topology, fabric, "tsmcf", progress=progress)
    ir = save_schedule(schedule, out / "schedule.json")
    flow = 1.0 / schedule.lp_time
    print(f"schedule IR -> {ir}  (F = 1/{schedule.lp_time:.6g} = {flow:.6g}, "
          f"bound {(topology.n_hosts - 1) * flow * fabric.link_bw / 1e9:.3f} GB/s)")

    files = []
    for emit in ("msccl", "oneccl"):
        _step(f"2. lower to {emit}")
        path = out / f"{emit}.xml"
        _a2a(["compile", "--from-ir", str(ir), "--emit", emit, "-o", str(path), "-q"])
        files.append(path)

    for path in files:
        _step(f"3. verify {path}")
        _a2a(["verify", str(path), "--topology", args.spec, "--link-bw", DEFAULT_LINK_BW,
              "--host-bw", DEFAULT_HOST_BW])

    if args.no_run:
        return 0
    mpiexec = find_mpiexec()
    for path in files:
        _step(f"4. run {path} on {topology.n_hosts} local MPI ranks")
        cmd = [mpiexec, "-n", str(topology.n_hosts), sys.executable, "-m", "runtimes.mpi", str(path),
               "-b", args.minbytes, "-e", args.maxbytes, "-n", args.iters, "-w", "2",
               "--link-bw", DEFAULT_LINK_BW, "--mcf-flow", repr(flow), "--timeout", args.timeout]
        print("$ " + " ".join(cmd), flush=True)
        code = subprocess.call(cmd, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        if code:
            raise A2AError(f"the MPI run of {path} failed with exit code {code}")
    print(f"\ndemo complete: every schedule verified and delivered byte-exact; files in {out}/")
    return 0
