"""Lowering a link schedule to an MSCCL++ execution plan (Basu et al. §4); the format is
:mod:`a2a_compiler.formats.mscclpp`, the executor's limits :mod:`a2a_compiler.formats.mscclpp_rules`.

Chunks get the buffer slots of :func:`~a2a_compiler.lower.placement.place` (one lane).
Layout of rank ``v`` (docs/formats.md):

* threadblock 0, the *sink*: copies the self shard, tells every in-neighbour ``u`` it
  may write (``rlxsignal``: this rank's previous run is over), then waits until each has
  written everything it sends here (``wait``);
* threadblock ``1 + j`` sends to the j-th out-neighbour ``w``: after the sink of ``w``
  said it may (``rlxwait``), for each schedule step it waits for the chunks it relays to
  have arrived, ``put`` s the step's runs into ``w``'s scratch (relayed chunks) or output
  (delivered ones), up to 8 per operation, and signals the threadblocks of ``w`` that will
  relay them; at the end it signals the sink of ``w`` and, over port channels, flushes every
  channel it put on.

Every signal has its own connection, one per (producer threadblock, consumer
threadblock): a producer signals a consumer after each of its steps whose chunks the
consumer relays first, and the consumer waits once for each, so counts always match.  Ranks on
one node (``nodes``) use memory channels, across nodes port channels.  A port put is work for
the rank's proxy, and the executor orders it only on its own connection (one IB queue pair per
channel; :func:`~a2a_compiler.verify.simulate.simulate_mscclpp` cites the rules): so a relayed
chunk is put on the very connection whose signal tells its relay it arrived, a delivered one on
the sink's, whose final signal the sink waits for, and each sender ends with an effective
``flush`` (a ``dst_buff`` entry per channel) of the channels it put on, as the kernel's end does
not wait for the proxy and the next launch reuses the buffers its puts read.  ``nop`` s
(``__syncthreads``) separate the threads copying data from the thread that signals, and a wait
from the copy that reads its data.
"""

from __future__ import annotations

from collections import defaultdict

from ..chunk.ir import LinkSchedule
from ..errors import A2AError
from ..formats.mscclpp import BuffRef, Channel, Gpu, MscclppProgram, Op, RemoteBuffer, ThreadBlock
from ..formats.mscclpp_rules import MAX_CHANNEL, MAX_CHANNEL_PER_OPERATION, MAX_OPERATION
from . import program_name, record_of
from .placement import check_balanced_layout, place

#: Formats that scale further than an MSCCL++ plan, named when a program does not fit.
SCALES_FURTHER = "--emit mpi (MPI path schedules) or --emit msccl"


