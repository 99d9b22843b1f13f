"""Execute a :class:`~runtimes.mpi.plan.RankPlan` with nonblocking mpi4py point-to-point calls.

Messages are raw bytes sent through the buffer protocol straight from numpy
views of the user's buffers (no pickling, no packing): chunk ``j`` of a buffer
is row ``j`` of a ``(chunks, chunk_bytes)`` uint8 view, so a message of ``cnt``
consecutive chunks is one contiguous slice.
"""

from __future__ import annotations

import os
import time

import numpy as np
from mpi4py import MPI

from a2a_compiler.errors import A2AError

from .plan import (BUF_I, BUF_O, CPY, RCS, RECV, SEND, MscclPlan, OnecclPlan, PathPlan, RankPlan,
                   build_plans, load_schedule)
from .rankmap import place_ranks
from .steered import SteeredRoutes


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
        p = self.plan
        if p.inplace:  # the plan transposes its input buffer in place: give it the output, holding the input
            bufs[BUF_O][:] = bufs[BUF_I]
            bufs[BUF_I] = bufs[BUF_O]
        if p.self_copy:
            me = slice(p.rank * p.chunks_per_shard, (p.rank + 1) * p.chunks_per_shard)
            bufs[BUF_O][me] = bufs[BUF_I][me]
        body = p.body
        if isinstance(body, MscclPlan):  # MSCCL and MSCCL++ plans
            run_msccl(body, bufs, self.comm)
        elif isinstance(body, OnecclPlan):
            run_oneccl(body, bufs, self.comm)
        else:
            run_path_steps(body, bufs, self.comm, self.steered)


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


def run_msccl(plan: MscclPlan, bufs: list[np.ndarray], comm) -> None:
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
        recvs[(t, j)] = comm.Irecv(bufs[db][do:do + cnt], peer, tag)

    def post_send(t, b, lo, cnt, peer, tag):
        if peer < 0:
            peer, tag = tbs[t].send, tbs[t].tag
        sends.append((comm.Isend(bufs[b][lo:lo + cnt], peer, tag), b, lo, lo + cnt))

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
                if hazard and (t, j) not in recvs and _send_reads(sends, db, do, do + cnt):
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
            raise A2AError(f"rank {comm.rank}: the schedule deadlocks locally (waiting: {', '.join(stuck[:5])})")
        waking = [k for k in pending if tbs[k[0]].steps[k[1]].wake]
        if blocked_on_send:  # a reused slot waits for a send reading it: any completion may unblock
            waking += [None] * len(sends)
        if waking:
            reqs = [recvs[k] for k in waking if k] + [s[0] for s in sends] * blocked_on_send
            for i in _waitsome(reqs):
                if waking[i]:
                    recvs[waking[i]] = None
        else:
            _waitall([recvs[k] for k in pending])
            recvs.update(dict.fromkeys(pending))
    _waitall([s[0] for s in sends])


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


def run_path_steps(plan: PathPlan, bufs: list[np.ndarray], comm, steered=None) -> None:
    """A path plan's time steps in order, a barrier between them (every rank finished the previous step);
    each step over the steered connections, or with MPI (:func:`run_paths`)."""
    for t, step in enumerate(plan.steps()):
        if t:
            _barrier(comm)
        if steered is not None:
            steered.run(step, bufs)
        else:
            run_paths(step, bufs, comm)


def _barrier(comm) -> None:
    """``MPI_Barrier``, not spinning meanwhile (as :func:`_waitall`)."""
    _waitall([comm.Ibarrier()])


def _send_reads(sends: list, buf: int, lo: int, hi: int) -> bool:
    """Does an Isend still in flight read chunks ``buf[lo:hi]``?"""
    return any(b == buf and s_lo < hi and lo < s_hi and not req.Test() for req, b, s_lo, s_hi in sends)


def run_oneccl(plan: OnecclPlan, bufs: list[np.ndarray], comm) -> None:
    """Per step: local copies, then every receive and send posted at once, wait-all at the sync."""
    for copies, sends, recvs in plan.steps:
        for sb, so, db, do, cnt in copies:
            bufs[db][do:do + cnt] = bufs[sb][so:so + cnt]
        reqs = [comm.Irecv(bufs[m.buf][m.off:m.off + m.cnt], m.peer, m.tag) for m in recvs]
        reqs += [comm.Isend(bufs[m.buf][m.off:m.off + m.cnt], m.peer, m.tag) for m in sends]
        _waitall(reqs)


def run_paths(plan: PathPlan, bufs: list[np.ndarray], comm) -> None:
    """Post every receive and every origin send; forward relayed runs as they arrive."""
    rreqs = [comm.Irecv(bufs[f.recv.buf][f.recv.off:f.recv.off + f.recv.cnt], f.recv.peer, f.recv.tag)
             for f in plan.recvs]
    sreqs = [comm.Isend(bufs[m.buf][m.off:m.off + m.cnt], m.peer, m.tag) for m in plan.sends]
    relays = [i for i, f in enumerate(plan.recvs) if f.send is not None]
    while relays:  # wake up for relayed runs only; final receives are waited for all at once
        arrived = set(_waitsome([rreqs[i] for i in relays]))
        for j in arrived:
            m = plan.recvs[relays[j]].send
            sreqs.append(comm.Isend(bufs[m.buf][m.off:m.off + m.cnt], m.peer, m.tag))
        relays = [i for j, i in enumerate(relays) if j not in arrived]
    _waitall(rreqs)
    _waitall(sreqs)
