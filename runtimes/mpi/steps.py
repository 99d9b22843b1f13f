"""The executor core: run a :class:`~runtimes.mpi.plan.RankPlan` over any point-to-point transport.

Which bytes go where at each step, the local copies, relay scratch and the
all-to-allv byte plans live here once; a transport only moves bytes.  Two
transports use it: MPI (:class:`runtimes.mpi.executor.MpiTransport`, mpi4py
nonblocking calls on numpy buffers) and ``torch.distributed``
(:mod:`runtimes.torch`, ``isend``/``irecv`` on tensors).  A transport is any
object with

* ``rank``: this rank in the schedule's group (error messages);
* ``isend(buf, peer, tag)`` / ``irecv(buf, peer, tag)``: post one message, return a request;
* ``start(sends, recvs)``: post many ``(buf, peer, tag)`` at once (a batch), return their requests,
  receives first;
* ``test(req)``: has it completed; ``waitsome(reqs)``: indices of completed ones (at least one);
  ``waitall(reqs)``; ``barrier()``;
* ``buffer(key, rows, cols)``: a ``(rows, cols)`` byte buffer, reused while the shape stays.

Buffers are ``(chunks, chunk bytes)`` uint8 arrays or tensors: a message of
``cnt`` consecutive chunks is the contiguous row slice ``buf[off:off + cnt]``,
and a local copy is a slice assignment.  This module imports neither MPI nor
torch.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from a2a_compiler.errors import A2AError

from .plan import BUF_I, BUF_O, BUF_S, CPY, RCS, RECV, SEND, Forward, MscclPlan, OnecclPlan, PathPlan, RankPlan


def run_plan(plan: RankPlan, bufs: list, transport, steered=None) -> None:
    """Run ``plan`` on ``[input, output, scratch]`` chunk buffers in host order (the all-to-all)."""
    if plan.self_copy:
        me = slice(plan.rank * plan.chunks_per_shard, (plan.rank + 1) * plan.chunks_per_shard)
        bufs[BUF_O][me] = bufs[BUF_I][me]
    run_body(plan, bufs, transport, steered)


def run_body(plan: RankPlan, bufs: list, transport, steered=None) -> None:
    """The plan's messages and copies: an in-place plan (MSCCL++) transposes the output buffer, given the input."""
    if plan.inplace:
        bufs[BUF_O][:] = bufs[BUF_I]
        bufs[BUF_I] = bufs[BUF_O]
    body = plan.body
    if isinstance(body, MscclPlan):  # MSCCL and MSCCL++ plans
        run_msccl(body, bufs, transport)
    elif isinstance(body, OnecclPlan):
        run_oneccl(body, bufs, transport)
    else:
        run_path_steps(body, bufs, transport, steered)


