"""Execute a :class:`~runtimes.mpi.plan.RankPlan` with nonblocking mpi4py point-to-point calls.

Messages are raw bytes sent through the buffer protocol straight from numpy
views of the user's buffers (no pickling, no packing): chunk ``j`` of a buffer
is row ``j`` of a ``(chunks, chunk_bytes)`` uint8 view, so a message of ``cnt``
consecutive chunks is one contiguous slice.  The steps themselves are the
executor core's (:mod:`runtimes.mpi.steps`); :class:`MpiTransport` moves their bytes.
"""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

from a2a_compiler.errors import A2AError

from .plan import PathPlan, RankPlan, build_plans, load_schedule
from .rankmap import place_ranks
from .steered import SteeredRoutes
from .steps import run_plan


def _attempt(fn, prefix: str = ""):
    """``(result, error message, bug)`` of ``fn()``; a bug is kept to be re-raised once the ranks agree."""
    try:
        return fn(), None, None
    except A2AError as exc:
        return None, str(exc), None
    except Exception as exc:  # noqa: BLE001 - re-raised by the caller after the ranks agree
        return None, f"{prefix}internal error: {type(exc).__name__}: {exc}", exc


def agree(comm, fn):
    """Run ``fn()`` on every rank and make its failure collective.

    If any rank raises, every rank raises :class:`A2AError` with the lowest
    failing rank's message (prefixed by that rank when the ranks disagree), so
    no rank is left waiting for the others.  A non-:class:`A2AError` exception
    (a bug) is re-raised with its traceback on the rank where it happened.
    """
    result, err, bug = _attempt(fn)
    errors = comm.allgather(err)
    if bug is not None:
        raise bug
    failed = [(r, e) for r, e in enumerate(errors) if e is not None]
    if failed:
        if len(failed) == comm.size and len({e for _, e in failed}) == 1:
            raise A2AError(failed[0][1])
        raise A2AError(f"rank {failed[0][0]}: {failed[0][1]}")
    return result


def on_root(comm, fn, root: int = 0):
    """Run ``fn()`` on ``root`` only; its failure raises :class:`A2AError` on every rank.

    The other ranks wait in a nonblocking barrier polled with short sleeps,
    leaving the CPU to ``root`` (which matters when ranks oversubscribe cores).
    Returns ``fn()``'s result on ``root`` and ``None`` elsewhere.
    """
    result, err, bug = _attempt(fn, f"rank {root}: ") if comm.rank == root else (None, None, None)
    req = comm.Ibarrier()
    while not req.Test():
        time.sleep(0.002)
    err = comm.bcast(err, root)
    if bug is not None:
        raise bug
    if err is not None:
        raise A2AError(err)
    return result


