"""Hand-built 8-rank schedules for the runtime tests (the runtime_*.xml files).

Built by hand, independently of the compiler's solvers and lowering, and
written with the format writers.  Regenerate the files with
``python tests/data/runtime_fixtures.py``.

* ``relay_msccl``: MSCCL, 2 chunks/shard, 2 channels.  Chunk 1 of shard
  ``r -> r+4`` is relayed by ``r+1`` through scratch slot 0 (a receive with
  ``hasdep`` and a dependent send); chunk 1 of ``r -> r+2`` is relayed by
  ``r+1`` with ``rcs`` on channel 1; the self shard is a ``cpy`` that a ``nop``
  waits for; all other data goes direct (2 chunks per message).
* ``ecube_oneccl``: oneCCL-style hypercube:3 e-cube all-to-all, 3 steps, each
  step exchanging across one dimension, forwarded shards staged in scratch.
* ``two_hop_paths``: MPI path schedule, 5 chunks/shard over three routes per
  pair: direct (two runs), a 2-hop route through a rank, and a route through
  switch node 8 then a rank.
* ``wrong_offset_msccl``: the direct schedule with one receive landing at the
  wrong output offset, for the failure report.
"""

from __future__ import annotations

from pathlib import Path

from a2a_compiler.formats import (MpiPathProgram, MscclGpu, MscclProgram, MscclStep, MscclThreadBlock,
                                         OnecclOp, OnecclProgram, OnecclRank, PathSend)

N = 8


def _st(s, t, sb="i", so=-1, db="o", do=-1, cnt=1, depid=-1, deps=-1, hasdep=0):
    return MscclStep(s, t, sb, so, db, do, cnt, depid, deps, hasdep)


def relay_msccl() -> MscclProgram:
    C = 2
    gpus = []
    for r in range(N):
        tbs = [MscclThreadBlock(0, -1, -1, 0, (_st(0, "cpy", "i", r * C, "o", r * C, C, hasdep=1),))]
        recv_tb = {}
        for p in range(N):
            if p == r:
                continue
            off = (p - r) % N
            steps = [_st(0, "s", "i", p * C, cnt=1 if off in (2, 4) else 2)]
            if off == 1:  # origin of chunk 1 of r -> r+4, relayed by p = r+1
                steps.append(_st(1, "s", "i", ((r + 4) % N) * C + 1))
            if off == 3:  # forward chunk 1 of (r-1) -> (r+3) from scratch once it has arrived
                steps.append(_st(1, "s", "s", 0, depid=-2, deps=1))
            tbs.append(MscclThreadBlock(len(tbs), p, -1, 0, tuple(steps)))
        for p in range(N):
            if p == r:
                continue
            off = (r - p) % N
            steps = [_st(0, "r", do=p * C, cnt=1 if off in (2, 4) else 2)]
            if off == 1:  # chunk 1 of p -> p+4 arrives for relaying
                steps.append(_st(1, "r", db="s", do=0, hasdep=1))
            if off == 3:  # chunk 1 of (r-4) -> r, relayed by p = r-3
                steps.append(_st(1, "r", do=((r - 4) % N) * C + 1))
            recv_tb[p] = len(tbs)
            tbs.append(MscclThreadBlock(len(tbs), -1, p, 0, tuple(steps)))
        # resolve the scratch forward's dependency on the receive block from r-1
        tbs = [MscclThreadBlock(tb.id, tb.send, tb.recv, tb.chan, tuple(
            _st(st.s, st.type, st.srcbuf, st.srcoff, st.dstbuf, st.dstoff, st.cnt, recv_tb[(r - 1) % N], st.deps,
                st.hasdep) if st.depid == -2 else st for st in tb.steps)) for tb in tbs]
        tbs.append(MscclThreadBlock(len(tbs), (r + 1) % N, (r - 1) % N, 1, (
            _st(0, "nop", "i", -1, "o", -1, 0, depid=0, deps=0),
            _st(1, "s", "i", ((r + 2) % N) * C + 1),
            _st(2, "rcs", "s", 1, "s", 1),
            _st(3, "r", do=((r - 2) % N) * C + 1),
        )))
        gpus.append(MscclGpu(r, N * C, N * C, 2, tuple(tbs)))
    return MscclProgram("runtime-relay-8", "Simple", 2, N * C, N, "alltoall", 0, 1, 0, 0, tuple(gpus))


