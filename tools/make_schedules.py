"""Compile the precompiled schedules in schedules/ for the paper's testbed topologies (Basu et al. §5.1–5.2).

    python tools/make_schedules.py            # (re)write schedules/*.xml, *.json and schedules/README.md
    python tools/make_schedules.py --check    # recompile into a temporary directory, compare bytes, verify

Each schedule is produced by :func:`a2a_compiler.compile`, byte for byte what the
``a2a compile`` command listed in schedules/README.md writes; link schedules (tsMCF) are emitted as MSCCL
(for NCCL's MSCCL executor), MSCCL++ plans and oneCCL-style XML, path schedules (MCF-extP) as MPI path XML.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "schedules"
#: §5.2 torus fabric: 25 Gbps links, 100 Gbps host injection (host-NIC bottleneck for degree 6).
TORUS = {"link_bw": "25Gbps", "host_bw": "100Gbps"}

#: GPU files are compiled for NCCL's MSCCL executor: a chunk count it selects at power-of-two sizes (issue #33).
NCCL = {"target": "nccl"}

#: (file name, a2a_compiler.compile arguments: spec, emit, keywords; what it is).
SCHEDULES = [
    ("bipartite-4-tsmcf.msccl.xml", ("bipartite:4", "msccl", NCCL), "complete bipartite K4,4 (8 GPUs), tsMCF"),
    ("bipartite-4-tsmcf.oneccl.xml", ("bipartite:4", "oneccl", {}), "complete bipartite K4,4, tsMCF"),
    ("bipartite-4-mcf-extp.mpi.xml", ("bipartite:4", "mpi", {}), "complete bipartite K4,4, MCF-extP"),
    ("hypercube-3-tsmcf.msccl.xml", ("hypercube:3", "msccl", NCCL), "3-cube (8 GPUs), tsMCF"),
    ("hypercube-3-tsmcf.mscclpp.json", ("hypercube:3", "mscclpp", {}), "3-cube (8 GPUs), tsMCF, MSCCL++ plan"),
    ("hypercube-3-tsmcf.oneccl.xml", ("hypercube:3", "oneccl", {}), "3-cube, tsMCF"),
    ("hypercube-3-mcf-extp.mpi.xml", ("hypercube:3", "mpi", {}), "3-cube, MCF-extP"),
    ("twisted-hypercube-3-tsmcf.msccl.xml", ("twisted-hypercube:3", "msccl", NCCL), "twisted 3-cube (8 GPUs), tsMCF"),
    ("twisted-hypercube-3-tsmcf.oneccl.xml", ("twisted-hypercube:3", "oneccl", {}), "twisted 3-cube, tsMCF"),
    ("twisted-hypercube-3-mcf-extp.mpi.xml", ("twisted-hypercube:3", "mpi", {}), "twisted 3-cube, MCF-extP"),
    ("torus-3x3x3-tsmcf.msccl.xml", ("torus:3x3x3", "msccl", {**TORUS, **NCCL}),
     "3x3x3 torus (27 nodes), host-NIC bottleneck (§5.2), tsMCF"),
    ("torus-3x3x3-tsmcf-f99.msccl.xml",
     ("torus:3x3x3", "msccl", {**TORUS, **NCCL, "min_fidelity": 0.99, "max_chunks": 32}),
     "3x3x3 torus, host-NIC bottleneck, tsMCF, fidelity >= 0.99"),
    ("torus-3x3x3-tsmcf.oneccl.xml", ("torus:3x3x3", "oneccl", TORUS), "3x3x3 torus, host-NIC bottleneck, tsMCF"),
    ("torus-3x3x3-mcf-extp.mpi.xml", ("torus:3x3x3", "mpi", {**TORUS, "forwarding": "nic"}),
     "3x3x3 torus, NIC cut-through forwarding, MCF-extP"),
]


def command(name: str, spec: str, emit: str, options: dict) -> str:
    """The ``a2a compile`` command line equivalent to ``compile(spec, emit, **options)``."""
    from a2a_compiler.options import flag

    argv = ["compile", spec, *(a for k, v in options.items() for a in (flag(k), str(v))), "--emit", emit,
            "-o", f"schedules/{name}"]
    return "a2a " + shlex.join(argv)


def readme(results: dict) -> str:
    lines = [
        "# Precompiled schedules",
        "",
        "All-to-all schedules for the paper's testbed topologies (Basu et al. §5.1–5.2), compiled and",
        "verified by this project.  Regenerate with `python tools/make_schedules.py`; the test suite",
        "recompiles them and checks they are byte-identical and still verify.  Each line gives the exact",
        "command (run from the repository root) that produced the file.  Times are in link-times for",
        "unit shards (see `a2a compile --help`): LP is the method's own LP optimum, MCF the link MCF",
        "optimum (both certified lower bounds), predicted the program's time as `a2a verify` prices it;",
        "fidelity = LP / predicted, MCF ratio = MCF / predicted.",
        "",
        "| file | schedule | command | C | LP | MCF | predicted | fidelity | MCF ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, (spec, emit, options), what in SCHEDULES:
        r = results[name]
        lines.append(f"| `{name}` | {what} | `{command(name, spec, emit, options)}` | {r.chunks_per_shard} | "
                     f"{r.lp_time:.6g} | {r.mcf_time:.6g} | {r.predicted_time:.6g} | {r.fidelity:.4f} | "
                     f"{r.mcf_ratio:.4f} |")
    lines += ["", "Load an MSCCL file with the MSCCL executor and an MSCCL++ plan with MSCCL++'s executor as",
              "described in docs/msccl.md (the MSCCL files are compiled for NCCL's MSCCL executor, with a chunk",
              "count it selects at power-of-two sizes); run the oneCCL-style and MPI path files with",
              "`mpiexec -n N a2a run FILE` (docs/formats.md describes every format).", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="recompile and compare with schedules/ instead of writing")
    ap.add_argument("--quick", action="store_true",
                    help="--check of the hypercube:3 schedules only, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    args.check = args.check or args.quick
    sys.path.insert(0, str(ROOT))
    import a2a_compiler
    from a2a_compiler.files import atomic_write

    bad = []
    results = {}
    for name, (spec, emit, options), _ in SCHEDULES:
        if args.quick and spec != "hypercube:3":
            continue
        r = results[name] = a2a_compiler.compile(spec, emit, **options)
        print(f"{name}: {len(r.data)} bytes, C = {r.chunks_per_shard}, fidelity {r.fidelity:.4f}", file=sys.stderr)
        if args.check:
            if not (OUT / name).exists() or (OUT / name).read_bytes() != r.data:
                bad.append(name)
        else:
            r.write(OUT / name)
    if args.check:
        if bad:
            print("differ from a fresh compile: " + ", ".join(bad), file=sys.stderr)
            return 1
        return 0
    atomic_write(OUT / "README.md", readme(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