def run_msccl(plan: MscclPlan, bufs: list, transport) -> None:
    """Event loop over thread blocks (MSCCL semantics, docs/runtime.md).

    A thread block runs its steps in order; a step starts when its dependency
    (``depid``, ``deps``) has completed.  ``s`` posts an Isend and completes
    at once (a push into the connection FIFO); ``r`` completes when its data
    has arrived; ``rcs`` then also posts the Isend onward; ``cpy`` and ``nop``
    complete at once.  Receives into chunks written only once are posted
    upfront (in step order, so each connection stays FIFO); a receive into a
    reused scratch slot is posted when reached, once no in-flight send still
    reads the slot.  When nothing can start, wait for the next receive whose
    arrival enables work (or for all the rest at once when none does: every
    wake-up costs a trip through Python, which oversubscribed ranks feel).
    """
    tbs = plan.tbs
    nsteps = [len(tb.steps) for tb in tbs]
    pc = [0] * len(tbs)  # next step of each thread block = steps it has completed
    recvs: dict = {}     # (tb, step) -> its Irecv request, or None once the data has arrived
    sends: list = []     # (request, buf, lo, hi) of every Isend posted

    def post_recv(t, j):
        st = tbs[t].steps[j]
        db, do, cnt = st.dstbuf, st.dstoff, st.cnt
        peer, tag = (st.peer, st.tag) if st.peer >= 0 else (tbs[t].recv, tbs[t].tag)
        recvs[(t, j)] = transport.irecv(bufs[db][do:do + cnt], peer, tag)

    def post_send(t, b, lo, cnt, peer, tag):
        if peer < 0:
            peer, tag = tbs[t].send, tbs[t].tag
        sends.append((transport.isend(bufs[b][lo:lo + cnt], peer, tag), b, lo, lo + cnt))

    for t, tb in enumerate(tbs):
        for j, st in enumerate(tb.steps):
            if st.op == RECV or st.op == RCS:
                if st.hazard:
                    break
                post_recv(t, j)
    remaining = sum(nsteps)
    while remaining:
        progressed = blocked_on_send = False
        for t, tb in enumerate(tbs):
            while pc[t] < nsteps[t]:
                j = pc[t]
                op, sb, so, db, do, cnt, depid, deps, hazard, _, peer, tag = tb.steps[j]
                if depid >= 0 and pc[depid] <= deps:
                    break
                if hazard and (t, j) not in recvs and _send_reads(transport, sends, db, do, do + cnt):
                    blocked_on_send = True
                    break
                if op == RECV or op == RCS:
                    if (t, j) not in recvs:
                        post_recv(t, j)
                    if recvs[(t, j)] is not None:
                        break
                    del recvs[(t, j)]
                    if op == RCS:
                        post_send(t, db, do, cnt, peer, tag)
                elif op == SEND:
                    post_send(t, sb, so, cnt, peer, tag)
                elif op == CPY:
                    bufs[db][do:do + cnt] = bufs[sb][so:so + cnt]
                pc[t] += 1
                remaining -= 1
                progressed = True
        if progressed or not remaining:
            continue
        pending = [k for k, r in recvs.items() if r is not None]
        if not pending and not blocked_on_send:
            stuck = [f"tb {t} step {pc[t]}" for t in range(len(tbs)) if pc[t] < nsteps[t]]
            raise A2AError(f"rank {transport.rank}: the schedule deadlocks locally (waiting: {', '.join(stuck[:5])})")
        waking = [k for k in pending if tbs[k[0]].steps[k[1]].wake]
        if blocked_on_send:  # a reused slot waits for a send reading it: any completion may unblock
            waking += [None] * len(sends)
        if waking:
            reqs = [recvs[k] for k in waking if k] + [s[0] for s in sends] * blocked_on_send
            for i in transport.waitsome(reqs):
                if waking[i]:
                    recvs[waking[i]] = None
        else:
            transport.waitall([recvs[k] for k in pending])
            recvs.update(dict.fromkeys(pending))
    transport.waitall([s[0] for s in sends])


def run_path_steps(plan: PathPlan, bufs: list, transport, steered=None) -> None:
    """A path plan's time steps in order, a barrier between them (every rank finished the previous step);
    each step over the steered connections (MPI), or the transport (:func:`run_paths`)."""
    for t, step in enumerate(plan.steps()):
        if t:
            transport.barrier()
        if steered is not None:
            steered.run(step, bufs)
        else:
            run_paths(step, bufs, transport)


def _send_reads(transport, sends: list, buf: int, lo: int, hi: int) -> bool:
    """Does a send still in flight read chunks ``buf[lo:hi]``?"""
    return any(b == buf and s_lo < hi and lo < s_hi and not transport.test(req) for req, b, s_lo, s_hi in sends)


def run_oneccl(plan: OnecclPlan, bufs: list, transport) -> None:
    """Per step: local copies, then every receive and send posted at once, wait-all at the sync."""
    for copies, sends, recvs in plan.steps:
        for sb, so, db, do, cnt in copies:
            bufs[db][do:do + cnt] = bufs[sb][so:so + cnt]
        transport.waitall(transport.start([_message(bufs, m) for m in sends], [_message(bufs, m) for m in recvs]))


def run_paths(plan: PathPlan, bufs: list, transport) -> None:
    """Post every receive and every origin send; forward relayed runs as they arrive."""
    reqs = transport.start([_message(bufs, m) for m in plan.sends], [_message(bufs, f.recv) for f in plan.recvs])
    rreqs, sreqs = reqs[:len(plan.recvs)], reqs[len(plan.recvs):]
    relays = [i for i, f in enumerate(plan.recvs) if f.send is not None]
    while relays:  # wake up for relayed runs only; final receives are waited for all at once
        arrived = set(transport.waitsome([rreqs[i] for i in relays]))
        for j in arrived:
            m = plan.recvs[relays[j]].send
            sreqs.append(transport.isend(*_message(bufs, m)))
        relays = [i for j, i in enumerate(relays) if j not in arrived]
    transport.waitall(rreqs)
    transport.waitall(sreqs)


def _message(bufs: list, m) -> tuple:
    """``(buffer slice, peer, tag)`` of a :class:`~runtimes.mpi.plan.Message`."""
    return bufs[m.buf][m.off:m.off + m.cnt], m.peer, m.tag


# ------------------------------------------------------------------ all-to-allv


