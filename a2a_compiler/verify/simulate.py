"""Symbolic execution: prove a lowered program performs the all-to-all (data movement + deadlock).

Every chunk is a label ``(origin, dest, index)``.  Rank ``s`` starts with
``i[d·C+k] = (s, d, k)``; at the end ``o[s·C+k]`` on rank ``d`` must hold
``(s, d, k)``.  An all-to-allv layout (``T[s][d]`` chunks per pair) starts with
``i[Σ_{j<d} T[s][j] + k] = (s, d, k)`` and must end with ``(s, d, k)`` in
``o[Σ_{j<s} T[j][d] + k]`` on ``d``.  Each checker returns a :class:`Trace`: the violations found and
every chunk transfer (a :class:`Move`) for the performance model.

* :func:`simulate_msccl` runs thread blocks step by step: dependencies wait for
  the target step, sends push onto the (gpu, peer, channel) connection, a FIFO
  of :data:`FIFO_SLOTS` messages, receives pop from it.  Local buffer accesses
  are checked against a happens-before order (program order + dependencies,
  vector clocks per gpu): a read of a slot written by another thread block must
  be ordered after the write, a write after the previous reads and write.  An
  output slot may hold a chunk passing through (staged for an ``rcs`` relay)
  before its own chunk; overwriting a delivered chunk is an error.  When
  no thread block can move, the wait-for cycle (or the missing peer) is reported.
* :func:`simulate_oneccl` runs the step/sync semantics of docs/formats.md.
* :func:`check_paths` checks that an MPI path schedule's chunks partition every shard
  (its trace has no moves: routes are priced directly).
"""

from __future__ import annotations

from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field

import numpy as np

from ..errors import echo_items
from ..formats import MpiPathProgram, MscclProgram, OnecclProgram
from ..formats.mscclpp import MscclppProgram

#: Slots per connection (NCCL_STEPS): a sender blocks when this many messages are unreceived.
FIFO_SLOTS = 8
#: Messages kept per check (a broken file can produce thousands of consequential errors).
MAX_ERRORS = 40


@dataclass(frozen=True)
class Move:
    """One message ``src -> dst`` carrying ``labels``.

    ``after``: ids (indices in :attr:`Trace.moves`) of the moves it must follow:
    those that brought the data it reads to ``src``, and the previous message on
    its connection (MSCCL); ``step``: the oneCCL step (-1 for MSCCL).
    """

    src: int
    dst: int
    labels: tuple
    after: tuple[int, ...] = ()
    step: int = -1


@dataclass
class Trace:
    """A symbolic execution's result: violations (capped at :data:`MAX_ERRORS`) and the messages it moved."""

    errors: list[str] = field(default_factory=list)
    dropped: int = 0
    moves: list[Move] = field(default_factory=list)
    chunks_per_shard: int = 1

    def error(self, msg: str) -> None:
        """Record a violation (counted beyond :data:`MAX_ERRORS`)."""
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(msg)
        else:
            self.dropped += 1

    def finish(self) -> "Trace":
        """The trace, with a count of the violations not listed."""
        if self.dropped:
            self.errors.append(f"... and {self.dropped} more data-movement error(s)")
            self.dropped = 0
        return self


def _check_outputs(trace: Trace, outputs, T: np.ndarray, name: str = "gpu", buf: str = "o") -> None:
    """Every rank's output (buffer ``buf``) is the all-to-all(v) transpose of the inputs (``T``: chunks per pair)."""
    n = len(T)
    for d in range(n):
        expect = [(s, d, k) for s in range(n) for k in range(int(T[s, d]))]
        for x, lab in enumerate(outputs[d]):
            want = expect[x] if x < len(expect) else None
            if want is None:
                if lab is not None:
                    trace.error(f"{name} {d}: output chunk {buf}[{x}] holds chunk {lab} beyond the {len(expect)} the "
                                f"layout receives")
            elif lab is None:
                trace.error(f"{name} {d}: output chunk {buf}[{x}] (chunk {want[2]} from {name} {want[0]}) is never "
                            f"written")
            elif lab != want:
                trace.error(f"{name} {d}: output chunk {buf}[{x}] holds chunk {lab} (origin, dest, index), "
                            f"expected {want}")


def _inputs(T: np.ndarray):
    """Every rank's input labels in buffer order (``T``: chunks per pair, the diagonal included)."""
    n = len(T)
    return [[(g, d, k) for d in range(n) for k in range(int(T[g, d]))] for g in range(n)]


def layout_counts(n: int, c: int, counts=None) -> np.ndarray:
    """``counts`` (an all-to-allv layout), or ``c`` chunks for every pair (the all-to-all's)."""
    return np.full((n, n), c, dtype=np.int64) if counts is None else np.asarray(counts, dtype=np.int64)


# ---------------------------------------------------------------------- MSCCL


class _Slot:
    __slots__ = ("value", "writer", "readers", "move")

    def __init__(self, value=None):
        self.value, self.writer, self.readers, self.move = value, None, [], -1


