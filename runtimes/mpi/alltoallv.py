"""``Alltoallv``: one compiled schedule serving every all-to-allv batch, like ``comm.Alltoallv``.

A mixture-of-experts layer exchanges a different demand matrix every step; the
schedule is compiled once (for a typical matrix, or the uniform one) and every
call splits the byte counts that arrive by the schedule's structure:

* **MPI path schedules** (per-pair route weights): chunk ``k`` of pair
  ``(s, d)`` is bytes ``[⌊k·c/C⌋, ⌊(k+1)·c/C⌋)`` of the pair's ``c`` bytes, so
  each route carries its share of the pair exactly, whatever ``c`` is.  Every
  call's plan is the static plan (:func:`~runtimes.mpi.plan.plan_paths`) with
  chunk ranges turned into byte ranges; relays size their scratch from the
  counts, which every rank learns by one ``Allgather``.
* **Link programs** (MSCCL, oneCCL-style): fixed-size chunks, ``T[s][d]`` per
  pair (the file's all-to-allv layout, the demand's MSCCL layout, or ``C``
  everywhere for a plain all-to-all): a pair's bytes fill its chunks, whose size
  is the largest ``⌈c/T⌉`` over the pairs of this call (the rest is padding),
  and the program runs on staging buffers.

The diagonal (a rank's own block) is copied locally.  Counts and displacements
follow mpi4py: in elements of the buffers' dtype, displacements ``None`` for
packed blocks.  Errors (counts that disagree between ranks, bytes for a pair the
schedule has no chunks for) raise :class:`A2AError` on every rank.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from a2a_compiler.errors import A2AError

from .executor import Alltoall, _byte_view, run_msccl, run_oneccl, run_path_steps
from .plan import BUF_I, BUF_O, BUF_S, Forward, MscclPlan, PathPlan


def layout_counts(program, nranks: int, demand=None) -> np.ndarray | None:
    """Chunks per pair of a link program's buffers (``None`` for an MPI path program).

    MSCCL XML and MSCCL++ plans record no layout: a file that moves data as a plain all-to-all is one; any
    other is taken in ``demand``'s (default: the one its record holds) all-to-allv layout and must move data right there
    (:func:`a2a_compiler.verify.simulate.simulate_msccl`, :func:`~a2a_compiler.verify.simulate.simulate_mscclpp`).
    An MSCCL++ plan needs separate send and receive buffers.
    """
    from a2a_compiler.formats import MpiPathProgram, MscclppProgram, MscclProgram
    from a2a_compiler.verify.simulate import simulate_msccl, simulate_mscclpp

    if isinstance(program, MpiPathProgram):
        return None
    if isinstance(program, (MscclProgram, MscclppProgram)):
        if isinstance(program, MscclppProgram):
            if program.inplace:
                raise A2AError(f"MSCCL++ plan {program.name!r} is in place; an all-to-allv (--demand) needs separate "
                               f"send and receive buffers: run it without --demand")
            what, c = "MSCCL++ plan", program.chunks_per_shard

            def moves(counts=None):   # one launch: where the data goes ('a2a verify' checks the second)
                return simulate_mscclpp(program, launches=1, counts=counts).errors
        else:
            what, c = "MSCCL algo", program.nchunksperloop // program.ngpus

            def moves(counts=None):
                return simulate_msccl(program, counts).errors
        if demand is None and program.record is not None:
            demand = program.record.demand_volumes(program.name)   # the all-to-allv it was compiled for
        if demand is None or not moves():
            return np.full((nranks, nranks), c, np.int64)
        counts = demand.msccl_counts(c, "MSCCL++" if isinstance(program, MscclppProgram) else "MSCCL")
        wrong = moves(counts)
        if wrong:
            raise A2AError(f"{what} {program.name!r} moves data neither as an all-to-all nor as the all-to-allv "
                           f"of {demand.source}: {wrong[0]}")
        return counts
    return program.counts()


class Alltoallv(Alltoall):
    """A compiled schedule bound to a communicator, callable like ``comm.Alltoallv`` (mpi4py conventions).

    Constructed as :class:`~runtimes.mpi.executor.Alltoall` (the schedule, route
    mode, steering, rank map; collective), plus ``demand`` (a
    :class:`~a2a_compiler.demand.Demand`), which gives an MSCCL all-to-allv file
    its buffer layout (MSCCL XML records none).  The counts and buffers keep
    ``comm``'s rank order, the plans follow the hosts.

    ``a2a(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls)``: block
    ``d`` of ``sendbuf`` (``sendcounts[d]`` elements at ``sdispls[d]``) goes to
    rank ``d``, block ``s`` of ``recvbuf`` comes from rank ``s``; displacements
    ``None`` mean packed blocks.  Both buffers are contiguous arrays of one dtype.

    >>> a2av = Alltoallv("moe.mpi.xml", MPI.COMM_WORLD)              # doctest: +SKIP
    >>> a2av(send, scounts, None, recv, rcounts, None)                 # doctest: +SKIP
    """

    def __init__(self, schedule, comm=None, *, route_mode: str = "relay", steering: dict | None = None,
                 demand=None, rank_map=None, topology=None):
        self._demand = demand
        super().__init__(schedule, comm, route_mode=route_mode, steering=steering, rank_map=rank_map,
                         topology=topology)

    def _program_layout(self, program, nranks: int):
        """The chunks per pair of a link program's buffers (:func:`layout_counts`)."""
        return layout_counts(program, nranks, self._demand)

    def __call__(self, sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls) -> None:
        p, comm = self.plan, self.comm
        n, me = p.nranks, comm.rank
        try:
            sbytes, sc, sd, rbytes, rc, rd = _arguments(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, n)
            err = None
            sc, sd, rc, rd = (_to_hosts(a, self.nodes) for a in (sc, sd, rc, rd))   # blocks by host, not by rank
        except A2AError as exc:                      # said on every rank below, never left hanging
            err, sc, rc = str(exc), np.zeros(n, np.int64), np.zeros(n, np.int64)
        table = np.empty((n, 2 * n + 1), np.int64)
        comm.Allgather(np.concatenate([sc, rc, [err is not None]]), table)
        if table[:, -1].any():
            raise A2AError(err or f"rank {int(np.flatnonzero(table[:, -1])[0])}: invalid all-to-allv arguments")
        counts = table[:, :n]                        # counts[s, d]: bytes s sends d
        _check(counts, table[:, n:2 * n], self.layout)
        rbytes[rd[me]:rd[me] + counts[me, me]] = sbytes[sd[me]:sd[me] + counts[me, me]]
        body = p.body
        if isinstance(body, PathPlan):
            plan, scratch = _byte_plan(body, counts, p.chunks_per_shard, sd, rd)
            run_path_steps(plan, [sbytes, rbytes, np.empty(scratch, np.uint8)], comm, self.steered)
            return
        T = self.layout
        pos = T > 0
        cb = int(max(1, (-(-counts[pos] // T[pos])).max(initial=1)))   # chunk bytes: the largest ceil(c/T)
        in_off, out_off = np.cumsum(T, axis=1) - T, np.cumsum(T, axis=0) - T
        i = np.zeros((int(T[me].sum()), cb), np.uint8)
        o = np.empty((int(T[:, me].sum()), cb), np.uint8)
        flat_i, flat_o = i.reshape(-1), o.reshape(-1)
        for d in range(n):
            if d != me and counts[me, d]:
                flat_i[in_off[me, d] * cb:in_off[me, d] * cb + counts[me, d]] = sbytes[sd[d]:sd[d] + counts[me, d]]
        bufs = [i, o, np.empty((p.scratch_chunks, cb), np.uint8)]
        (run_msccl if isinstance(body, MscclPlan) else run_oneccl)(body, bufs, comm)
        for s in range(n):
            if s != me and counts[s, me]:
                rbytes[rd[s]:rd[s] + counts[s, me]] = flat_o[out_off[s, me] * cb:out_off[s, me] * cb + counts[s, me]]


def _to_hosts(per_rank: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """A per-rank array of ``comm``'s order reordered by the host each rank plays."""
    out = np.empty_like(per_rank)
    out[nodes] = per_rank
    return out


def _arguments(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, n: int):
    """Byte views of the buffers and byte counts and displacements of the blocks, checked."""
    send, recv = np.asarray(sendbuf), np.asarray(recvbuf)
    if send.dtype != recv.dtype:
        raise A2AError(f"sendbuf holds {send.dtype} and recvbuf {recv.dtype}; use one dtype")
    size = send.dtype.itemsize
    sc, sd = _blocks(sendcounts, sdispls, n, send.size, "send")
    rc, rd = _blocks(recvcounts, rdispls, n, recv.size, "receive")
    sbytes, rbytes = _byte_view(send, "sendbuf", False), _byte_view(recv, "recvbuf", True)
    if np.may_share_memory(sbytes, rbytes):
        raise A2AError("sendbuf and recvbuf overlap; in-place all-to-allv is not supported")
    return sbytes, sc * size, sd * size, rbytes, rc * size, rd * size


def _blocks(counts, displs, n: int, size: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    """Counts and displacements (packed when ``displs`` is None) as int64 arrays, checked against the buffer."""
    c = np.asarray(counts, dtype=np.int64).reshape(-1)
    if len(c) != n or np.any(c < 0):
        raise A2AError(f"{what} counts must be {n} integers >= 0, got {len(c)}")
    d = np.concatenate([[0], np.cumsum(c)[:-1]]) if displs is None else np.asarray(displs, dtype=np.int64).reshape(-1)
    if len(d) != n or np.any(d < 0) or np.any(d + c > size):
        raise A2AError(f"{what} blocks (counts + displacements) fall outside the {size}-element buffer")
    return c, d


def _check(counts: np.ndarray, recv_counts: np.ndarray, layout: np.ndarray | None) -> None:
    """The same on every rank (every rank holds both tables): matched counts, chunks for every sent byte."""
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


def _byte_plan(plan: PathPlan, counts: np.ndarray, C: int, sd: np.ndarray, rd: np.ndarray):
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


__all__ = ["Alltoallv", "layout_counts"]