def lower_mscclpp(schedule: LinkSchedule, *, name: str | None = None, nodes=None) -> MscclppProgram:
    """Lower a time-stepped link schedule to an out-of-place MSCCL++ all-to-all plan (module docstring).

    ``nodes[r]``: the node (server) of rank ``r`` (default: each rank its own); ranks of one node
    share memory channels, others port channels
    (:func:`~a2a_compiler.topology.switched.host_nodes`).  An all-to-allv schedule (a balanced
    demand) is laid out as MSCCL lays it (:func:`~a2a_compiler.lower.msccl.lower_msccl`): fixed-size
    buffers of ``N·C`` chunks, ``T[i][j]`` chunks of rank ``i`` for rank ``j``
    (:func:`~a2a_compiler.chunk.counts.msccl_counts`), and the plan's record holds the demand's
    volumes, from which ``a2a verify`` and ``a2a run`` recompute ``T``.  Raises :class:`A2AError`, one
    line naming the limit, when a threadblock would exceed the executor's operations or channels, or
    when the schedule's chunk counts are not that layout.
    """
    check_balanced_layout(schedule, "MSCCL++")
    pl = place(schedule, lanes=1)
    node = list(range(schedule.n_ranks)) if nodes is None else [int(x) for x in nodes]
    n, C = pl.n_ranks, pl.chunks_per_shard
    kind = {}
    runs: dict[tuple[int, int], list] = defaultdict(list)   # (u, v) -> runs u -> v in order
    for r in pl.runs:
        runs[(r.src, r.dst)].append(r)
        kind[(r.src, r.dst)] = kind[(r.dst, r.src)] = "memory" if node[r.src] == node[r.dst] else "port"
    by_id = {r.id: r for r in pl.runs}
    relay = {(r.src, x): r.dst for r in pl.runs if r.srcbuf == "s" for x in range(r.srcoff, r.srcoff + r.cnt)}
    outs = {v: sorted(w for (u, w) in runs if u == v) for v in range(n)}
    ins = {v: sorted(u for (u, w) in runs if w == v) for v in range(n)}
    # need[(u, v, w)]: (step t, step s) when v's sender to w, at step t, first needs what u put into v up to
    # step s: u's sender signals it after its step-s puts, and it waits once before its step-t puts
    need: dict[tuple[int, int, int], list[tuple[int, int]]] = defaultdict(list)
    for (v, w), lst in sorted(runs.items()):
        best: dict[int, int] = {}
        first: dict[tuple[int, int], int] = {}      # (step t, u) -> the latest step of u that step t relays
        for r in lst:
            for a in r.after:
                key = (r.step, by_id[a].src)
                first[key] = max(first.get(key, -1), by_id[a].step)
        for (t, u), s in sorted(first.items()):
            if s > best.get(u, -1):
                best[u] = s
                need[(u, v, w)].append((t, s))
    # connections of each rank pair in one order both ends agree on (the executor pairs the k-th with the k-th)
    conns: dict[frozenset, list] = defaultdict(list)
    for (u, v) in sorted(runs):
        conns[frozenset((u, v))].append(("sink", u, v, -1))
        conns[frozenset((u, v))] += [("feed", u, v, w) for w in outs[v] if need.get((u, v, w))]
    for key in conns:
        conns[key].sort(key=lambda c: (c[1], c[2], c[0] != "sink", c[3]))
    index: dict[tuple[int, tuple], int] = {}   # (rank, connection) -> its index among the rank's channels of its type
    channels = []
    for v in range(n):
        lists: dict[str, list[int]] = {"memory": [], "port": []}
        for peer in sorted(set(outs[v]) | set(ins[v])):
            for c in conns[frozenset((v, peer))]:
                index[(v, c)] = len(lists[kind[(v, peer)]])
                lists[kind[(v, peer)]].append(peer)
        channels.append(tuple(Channel(t, tuple(p)) for t, p in lists.items() if p))
    gpus = []
    for v in range(n):
        tbs = [_sink(v, [c for c in pl.copies if c.rank == v], ins[v], kind, index)]
        remote = []
        for w in outs[v]:
            tbs.append(_sender(v, w, len(tbs), runs[(v, w)], need, ins[v], outs[w], kind, index, remote, relay))
        gpus.append(Gpu(v, n * C, n * C, pl.scratch[v], tuple(tbs), channels[v], tuple(remote), ()))
    return MscclppProgram(program_name(schedule, name), "alltoall", "Simple", False, tuple(gpus),
                          record=record_of(schedule, volumes=True))


class _Block:
    """A threadblock under construction: its channel and remote buffer ids, its operations."""

    def __init__(self, v: int, tb: int, index: dict):
        self.v, self.tb, self.index = v, tb, index
        self.chans: dict[str, list[int]] = defaultdict(list)
        self.bufs: dict[str, list[int]] = defaultdict(list)
        self.ops: list[Op] = []

    def chan(self, kind: str, conn) -> int:
        gid = self.index[(self.v, conn)]
        lst = self.chans[kind]
        if gid not in lst:
            lst.append(gid)
        return lst.index(gid)

    def sync(self, name: str, kind: str, conns) -> None:
        """``name`` (signal, wait, ...) on the connections ``conns``, at most 8 per operation."""
        ids = [self.chan(kind, c) for c in conns]
        for a in range(0, len(ids), MAX_CHANNEL_PER_OPERATION):
            self.ops.append(Op(name, channel_type=kind, channel_ids=tuple(ids[a:a + MAX_CHANNEL_PER_OPERATION])))

    def nop(self) -> None:
        if self.ops and self.ops[-1].name != "nop":
            self.ops.append(Op("nop"))

    def finish(self) -> ThreadBlock:
        flat = sum(1 + len(o.ops or ()) for o in self.ops)
        if flat > MAX_OPERATION:
            raise A2AError(f"gpu {self.v} threadblock {self.tb} needs {flat} operations, over the MSCCL++ "
                           f"executor's {MAX_OPERATION} per threadblock; use fewer chunks per shard (--max-chunks) "
                           f"or {SCALES_FURTHER}")
        for k, ids in list(self.chans.items()) + list(self.bufs.items()):
            if len(ids) > MAX_CHANNEL:
                raise A2AError(f"gpu {self.v} threadblock {self.tb} needs {len(ids)} {k} channels or buffers, over "
                               f"the MSCCL++ executor's {MAX_CHANNEL} per threadblock (degree too high); use "
                               f"{SCALES_FURTHER}")
        return ThreadBlock(self.tb, tuple(self.ops), tuple((k, tuple(v)) for k, v in self.chans.items() if v),
                           tuple((k, tuple(v)) for k, v in self.bufs.items() if v))