def simulate_msccl(p: MscclProgram, counts=None) -> Trace:
    """Execute ``p`` symbolically; assumes :func:`~a2a_compiler.formats.msccl_rules.check_rules` found it sound.

    ``counts``: the chunks of every pair of an all-to-allv layout (rows and columns summing to
    ``nchunksperloop``; :func:`~a2a_compiler.chunk.counts.msccl_counts`), else the all-to-all's.
    """
    n = p.ngpus
    c = p.nchunksperloop // n
    trace = Trace(chunks_per_shard=c)
    T = layout_counts(n, c, counts)
    inputs = _inputs(T)
    bufs = [{"i": [_Slot(v) for v in inputs[g.id]], "o": [_Slot() for _ in range(n * c)],
             "s": [_Slot() for _ in range(g.s_chunks)]} for g in p.gpus]
    tbs = [{tb.id: tb for tb in g.tbs} for g in p.gpus]
    ntb = [len(g.tbs) for g in p.gpus]
    pc = [dict.fromkeys(t, 0) for t in tbs]
    # clocks[g][tb][s] = vector clock after step s (entry j = steps of tb j known complete)
    clocks = [{t: [] for t in tbs[g]} for g in range(n)]
    fifo: dict[tuple[int, int, int], deque] = defaultdict(deque)
    delivered = Counter()

    def hb(g, clock, who):
        tb, s = who
        return clock[tb] >= s + 1

    def where(g, tb, s):
        return f"gpu {g} tb {tb} step {s}"

    def read(g, tb, s, clock, buf, off, cnt):
        vals, moves = [], []
        for x in range(off, off + cnt):
            slot = bufs[g][buf][x]
            if slot.value is None:
                what = "scratch" if buf == "s" else "output"
                trace.error(f"{where(g, tb, s)}: reads unwritten {what} chunk {buf}[{x}]")
            elif slot.writer and slot.writer[0] != tb and not hb(g, clock, slot.writer):
                trace.error(f"{where(g, tb, s)}: reads {buf}[{x}] written by tb {slot.writer[0]} step "
                            f"{slot.writer[1]} with no dependency ordering the two (race)")
            slot.readers.append((tb, s))
            vals.append(slot.value)
            moves.append(slot.move)
        return vals, moves

    def write(g, tb, s, clock, buf, off, vals, moves):
        for x, v, mv in zip(range(off, off + len(vals)), vals, moves):
            slot = bufs[g][buf][x]
            if slot.writer is not None:
                if buf == "o" and slot.value is not None and slot.value[1] == p.gpus[g].id:
                    trace.error(f"{where(g, tb, s)}: overwrites output chunk o[{x}] already written by tb "
                                f"{slot.writer[0]} step {slot.writer[1]}")
                # overwriting scratch never read is a dead write, not an error: if that data was
                # needed, the output check reports the chunk that never arrives
                for other in [slot.writer, *slot.readers]:
                    if other[0] != tb and not hb(g, clock, other):
                        trace.error(f"{where(g, tb, s)}: writes {buf}[{x}] with no dependency ordering it after "
                                    f"tb {other[0]} step {other[1]} (race)")
                        break
            if buf == "o" and v is not None and v[1] == p.gpus[g].id:
                delivered[v] += 1
                if delivered[v] == 2:
                    trace.error(f"{where(g, tb, s)}: chunk {v} (origin, dest, index) delivered twice")
            slot.value, slot.writer, slot.readers, slot.move = v, (tb, s), [], mv

    def blocker(g, tb):
        """Why the next step of ``tb`` cannot run: (reason, waited-for (gpu, tb) or None), or None if it can."""
        t = tbs[g][tb]
        st = t.steps[pc[g][tb]]
        if st.depid >= 0 and pc[g][st.depid] <= st.deps:
            return f"waits for tb {st.depid} step {st.deps} (dependency)", (g, st.depid)
        if st.type in ("r", "rcs") and not fifo[(t.recv, g, t.chan)]:
            return f"waits for a message from gpu {t.recv} on channel {t.chan}", ("recv", t.recv, g, t.chan)
        if st.type in ("s", "rcs") and len(fifo[(g, t.send, t.chan)]) >= FIFO_SLOTS:
            return f"waits for gpu {t.send} to drain the full channel-{t.chan} connection", ("send", g, t.send, t.chan)
        return None

    last_on = {}  # connection -> id of its latest message

    def send(g, t, vals, moves, who):
        conn = (g, t.send, t.chan)
        after = {m for m in moves if m >= 0} | ({last_on[conn]} if conn in last_on else set())
        last_on[conn] = len(trace.moves)
        fifo[conn].append((vals, len(trace.moves), who))
        trace.moves.append(Move(g, t.send, tuple(vals), tuple(sorted(after))))

    def run(g, tb):
        t = tbs[g][tb]
        s = pc[g][tb]
        st = t.steps[s]
        clock = clocks[g][tb][-1].copy() if s else np.zeros(ntb[g], dtype=np.int32)
        if st.depid >= 0:
            np.maximum(clock, clocks[g][st.depid][st.deps], out=clock)
        if st.type == "s":
            vals, moves = read(g, tb, s, clock, st.srcbuf, st.srcoff, st.cnt)
            send(g, t, vals, moves, (g, tb, s))
        elif st.type in ("r", "rcs"):
            vals, mid, (sg, stb, ss) = fifo[(t.recv, g, t.chan)].popleft()
            if len(vals) != st.cnt:
                trace.error(f"{where(g, tb, s)}: receives cnt={st.cnt} but the matching send, gpu {sg} tb {stb} "
                            f"step {ss}, sent {len(vals)} chunk(s)")
                vals = (vals + [None] * st.cnt)[:st.cnt]
            write(g, tb, s, clock, st.dstbuf, st.dstoff, vals, [mid] * len(vals))
            if st.type == "rcs":
                send(g, t, vals, [mid], (g, tb, s))
        elif st.type == "cpy":
            vals, moves = read(g, tb, s, clock, st.srcbuf, st.srcoff, st.cnt)
            write(g, tb, s, clock, st.dstbuf, st.dstoff, vals, moves)
        clock[tb] = s + 1
        clocks[g][tb].append(clock)
        pc[g][tb] = s + 1

    active = [(g, tb) for g in range(n) for tb in sorted(tbs[g]) if tbs[g][tb].steps]
    while active:
        moved, still = False, []
        for g, tb in active:
            steps = tbs[g][tb].steps
            while pc[g][tb] < len(steps) and blocker(g, tb) is None:
                run(g, tb)
                moved = True
            if pc[g][tb] < len(steps):
                still.append((g, tb))
        active = still
        if not moved:
            break
    if active:
        trace.error(_deadlock(p, active, pc, blocker, tbs))
    _check_outputs(trace, [[sl.value for sl in bufs[g]["o"]] for g in range(n)], T)
    return trace.finish()


