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
    ``nchunksperloop``; :meth:`~a2a_compiler.demand.Demand.msccl_counts`), else the all-to-all's.
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


class _PlanSlot:
    __slots__ = ("value", "writer", "readers", "move", "pending")

    def __init__(self, value=None):
        self.value, self.writer, self.readers, self.move, self.pending = value, None, [], -1, None


def simulate_mscclpp(p: MscclppProgram) -> Trace:
    """Execute an MSCCL++ plan symbolically (docs/formats.md, "MSCCL++ execution plans").

    Assumes :func:`~a2a_compiler.formats.mscclpp_rules.check_rules` found it sound.  Every
    threadblock runs its operations in order (a ``pipeline``'s inner operations once, over their
    whole range).  A ``signal`` on a channel adds one to the peer's end of that connection and a
    ``wait`` takes one, blocking while there is none; ``sem_release`` / ``sem_acquire`` do the same
    on a GPU's device semaphores, ``barrier`` blocks until ``num_threadblocks`` arrive.  A memory
    channel ``put`` writes the peer's buffer at once; a port channel ``put`` completes at the next
    ``signal`` or ``flush`` of the same threadblock on the same channel (until then its data must
    not be read).  Happens-before follows program order, signal -> wait (not the relaxed
    ``rlxsignal`` / ``rlxwait``), release -> acquire and barriers, by vector clocks: every read of
    data another threadblock wrote, and every overwrite of data another read, must be ordered after
    it.  At the end each rank's output (the input buffer of an in-place plan) must be the
    all-to-all transpose; threadblocks that cannot go on are reported as a deadlock.
    """
    from ..formats.mscclpp import resolve

    n = p.nranks
    c = p.chunks_per_shard
    trace = Trace(chunks_per_shard=c)
    res = resolve(p)
    inputs = _inputs(layout_counts(n, c))
    bufs = [{"i": [_PlanSlot(v) for v in inputs[g.id]], "o": [_PlanSlot() for _ in range(n * c)],
             "s": [_PlanSlot() for _ in range(g.scratch_chunks)]} for g in p.gpus]
    ents = [(g.id, tb.id) for g in p.gpus for tb in sorted(g.threadblocks, key=lambda t: t.id)]
    index = {e: k for k, e in enumerate(ents)}
    tbs = {(g.id, tb.id): tb for g in p.gpus for tb in g.threadblocks}
    ops = {e: [o for op in tb.ops for o in (op.ops if op.name == "pipeline" else (op,))] for e, tb in tbs.items()}
    labels = {e: [f"{i}.{j}" if op.name == "pipeline" else str(i) for i, op in enumerate(tb.ops)
                  for j in (range(len(op.ops)) if op.name == "pipeline" else (0,))] for e, tb in tbs.items()}
    pc = dict.fromkeys(ents, 0)
    clock = {e: np.zeros(len(ents), dtype=np.int64) for e in ents}
    signals: dict = defaultdict(deque)    # (pair, from rank) -> snapshots (None: relaxed)
    sems = {(g.id, s): deque([None] * v) for g in p.gpus for s, v in enumerate(g.semaphores)}
    arrived: dict = defaultdict(set)      # (rank, barrier id) -> entities waiting there
    released: set = set()                 # entities let through their current barrier
    pending: dict = defaultdict(list)     # (entity, pair) -> slots of port puts not yet complete
    last_move: dict = {}
    out_buf = "i" if p.inplace else "o"

    def where(e):
        return f"gpu {e[0]} tb {e[1]} op {labels[e][pc[e]] if pc[e] < len(labels[e]) else pc[e]}"

    def ordered(e, who) -> bool:
        return who[0] == e or clock[e][index[who[0]]] > who[1]

    def read(e, rank, buf, lo, size):
        vals, moves = [], []
        for x in range(lo, lo + size):
            slot = bufs[rank][buf][x]
            if slot.value is None:
                trace.error(f"{where(e)}: reads unwritten chunk {buf}[{x}] of gpu {rank}")
            elif slot.pending is not None:
                trace.error(f"{where(e)}: reads {buf}[{x}] of gpu {rank} before the port put of gpu "
                            f"{slot.pending[0]} tb {slot.pending[1]} that writes it is flushed or signalled")
            elif slot.writer is not None and not ordered(e, slot.writer):
                w = slot.writer[0]
                trace.error(f"{where(e)}: reads {buf}[{x}] of gpu {rank} written by gpu {w[0]} tb {w[1]} with no "
                            f"signal/wait, semaphore or barrier ordering the two (race)")
            slot.readers.append((e, pc[e]))
            vals.append(slot.value)
            moves.append(slot.move)
        return vals, moves

    def write(e, rank, buf, lo, vals, move, port_pair=None):
        for x, v in zip(range(lo, lo + len(vals)), vals):
            slot = bufs[rank][buf][x]
            for other in ([slot.writer] if slot.writer else []) + slot.readers:
                if not ordered(e, other):
                    trace.error(f"{where(e)}: writes {buf}[{x}] of gpu {rank} with no ordering after gpu "
                                f"{other[0][0]} tb {other[0][1]} op {labels[other[0]][other[1]]} (race)")
                    break
            slot.value, slot.writer, slot.readers, slot.move = v, (e, pc[e]), [], move
            slot.pending = None
            if port_pair is not None:
                slot.pending = e
                pending[(e, port_pair)].append(slot)

    def complete(e, pair):
        for slot in pending.pop((e, pair), []):
            if slot.pending == e:
                slot.pending = None
                slot.writer = (e, pc[e])   # visible to those ordered after this signal or flush

    def channel(e, op, i):
        return res[e[0]].channels[e[1]][op.channel_type][op.channel_ids[i]]

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
            merged = np.max([clock[x] for x in group], axis=0)
            for x in group:
                np.maximum(clock[x], merged, out=clock[x])
            released.update(group)
            arrived[(e[0], op.barrier_id)] = set()
        return None

    def run(e, op):
        rank, k = e[0], pc[e]
        if op.name in ("put", "pws", "pwsf"):
            remote = res[rank].remote[e[1]][op.channel_type]
            for i, (s, d) in enumerate(zip(op.src, op.dst)):
                vals, moves = read(e, rank, s.type, s.index, s.size)
                peer, buf = remote[d.buffer_id]
                after = {m for m in moves if m >= 0} | ({last_move[e]} if e in last_move else set())
                mid = len(trace.moves)
                trace.moves.append(Move(rank, peer, tuple(vals), tuple(sorted(after))))
                last_move[e] = mid
                port = channel(e, op, i).pair if op.channel_type == "port" else None
                write(e, peer, buf, d.index, vals, mid, port)
            if op.name != "put":
                for i in range(len(op.channel_ids)):
                    ch = channel(e, op, i)
                    complete(e, ch.pair)
                    signals[(ch.pair, rank)].append(None)
        elif op.name == "get":
            remote = res[rank].remote[e[1]][op.channel_type]
            for s, d in zip(op.src, op.dst):
                peer, buf = remote[s.buffer_id]
                vals, moves = read(e, peer, buf, s.index, s.size)
                after = {m for m in moves if m >= 0} | ({last_move[e]} if e in last_move else set())
                mid = len(trace.moves)
                trace.moves.append(Move(peer, rank, tuple(vals), tuple(sorted(after))))
                last_move[e] = mid
                write(e, rank, d.type, d.index, vals, mid)
        elif op.name == "copy":
            for s, d in zip(op.src, op.dst):
                vals, moves = read(e, rank, s.type, s.index, s.size)
                write(e, rank, d.type, d.index, vals, max(moves, default=-1))
        elif op.name in ("signal", "rlxsignal", "flush"):
            for i in range(len(op.channel_ids)):
                ch = channel(e, op, i)
                complete(e, ch.pair)
                if op.name != "flush":
                    signals[(ch.pair, rank)].append(clock[e].copy() if op.name == "signal" else None)
        elif op.name in ("wait", "rlxwait"):
            for i in range(len(op.channel_ids)):
                ch = channel(e, op, i)
                snap = signals[(ch.pair, ch.peer)].popleft()
                if op.name == "wait" and snap is not None:
                    np.maximum(clock[e], snap, out=clock[e])
        elif op.name == "sem_release":
            for s in op.semaphore_ids:
                sems[(rank, s)].append(clock[e].copy())
        elif op.name == "sem_acquire":
            for s in op.semaphore_ids:
                snap = sems[(rank, s)].popleft()
                if snap is not None:
                    np.maximum(clock[e], snap, out=clock[e])
        released.discard(e)
        pc[e] = k + 1
        clock[e][index[e]] = k + 1

    active = list(ents)
    while active:
        moved, still = False, []
        for e in active:
            while pc[e] < len(ops[e]) and blocked(e, ops[e][pc[e]]) is None:
                run(e, ops[e][pc[e]])
                moved = True
            if pc[e] < len(ops[e]):
                still.append(e)
        active = still
        if not moved:
            break
    if active:
        stuck = [f"{where(e)} {blocked(e, ops[e][pc[e]])}" for e in active[:4]]
        trace.error(f"deadlock: {len(active)} threadblock(s) cannot progress: {'; '.join(stuck)}"
                    + (" ..." if len(active) > 4 else ""))
    for e, lst in pending.items():
        if lst:
            trace.error(f"gpu {e[0][0]} tb {e[0][1]}: a port put on channel {e[1]} is never flushed or signalled")
            break
    _check_outputs(trace, [[sl.value for sl in bufs[g.id][out_buf]] for g in p.gpus], np.full((n, n), c),
                   buf=out_buf)
    return trace.finish()
