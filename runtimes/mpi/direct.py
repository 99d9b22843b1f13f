"""The direct (single-hop, complete-graph) all-to-all in each of the three formats.

Every rank sends shard ``d`` straight to rank ``d``: exactly the bytes native
``MPI_Alltoall`` moves, so timing these against ``MPI_Alltoall`` isolates this
runtime's overhead per format (tools/bench_runtime.py).
"""

from __future__ import annotations

from a2a_compiler.formats import (MpiPathProgram, MscclGpu, MscclProgram, MscclStep, MscclThreadBlock,
                                         OnecclOp, OnecclProgram, OnecclRank, PathSend)


def _step(s, type_, srcbuf, srcoff, dstbuf, dstoff, cnt):
    return MscclStep(s, type_, srcbuf, srcoff, dstbuf, dstoff, cnt, -1, -1, 0)


def direct_msccl(nranks: int, chunks_per_shard: int = 1) -> MscclProgram:
    """One thread block per peer (send, then receive, one message of ``C`` chunks each) and one copy block."""
    C = chunks_per_shard
    gpus = []
    for r in range(nranks):
        tbs = [MscclThreadBlock(0, -1, -1, 0, (_step(0, "cpy", "i", r * C, "o", r * C, C),))]
        for p in range(nranks):
            if p != r:
                tbs.append(MscclThreadBlock(len(tbs), p, p, 0, (  # both ends describe a transfer alike
                    _step(0, "s", "i", p * C, "o", r * C, C), _step(1, "r", "i", r * C, "o", p * C, C))))
        gpus.append(MscclGpu(r, nranks * C, nranks * C, 0, tuple(tbs)))
    return MscclProgram(f"direct-{nranks}", "Simple", 1, nranks * C, nranks, "alltoall", 0, 1, 0, 0, tuple(gpus))


def direct_oneccl(nranks: int, chunks_per_shard: int = 1) -> OnecclProgram:
    """One step: the self copy, a send to and a receive from every peer."""
    C = chunks_per_shard
    ranks = []
    for r in range(nranks):
        ops = [OnecclOp("copy", -1, "i", r * C, "o", r * C, C)]
        ops += [OnecclOp("send", p, "i", p * C, "", -1, C) for p in range(nranks) if p != r]
        ops += [OnecclOp("recv", p, "", -1, "o", p * C, C) for p in range(nranks) if p != r]
        ranks.append(OnecclRank(r, nranks * C, nranks * C, 0, (tuple(ops),)))
    return OnecclProgram(f"direct-{nranks}", nranks, C, 1, tuple(ranks))


def direct_paths(nranks: int, chunks_per_shard: int = 1) -> MpiPathProgram:
    """One single-hop route per pair carrying the whole shard."""
    sends = tuple(PathSend(s, d, 0, 0, (s, d), tuple(range(chunks_per_shard)))
                  for s in range(nranks) for d in range(nranks) if s != d)
    return MpiPathProgram(f"direct-{nranks}", nranks, nranks, chunks_per_shard, sends)


DIRECT = {"msccl": direct_msccl, "oneccl": direct_oneccl, "mpi": direct_paths}