def _deadlock(p, stuck, pc, blocker, tbs) -> str:
    """Describe the wait-for cycle among stuck thread blocks (or the peer that never acts)."""
    ends = {}  # connection end -> (gpu, tb): the tb that sends / receives on it
    for g in p.gpus:
        for t in g.tbs:
            if t.send >= 0:
                ends[("recv", g.id, t.send, t.chan)] = (g.id, t.id)   # a receiver on t.send waits for this tb
            if t.recv >= 0:
                ends[("send", t.recv, g.id, t.chan)] = (g.id, t.id)   # a sender to g waits for this tb
    stuck_set = set(stuck)

    def edge(node):
        reason, target = blocker(*node)
        if target[0] in ("recv", "send"):
            target = ends.get(target)
        return reason, target

    desc = lambda node: f"gpu {node[0]} tb {node[1]} step {pc[node[0]][node[1]]}"
    node, seen, path = stuck[0], {}, []
    while node in stuck_set and node not in seen:
        seen[node] = len(path)
        reason, nxt = edge(node)
        path.append(f"{desc(node)} {reason}")
        if nxt is None or nxt not in stuck_set:
            who = "no thread block" if nxt is None else f"gpu {nxt[0]} tb {nxt[1]} (finished)"
            return (f"deadlock: {len(stuck)} thread block(s) cannot progress; {echo_items(path, 'waits', ' -> ')}, "
                    f"but {who} will ever provide it")
        node = nxt
    cycle = path[seen[node]:]
    return f"deadlock: {len(stuck)} thread block(s) cannot progress; wait-for cycle: {echo_items(cycle, 'waits', ' -> ')}"


# --------------------------------------------------------------------- oneCCL


def simulate_oneccl(p: OnecclProgram) -> Trace:
    """Execute the step/sync semantics of docs/formats.md ("oneCCL-style XML") symbolically."""
    n, c = p.nranks, p.chunks_per_shard
    trace = Trace(chunks_per_shard=c)
    T = p.counts()
    ins, outs = T.sum(axis=1), T.sum(axis=0)
    for r in p.ranks:
        if r.i_chunks != ins[r.id] or r.o_chunks != outs[r.id] or r.s_chunks < 0:
            trace.error(f"rank {r.id}: i_chunks={r.i_chunks} o_chunks={r.o_chunks} s_chunks={r.s_chunks}; "
                        f"need i_chunks = {ins[r.id]} and o_chunks = {outs[r.id]} (the chunks it sends and "
                        f"receives) and s_chunks >= 0")
    if trace.errors:
        return trace.finish()
    inputs = _inputs(T)
    bufs = [{"i": list(inputs[r]), "o": [None] * int(outs[r]), "s": [None] * p.ranks[r].s_chunks} for r in range(n)]
    written = [{"o": [None] * int(outs[r]), "s": [None] * p.ranks[r].s_chunks} for r in range(n)]
    delivered = Counter()
    allowed = {"send": ("i", "s"), "recv": ("o", "s"), "copy_src": ("i", "s"), "copy_dst": ("o", "s")}

    def span(r, t, what, buf, off, cnt, kind):
        size = len(bufs[r][buf]) if buf in bufs[r] else 0
        if buf not in allowed[kind]:
            trace.error(f"rank {r} step {t}: {what} uses buffer {buf!r}, allowed: {', '.join(allowed[kind])}")
            return None
        if cnt < 1 or off < 0 or off + cnt > size:
            trace.error(f"rank {r} step {t}: {what} {buf}[{off}..{off + cnt - 1}] is outside the {size}-chunk buffer")
            return None
        return range(off, off + cnt)

    for t in range(p.nsteps):
        sends = defaultdict(list)   # (a, b) -> [values]
        reads = [set() for _ in range(n)]
        writes = []                 # (rank, buf, slot, value, what)
        for r in range(n):
            for k, op in enumerate(p.ranks[r].steps[t]):
                what = f"{op.kind} #{k}"
                if op.kind in ("send", "copy"):
                    kind = "send" if op.kind == "send" else "copy_src"
                    rng = span(r, t, what, op.srcbuf, op.srcoff, op.cnt, kind)
                    if rng is None:
                        continue
                    vals = [bufs[r][op.srcbuf][x] for x in rng]
                    for x in rng:
                        reads[r].add((op.srcbuf, x))
                        if bufs[r][op.srcbuf][x] is None:
                            trace.error(f"rank {r} step {t}: {what} reads {op.srcbuf}[{x}], which holds no data at "
                                        f"the start of the step")
                    if op.kind == "send":
                        if not 0 <= op.peer < n or op.peer == r:
                            trace.error(f"rank {r} step {t}: {what} to peer {op.peer}, not another rank")
                            continue
                        sends[(r, op.peer)].append(vals)
                        trace.moves.append(Move(r, op.peer, tuple(vals), step=t))
                    else:
                        drng = span(r, t, what, op.dstbuf, op.dstoff, op.cnt, "copy_dst")
                        if drng is not None:
                            writes += [(r, op.dstbuf, x, v, what) for x, v in zip(drng, vals)]
        for r in range(n):
            queues = {a: deque(sends.pop((a, r), [])) for a in range(n)}
            for k, op in enumerate(p.ranks[r].steps[t]):
                if op.kind != "recv":
                    continue
                what = f"recv #{k}"
                if not 0 <= op.peer < n or op.peer == r:
                    trace.error(f"rank {r} step {t}: {what} from peer {op.peer}, not another rank")
                    continue
                if not queues[op.peer]:
                    trace.error(f"rank {r} step {t}: {what} from rank {op.peer} has no matching send "
                                f"(rank {op.peer} sends fewer messages to rank {r} in step {t})")
                    continue
                vals = queues[op.peer].popleft()
                if len(vals) != op.cnt:
                    trace.error(f"rank {r} step {t}: {what} from rank {op.peer} has cnt={op.cnt}, the matching send "
                                f"has cnt={len(vals)}")
                drng = span(r, t, what, op.dstbuf, op.dstoff, op.cnt, "recv")
                if drng is not None:
                    writes += [(r, op.dstbuf, x, v, what) for x, v in zip(drng, vals)]
            for a, q in queues.items():
                if q:
                    trace.error(f"rank {a} step {t}: {len(q)} send(s) to rank {r} with no matching recv")
        for (a, b), q in sends.items():
            trace.error(f"rank {a} step {t}: {len(q)} send(s) to rank {b} with no matching recv")
        for r, buf, x, v, what in writes:
            if (buf, x) in reads[r]:
                trace.error(f"rank {r} step {t}: {what} writes {buf}[{x}], which is read in the same step")
            if written[r][buf][x] is not None:
                trace.error(f"rank {r} step {t}: {what} writes {buf}[{x}] already written in step "
                            f"{written[r][buf][x]} (each output and scratch chunk is written once)")
            if buf == "o" and v is not None and v[1] == r:
                delivered[v] += 1
                if delivered[v] == 2:
                    trace.error(f"rank {r} step {t}: chunk {v} (origin, dest, index) delivered twice")
            written[r][buf][x] = t
            bufs[r][buf][x] = v
    _check_outputs(trace, [bufs[r]["o"] for r in range(n)], T, "rank")
    return trace.finish()