class Alltoall:
    """A compiled all-to-all schedule bound to a communicator, callable like ``comm.Alltoall``.

    ``schedule`` is a file path (MSCCL XML, oneCCL-style XML or MPI path
    schedule; rank 0 reads it) or an already loaded program
    (:mod:`a2a_compiler.formats`; rank 0's is used).  Construction is
    collective: rank 0 builds every rank's plan once (checking it fits the
    communicator) and scatters them; the communicator is duplicated (so
    schedule traffic never mixes with yours).  Any failure raises
    :class:`A2AError` on every rank.

    ``rank_map`` says which topology host each rank plays: ``None`` (rank
    ``r`` plays host ``r``), a rank map file or a
    :class:`~runtimes.mpi.rankmap.RankMap` (docs/formats.md), checked
    against every rank's ``MPI_Get_processor_name``; ``topology`` (a
    :class:`~a2a_compiler.topology.Topology` or spec) lets a map file name
    hosts by their topology names.  The schedule's rank
    ``i`` is then executed by the process placing host ``i`` (``a2a.node``;
    ``a2a.nodes[r]`` for every rank ``r``), while the buffers keep
    ``comm``'s rank order, exactly as ``comm.Alltoall``'s do: a map other
    than the identity costs one copy in and one out (as padding does).

    ``a2a(sendbuf, recvbuf)`` transposes like ``MPI_Alltoall``: both are
    contiguous arrays of ``N*m`` bytes (any dtype), block ``d`` of ``sendbuf``
    goes to rank ``d``, block ``s`` of ``recvbuf`` comes from rank ``s``.  All
    ranks must pass the same size.  When the schedule's ``C`` chunks per shard
    do not divide ``m``, shards are padded to ``C*ceil(m/C)`` bytes in internal
    buffers (one extra copy in and out); otherwise no copy is made unless a
    rank map reorders the ranks.

    ``steering`` (MPI path schedules, ``route_mode="direct"``) maps every
    route ``(src, dst, route_id)`` to ``(src_ip, dst_ip)``: each route then
    travels its own TCP connection between those addresses
    (:class:`~runtimes.mpi.steered.SteeredRoutes`), the equivalent of the
    paper's per-route UDP source ports (§4).

    >>> a2a = Alltoall("torus-3x3x3.xml", MPI.COMM_WORLD)   # doctest: +SKIP
    >>> a2a(send, recv)                                       # doctest: +SKIP
    """

    def __init__(self, schedule, comm=None, *, route_mode: str = "relay", steering: dict | None = None,
                 rank_map=None, topology=None):
        comm = MPI.COMM_WORLD if comm is None else comm
        names = None if rank_map is None else comm.gather(MPI.Get_processor_name())

        def setup():
            program = load_schedule(schedule)[1] if isinstance(schedule, (str, os.PathLike)) else schedule
            layout = self._program_layout(program, comm.size)
            plans = build_plans(program, comm.size, route_mode)
            nodes = place_ranks(rank_map, names, comm.size, topology)
            if steering is None:
                mine = [None] * len(plans)
            elif not isinstance(plans[0].body, PathPlan) or route_mode != "direct":
                raise A2AError("steered routes need an MPI path schedule run with route_mode='direct'")
            else:
                routes = {(s.src, s.dst, s.route_id) for s in program.sends}
                if routes != set(steering):
                    missing = sorted(routes - set(steering)) or sorted(set(steering) - routes)
                    raise A2AError(f"the steering addresses do not match the schedule's routes (e.g. {missing[0]})")
                mine = [{} for _ in plans]
                for (s, d, k), addrs in steering.items():
                    mine[s][(s, d, k)] = mine[d][(s, d, k)] = addrs
            return [(plans[n], mine[n]) for n in nodes], (nodes, layout)  # rank r runs the plan of its host

        per_rank, shared = on_root(comm, setup) or (None, None)
        nodes, self.layout = comm.bcast(shared)
        self.plan: RankPlan
        self.plan, addresses = comm.scatter(per_rank)
        #: ``nodes[r]``: the topology host (schedule rank) MPI rank ``r`` of ``comm`` plays.
        self.nodes = nodes
        self.node = int(nodes[comm.rank])
        # The schedule's communicator: its rank i is the process playing host i.
        self.comm = comm.Split(0, self.node)
        self.transport = MpiTransport(self.comm)
        self._order = None if (nodes == np.arange(comm.size)).all() else nodes
        self.steered = None if addresses is None else agree(self.comm, lambda: SteeredRoutes(self.comm, addresses))
        self._layouts: dict[int, tuple] = {}

    def _program_layout(self, program, nranks: int):
        """What every rank needs to know of the program's buffers beyond its plan (``self.layout``): nothing
        for the all-to-all, whose buffers are ``N`` equal shards; an all-to-allv file is refused."""
        if getattr(program, "chunk_counts", None) is not None:
            raise A2AError("this oneCCL-style file is an all-to-allv (its buffers follow chunks= per pair); "
                           "run it with runtimes.mpi.Alltoallv or 'a2a run FILE --demand D.csv'")
        return None

    @property
    def format(self) -> str:
        return self.plan.format

    def free(self) -> None:
        """Release the duplicated communicator and any steered connections (collective)."""
        if self.steered is not None:
            self.steered.close()
        if self.comm != MPI.COMM_NULL:
            self.comm.Free()

    def chunk_bytes(self, m: int) -> int:
        """Bytes per chunk for a per-peer shard of ``m`` bytes (``ceil(m / C)``)."""
        return -(-m // self.plan.chunks_per_shard)

    def _layout(self, m: int):
        """Cached per shard size: chunk bytes, staging buffers (or None), scratch.

        Shards are staged (copied in and out of internal buffers in host order)
        when ``C`` chunks do not divide ``m`` (padding to ``C*ceil(m/C)``) or
        when ranks play other hosts than their own number (rank map).
        """
        lay = self._layouts.get(m)
        if lay is None:
            p = self.plan
            c = self.chunk_bytes(m)
            nchunks = p.nranks * p.chunks_per_shard
            stage = None
            if c * p.chunks_per_shard != m or self._order is not None:
                stage = (np.zeros((nchunks, c), np.uint8), np.zeros((nchunks, c), np.uint8))
            lay = (c, stage, np.empty((p.scratch_chunks, c), np.uint8))
            self._layouts = {m: lay}  # keep only the latest size's buffers
        return lay

    def __call__(self, sendbuf, recvbuf) -> None:
        p = self.plan
        send = _byte_view(sendbuf, "sendbuf", writable=False)
        recv = _byte_view(recvbuf, "recvbuf", writable=True)
        if send.size != recv.size:
            raise A2AError(f"sendbuf has {send.size} bytes but recvbuf has {recv.size}")
        if np.may_share_memory(send, recv):
            raise A2AError("sendbuf and recvbuf overlap; in-place all-to-all is not supported")
        if send.size == 0 or send.size % p.nranks:
            raise A2AError(f"buffers must hold {p.nranks} equal nonempty shards; got {send.size} bytes")
        m = send.size // p.nranks
        c, stage, scratch = self._layout(m)
        if stage is None:
            bufs = [send.reshape(-1, c), recv.reshape(-1, c), scratch]
        else:
            _stage_in(send.reshape(p.nranks, m), stage[0], self._order)
            bufs = [stage[0], stage[1], scratch]
        self._execute(bufs)
        if stage is not None:
            _stage_out(stage[1], recv.reshape(p.nranks, m), self._order)

    def _execute(self, bufs: list[np.ndarray]) -> None:
        """Run this rank's plan on ``[input, output, scratch]`` chunk buffers in host order."""
        run_plan(self.plan, bufs, self.transport, self.steered)


def _stage_in(shards: np.ndarray, stage: np.ndarray, order: np.ndarray | None) -> None:
    """Copy ``shards`` (row ``r``: for MPI rank ``r``) into ``stage`` chunks in host order, padded."""
    n, m = shards.shape
    rows = stage.reshape(n, -1)
    if order is None:
        rows[:, :m] = shards
    else:
        rows[order, :m] = shards  # the shard for rank r goes to the host it plays


def _stage_out(stage: np.ndarray, shards: np.ndarray, order: np.ndarray | None) -> None:
    """Copy ``stage`` chunks (host order) into ``shards`` (row ``r``: from MPI rank ``r``)."""
    n, m = shards.shape
    rows = stage.reshape(n, -1)[:, :m]
    if order is None:
        shards[:] = rows
    else:
        np.take(rows, order, axis=0, out=shards, mode="clip")  # clip: no intermediate buffer


def _byte_view(buf, name: str, writable: bool) -> np.ndarray:
    arr = np.asarray(buf)
    if not arr.flags.c_contiguous:
        raise A2AError(f"{name} must be a C-contiguous array")
    if writable and not arr.flags.writeable:
        raise A2AError(f"{name} is read-only")
    return arr.reshape(-1).view(np.uint8)


# MPI's blocking waits spin on the CPU; when ranks oversubscribe cores the rank
# whose message we wait for may be the one we keep off the core (measured: a
# hypercube:3 MSCCL call on 8 ranks / 2 cores took 17-34 ms with Waitsome, 2-3 ms
# polling with sched_yield).  With a core to itself, sched_yield returns at once.
# Under MPIR_CVAR_ENABLE_HEAVY_YIELD=1 (set by the testbed, runtimes/testbed/launch.py)
# MPICH sleeps when a poll finds nothing, so its own waits do not spin: block in them,
# leaving the cores to the ranks that have work and to the kernel's forwarding.
WAITS_SLEEP = os.environ.get("MPIR_CVAR_ENABLE_HEAVY_YIELD") == "1"


def _waitsome(reqs: list) -> list[int]:
    """Indices of completed requests (at least one), not spinning while none is."""
    if WAITS_SLEEP:
        return MPI.Request.Waitsome(reqs)
    done = MPI.Request.Testsome(reqs)
    while not done:
        os.sched_yield()
        done = MPI.Request.Testsome(reqs)
    return done


def _waitall(reqs: list) -> None:
    """Complete every request, not spinning meanwhile."""
    if WAITS_SLEEP:
        MPI.Request.Waitall(reqs)
        return
    while not MPI.Request.Testall(reqs):
        os.sched_yield()


class MpiTransport:
    """The executor core's transport over an mpi4py communicator (:mod:`runtimes.mpi.steps`)."""

    def __init__(self, comm):
        self.comm, self.rank = comm, comm.rank
        self._buffers: dict = {}

    def isend(self, buf, peer: int, tag: int):
        return self.comm.Isend(buf, peer, tag)

    def irecv(self, buf, peer: int, tag: int):
        return self.comm.Irecv(buf, peer, tag)

    def start(self, sends: list, recvs: list) -> list:
        return [self.comm.Irecv(*m) for m in recvs] + [self.comm.Isend(*m) for m in sends]

    @staticmethod
    def test(req) -> bool:
        return req.Test()

    waitsome = staticmethod(_waitsome)
    waitall = staticmethod(_waitall)

    def barrier(self) -> None:
        """``MPI_Barrier``, not spinning meanwhile (as :func:`_waitall`)."""
        _waitall([self.comm.Ibarrier()])

    def buffer(self, key: str, *shape: int) -> np.ndarray:
        buf = self._buffers.get(key)
        if buf is None or buf.shape != shape:
            buf = self._buffers[key] = np.empty(shape, np.uint8)
        return buf
