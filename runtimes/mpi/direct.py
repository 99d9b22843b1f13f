"""The direct (single-hop, complete-graph) all-to-all as an MSCCL program.

Every rank sends shard ``d`` straight to rank ``d``: exactly the bytes native
``MPI_Alltoall`` moves, so timing it against ``MPI_Alltoall`` isolates this
runtime's overhead (tools/bench_runtime.py).
"""

from __future__ import annotations

from a2a_compiler.lower.programs import MscclGpu, MscclProgram, MscclStep, MscclThreadBlock


def _step(s, type_, srcbuf, srcoff, dstbuf, dstoff, cnt, hasdep=0):
    return MscclStep(s, type_, srcbuf, srcoff, dstbuf, dstoff, cnt, -1, -1, hasdep)


def direct_msccl(nranks: int, chunks_per_shard: int = 1) -> MscclProgram:
    """One thread block per peer (send, then receive, one message of ``C`` chunks each) and one copy block."""
    C = chunks_per_shard
    gpus = []
    for r in range(nranks):
        tbs = [MscclThreadBlock(0, -1, -1, 0, (_step(0, "cpy", "i", r * C, "o", r * C, C),))]
        for p in range(nranks):
            if p != r:
                tbs.append(MscclThreadBlock(len(tbs), p, p, 0, (
                    _step(0, "s", "i", p * C, "o", -1, C), _step(1, "r", "i", -1, "o", p * C, C))))
        gpus.append(MscclGpu(r, nranks * C, nranks * C, 0, tuple(tbs)))
    return MscclProgram(f"direct-{nranks}", "Simple", 1, nranks * C, nranks, "alltoall", 0, 1, 0, 0, tuple(gpus))