def wrong_offset_msccl() -> MscclProgram:
    from runtimes.mpi.direct import direct_msccl

    prog = direct_msccl(N)
    g3 = prog.gpus[3]
    tb = g3.tbs[1]  # rank 3's block for peer 0: its receive lands in slot 1 instead of 0
    bad = MscclThreadBlock(tb.id, tb.send, tb.recv, tb.chan, (tb.steps[0], _st(1, "r", do=1)))
    gpus = list(prog.gpus)
    gpus[3] = MscclGpu(3, g3.i_chunks, g3.o_chunks, g3.s_chunks, (g3.tbs[0], bad) + g3.tbs[2:])
    return MscclProgram("runtime-wrong-offset-8", prog.proto, prog.nchannels, prog.nchunksperloop, prog.ngpus,
                        prog.coll, prog.inplace, prog.outofplace, prog.min_bytes, prog.max_bytes, tuple(gpus))


def ecube_oneccl() -> OnecclProgram:
    C, dims = 2, 3
    where = {(s, d): ("i", d * C) for s in range(N) for d in range(N) if s != d}  # buffer slot at the holder
    holder = {(s, d): s for s in range(N) for d in range(N) if s != d}
    scratch = [0] * N
    steps = [[[OnecclOp("copy", -1, "i", r * C, "o", r * C, C)] for r in range(N)]]
    steps += [[[] for _ in range(N)] for _ in range(dims - 1)]
    for t in range(dims):
        sends, recvs = [[] for _ in range(N)], [[] for _ in range(N)]
        for (s, d) in sorted(holder):
            u = holder[(s, d)]
            if not (u ^ d) >> t & 1:
                continue
            v = u ^ (1 << t)
            buf, off = where[(s, d)]
            if v == d:
                dst = ("o", s * C)
            else:
                dst = ("s", scratch[v])
                scratch[v] += C
            sends[u].append(OnecclOp("send", v, buf, off, "", -1, C))
            recvs[v].append(OnecclOp("recv", u, "", -1, dst[0], dst[1], C))
            holder[(s, d)], where[(s, d)] = v, dst
        for r in range(N):
            steps[t][r] += sends[r] + recvs[r]
    ranks = tuple(OnecclRank(r, N * C, N * C, scratch[r], tuple(tuple(steps[t][r]) for t in range(dims)))
                  for r in range(N))
    return OnecclProgram("runtime-ecube-8", N, C, dims, ranks)


def two_hop_paths() -> MpiPathProgram:
    sends = []
    for s in range(N):
        for d in range(N):
            if s == d:
                continue
            r1 = (s + 1) % N if (s + 1) % N != d else (s + 2) % N
            r2 = (d + 1) % N if (d + 1) % N != s else (d + 2) % N
            sends += [PathSend(s, d, 0, 0, (s, d), (0, 4)),
                      PathSend(s, d, 1, 0, (s, r1, d), (1, 2)),
                      PathSend(s, d, 2, 1, (s, 8, r2, d), (3,))]
    return MpiPathProgram("runtime-two-hop-8", N, N + 1, 5, tuple(sends))


FIXTURES = {
    "runtime_relay8.msccl.xml": relay_msccl,
    "runtime_wrong_offset8.msccl.xml": wrong_offset_msccl,
    "runtime_ecube8.oneccl.xml": ecube_oneccl,
    "runtime_two_hop8.mpi.xml": two_hop_paths,
}

if __name__ == "__main__":
    from a2a_compiler.files import atomic_write
    from a2a_compiler.formats import program_to_xml

    for name, make in FIXTURES.items():
        atomic_write(Path(__file__).resolve().parent / name, program_to_xml(make()))
        print(name)