def check_counts(counts: np.ndarray, recv_counts: np.ndarray, layout: np.ndarray | None) -> None:
    """The same on every rank (every rank holds both tables): matched counts, chunks for every sent byte.

    ``counts[s, d]``: bytes rank ``s`` sends ``d``; ``recv_counts[d, s]``: bytes ``d`` expects from ``s``.
    """
    expect = recv_counts.T                           # expect[s, d]: what d receives from s
    bad = np.argwhere(counts != expect)
    if len(bad):
        s, d = map(int, bad[0])
        raise A2AError(f"rank {s} sends rank {d} {counts[s, d]} bytes but rank {d} expects {expect[s, d]}")
    if layout is not None:
        off = ~np.eye(len(counts), dtype=bool)
        bad = np.argwhere(off & (counts > 0) & (layout == 0))
        if len(bad):
            s, d = map(int, bad[0])
            raise A2AError(f"the schedule has no chunks from rank {s} to rank {d} (its demand is 0 there) but "
                           f"{counts[s, d]} bytes are to go; compile it for a demand with that pair")


def run_alltoallv(plan: RankPlan, layout: np.ndarray | None, counts: np.ndarray, send, sd: np.ndarray, recv,
                  rd: np.ndarray, transport, steered=None) -> None:
    """One all-to-allv call of ``plan``: ``counts[s, d]`` bytes from host ``s`` to host ``d`` (checked by
    :func:`check_counts`), block ``d`` at byte ``sd[d]`` of the 1-D byte buffer ``send``, block ``s`` at
    ``rd[s]`` of ``recv`` (indexed by host).

    The diagonal is copied locally.  An MPI path plan moves each chunk ``k`` of a pair of ``c`` bytes as bytes
    ``[⌊k·c/C⌋, ⌊(k+1)·c/C⌋)`` straight between the callers' buffers (:func:`byte_plan`); a link program
    (MSCCL, MSCCL++, oneCCL-style; ``layout[s, d]`` chunks per pair) runs on staging buffers whose chunks are
    the largest ``⌈c/T⌉`` bytes of the call, the rest padding.
    """
    n, me = plan.nranks, plan.rank
    recv[rd[me]:rd[me] + counts[me, me]] = send[sd[me]:sd[me] + counts[me, me]]
    if isinstance(plan.body, PathPlan):
        body, scratch = byte_plan(plan.body, counts, plan.chunks_per_shard, sd, rd)
        run_path_steps(body, [send, recv, transport.buffer("s", scratch)], transport, steered)
        return
    T = layout
    pos = T > 0
    cb = int(max(1, (-(-counts[pos] // T[pos])).max(initial=1)))   # chunk bytes: the largest ceil(c/T)
    in_off, out_off = (np.cumsum(T, axis=1) - T) * cb, (np.cumsum(T, axis=0) - T) * cb
    i = transport.buffer("i", int(T[me].sum()), cb)
    o = transport.buffer("o", int(T[:, me].sum()), cb)
    flat_i, flat_o = i.reshape(-1), o.reshape(-1)
    for d in range(n):
        c = int(counts[me, d])
        if d != me and c:
            flat_i[int(in_off[me, d]):int(in_off[me, d]) + c] = send[int(sd[d]):int(sd[d]) + c]
    run_body(plan, [i, o, transport.buffer("s", plan.scratch_chunks, cb)], transport)
    for s in range(n):
        c = int(counts[s, me])
        if s != me and c:
            recv[int(rd[s]):int(rd[s]) + c] = flat_o[int(out_off[s, me]):int(out_off[s, me]) + c]


def byte_plan(plan: PathPlan, counts: np.ndarray, C: int, sd: np.ndarray, rd: np.ndarray):
    """The path plan with chunk runs turned into byte ranges of this call; returns it and the scratch bytes.

    Chunk ``k`` of a pair of ``c`` bytes is ``[⌊k·c/C⌋, ⌊(k+1)·c/C⌋)``; a relay's scratch runs are
    laid out one after another in plan order, as their chunk slots were.
    """
    def span(m):
        s, d, k = m.shard
        c = int(counts[s, d])
        lo, hi = k * c // C, (k + m.cnt) * c // C
        return lo, hi - lo

    scratch_at: dict[int, int] = {}
    top = 0
    for f in plan.recvs:
        if f.recv.buf == BUF_S:
            scratch_at[f.recv.off] = top
            top += span(f.recv)[1]

    def place(m):
        lo, nbytes = span(m)
        s, d, _ = m.shard
        off = {BUF_I: sd[d] + lo, BUF_O: rd[s] + lo}.get(m.buf) if m.buf != BUF_S else scratch_at[m.off]
        return replace(m, off=int(off), cnt=nbytes)

    sends = tuple(place(m) for m in plan.sends)
    recvs = tuple(Forward(place(f.recv), None if f.send is None else place(f.send)) for f in plan.recvs)
    return PathPlan(sends, recvs, plan.send_steps, plan.recv_steps, plan.nsteps), top
