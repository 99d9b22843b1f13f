"""Benchmark: fidelity of chunked tsMCF link schedules against the number of chunks per shard.

fidelity = lp_time / predicted_time (docs/formats.md, "Schedule IR JSON").  For each
topology tsMCF is solved once, then the flows are chunked with exactly C chunks per
shard for C in 1, 2, 4, 8, 16, and with the compiler's own choice (smallest C <= 16
reaching fidelity 0.97).  Not a test: run it by hand, e.g.

    python tools/bench_fidelity.py
    python tools/bench_fidelity.py hypercube:3 torus:3x3x3@25Gbps,100Gbps,host

A topology may carry a fabric after '@': LINK_BW,HOST_BW,FORWARDING.
"""

from __future__ import annotations

import argparse
import sys
import time

from a2a_compiler.chunk.chunking import chunk_link_schedule
from a2a_compiler.chunk.ir import fidelity
from a2a_compiler.fabric import Fabric, parse_bandwidth
from a2a_compiler.solve.tsmcf import tsmcf
from a2a_compiler.topology import from_spec

DEFAULT = ["bipartite:4", "hypercube:3", "twisted-hypercube:3", "torus:3x3x3@25Gbps,100Gbps,host", "genkautz:32,4"]
CAPS = (1, 2, 4, 8, 16)


def parse(item: str):
    spec, _, fab = item.partition("@")
    if not fab:
        return spec, Fabric()
    link, host, forwarding = fab.split(",")
    return spec, Fabric(parse_bandwidth(link), parse_bandwidth(host), forwarding)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topologies", nargs="*", help="SPEC or SPEC@LINK,HOST,FORWARDING (default: the §5.2 set)")
    ap.add_argument("--quick", action="store_true", help="hypercube:3 only, in seconds (tests/test_tools.py runs it)")
    args = ap.parse_args(argv)
    args.topologies = args.topologies or (["hypercube:3"] if args.quick else DEFAULT)
    head = f"{'topology':<34} {'steps':>5} {'lp_time':>8} " + " ".join(f"{'C=' + str(c):>7}" for c in CAPS)
    print(head + f" {'chosen':>14} {'solve s':>8} {'chunk s':>8}")
    for item in args.topologies:
        spec, fabric = parse(item)
        topo = from_spec(spec)
        t0 = time.perf_counter()
        sol = tsmcf(topo, fabric)
        t1 = time.perf_counter()
        fids = [fidelity(chunk_link_schedule(topo, sol, chunks=c)) for c in CAPS]
        t2 = time.perf_counter()
        chosen = chunk_link_schedule(topo, sol, max_chunks=16)
        print(f"{item:<34} {sol.n_steps:>5} {sol.lp_time:>8.4f} " + " ".join(f"{f:>7.4f}" for f in fids)
              + f" {f'{fidelity(chosen):.4f} (C={chosen.chunks_per_shard})':>14} {t1 - t0:>8.2f} "
              f"{(t2 - t1) / len(CAPS):>8.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
