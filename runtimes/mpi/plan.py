"""Per-rank execution plans for the three lowered formats (docs/formats.md, docs/runtime.md).

A plan is everything static about running one schedule on one rank: which
messages it posts, in which order, with which tags, from and into which chunk
ranges of the input (``i``), output (``o``) and scratch (``s``) buffers.  The
builders here make every rank's plan in one pass over the whole program,
without MPI, from the in-memory program (:mod:`a2a_compiler.formats`);
the executor (:mod:`runtimes.mpi.executor`) builds them on rank 0, scatters
them, and then only binds buffers and posts nonblocking operations.

The builders also check the properties a run relies on to neither crash nor
hang: the rank count, buffer ranges, and that the k-th send on every
connection matches the k-th receive with the same chunk count (Basu et al.
§4: sends and receives are asynchronous, matched per connection in order).
Anything wrong raises :class:`FormatError`.  This module imports no compiler
stage at load time, so ranks other than 0 start fast.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from a2a_compiler.errors import A2AError, FormatError

#: Buffer ids: input, output, scratch.
BUF_I, BUF_O, BUF_S = 0, 1, 2
BUFFERS = {"i": BUF_I, "o": BUF_O, "s": BUF_S}
#: MSCCL step opcodes.
NOP, SEND, RECV, RCS, CPY = range(5)
_OPCODES = {"nop": NOP, "s": SEND, "r": RECV, "rcs": RCS, "cpy": CPY}
#: Largest tag we use; MPI guarantees MPI_TAG_UB >= 32767.
TAG_LIMIT = 32768
ROUTE_MODES = ("relay", "direct")


@dataclass(frozen=True)
class Message:
    """One point-to-point message: ``cnt`` chunks at ``buf[off]``, to/from ``peer`` with ``tag``.

    ``shard`` (MPI path plans): ``(src, dst, k)``, the message carries chunks ``k .. k+cnt-1``
    of the shard ``src -> dst`` (what :class:`~runtimes.mpi.alltoallv.Alltoallv` sizes in bytes).
    """

    peer: int
    tag: int
    buf: int
    off: int
    cnt: int
    shard: tuple[int, int, int] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Forward:
    """A relayed message: receive ``recv`` into scratch, then send the same chunks as ``send``."""

    recv: Message
    send: Message | None


class StepPlan(NamedTuple):
    """One MSCCL step with buffer ids resolved (a tuple: the executor's inner loop unpacks it).

    ``hazard`` marks a step writing a chunk that is written more than once on
    this rank (a reused scratch slot): it must wait until no in-flight send
    still reads that chunk.  ``wake`` marks a receive whose arrival can let
    this rank post more work (a forward, a later non-receive step of its
    block, a step depending on it); the executor waits for those one by one
    and for the others (pure final receives) all at once.
    """

    op: int
    srcbuf: int
    srcoff: int
    dstbuf: int
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hazard: bool
    wake: bool
    peer: int = -1   # MSCCL++: this step's own peer and tag (-1: the thread block's)
    tag: int = -1


@dataclass(frozen=True)
class ThreadBlockPlan:
    """A thread block: sends to ``send``, receives from ``recv`` with MPI tag ``tag`` (its channel)."""

    send: int
    recv: int
    tag: int
    steps: tuple[StepPlan, ...]


@dataclass(frozen=True)
class MscclPlan:
    """One rank's thread blocks, in id order."""

    tbs: tuple[ThreadBlockPlan, ...]


class LocalCopy(NamedTuple):
    """``cnt`` chunks ``srcbuf[srcoff] -> dstbuf[dstoff]`` on this rank (buffer ids)."""

    srcbuf: int
    srcoff: int
    dstbuf: int
    dstoff: int
    cnt: int


class OnecclStepPlan(NamedTuple):
    """One oneCCL step: local copies, then sends and receives posted at once, then the sync."""

    copies: tuple[LocalCopy, ...]
    sends: tuple[Message, ...]
    recvs: tuple[Message, ...]


@dataclass(frozen=True)
class OnecclPlan:
    """One rank's steps, in order."""

    steps: tuple[OnecclStepPlan, ...]


@dataclass(frozen=True)
class PathPlan:
    """Sends posted at the start, and receives (relay hops forward on completion).

    A time-stepped file (``nsteps > 1``) gives each send and receive its step
    (``send_steps``, ``recv_steps``); :meth:`steps` splits the plan, and the
    executor runs the steps in order with a barrier between them.
    """

    sends: tuple[Message, ...]
    recvs: tuple[Forward, ...]
    send_steps: tuple[int, ...] = ()
    recv_steps: tuple[int, ...] = ()
    nsteps: int = 1

    def steps(self) -> list["PathPlan"]:
        """One single-step plan per time step, in order."""
        if self.nsteps == 1:
            return [self]
        return [PathPlan(tuple(m for m, s in zip(self.sends, self.send_steps) if s == t),
                         tuple(f for f, s in zip(self.recvs, self.recv_steps) if s == t)) for t in range(self.nsteps)]


@dataclass(frozen=True)
class RankPlan:
    """What one rank executes for one schedule, in chunk units.

    ``self_copy``: the program does not write this rank's own output shard, so
    the runtime copies it (docs/formats.md: the self shard is copied locally).
    """

    format: str
    name: str
    nranks: int
    rank: int
    chunks_per_shard: int
    scratch_chunks: int
    self_copy: bool
    body: MscclPlan | OnecclPlan | PathPlan
    route_mode: str | None = None
    record: object = None  # the file's a2a_compiler.formats.record.Record (fabric, MCF time), if any
    inplace: bool = False  # MSCCL++ in-place plans: the result replaces the input buffer


# ----------------------------------------------------------------- helpers


def _check_nranks(nranks: int, size: int) -> None:
    if nranks != size:
        raise A2AError(
            f"the schedule is for {nranks} ranks but the communicator has {size}; run it with mpiexec -n {nranks}"
        )


def _check_range(where: str, buf: str, off: int, cnt: int, sizes: dict[str, int]) -> None:
    if buf not in sizes:
        raise FormatError(f"{where}: unknown buffer {buf!r} (expected one of {', '.join(sizes)})")
    if cnt < 1 or off < 0 or off + cnt > sizes[buf]:
        raise FormatError(f"{where}: chunks {off}..{off + cnt - 1} of buffer {buf!r} outside 0..{sizes[buf] - 1}")


def _match_sequences(sends: dict, recvs: dict, what: str) -> None:
    """Require the k-th send on every connection to meet a k-th receive of equal ``cnt``."""
    for key in sorted(set(sends) | set(recvs)):
        a, b = sends.get(key, []), recvs.get(key, [])
        if a == b:
            continue
        src, dst, chan = key
        for k, (x, y) in enumerate(zip(a, b)):
            if x != y:
                raise FormatError(
                    f"{what} {chan}: send #{k} from rank {src} to rank {dst} carries {x} chunk(s) "
                    f"but the matching receive expects {y}"
                )
        raise FormatError(
            f"{what} {chan}: rank {src} sends {len(a)} message(s) to rank {dst} but rank {dst} receives {len(b)}"
        )


def _writes_own_shard(written: np.ndarray, rank: int, C: int) -> bool:
    return bool(written[rank * C:(rank + 1) * C].all())


def chunk_runs(chunks: tuple[int, ...]) -> list[tuple[int, int]]:
    """Split a chunk list into ``(first, count)`` runs of consecutive indices, in order."""
    runs: list[list[int]] = []
    for k in chunks:
        if runs and k == runs[-1][0] + runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([k, 1])
    return [tuple(r) for r in runs]


# ------------------------------------------------------------------- MSCCL


def plan_msccl(prog, size: int) -> list[RankPlan]:
    """Every rank's plan for an MSCCL ``<algo>`` (thread-block semantics of the MSCCL executor).

    The program must obey every rule of the executor its record names (``Record.target``, else
    nccl: :func:`a2a_compiler.verify._msccl_target`, as ``a2a verify`` picks it;
    :func:`a2a_compiler.formats.msccl_rules.check_rules`; the first broken one
    raises :class:`FormatError`).  Each ``tb`` runs its steps in order; a step
    with ``depid >= 0`` waits until thread block ``depid`` has completed step
    ``deps``.  Connection ``(peer, chan, direction)`` is a FIFO: the MPI tag is
    the channel.
    """
    from a2a_compiler.formats.msccl_rules import check_rules
    from a2a_compiler.verify import _msccl_target

    _check_nranks(prog.ngpus, size)
    if prog.nchannels >= TAG_LIMIT:
        raise FormatError(f"MSCCL nchannels={prog.nchannels} exceeds {TAG_LIMIT - 1}")
    findings = check_rules(prog, _msccl_target(None, prog.record, []))
    if findings.errors:
        more = f" (and {len(findings.errors) - 1} more; run 'a2a verify')" if len(findings.errors) > 1 else ""
        raise FormatError(f"MSCCL algo {prog.name!r}: {findings.errors[0]}{more}")
    C = prog.nchunksperloop // prog.ngpus
    return [_msccl_rank(prog.name, prog.ngpus, C, gpu) for gpu in prog.gpus]


def _msccl_rank(name: str, N: int, C: int, mine) -> RankPlan:
    raw = [(tb.send, tb.recv, tb.chan,
            [(_OPCODES[st.type], BUFFERS.get(st.srcbuf, -1), st.srcoff, BUFFERS.get(st.dstbuf, -1), st.dstoff,
              st.cnt, st.depid, st.deps) for st in tb.steps]) for tb in mine.tbs]
    tbs, written = _thread_blocks(raw, {BUF_O: N * C, BUF_S: mine.s_chunks})
    return RankPlan("msccl", name, N, mine.id, C, mine.s_chunks,
                    not _writes_own_shard(written[BUF_O] > 0, mine.id, C), MscclPlan(tbs))


def _thread_blocks(raw, sizes: dict[int, int], read_by_sends: bool = False):
    """:class:`ThreadBlockPlan` s from ``(send, recv, tag, steps)`` with steps ``(op, srcbuf, srcoff,
    dstbuf, dstoff, cnt, depid, deps[, peer, tag])``, and the times each chunk of ``sizes``'
    buffers is written.

    A step is a ``hazard`` when it writes a chunk written more than once on this rank (a reused
    scratch slot) or, with ``read_by_sends``, a chunk some send reads (an in-place plan overwrites
    its input); ``wake`` as :class:`StepPlan` says.
    """
    written = {b: np.zeros(n, dtype=np.int64) for b, n in sizes.items()}
    sent = {b: np.zeros(n, dtype=bool) for b, n in sizes.items()}
    for _, _, _, steps in raw:
        for op, sb, so, db, do, cnt, *_ in steps:
            if op in (RECV, RCS, CPY) and db in written:
                written[db][do:do + cnt] += 1
            if read_by_sends and op == SEND and sb in sent:
                sent[sb][so:so + cnt] = True
    depended = {(st[6], st[7]) for _, _, _, steps in raw for st in steps if st[6] >= 0}
    tbs = []
    for t, (send, recv, tag, steps) in enumerate(raw):
        out, wake = [], False
        for j in reversed(range(len(steps))):  # wake: this step or a later one of the block enables work
            op, sb, so, db, do, cnt, depid, deps, *peer_tag = steps[j]
            hazard = op in (RECV, RCS, CPY) and db in written and bool(
                (written[db][do:do + cnt] > 1).any() or sent[db][do:do + cnt].any())
            wake = wake or op != RECV or (t, j) in depended
            out.append(StepPlan(op, sb, so, db, do, cnt, depid, deps, hazard, wake, *(peer_tag or (-1, -1))))
        tbs.append(ThreadBlockPlan(send=send, recv=recv, tag=tag, steps=tuple(reversed(out))))
    return tuple(tbs), written


# ----------------------------------------------------------------- MSCCL++


def plan_mscclpp(prog, size: int) -> list[RankPlan]:
    """Every rank's plan for an MSCCL++ execution plan, as thread blocks for :func:`run_msccl`.

    Each MSCCL++ threadblock becomes one thread block whose steps name their own peer and tag.
    A ``put`` is a send to the rank that owns the destination buffer, which receives it in a
    thread block of its own (one per sending threadblock, receiving its puts in order); a
    ``signal`` is an empty message, and the ``wait`` that takes it receives it and then waits
    for the receiving block to hold every put the signalling threadblock made to this rank
    before the signal (on the GPU the data is there once the signal is); ``copy`` is a local
    copy; ``sem_acquire`` depends on the matching ``sem_release`` (the k-th acquire of a
    semaphore on the k-th release beyond its initial value), ``barrier`` on every other
    participant's arrival; a ``pipeline`` runs its inner operations once; ``nop`` and ``flush``
    vanish.  Every message from rank a to rank b has its own tag, so arrival order never
    matters.  The plan must obey :mod:`a2a_compiler.formats.mscclpp_rules`; what the MPI
    emulation cannot order statically (a channel signalled or waited on by several
    threadblocks, a semaphore released by several, ``get``) raises :class:`FormatError`.
    """
    from a2a_compiler.formats.mscclpp import resolve
    from a2a_compiler.formats.mscclpp_rules import check_rules

    _check_nranks(prog.nranks, size)
    findings = check_rules(prog)
    if findings.errors:
        more = f" (and {len(findings.errors) - 1} more; run 'a2a verify')" if len(findings.errors) > 1 else ""
        raise FormatError(f"MSCCL++ plan {prog.name!r}: {findings.errors[0]}{more}")
    res = resolve(prog)
    N, C = prog.nranks, prog.chunks_per_shard
    tags: dict = defaultdict(int)              # (a, b) -> next tag of a message a -> b
    receiver: dict = defaultdict(list)         # (b, (a, tb)) -> RECV steps of that threadblock's puts to b
    signals: dict = defaultdict(list)          # (pair, from rank) -> [(tag, sender tb, puts to the peer before it)]
    owner: dict = {}                           # (what, key, rank) -> the one tb doing it
    raw: dict = {}                             # (rank, tb) -> steps, with placeholders

    def tag(a, b):
        t = tags[(a, b)]
        tags[(a, b)] = t + 1
        if t >= TAG_LIMIT:
            raise FormatError(f"more than {TAG_LIMIT} messages from rank {a} to rank {b}")
        return t

    def one(what, key, rank, tb):
        if owner.setdefault((what, key, rank), tb) != tb:
            raise FormatError(f"rank {rank}: {what}s on {key} come from threadblocks {owner[(what, key, rank)]} and "
                              f"{tb}; the MPI runtime needs one threadblock per channel or semaphore to order them")

    for g in prog.gpus:
        r = g.id
        for tb in g.threadblocks:
            steps = raw[(r, tb.id)] = []
            for op in (o for top in tb.ops for o in (top.ops if top.name == "pipeline" else (top,))):
                kind = op.channel_type
                chans = [res[r].channels[tb.id][kind][i] for i in op.channel_ids or ()]
                if op.name in ("put", "pws", "pwsf"):
                    for s, d in zip(op.src, op.dst):
                        peer, buf = res[r].remote[tb.id][kind][d.buffer_id]
                        t = tag(r, peer)
                        steps.append((SEND, BUFFERS[s.type], s.index, -1, 0, s.size, -1, -1, peer, t))
                        receiver[(peer, (r, tb.id))].append((RECV, -1, 0, BUFFERS[buf], d.index, d.size, -1, -1, r, t))
                if op.name in ("signal", "rlxsignal", "pws", "pwsf"):
                    for ch in chans:
                        one("signal", ch.pair, r, tb.id)
                        t = tag(r, ch.peer)
                        steps.append((SEND, BUF_I, 0, -1, 0, 0, -1, -1, ch.peer, t))
                        signals[(ch.pair, r)].append((t, tb.id, len(receiver[(ch.peer, (r, tb.id))])))
                elif op.name in ("wait", "rlxwait"):
                    for ch in chans:
                        one("wait", ch.pair, r, tb.id)
                        steps.append(("wait", ch.pair, ch.peer))
                elif op.name == "copy":
                    steps += [(CPY, BUFFERS[s.type], s.index, BUFFERS[d.type], d.index, s.size, -1, -1)
                              for s, d in zip(op.src, op.dst)]
                elif op.name == "sem_release":
                    for sem in op.semaphore_ids:
                        one("release", f"semaphore {sem}", r, tb.id)
                        steps.append(("release", sem))
                elif op.name == "sem_acquire":
                    steps += [("acquire", sem) for sem in op.semaphore_ids]
                elif op.name == "barrier":
                    steps.append(("barrier", op.barrier_id))
                elif op.name == "get":
                    raise FormatError(f"rank {r} tb {tb.id}: 'get' is not supported by the MPI runtime")
    plans = []
    taken: dict = defaultdict(int)
    for g in prog.gpus:
        r = g.id
        blocks = [raw[(r, tb.id)] for tb in sorted(g.threadblocks, key=lambda x: x.id)]
        feeders = sorted(e for (b, e) in receiver if b == r)
        block_of = {e: len(blocks) + k for k, e in enumerate(feeders)}
        blocks += [receiver[(r, e)] for e in feeders]
        late = []                                  # signals nobody waits for are still received
        for t, steps in enumerate(blocks):
            out = []
            for st in steps:
                if st[0] != "wait":
                    out.append(st)
                    continue
                _, pair, peer = st
                k = taken[(pair, peer)]
                taken[(pair, peer)] = k + 1
                sent = signals.get((pair, peer), [])
                if k >= len(sent):
                    raise FormatError(f"rank {r} tb {t} waits for signal {k + 1} from rank {peer} on channel {pair}, "
                                      f"which is never sent (run 'a2a verify')")
                sig_tag, tb_from, puts = sent[k]
                out.append((RECV, -1, 0, BUF_S, 0, 0, -1, -1, peer, sig_tag))
                if puts:
                    out.append((NOP, -1, 0, -1, 0, 0, block_of[(peer, tb_from)], puts - 1))
            steps[:] = out
        for (pair, a), sent in sorted(signals.items()):
            if r in pair[1:3] and a != r:
                late += [(RECV, -1, 0, BUF_S, 0, 0, -1, -1, a, sig_tag) for sig_tag, _, _ in sent[taken[(pair, a)]:]]
        if late:
            blocks.append(late)
        _resolve_sync(r, blocks, g.semaphores)
        sizes = {BUF_I: N * C, BUF_O: N * C, BUF_S: g.scratch_chunks}
        tbs, written = _thread_blocks([(-1, -1, 0, steps) for steps in blocks], sizes, read_by_sends=True)
        own = written[BUF_I if prog.inplace else BUF_O] > 0
        plans.append(RankPlan("mscclpp", prog.name, N, r, C, g.scratch_chunks,
                              not prog.inplace and not _writes_own_shard(own, r, C), MscclPlan(tbs),
                              inplace=prog.inplace))
    return plans


def _resolve_sync(rank: int, blocks: list[list], semaphores) -> None:
    """Replace the ``("release", sem)``, ``("acquire", sem)`` and ``("barrier", id)`` placeholders of
    ``blocks`` by NOP steps and dependencies (in place): the k-th acquire of a semaphore depends on
    its k-th release beyond the initial value; a barrier is an arrival NOP followed by one NOP per
    other participant, depending on that participant's arrival at the same (k-th) barrier."""
    users: dict = defaultdict(list)
    for t, steps in enumerate(blocks):
        if any(st[0] == "barrier" for st in steps):
            for b in sorted({st[1] for st in steps if st[0] == "barrier"}):
                users[b].append(t)
    releases: dict = defaultdict(list)   # sem -> (tb, step) of each release, in order
    arrivals: dict = {}                  # (barrier, tb, k) -> step of the arrival
    expanded = []
    for t, steps in enumerate(blocks):
        out, seen = [], defaultdict(int)
        for st in steps:
            if st[0] == "release":
                releases[st[1]].append((t, len(out)))
                out.append((NOP, -1, 0, -1, 0, 0, -1, -1))
            elif st[0] == "barrier":
                k = seen[st[1]]
                seen[st[1]] += 1
                arrivals[(st[1], t, k)] = len(out)
                out.append((NOP, -1, 0, -1, 0, 0, -1, -1))
                out += [("after", st[1], u, k) for u in users[st[1]] if u != t]
            else:
                out.append(st)
        expanded.append(out)
    acquired: dict = defaultdict(int)
    for t, out in enumerate(expanded):
        for j, st in enumerate(out):
            if st[0] == "acquire":
                k = acquired[st[1]] - semaphores[st[1]]
                acquired[st[1]] += 1
                if k >= len(releases[st[1]]):
                    raise FormatError(f"rank {rank}: semaphore {st[1]} is acquired more often than released")
                out[j] = (NOP, -1, 0, -1, 0, 0, *(releases[st[1]][k] if k >= 0 else (-1, -1)))
            elif st[0] == "after":
                _, b, u, k = st
                if (b, u, k) not in arrivals:
                    raise FormatError(f"rank {rank}: barrier {b} is reached {k + 1} times by one threadblock "
                                      f"but fewer by another")
                out[j] = (NOP, -1, 0, -1, 0, 0, u, arrivals[(b, u, k)])
        blocks[t][:] = out


# ------------------------------------------------------------------ oneCCL


def plan_oneccl(prog, size: int) -> list[RankPlan]:
    """Every rank's plan for a oneCCL-style program (Basu et al. §4): per step, post every
    send and receive asynchronously, wait for all of them at the step's sync.
    The tag is the step index, so steps never mix."""
    _check_nranks(prog.nranks, size)
    N, C = prog.nranks, prog.chunks_per_shard
    if C < 1:
        raise FormatError(f"oneCCL chunks_per_shard={C} must be >= 1")
    if [r.id for r in prog.ranks] != list(range(N)):
        raise FormatError(f"oneCCL program {prog.name!r}: expected <rank> ids 0..{N - 1}")
    sends: dict = defaultdict(list)
    recvs: dict = defaultdict(list)
    T = prog.counts()          # chunks per pair: C everywhere, or an all-to-allv layout (docs/formats.md)
    for r in prog.ranks:
        if r.i_chunks != T[r.id].sum() or r.o_chunks != T[:, r.id].sum():
            raise FormatError(f"rank {r.id}: i_chunks/o_chunks must equal the chunks it sends and receives, "
                              f"{T[r.id].sum()} and {T[:, r.id].sum()}")
        if len(r.steps) != prog.nsteps:
            raise FormatError(f"rank {r.id}: lists {len(r.steps)} steps, nsteps={prog.nsteps}")
        sizes = {"i": r.i_chunks, "o": r.o_chunks, "s": r.s_chunks}
        for t, ops in enumerate(r.steps):
            for op in ops:
                w = f"rank {r.id} step {t} {op.kind}"
                if op.kind in ("send", "recv") and (op.peer == r.id or not 0 <= op.peer < N):
                    raise FormatError(f"{w}: peer {op.peer} is not another rank")
                if op.kind in ("send", "copy"):
                    _check_range(w, op.srcbuf, op.srcoff, op.cnt, sizes)
                if op.kind in ("recv", "copy"):
                    _check_range(w, op.dstbuf, op.dstoff, op.cnt, sizes)
                    if op.dstbuf == "i":
                        raise FormatError(f"{w}: writes into the input buffer, which the runtime never modifies")
                if op.kind == "send":
                    sends[(r.id, op.peer, t)].append(op.cnt)
                elif op.kind == "recv":
                    recvs[(op.peer, r.id, t)].append(op.cnt)
                elif op.kind != "copy":
                    raise FormatError(f"{w}: unknown operation (expected send, recv, copy)")
    _match_sequences(sends, recvs, "oneCCL step")
    own = np.cumsum(T, axis=0)[np.arange(N), np.arange(N)] - np.diag(T)   # where each rank's own block lands
    return [_oneccl_rank(prog.name, N, C, r, int(own[r.id]), int(T[r.id, r.id])) for r in prog.ranks]


def _oneccl_rank(name: str, N: int, C: int, mine, own: int, own_chunks: int) -> RankPlan:
    rank = mine.id
    written = np.zeros(mine.o_chunks, dtype=bool)
    steps = []
    for t, ops in enumerate(mine.steps):
        tag = t % TAG_LIMIT
        copies = tuple(LocalCopy(BUFFERS[o.srcbuf], o.srcoff, BUFFERS[o.dstbuf], o.dstoff, o.cnt)
                       for o in ops if o.kind == "copy")
        snd = tuple(Message(o.peer, tag, BUFFERS[o.srcbuf], o.srcoff, o.cnt) for o in ops if o.kind == "send")
        rcv = tuple(Message(o.peer, tag, BUFFERS[o.dstbuf], o.dstoff, o.cnt) for o in ops if o.kind == "recv")
        for o in ops:
            if o.kind != "send" and o.dstbuf == "o":
                written[o.dstoff:o.dstoff + o.cnt] = True
        steps.append(OnecclStepPlan(copies, snd, rcv))
    return RankPlan("oneccl", name, N, rank, C, mine.s_chunks,
                    not written[own:own + own_chunks].all(), OnecclPlan(tuple(steps)))


# ------------------------------------------------------------- MPI paths


def plan_paths(prog, size: int, route_mode: str = "relay") -> list[RankPlan]:
    """Every rank's plan for an MPI path schedule (Basu et al. §4, path-based schedules).

    Every message of a send (its hops too) belongs to the send's time step.

    ``direct``: each run of consecutive chunks of a ``send`` goes end to end
    with tag ``route_id``, for a transport that steers tags onto routes.
    ``relay``: the run is forwarded hop by hop through the ranks on the route
    (switch nodes, ids >= nranks, are skipped: the network forwards); each hop
    ``a -> b`` gets its own tag, numbered in file order per ``(a, b)``, so
    relayed messages never depend on arrival order, and each relaying rank
    stages the run in its own scratch slots.
    """
    if route_mode not in ROUTE_MODES:
        raise A2AError(f"--route-mode must be one of {', '.join(ROUTE_MODES)}, got {route_mode!r}")
    _check_nranks(prog.nranks, size)
    N, C = prog.nranks, prog.chunks_per_shard
    if C < 1:
        raise FormatError(f"MPI path chunks_per_shard={C} must be >= 1")
    sends: list[list[Message]] = [[] for _ in range(N)]
    recvs: list[list[Forward]] = [[] for _ in range(N)]
    send_steps: list[list[int]] = [[] for _ in range(N)]
    recv_steps: list[list[int]] = [[] for _ in range(N)]
    written = np.zeros((N, N * C), dtype=bool)
    hop_tags: dict = defaultdict(int)
    scratch = [0] * N
    for ps in prog.sends:
        w = f"send {ps.src}->{ps.dst} route {ps.route_id}"
        if not (0 <= ps.src < N and 0 <= ps.dst < N) or ps.src == ps.dst:
            raise FormatError(f"{w}: source and destination must be two different ranks below {N}")
        if not ps.nodes or ps.nodes[0] != ps.src or ps.nodes[-1] != ps.dst:
            raise FormatError(f"{w}: route must start at {ps.src} and end at {ps.dst}")
        if any(not 0 <= n < prog.nnodes for n in ps.nodes):
            raise FormatError(f"{w}: route node outside 0..{prog.nnodes - 1}")
        if any(not 0 <= k < C for k in ps.chunks):
            raise FormatError(f"{w}: chunk index outside 0..{C - 1}")
        if not 0 <= ps.route_id < TAG_LIMIT:
            raise FormatError(f"{w}: route_id must be in 0..{TAG_LIMIT - 1}")
        hops = [n for n in ps.nodes if n < N] if route_mode == "relay" else [ps.src, ps.dst]
        if len(set(hops)) != len(hops):
            raise FormatError(f"{w}: route visits rank(s) twice")
        for k0, cnt in chunk_runs(ps.chunks):
            final = ps.src * C + k0
            written[ps.dst, final:final + cnt] = True
            shard = (ps.src, ps.dst, k0)
            if route_mode == "direct":
                sends[ps.src].append(Message(ps.dst, ps.route_id, BUF_I, ps.dst * C + k0, cnt, shard))
                recvs[ps.dst].append(Forward(Message(ps.src, ps.route_id, BUF_O, final, cnt, shard), None))
                send_steps[ps.src].append(ps.step)
                recv_steps[ps.dst].append(ps.step)
                continue
            prev = None  # (sender, tag) of the hop message arriving at a
            for a, b in zip(hops, hops[1:]):
                tag = hop_tags[(a, b)]
                hop_tags[(a, b)] += 1
                if tag >= TAG_LIMIT:
                    raise FormatError(f"more than {TAG_LIMIT} relayed messages from rank {a} to rank {b}")
                if prev is None:
                    sends[a].append(Message(b, tag, BUF_I, ps.dst * C + k0, cnt, shard))
                    send_steps[a].append(ps.step)
                else:  # a relays: it receives the run into scratch, then forwards it to b
                    recvs[a].append(Forward(Message(prev[0], prev[1], BUF_S, scratch[a], cnt, shard),
                                            Message(b, tag, BUF_S, scratch[a], cnt, shard)))
                    recv_steps[a].append(ps.step)
                    scratch[a] += cnt
                prev = (a, tag)
            recvs[ps.dst].append(Forward(Message(prev[0], prev[1], BUF_O, final, cnt, shard), None))
            recv_steps[ps.dst].append(ps.step)
    S = prog.nsteps
    return [RankPlan("mpi", prog.name, N, r, C, scratch[r], not _writes_own_shard(written[r], r, C),
                     PathPlan(tuple(sends[r]), tuple(recvs[r]), tuple(send_steps[r]) if S > 1 else (),
                              tuple(recv_steps[r]) if S > 1 else (), S), route_mode) for r in range(N)]


def layout_counts(program, nranks: int, demand=None) -> np.ndarray | None:
    """Chunks per pair of a link program's buffers (``None`` for an MPI path program).

    MSCCL XML and MSCCL++ plans record no layout: a file that moves data as a plain all-to-all is one; any
    other is taken in ``demand``'s (default: the one its record holds) all-to-allv layout and must move data right there
    (:func:`a2a_compiler.verify.simulate.simulate_msccl`, :func:`~a2a_compiler.verify.simulate.simulate_mscclpp`).
    An MSCCL++ plan needs separate send and receive buffers.
    """
    from a2a_compiler.chunk.counts import msccl_counts
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
        counts = msccl_counts(demand, c, "MSCCL++" if isinstance(program, MscclppProgram) else "MSCCL")
        wrong = moves(counts)
        if wrong:
            raise A2AError(f"{what} {program.name!r} moves data neither as an all-to-all nor as the all-to-allv "
                           f"of {demand.source}: {wrong[0]}")
        return counts
    return program.counts()


# -------------------------------------------------------------- dispatch


def program_ranks(program) -> int:
    """The number of ranks a loaded program is for."""
    return program.ngpus if hasattr(program, "ngpus") else program.nranks


def load_schedule(path) -> tuple[str, object]:
    """Read any schedule file the compiler emits (or MSCCL XML from other tools)."""
    from a2a_compiler.formats import load_program

    return load_program(path)


def build_plans(program, size: int, route_mode: str = "relay") -> list[RankPlan]:
    """Every rank's plan; dispatch on the program type (see :mod:`a2a_compiler.formats`)."""
    from a2a_compiler.formats import MpiPathProgram, MscclppProgram, MscclProgram, OnecclProgram

    if isinstance(program, MscclProgram):
        plans = plan_msccl(program, size)
    elif isinstance(program, MscclppProgram):
        plans = plan_mscclpp(program, size)
    elif isinstance(program, OnecclProgram):
        plans = plan_oneccl(program, size)
    elif isinstance(program, MpiPathProgram):
        plans = plan_paths(program, size, route_mode)
    else:
        raise A2AError(f"not a schedule program: {type(program).__name__}")
    return [replace(p, record=program.record) for p in plans]