def _sink(v: int, copies: list, ins: list[int], kind: dict, index: dict) -> ThreadBlock:
    b = _Block(v, 0, index)
    b.ops += [Op("copy", (BuffRef("i", None, c.off, c.cnt),), (BuffRef("o", None, c.off, c.cnt),)) for c in copies]
    for t in ("memory", "port"):
        peers = [u for u in ins if kind[(u, v)] == t]
        if peers:
            b.nop()
            b.sync("rlxsignal", t, [("sink", u, v, -1) for u in peers])
    for t in ("memory", "port"):
        peers = [u for u in ins if kind[(u, v)] == t]
        if peers:
            b.sync("wait", t, [("sink", u, v, -1) for u in peers])
    return b.finish()


def _remote(b: _Block, remote: list, w: int, buf: str, kind: str) -> int:
    """The threadblock-local id of buffer ``buf`` of rank ``w`` (added to the GPU's remote buffers once)."""
    rb = RemoteBuffer(w, buf, (kind,))
    if rb not in remote:
        remote.append(rb)
    gid = remote.index(rb)
    if gid not in b.bufs[kind]:
        b.bufs[kind].append(gid)
    return b.bufs[kind].index(gid)


def _segments(r, relay: dict) -> list[tuple[int, int, int | None]]:
    """Run ``r`` cut into ``(offset, count, x)``: chunks its receiver relays to ``x`` (None: delivered)."""
    out: list[list] = []
    for k in range(r.cnt):
        x = relay.get((r.dst, r.dstoff + k)) if r.dstbuf == "s" else None
        if out and out[-1][2] == x:
            out[-1][1] += 1
        else:
            out.append([k, 1, x])
    return [tuple(seg) for seg in out]


def _sender(v: int, w: int, tb: int, runs: list, need: dict, ins: list[int], downstream: list[int], kind: dict,
            index: dict, remote: list, relay: dict) -> ThreadBlock:
    b = _Block(v, tb, index)
    out = kind[(v, w)]
    sink = ("sink", v, w, -1)
    b.sync("rlxwait", out, [sink])
    waits: dict[int, list] = defaultdict(list)      # step -> connections to wait on before its puts
    for u in ins:
        for t, _ in need.get((u, v, w), ()):
            waits[t].append(("feed", u, v, w))
    signals: dict[int, list] = defaultdict(list)    # step -> consumers to signal after its puts
    for x in downstream:
        for _, t in need.get((v, w, x), ()):
            signals[t].append(("feed", v, w, x))
    steps: dict[int, list] = defaultdict(list)
    for r in runs:
        steps[r.step].append(r)
    flush: dict = {}                                # port connection -> the last destination put on it
    for t, lst in sorted(steps.items()):
        for k in ("memory", "port"):
            conns = [c for c in waits.get(t, ()) if kind[(c[1], v)] == k]
            if conns:
                b.sync("wait", k, conns)
        if waits.get(t):
            b.nop()
        pairs = []                                  # (source, destination, connection)
        for r in lst:
            buf = _remote(b, remote, w, r.dstbuf, out)
            for off, cnt, x in (_segments(r, relay) if out == "port" else [(0, r.cnt, None)]):
                conn = sink if x is None else ("feed", v, w, x)
                pairs.append((BuffRef(r.srcbuf, None, r.srcoff + off, cnt), BuffRef(None, buf, r.dstoff + off, cnt),
                              conn))
        for a in range(0, len(pairs), MAX_CHANNEL_PER_OPERATION):
            part = pairs[a:a + MAX_CHANNEL_PER_OPERATION]
            ids = tuple(b.chan(out, c) for _, _, c in part) if out == "port" else None
            b.ops.append(Op("put", tuple(x for x, _, _ in part), tuple(y for _, y, _ in part), out, ids))
            flush.update((c, y) for _, y, c in part)
        if signals.get(t):
            b.nop()
            b.sync("signal", out, signals[t])
    b.nop()
    b.sync("signal", out, [sink])
    if out == "port":   # an effective flush: one dst_buff entry per channel (the last destination put on it)
        conns = sorted(flush, key=lambda c: b.chan(out, c))
        for a in range(0, len(conns), MAX_CHANNEL_PER_OPERATION):
            part = conns[a:a + MAX_CHANNEL_PER_OPERATION]
            b.ops.append(Op("flush", (), tuple(flush[c] for c in part), out, tuple(b.chan(out, c) for c in part)))
    return b.finish()
