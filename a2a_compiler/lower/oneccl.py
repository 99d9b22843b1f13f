"""Lowering a link schedule to a oneCCL-style program (Basu et al. §4); the format is
:mod:`a2a_compiler.formats.oneccl`."""

from __future__ import annotations

from ..chunk.ir import LinkSchedule
from ..formats.oneccl import OnecclOp, OnecclProgram, OnecclRank
from . import demand_volumes, program_name, record_of
from .placement import place


def lower_oneccl(schedule: LinkSchedule, name: str | None = None) -> OnecclProgram:
    """Lower a time-stepped link schedule to oneCCL-style XML (Basu et al. §4).

    Step ``t`` of the schedule is step ``t`` of every rank: at step 0 the self
    shard is copied ``i -> o``; each run of
    :func:`~a2a_compiler.lower.placement.place` (chunks contiguous on both
    sides) becomes a ``send`` on the sender and a ``recv`` on the receiver, in
    the same order, so the k-th send matches the k-th receive.  Relayed chunks
    land in fresh scratch slots and are sent from there in a later step.  An all-to-allv
    schedule's buffers follow its chunk counts, which the file records per rank with the volumes.
    """
    pl = place(schedule)
    n, c = schedule.n_ranks, schedule.chunks_per_shard
    nsteps = max(1, len(schedule.steps))
    ops = [[[] for _ in range(nsteps)] for _ in range(n)]
    for cp in pl.copies:
        ops[cp.rank][0].append(OnecclOp("copy", -1, "i", cp.off, "o", cp.off, cp.cnt))
    recvs = [[[] for _ in range(nsteps)] for _ in range(n)]
    for r in pl.runs:
        ops[r.src][r.step].append(OnecclOp("send", r.dst, r.srcbuf, r.srcoff, "", -1, r.cnt))
        recvs[r.dst][r.step].append(OnecclOp("recv", r.src, "", -1, r.dstbuf, r.dstoff, r.cnt))
    ranks = tuple(OnecclRank(g, int(pl.in_chunks[g]), int(pl.out_chunks[g]), pl.scratch[g],
                             tuple(tuple(a + b) for a, b in zip(ops[g], recvs[g]))) for g in range(n))
    counts = None if schedule.demand is None else tuple(map(tuple, pl.counts.tolist()))
    return OnecclProgram(program_name(schedule, name), n, c, nsteps, ranks, record_of(schedule), counts,
                         demand_volumes(schedule))