# ------------------------------------------------------------------ MPI paths


def check_paths(p: MpiPathProgram) -> Trace:
    """Chunks of every shard partitioned exactly once over its routes; routes start and end right."""
    n, c = p.nranks, p.chunks_per_shard
    trace = Trace(chunks_per_shard=c)
    seen: dict[tuple[int, int], Counter] = defaultdict(Counter)
    ids: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for s in p.sends:
        w = f"rank {s.src} send to {s.dst} route_id {s.route_id}"
        if not 0 <= s.dst < n or s.dst == s.src:
            trace.error(f"{w}: dst={s.dst} is not another rank (0..{n - 1})")
            continue
        if len(s.nodes) < 2 or s.nodes[0] != s.src or s.nodes[-1] != s.dst:
            trace.error(f"{w}: route {echo_items(s.nodes, 'nodes')} must start at {s.src} and end at {s.dst}")
        if any(not 0 <= v < p.nnodes for v in s.nodes):
            trace.error(f"{w}: route {echo_items(s.nodes, 'nodes')} names a node outside 0..{p.nnodes - 1}")
        if len(set(s.nodes)) != len(s.nodes):
            trace.error(f"{w}: route {echo_items(s.nodes, 'nodes')} visits a node twice")
        if s.route_id < 0 or s.layer < 0:
            trace.error(f"{w}: route_id and layer must be >= 0")
        ids[(s.src, s.dst)][s.route_id] += 1
        if not s.chunks:
            trace.error(f"{w}: carries no chunks")
        for k in s.chunks:
            if not 0 <= k < c:
                trace.error(f"{w}: chunk {k} outside 0..{c - 1}")
            else:
                seen[(s.src, s.dst)][k] += 1
    for pair, cnt in sorted(ids.items()):
        dup = sorted(r for r, m in cnt.items() if m > 1)
        if dup:
            trace.error(f"rank {pair[0]} -> {pair[1]}: route_id {dup[0]} used by more than one send")
    for a in range(n):
        for b in range(n):
            if a == b:
                continue
            cnt = seen.get((a, b), Counter())
            twice = sorted(k for k, m in cnt.items() if m > 1)
            missing = [k for k in range(c) if k not in cnt]
            if twice:
                trace.error(f"rank {a} -> {b}: chunk {twice[0]} is sent on more than one route (delivered twice)")
            if missing:
                trace.error(f"rank {a} -> {b}: chunk(s) {echo_items(missing, 'chunks')} of the shard are never sent")
    return trace.finish()


# -------------------------------------------------------------------- MSCCL++

#: Port-channel transports: the executor connects two ranks' port channels over InfiniBand when they
#: are in different IPC domains (nodes), else over CUDA IPC (``executor.cc`` l.298-300).
TRANSPORTS = ("ib", "cudaipc")
#: The executor's rules a race breaks, as the messages cite them (microsoft/mscclpp 1f5f065d).
RULE_FLUSH = ("a flush completes only the channels of its dst_buff entries: execution_plan.cc l.550-551, "
              "execution_kernel.hpp l.120-127")
RULE_CONNECTION = ("on InfiniBand a signal orders only the earlier puts of its own connection, one queue pair per "
                   "channel: executor.cc l.287-313, port_channel.cc l.117-154, connection.cc l.399-449")
