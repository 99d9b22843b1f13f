"""Compile the precompiled schedules in schedules/ for the paper's testbed topologies (Basu et al. §5.1–5.2).

    python tools/make_schedules.py            # (re)write schedules/*.xml and schedules/README.md
    python tools/make_schedules.py --check    # recompile into a temporary directory, compare bytes, verify

Each schedule is produced by exactly the ``a2a compile`` command listed in
schedules/README.md; link schedules (tsMCF) are emitted as MSCCL and
oneCCL-style XML, path schedules (MCF-extP) as MPI path XML.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "schedules"
#: §5.2 torus fabric: 25 Gbps links, 100 Gbps host injection (host-NIC bottleneck for degree 6).
TORUS_FABRIC = ["--link-bw", "25Gbps", "--host-bw", "100Gbps"]

#: (file name, a2a compile arguments without -o, what it is).
SCHEDULES = [
    ("bipartite-4-tsmcf.msccl.xml", ["bipartite:4", "--emit", "msccl"], "complete bipartite K4,4 (8 GPUs), tsMCF"),
    ("bipartite-4-tsmcf.oneccl.xml", ["bipartite:4", "--emit", "oneccl"], "complete bipartite K4,4, tsMCF"),
    ("bipartite-4-mcf-extp.mpi.xml", ["bipartite:4", "--emit", "mpi"], "complete bipartite K4,4, MCF-extP"),
    ("hypercube-3-tsmcf.msccl.xml", ["hypercube:3", "--emit", "msccl"], "3-cube (8 GPUs), tsMCF"),
    ("hypercube-3-tsmcf.oneccl.xml", ["hypercube:3", "--emit", "oneccl"], "3-cube, tsMCF"),
    ("hypercube-3-mcf-extp.mpi.xml", ["hypercube:3", "--emit", "mpi"], "3-cube, MCF-extP"),
    ("twisted-hypercube-3-tsmcf.msccl.xml", ["twisted-hypercube:3", "--emit", "msccl"],
     "twisted 3-cube (8 GPUs), tsMCF"),
    ("twisted-hypercube-3-tsmcf.oneccl.xml", ["twisted-hypercube:3", "--emit", "oneccl"], "twisted 3-cube, tsMCF"),
    ("twisted-hypercube-3-mcf-extp.mpi.xml", ["twisted-hypercube:3", "--emit", "mpi"], "twisted 3-cube, MCF-extP"),
    ("torus-3x3x3-tsmcf.msccl.xml", ["torus:3x3x3", *TORUS_FABRIC, "--emit", "msccl"],
     "3x3x3 torus (27 nodes), host-NIC bottleneck (§5.2), tsMCF"),
    ("torus-3x3x3-tsmcf.oneccl.xml", ["torus:3x3x3", *TORUS_FABRIC, "--emit", "oneccl"],
     "3x3x3 torus, host-NIC bottleneck, tsMCF"),
    ("torus-3x3x3-mcf-extp.mpi.xml", ["torus:3x3x3", *TORUS_FABRIC, "--forwarding", "nic", "--emit", "mpi"],
     "3x3x3 torus, NIC cut-through forwarding, MCF-extP"),
]


def command(name: str, args: list[str]) -> list[str]:
    return ["compile", *args, "-o", f"schedules/{name}"]


def compile_one(name: str, args: list[str], directory: Path) -> tuple[bytes, str]:
    """Run ``a2a compile`` in-process into ``directory``; return the file and the printed summary."""
    from a2a_compiler.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["compile", *args, "-q", "-o", str(directory / name)])
    if rc != 0:
        raise SystemExit(f"a2a {shlex.join(command(name, args))} failed with exit status {rc}")
    return (directory / name).read_bytes(), out.getvalue()


def readme(summaries: dict[str, str]) -> str:
    lines = [
        "# Precompiled schedules",
        "",
        "All-to-all schedules for the paper's testbed topologies (Basu et al. §5.1–5.2), compiled and",
        "verified by this project.  Regenerate with `python tools/make_schedules.py`; the test suite",
        "recompiles them and checks they are byte-identical and still verify.  Each line gives the exact",
        "command (run from the repository root) that produced the file.  Times are in link-times for",
        "unit shards (see `a2a compile --help`).",
        "",
        "| file | schedule | command | LP time | predicted | fidelity |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, args, what in SCHEDULES:
        s = summaries[name]
        lines.append(f"| `{name}` | {what} | `a2a {shlex.join(command(name, args))}` | {s['lp']} | "
                     f"{s['predicted']} | {s['fidelity']} |")
    lines += ["", "Load an MSCCL file with the MSCCL executor as described in docs/msccl.md; run the oneCCL-style",
              "and MPI path files with `mpiexec -n N a2a run FILE` (docs/formats.md describes all three).", ""]
    return "\n".join(lines)


def _parse_summary(text: str) -> dict[str, str]:
    vals = {}
    for line in text.splitlines():
        if line.startswith("LP time"):
            vals["lp"] = line.split()[2]
        elif line.startswith("predicted"):
            parts = line.split()
            vals["predicted"], vals["fidelity"] = parts[1], parts[-1]
    return vals


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="recompile into a temporary directory and compare with schedules/ instead of writing")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from a2a_compiler.files import atomic_write

    bad = []
    summaries = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, cargs, _ in SCHEDULES:
            data, text = compile_one(name, cargs, Path(tmp))
            summaries[name] = _parse_summary(text)
            print(f"{name}: {len(data)} bytes", file=sys.stderr)
            if args.check:
                if not (OUT / name).exists() or (OUT / name).read_bytes() != data:
                    bad.append(name)
            else:
                atomic_write(OUT / name, data)
    if args.check:
        if bad:
            print("differ from a fresh compile: " + ", ".join(bad), file=sys.stderr)
            return 1
        return 0
    atomic_write(OUT / "README.md", readme(summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
