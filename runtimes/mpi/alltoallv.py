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

import numpy as np

from a2a_compiler.errors import A2AError

from .executor import Alltoall, _byte_view
from .plan import layout_counts
from .steps import check_counts, run_alltoallv


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
        n = p.nranks
        try:
            sbytes, sc, sd, rbytes, rc, rd = _arguments(sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls, n)
            err = None
            sc, sd, rc, rd = (_to_hosts(a, self.nodes) for a in (sc, sd, rc, rd))   # blocks by host, not by rank
        except A2AError as exc:                      # said on every rank below, never left hanging
            err, sc, rc = str(exc), np.zeros(n, np.int64), np.zeros(n, np.int64)
        table = np.empty((n, 2 * n + 1), np.int64)
        comm.Allgather(np.concatenate([sc, rc, [err is not None]]), table)
        if table[:, -1].any():                       # every rank says what is wrong on the first rank wrong
            bad = int(np.flatnonzero(table[:, -1])[0])
            raise A2AError(f"rank {bad}: {comm.allgather(err)[bad]}")
        counts = table[:, :n]                        # counts[s, d]: bytes s sends d
        check_counts(counts, table[:, n:2 * n], self.layout)
        run_alltoallv(p, self.layout, counts, sbytes, sd, rbytes, rd, self.transport, self.steered)


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
    if len(c) != n:
        raise A2AError(f"{what} counts must be {n} integers >= 0, got {len(c)}")
    if np.any(c < 0):
        peer = int(np.flatnonzero(c < 0)[0])
        raise A2AError(f"{what} count for rank {peer} is {c[peer]}; counts must be >= 0")
    d = np.concatenate([[0], np.cumsum(c)[:-1]]) if displs is None else np.asarray(displs, dtype=np.int64).reshape(-1)
    if len(d) != n or np.any(d < 0) or np.any(d + c > size):
        raise A2AError(f"{what} blocks (counts + displacements) fall outside the {size}-element buffer")
    return c, d


__all__ = ["Alltoallv", "layout_counts"]