RULE_PROXY = ("a port put completes at a flush of its channel, or for its peer at a wait on a later signal of its "
              "connection; the kernel's end does not wait for the proxy: executor.cc l.548-563")


class _At:
    """An operation of entity ``e`` (a threadblock ``(rank, tb)`` or a rank's caller ``(rank, -1)``), the
    ``k``-th the entity ran; ordered before another entity once that one's clock counts past ``k``."""

    __slots__ = ("e", "k", "launch", "label")

    def __init__(self, e, k, launch, label):
        self.e, self.k, self.launch, self.label = e, k, launch, label

    def __str__(self):
        who = f"the caller of gpu {self.e[0]}" if self.e[1] < 0 else f"gpu {self.e[0]} tb {self.e[1]} op {self.label}"
        return who + (f" (launch {self.launch + 1})" if self.launch else "")


class _ProxyPut:
    """A port put: the proxy reads its source and writes its destination some time after ``push`` (the
    put operation) and before the events in ``done`` (flushes and signals that complete it)."""

    __slots__ = ("push", "pair", "src", "done", "noop_flush", "signalled", "other_signal", "reported")

    def __init__(self, push: _At, pair, src: str):
        self.push, self.pair, self.src, self.done = push, pair, src, []
        self.noop_flush = self.signalled = self.other_signal = self.reported = False

    def __str__(self):
        return f"the port put of {self.push}"


class _PlanSlot:
    __slots__ = ("value", "writer", "readers", "move")

    def __init__(self, value=None):
        self.value, self.writer, self.readers, self.move = value, None, [], -1


