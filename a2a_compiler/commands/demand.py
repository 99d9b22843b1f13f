"""``a2a demand``: make and inspect all-to-allv demand matrices (:mod:`a2a_compiler.demand`)."""

from __future__ import annotations

from ..cli import command_parser
from .common import nonnegative_int, positive_int, print_json

DESCRIPTION = """\
Make or inspect the demand matrix of an all-to-allv (a mixture-of-experts layer's token exchange):
D[s,d] is the relative volume rank s sends rank d; the diagonal stays local and is ignored.
Every command that takes --demand FILE (solve, schedule, compile, routes, verify, run, testbed bench)
reads what these write: CSV, N lines of N comma-separated numbers, or a .npy array.
"""

EPILOG = """\
generators:
  zipf N     a seeded MoE layer: N*E experts (E = --experts-per-rank, expert e on rank e//E), popularity
             of the expert of popularity rank r proportional to (1+r)^-alpha (rank order seeded), every rank
             routes --tokens tokens to --top-k distinct experts drawn by popularity.  alpha 0: no skew
             (sampling noise only); 0.5 mild; 1 strong; 2 extreme.  Token counts, the same on every machine.
  router F   token counts from a router dump F.npy: integer expert ids of shape (N, T, k) (or (N, T)
             for top-1), entry [s,t,j] the j-th expert of token t on rank s; --experts E experts (a
             multiple of N, default: enough for the largest id) placed contiguously, E/N per rank.
  show F     size, skew (largest pair, busiest sender and receiver after scaling to mean 1 per pair),
             whether rows and columns balance (what MSCCL's fixed-size buffers need), the hash that output
             files record; --chunks C also prints the chunk counts T of an MSCCL file with C chunks per peer
             (rows and columns summing to N*C: the buffer layout of docs/formats.md).

examples:
  a2a demand zipf 8 --alpha 1 --seed 1 -o D.csv
  a2a demand router routing.npy --experts 32 -o D.csv
  a2a demand show D.csv --json
"""


def register(sub) -> None:
    """Add ``a2a demand`` to the subcommands."""
    p = command_parser(sub, "demand", "make or inspect an all-to-allv demand matrix (MoE): zipf, router, show",
                       DESCRIPTION, EPILOG)
    dsub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    z = dsub.add_parser("zipf", help="seeded Zipf-skewed expert popularity (token counts)")
    z.add_argument("ranks", type=positive_int, metavar="N", help="number of ranks")
    z.add_argument("--alpha", type=float, default=1.0, help="Zipf exponent of expert popularity (default 1; 0 = none)")
    z.add_argument("--experts-per-rank", type=positive_int, default=2, metavar="E", help="experts per rank (default 2)")
    z.add_argument("--tokens", type=positive_int, default=4096, metavar="T", help="tokens per rank (default 4096)")
    z.add_argument("--top-k", type=positive_int, default=2, metavar="K", help="experts per token (default 2)")
    z.add_argument("--seed", type=nonnegative_int, default=0, metavar="S", help="seed (default 0)")
    z.add_argument("-o", "--output", required=True, metavar="FILE.csv", help="where to write the matrix")
    z.set_defaults(func=run_zipf)
    r = dsub.add_parser("router", help="token counts from a router dump (.npy expert ids per token per rank)")
    r.add_argument("dump", metavar="DUMP.npy", help="integer expert ids, shape (ranks, tokens, top_k) or (ranks, tokens)")
    r.add_argument("--experts", type=positive_int, metavar="E", help="number of experts (a multiple of the ranks)")
    r.add_argument("-o", "--output", required=True, metavar="FILE.csv", help="where to write the matrix")
    r.set_defaults(func=run_router)
    s = dsub.add_parser("show", help="size, skew, balance and hash of a demand matrix")
    s.add_argument("file", metavar="FILE", help="CSV or .npy demand matrix")
    s.add_argument("--chunks", type=positive_int, metavar="C",
                   help="also print the MSCCL chunk counts T for C chunks per peer (balanced matrices)")
    s.add_argument("--json", action="store_true",
                   help="print one JSON object (docs/json.md): source, ranks, sha256, max, min, zero_pairs, max_send, "
                        "max_receive, receive_skew, send_skew, balanced, uniform, chunk_counts (with --chunks)")
    s.set_defaults(func=run_show)


def _write(demand, path) -> int:
    from ..files import atomic_write

    atomic_write(path, demand.to_csv())
    st = demand.stats()
    print(f"wrote {path}: {demand.n} x {demand.n} token counts ({demand.source}); scaled to mean 1 per pair: "
          f"largest pair {st['max']:.3g}, busiest receiver {st['max_receive']:.3g} (uniform {demand.n - 1})")
    return 0


def run_zipf(args) -> int:
    from ..demand import zipf_demand

    return _write(zipf_demand(args.ranks, args.alpha, experts_per_rank=args.experts_per_rank, tokens=args.tokens,
                              top_k=args.top_k, seed=args.seed), args.output)


def run_router(args) -> int:
    from ..demand import router_demand

    return _write(router_demand(args.dump, args.experts), args.output)


def run_show(args) -> int:
    from ..demand import read_demand

    d = read_demand(args.file)
    out = {**d.to_json_dict(max_ranks=0), **d.stats()}
    if args.chunks:
        from ..chunk.counts import msccl_counts

        out["chunk_counts"] = msccl_counts(d, args.chunks).tolist()
    if args.json:
        print_json(out)
        return 0
    print(f"{args.file}: {d.n} x {d.n}, sha256 {d.sha256}")
    print(f"scaled to mean 1 per pair: largest pair {out['max']:.4g}, smallest {out['min']:.4g}, "
          f"{out['zero_pairs']} pair(s) of 0")
    print(f"busiest sender {out['max_send']:.4g}, busiest receiver {out['max_receive']:.4g} (uniform: {d.n - 1}); "
          + ("uniform (the plain all-to-all)" if out["uniform"] else
             "balanced: every rank sends and receives the same" if out["balanced"] else "not balanced"))
    if args.chunks:
        print(f"MSCCL chunk counts for {args.chunks} chunk(s) per peer (rows and columns sum to {d.n * args.chunks}):")
        for row in out["chunk_counts"]:
            print(" ".join(f"{v:4d}" for v in row))
    return 0
