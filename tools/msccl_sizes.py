#!/usr/bin/env python3
"""How large an all-to-all each MSCCL executor loads: compile family sizes and report the program's size.

    python tools/msccl_sizes.py [--families torus,hypercube,genkautz] [--max-chunks 1] [--timeout 900]

For each size, ``a2a compile SPEC --emit msccl --target T --max-chunks C`` (C = 1 gives the
smallest program of the tsMCF schedule) for T = rccl and nccl, in a subprocess bounded by
``--timeout`` seconds; prints ranks, chunks per shard, parser nodes per rank (the most over
the ranks), thread blocks per GPU, steps per thread block, and compile seconds, or the
one-line refusal.  A family stops growing at its first refusal or timeout.  Results:
docs/results.md ("MSCCL sizes each executor loads").
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FAMILIES = {
    "torus": [f"torus:{k}x{k}x{k}" for k in range(3, 9)],
    "hypercube": [f"hypercube:{d}" for d in range(3, 11)],
    "genkautz": [f"genkautz:{n},4" for n in (32, 64, 96, 128, 192, 256)],
}


def measure(spec: str, target: str, chunks: int, timeout: float) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp, "a.xml")
        t0 = time.perf_counter()
        try:
            p = subprocess.run([sys.executable, "-m", "a2a_compiler", "compile", spec, "--emit", "msccl", "--target",
                                target, "--max-chunks", str(chunks), "-o", str(out), "--json", "-q"],
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"spec": spec, "target": target, "status": f"timeout after {timeout:.0f} s"}
        seconds = time.perf_counter() - t0
        if p.returncode not in (0, 1, 2):   # 1: written below the default fidelity target (warned); 2: refused
            return {"spec": spec, "target": target, "status": "error", "message": p.stderr.strip()[-2000:]}
        if p.returncode == 2:
            return {"spec": spec, "target": target, "status": "refused", "message": p.stderr.strip().splitlines()[-1],
                    "seconds": seconds}
        from a2a_compiler.formats import load_program
        from a2a_compiler.formats.msccl_rules import parser_nodes

        prog = load_program(out)[1]
        return {"spec": spec, "target": target, "status": "fits", "ranks": prog.ngpus,
                "chunks_per_shard": json.loads(p.stdout)["chunks_per_shard"],
                "parser_nodes": max(parser_nodes(prog, g) for g in prog.gpus),
                "tbs_per_gpu": max(len(g.tbs) for g in prog.gpus),
                "steps_per_tb": max(len(tb.steps) for g in prog.gpus for tb in g.tbs), "seconds": seconds}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--families", default=",".join(FAMILIES))
    p.add_argument("--max-chunks", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--targets", default="rccl,nccl")
    p.add_argument("--quick", action="store_true",
                   help="hypercube:3 for rccl only, in seconds (tests/test_tools.py runs it)")
    args = p.parse_args(argv)
    if args.quick:
        args.families, args.targets = "hypercube", "rccl"
    failed = False
    for fam in args.families.split(","):
        for target in args.targets.split(","):
            for spec in FAMILIES[fam][:1] if args.quick else FAMILIES[fam]:
                r = measure(spec, target, args.max_chunks, args.timeout)
                print(json.dumps(r), flush=True)
                failed = failed or r["status"] == "error"
                if r["status"] != "fits":
                    break
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