def simulate_mscclpp(p: MscclppProgram, transport: str | None = None, nodes=None, launches: int = 2,
                     counts=None) -> Trace:
    """Execute an MSCCL++ plan symbolically, ``launches`` times in a row, as microsoft/mscclpp's executor runs it
    (docs/formats.md, "MSCCL++ execution plans"; docs/msccl.md, "Ordering").

    Assumes :func:`~a2a_compiler.formats.mscclpp_rules.check_rules` found it sound.  Every threadblock
    runs its operations in order (a ``pipeline``'s inner operations once, over their whole range).  A
    ``signal`` adds one to the peer's end of its connection and a ``wait`` takes one, blocking while there
    is none; ``sem_release`` / ``sem_acquire`` do the same on a GPU's device semaphores, ``barrier`` blocks
    until ``num_threadblocks`` arrive.  Happens-before, by vector clocks, follows program order, signal ->
    wait, release -> acquire and barriers.  A memory channel's ``rlxsignal`` -> ``rlxwait`` orders only a
    later write after the accesses before it (no data is published: ``execution_kernel.hpp`` l.88-95,
    l.107-113); on port channels both are the plain ``signal`` / ``wait`` (l.96-98, l.115-117), and a
    memory-channel ``pws`` / ``pwsf`` signals nothing (``handlePut``, l.157-167).

    A memory-channel ``put`` writes the peer's buffer at once.  A port-channel ``put`` only queues work
    for the rank's proxy, which reads the source and writes the destination later (:class:`_ProxyPut`):

    * a ``flush`` waits until channel ``channel_ids[i]`` has completed its work for each ``dst_buff``
      entry ``i`` only (the loader sets ``nOutputs`` from ``dst_buff``, ``execution_plan.cc`` l.550-551;
      ``handleFlush`` loops over it, ``execution_kernel.hpp`` l.120-127): without ``dst_buff`` it waits
      for nothing;
    * every channel entry is its own connection (one IB queue pair; ``executor.cc`` l.287-313), and a
      ``signal`` follows only the earlier puts of its own connection (the proxy posts both on that
      connection, ``port_channel.cc`` l.117-154; ``connection.cc`` l.399-449): the peer that waits on it
      may read them, nothing else;
    * ``transport``: ``"ib"`` (every port channel over InfiniBand), ``"cudaipc"`` (over CUDA IPC, as
      NVIDIA builds run it: every connection of a rank copies on one stream, ``connection.cc`` l.124-131,
      so a signal or flush on any port channel of the rank orders all its earlier puts; ROCm builds give
      each connection its own stream and order as IB does), or None: by ``nodes[r]``, the node of rank
      ``r``, IB between nodes and CUDA IPC inside one, as the executor chooses; without ``nodes``, IB
      (the conservative reading: it orders least).

    The kernel's end does not wait for the proxy (``Executor::execute`` launches and returns,
    ``executor.cc`` l.548-563): at the end of a rank's kernel its caller reads the output and may
    overwrite the input, so every write into the output must be ordered before the end (a final
    ``wait``), and every port put of the rank flushed; then the plan runs again on the same scratch
    and output, and a second launch's write into a buffer an earlier launch may still read or write is
    a race too (checked once the first launch has none).  Every read of data another threadblock (or
    the proxy) wrote, and every overwrite of data another read or wrote, must be ordered after it; each
    signals: dict = defaultdict(deque)     # (pair, from rank) -> (clock or None if relaxed, wclock, puts it follows)
    input buffer of an in-place plan) must be the all-to-all transpose, and no signal may be left
    unconsumed (a later launch's wait would pass early); threadblocks that cannot go on are reported as
    a deadlock.  Only the first launch's moves are kept for the performance model, which runs one
    launch (``launches=1``: no second launch, no count of leftover signals).  ``counts``: the chunks of
    every pair of an all-to-allv layout, as :func:`simulate_msccl` takes them, else the all-to-all's.
    """
    from ..formats.mscclpp import resolve

    if transport is not None and transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r} is not one of {', '.join(TRANSPORTS)}")
    n = p.nranks
    c = p.chunks_per_shard
    trace = Trace(chunks_per_shard=c)
    res = resolve(p)
    T = layout_counts(n, c, counts)
    inputs = _inputs(T)
    bufs = [{"i": [_PlanSlot(v) for v in inputs[g.id]], "o": [_PlanSlot() for _ in range(n * c)],
             "s": [_PlanSlot() for _ in range(g.scratch_chunks)]} for g in p.gpus]
    tbs = {(g.id, tb.id): tb for g in p.gpus for tb in sorted(g.threadblocks, key=lambda t: t.id)}
    ents = list(tbs) + [(g.id, -1) for g in p.gpus]
    index = {e: k for k, e in enumerate(ents)}
    ops = {e: [o for op in tb.ops for o in (op.ops if op.name == "pipeline" else (op,))] for e, tb in tbs.items()}
    labels = {e: [f"{i}.{j}" if op.name == "pipeline" else str(i) for i, op in enumerate(tb.ops)
                  for j in (range(len(op.ops)) if op.name == "pipeline" else (0,))] for e, tb in tbs.items()}
    by_rank = defaultdict(list)
    for e in tbs:
        by_rank[e[0]].append(e)
    pos = dict.fromkeys(tbs, 0)            # index into ops, then END, twice: launch = pos // (len(ops) + 1)
    count = dict.fromkeys(ents, 0)         # operations each entity ran (its own clock entry)
    clock = {e: np.zeros(len(ents), dtype=np.int64) for e in ents}    # happens-before
    wclock = {e: np.zeros(len(ents), dtype=np.int64) for e in ents}   # plus relaxed signals (write-after only)
    signals: dict = defaultdict(deque)     # (pair, from rank) -> (clock, None if relaxed; wclock; port puts it follows)
    sems = {(g.id, s): deque([(None, None, ())] * v) for g in p.gpus for s, v in enumerate(g.semaphores)}
    arrived: dict = defaultdict(set)       # (rank, barrier id) -> entities waiting there
    released: set = set()                  # entities let through their current barrier
    pending: dict = defaultdict(list)      # (rank, pair) -> its port puts
    last_move: dict = {}
    out_buf = "i" if p.inplace else "o"
    outputs: dict = {}                     # rank -> its output as the caller saw it after launch 1
    seen: set = set()                      # races reported (once per pair of accesses and buffer)
    first = [0]                            # races in the first launch: the second is checked only without any

    def ipc(pair) -> bool:
        if transport is not None:
            return transport == "cudaipc"
        return nodes is not None and nodes[pair[1]] == nodes[pair[2]]

    def launch(e) -> int:
        return pos[e] // (len(ops[e]) + 1)

    def op_at(e):
        k = pos[e] % (len(ops[e]) + 1)
        return None if k == len(ops[e]) else ops[e][k]

    def event(e) -> _At:
        k = pos[e] % (len(ops[e]) + 1)
        return _At(e, count[e], launch(e), labels[e][k] if k < len(ops[e]) else "end")

    def ordered(x, acc, weak=False) -> bool:
        if isinstance(acc, _ProxyPut):
            return any(ordered(x, d, weak) for d in acc.done)
        return acc.e == x or (wclock if weak else clock)[x][index[acc.e]] > acc.k

    def why(x, other) -> str:
        if isinstance(other, _ProxyPut) and ordered(x, other.push):
            if other.noop_flush:
                return ("the put was issued before it, but its flush has no dst_buff entry for the channel "
                        f"({RULE_FLUSH})")
            if other.signalled:
                return ("the put was issued before it, and signalled on its connection, but no wait on that signal is "
                        f"ordered before it ({RULE_PROXY})")
            if other.other_signal:
                return f"the put was issued before it, but only signalled on another connection ({RULE_CONNECTION})"
            return f"the put was issued before it but has not completed ({RULE_PROXY})"
        return "with no signal/wait, semaphore or barrier ordering the two"

    def race(acc, verb, rank, buf, xs, other, rel) -> None:
        at = acc.push if isinstance(acc, _ProxyPut) else acc
        was = other.push if isinstance(other, _ProxyPut) else other
        key = (str(acc).replace(" (launch 2)", ""), str(other).replace(" (launch 2)", ""), at.launch == was.launch,
               rank, buf, xs[0], xs[-1])
        if key in seen or (isinstance(other, _ProxyPut) and other.reported) or (at.launch and first[0]):
            return
        seen.add(key)
        first[0] += not at.launch
        rng = f"{buf}[{xs[0]}]" if len(xs) == 1 else f"{buf}[{xs[0]}..{xs[-1]}]"
        if at.e[1] < 0:
            head = f"gpu {at.e[0]}: the kernel{' (launch 2)' if at.launch else ''} ends and its caller {verb} {rng}"
        else:
            head = f"{acc}: {verb} {rng} of gpu {rank}"
        trace.error(f"{head} {rel} {other}, {why(at.e, other)} (race)")

    def check(acc, verb, rank, buf, lo, size, strong):
        """Accesses of ``bufs[rank][buf][lo:lo+size]`` that ``acc`` is not ordered after, reported by range."""
        bad: dict = {}
        x = acc.push.e if isinstance(acc, _ProxyPut) else acc.e
        for i in range(lo, lo + size):
            slot = bufs[rank][buf][i]
            others = [slot.writer] if slot.writer is not None else []
            if not strong:
                others += slot.readers
            for o in others:
                if not ordered(x, o, weak=not strong):
                    bad.setdefault(id(o), (o, "written by" if o is slot.writer else "read by", []))[2].append(i)
                    break
        for o, rel, xs in bad.values():
            for run in _runs(xs):
                race(acc, verb, rank, buf, run, o, rel)

    def read(ev, rank, buf, lo, size):
        check(ev, "reads", rank, buf, lo, size, strong=True)
        vals, moves = [], []
        for i in range(lo, lo + size):
            slot = bufs[rank][buf][i]
            if slot.value is None and (isinstance(ev, _ProxyPut) or ev.e[1] >= 0):
                trace.error(f"{ev}: reads unwritten chunk {buf}[{i}] of gpu {rank}")
            slot.readers.append(ev)
            vals.append(slot.value)
            moves.append(slot.move)
        return vals, moves

    def write(ev, rank, buf, lo, vals, move):
        check(ev, "writes", rank, buf, lo, len(vals), strong=False)
        for i, v in zip(range(lo, lo + len(vals)), vals):
            slot = bufs[rank][buf][i]
            slot.value, slot.writer, slot.readers, slot.move = v, ev, [], move

    def channel(e, op, i):
        return res[e[0]].channels[e[1]][op.channel_type][op.channel_ids[i]]

    def covered(e, pair, name) -> list:
        """The port puts a signal or flush of ``e`` on channel ``pair`` orders: those of its connection
        (of every CUDA IPC port connection of the rank, on one stream) pushed before it."""
        rank = e[0]
        lst = [q for key, puts in pending.items() if key[0] == rank and ipc(key[1]) for q in puts] \
            if ipc(pair) else pending[(rank, pair)]
        if name == "signal" and not ipc(pair):
            for key, puts in pending.items():
                if key[0] == rank and key[1] != pair:
                    for q in puts:
                        if not q.done and ordered(e, q.push):
                            q.other_signal = True
        lst = [q for q in lst if ordered(e, q.push)]
        for q in lst if name == "signal" else ():
            q.signalled = True
        return lst

    def blocked(e, op):
        """Why ``op`` cannot run now, or None."""
        if op.name in ("wait", "rlxwait"):
            for i in range(len(op.channel_ids)):
                ch = channel(e, op, i)
                if len(signals[(ch.pair, ch.peer)]) < op.channel_ids.count(op.channel_ids[i]):
                    return f"waits for a signal from gpu {ch.peer} on {ch.type} channel {op.channel_ids[i]}"
        elif op.name == "sem_acquire":
            for s in op.semaphore_ids:
                if not sems[(e[0], s)]:
                    return f"waits to acquire semaphore {s}"
        elif op.name == "barrier" and e not in released:
            arrived[(e[0], op.barrier_id)].add(e)
            group = arrived[(e[0], op.barrier_id)]
            if len(group) < op.num_threadblocks:
                return f"waits at barrier {op.barrier_id} ({len(group)} of {op.num_threadblocks} arrived)"
            for clk in (clock, wclock):
                merged = np.max([clk[x] for x in group], axis=0)
                for x in group:
                    np.maximum(clk[x], merged, out=clk[x])
            released.update(group)
            arrived[(e[0], op.barrier_id)] = set()
        return None

    def signal(e, pair, peer_from, strong, puts=()):
        signals[(pair, peer_from)].append((clock[e].copy() if strong else None, wclock[e].copy(), puts))

    def join(e, snap, strong):
        s, w, puts = snap
        for q in puts:          # the waiter sees the port puts the signal followed on its connection
            q.done.append(_At(e, count[e], 0, ""))
        if strong and s is not None:
            np.maximum(clock[e], s, out=clock[e])
        if w is not None:
            np.maximum(wclock[e], w, out=wclock[e])
        np.maximum(wclock[e], clock[e], out=wclock[e])

    def run(e, op):
        rank = e[0]
        ev = event(e)
        clock[e][index[e]] = wclock[e][index[e]] = count[e] + 1
        first = ev.launch == 0
        if op.name in ("put", "pws", "pwsf"):
            remote = res[rank].remote[e[1]][op.channel_type]
            port = op.channel_type == "port"
            for i, (s, d) in enumerate(zip(op.src, op.dst)):
                peer, buf = remote[d.buffer_id]
                rng = f"{s.type}[{s.index}]" if s.size == 1 else f"{s.type}[{s.index}..{s.index + s.size - 1}]"
                acc = _ProxyPut(ev, channel(e, op, i).pair, rng) if port else ev
                vals, moves = read(acc, rank, s.type, s.index, s.size)
                mid = len(trace.moves)
                if first:
                    after = {m for m in moves if m >= 0} | ({last_move[e]} if e in last_move else set())
                    trace.moves.append(Move(rank, peer, tuple(vals), tuple(sorted(after))))
                    last_move[e] = mid
                write(acc, peer, buf, d.index, vals, mid if first else -1)
                if port:
                    pending[(rank, acc.pair)].append(acc)
            if op.name != "put" and op.channel_type == "port":
                for i in range(len(op.channel_ids)):
                    pair = channel(e, op, i).pair
                    if op.name == "pwsf":   # its flush: the putter knows them done
                        for q in covered(e, pair, "flush"):
                            q.done.append(ev)
                    signal(e, pair, rank, True, covered(e, pair, "signal"))
        elif op.name == "get":
            remote = res[rank].remote[e[1]][op.channel_type]
            for s, d in zip(op.src, op.dst):
                peer, buf = remote[s.buffer_id]
                vals, moves = read(ev, peer, buf, s.index, s.size)
                mid = len(trace.moves)
                if first:
                    after = {m for m in moves if m >= 0} | ({last_move[e]} if e in last_move else set())
                    trace.moves.append(Move(peer, rank, tuple(vals), tuple(sorted(after))))
                    last_move[e] = mid
                write(ev, rank, d.type, d.index, vals, mid if first else -1)
        elif op.name == "copy":
            for s, d in zip(op.src, op.dst):
                vals, moves = read(ev, rank, s.type, s.index, s.size)
                write(ev, rank, d.type, d.index, vals, max(moves, default=-1))
        elif op.name in ("signal", "rlxsignal"):
            port = op.channel_type == "port"
            for i in range(len(op.channel_ids)):
                pair = channel(e, op, i).pair
                signal(e, pair, rank, port or op.name == "signal", covered(e, pair, "signal") if port else ())
        elif op.name == "flush":
            ids = op.channel_ids or ()
            done = [ids[i] if i < len(ids) else 0 for i in range(len(op.dst))]
            tb_ports = res[rank].channels[e[1]].get("port", ())
            for i in done:
                for q in covered(e, tb_ports[i].pair, "flush") if i < len(tb_ports) else ():
                    q.done.append(ev)
            for i in set(ids) - set(done):
                for q in pending[(rank, tb_ports[i].pair)]:
                    if ordered(e, q.push) and not ordered(e, q):
                        q.noop_flush = True
        elif op.name in ("wait", "rlxwait"):
            strong = op.name == "wait" or op.channel_type == "port"
            for i in range(len(op.channel_ids)):
                ch = channel(e, op, i)
                join(e, signals[(ch.pair, ch.peer)].popleft(), strong)
        elif op.name == "sem_release":
            for s in op.semaphore_ids:
                sems[(rank, s)].append((clock[e].copy(), wclock[e].copy(), ()))
        elif op.name == "sem_acquire":
            for s in op.semaphore_ids:
                join(e, sems[(rank, s)].popleft(), True)
        released.discard(e)
        count[e] += 1
        pos[e] += 1

    def end(rank) -> None:
        """The end of ``rank``'s kernel: its caller reads the output, may overwrite the input, and launches
        the plan again (stream order: after every threadblock of this launch)."""
        x = (rank, -1)
        group = by_rank[rank] + [x]
        for clk in (clock, wclock):
            merged = np.max([clk[y] for y in group], axis=0)
            for y in group:
                np.maximum(clk[y], merged, out=clk[y])
        nth = count[x] // 2
        ev = _At(x, count[x], nth, "end")
        clock[x][index[x]] = wclock[x][index[x]] = count[x] + 1
        for q in (q for key, puts in pending.items() if key[0] == rank for q in puts):
            if not q.reported and not ordered(x, q) and not (nth and first[0]):
                q.reported = True
                first[0] += not nth
                rule = f"its flush has no dst_buff entry for the channel ({RULE_FLUSH})" if q.noop_flush else RULE_PROXY
                trace.error(f"{q.push}: the port put of {q.src} into gpu {q.pair[1] + q.pair[2] - rank} is not flushed "
                            f"before the kernel{' (launch 2)' if nth else ''} ends, and the proxy may still read its "
                            f"source after it: {rule} (race)")
        size = len(bufs[rank][out_buf])
        vals, _ = read(ev, rank, out_buf, 0, size)
        if nth == 0:
            outputs[rank] = vals
        count[x] += 1
        ev = _At(x, count[x], nth, "end")
        clock[x][index[x]] = wclock[x][index[x]] = count[x] + 1
        write(ev, rank, "i", 0, list(inputs[rank]), -1)
        count[x] += 1
        for y in by_rank[rank]:
            np.maximum(clock[y], clock[x], out=clock[y])
            np.maximum(wclock[y], wclock[x], out=wclock[y])
            pos[y] += 1

    def sweep(nth) -> bool:
        moved = False
        for e in tbs:
            while launch(e) == nth and pos[e] < launches * (len(ops[e]) + 1) and op_at(e) is not None \
                    and blocked(e, op_at(e)) is None:
                run(e, op_at(e))
                moved = True
        return moved

    def ends() -> bool:
        moved = False
        for g in p.gpus:
            if count[(g.id, -1)] < 2 * launches and all(op_at(e) is None and launch(e) == count[(g.id, -1)] // 2
                                              for e in by_rank[g.id]):
                end(g.id)
                moved = True
        return moved

    while sweep(0) or ends() or (launches > 1 and sweep(1)):
        pass
    stuck = [e for e in tbs if pos[e] < launches * (len(ops[e]) + 1) and op_at(e) is not None]
    if stuck:
        desc = [f"{event(e)} {blocked(e, op_at(e))}" for e in stuck[:4]]
        trace.error(f"deadlock: {len(stuck)} threadblock(s) cannot progress: {'; '.join(desc)}"
                    + (" ..." if len(stuck) > 4 else ""))
    elif launches > 1:
        left = sorted((pair, src, len(q)) for (pair, src), q in signals.items() if q)
        for pair, src, k in left[:1]:
            peer = pair[1] + pair[2] - src
            trace.error(f"gpu {src}: signals its {pair[0]} connection {pair[3]} to gpu {peer} more often than gpu "
                        f"{peer} waits on it ({k} left after two launches): a later launch's wait would pass early")
    _check_outputs(trace, [outputs.get(g.id, [sl.value for sl in bufs[g.id][out_buf]]) for g in p.gpus], T,
                   buf=out_buf)
    return trace.finish()


def _runs(xs: list[int]) -> list[list[int]]:
    """``xs`` (ascending) cut into runs of consecutive integers."""
    out: list[list[int]] = []
    for x in xs:
        if out and out[-1][-1] == x - 1:
            out[-1].append(x)
        else:
            out.append([x])
    return out
