"""Buffer placement of a time-stepped link schedule (Basu et al. §4, "Link-based Schedules").

Shared by the MSCCL and oneCCL lowerings.  Every chunk gets a concrete buffer
location on every rank it visits:

* chunk ``(s, d, k)`` starts in ``i[d·C+k]`` on ``s`` and ends in ``o[s·C+k]`` on ``d``;
  with a demand (``T[s][d]`` chunks for pair ``(s, d)``, the layout of an
  all-to-allv with fixed-size buffers) in ``i[Σ_{j<d} T[s][j] + k]`` and
  ``o[Σ_{j<s} T[j][d] + k]``;
* on a relay it is received into a fresh scratch slot (slots are handed out in
  arrival order and never reused, so no write ever clobbers live data).

With ``instances = I`` each chunk is split into ``I`` sub-chunks (``C·I`` chunks
per shard; sub-chunk ``j·C+k`` is part ``j`` of chunk ``k``) and instance ``j``
runs a copy of the schedule on its own sub-chunks.  With ``lanes = K`` the
chunks of each transfer are split into ``K`` contiguous blocks, one per lane
(MSCCL channel), rotated by the time step so single-chunk transfers spread
evenly.  Each lane block is cut into :class:`Run` s: chunks contiguous on both
the sender and the receiver, at most ``max_cnt`` long, which become one send and
one receive.

With ``rcs`` (MSCCL), a relay passes a chunk straight on where the reference's
``rcs`` (receive-copy-send) allows it: the step reads and writes one slot, and
by msccl-tools' convention both ends of every transfer name the same slots, so
the chunk must sit at the same place on the relay, its sender and its receiver.
On a three-hop path ``s -> u -> v -> d`` that place is ``o[s·C+k]``, where ``d``
keeps the chunk and where ``u`` and ``v`` would later keep their own chunk
``k`` from ``s``: when both of those arrive after the chunk has left ``v``
(:func:`rcs_chains`), ``u`` and ``v`` stage it in ``o[s·C+k]`` instead of
scratch, ``v`` forwards it with one ``rcs`` step on a channel of its own, and
the receives of ``u``'s and ``v``'s own chunks wait for the staged copy to be
sent (``recv_after``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..chunk.counts import msccl_counts
from ..chunk.ir import LinkSchedule, validate
from ..errors import A2AError

_BUF_ORDER = {"i": 0, "o": 1, "s": 2}


@dataclass(frozen=True)
class Run:
    """``cnt`` chunks moved ``src -> dst`` in schedule step ``step`` on ``lane``.

    ``after`` lists the ids of the earlier runs whose receives wrote the chunks
    this run reads on ``src`` (its data dependencies); ``recv_after`` those whose
    sends on ``dst`` read the slots this run overwrites (a staged chunk's slot);
    ``forwards`` is the run whose receive on ``src`` this run is fused with by
    ``rcs`` (else -1).
    """

    id: int
    step: int
    lane: int
    src: int
    dst: int
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    after: tuple[int, ...]
    recv_after: tuple[int, ...] = ()
    forwards: int = -1


@dataclass(frozen=True)
class Copy:
    """Local copy of ``cnt`` chunks ``i[off] -> o[off]`` on ``rank`` (the self shard)."""

    rank: int
    off: int
    cnt: int


@dataclass(frozen=True)
class Placement:
    """Where every chunk move of a link schedule reads and writes, per rank (§4): the runs, the self copies, scratch per rank."""

    n_ranks: int
    chunks_per_shard: int  # C·I, the chunks per shard of the lowered program
    lanes: int             # K·I, plus one per rcs channel
    runs: tuple[Run, ...]
    copies: tuple[Copy, ...]
    scratch: tuple[int, ...]  # scratch slots used per rank
    counts: np.ndarray        # chunks of every pair in the program (C·I everywhere, or T·I with a demand)

    @property
    def in_chunks(self) -> np.ndarray:
        """Input buffer chunks of each rank (row sums of :attr:`counts`)."""
        return self.counts.sum(axis=1)

    @property
    def out_chunks(self) -> np.ndarray:
        """Output buffer chunks of each rank (column sums of :attr:`counts`)."""
        return self.counts.sum(axis=0)


def check_store_and_forward(fabric) -> None:
    """Refuse NIC forwarding with a host bandwidth: the link lowerings relay every chunk through
    the ranks' scratch buffers (host store-and-forward, Basu et al. §3.2.2), so a schedule priced
    as NIC cut-through would claim a time its program cannot reach."""
    if fabric.forwarding == "nic" and fabric.host_bw is not None:
        raise A2AError("--forwarding nic cannot be lowered to MSCCL or oneCCL: their programs relay chunks "
                       "through the ranks' scratch buffers (host store-and-forward), where relayed traffic "
                       "crosses the host bandwidth too; use --forwarding host, or --emit mpi for NIC-routed paths")


def check_balanced_layout(schedule: LinkSchedule, fmt: str) -> None:
    """Refuse an all-to-allv schedule whose chunk counts are not the fixed-size-buffer layout of its demand
    (:func:`~a2a_compiler.chunk.counts.msccl_counts`: every row and column summing to ``N·C``), the one
    ``fmt`` (MSCCL, MSCCL++) files are verified and run in; unbalanced matrices are refused there."""
    if schedule.demand is None:
        return
    want = msccl_counts(schedule.demand, schedule.chunks_per_shard, fmt)
    if not np.array_equal(schedule.counts(), want):
        raise A2AError(f"this all-to-allv schedule's chunk counts do not give every rank the same buffer size; "
                       f"{fmt} needs a matrix whose rows and columns all sum to the same total: use the MPI "
                       f"path format (--emit mpi) or oneCCL-style XML (--emit oneccl)")


def _split(n: int, max_cnt: int | None):
    """Offsets/lengths cutting ``n`` consecutive chunks into pieces of at most ``max_cnt``."""
    size = max_cnt or max(n, 1)
    return [(a, min(size, n - a)) for a in range(0, n, size)]


def rcs_chains(schedule: LinkSchedule) -> tuple[dict, dict]:
    """The chunks a relay can pass straight on with ``rcs``, and the channel of each (module docstring).

    A chunk ``(s, d, k)`` on a three-hop path ``s -> u -> v -> d`` (hops in
    steps ``t1 < t2 < t3``) qualifies when ``u`` and ``v`` receive their own
    chunk ``k`` from ``s`` after step ``t2`` and no other staged chunk uses that
    slot on them.  Chains ``(u, v, d)`` share an rcs channel when no link would
    carry two kinds of traffic on it: a link ``u -> v`` on a channel feeds one
    ``rcs`` at ``v`` towards one ``d``, a link ``v -> d`` leaves one ``rcs`` fed
    from one ``u``.  Returns ``{chunk: (u, v, d)}`` and ``{(u, v, d): channel}``
    (channels numbered from 0).
    """
    path: dict = {}
    for t, step in enumerate(schedule.steps):
        for tr in step:
            for ch in tr.chunks:
                path.setdefault(tuple(ch), []).append((t, tr.src, tr.dst))
    arrival = {(hops[-1][2], ch): hops[-1][0] for ch, hops in path.items()}
    staged: set = set()
    chains, channel, roles = {}, {}, []
    for (s, d, k), hops in sorted(path.items()):
        if len(hops) != 3:
            continue
        (_, _, u), (t2, _, v) = hops[0], hops[1]
        if s in (u, v) or min(arrival[(u, (s, u, k))], arrival[(v, (s, v, k))]) <= t2 or {(u, s, k), (v, s, k)} & staged:
            continue
        chain = (u, v, d)
        if chain not in channel:
            need = {(u, v): ("feeds", d), (v, d): ("leaves", u)}
            channel[chain] = next((c for c, used in enumerate(roles)
                                   if all(used.get(link, role) == role for link, role in need.items())), len(roles))
            if channel[chain] == len(roles):
                roles.append({})
            roles[channel[chain]].update(need)
        staged |= {(u, s, k), (v, s, k)}
        chains[(s, d, k)] = chain
    return chains, channel


def place(schedule: LinkSchedule, *, lanes: int = 1, instances: int = 1, max_cnt: int | None = None,
          rcs: bool = False) -> Placement:
    """Assign buffers to every chunk move of ``schedule``; see the module docstring.

    The schedule's invariants are checked first (:func:`a2a_compiler.chunk.ir.validate`:
    real links, a chunk sent only by its holder, delivered exactly once), so an
    invalid schedule raises :class:`~a2a_compiler.errors.FormatError`.
    """
    if lanes < 1 or instances < 1:
        raise A2AError("channels and instances must be at least 1")
    if rcs and schedule.demand is not None:
        raise A2AError("--rcs stages relayed chunks in the relay's own output slots, which an all-to-allv "
                       "layout does not have for every chunk; compile without --rcs")
    check_store_and_forward(schedule.fabric)
    validate(schedule)
    n, c = schedule.n_ranks, schedule.chunks_per_shard
    ci = c * instances
    T = schedule.counts()                     # chunks of each pair per instance
    units = T * instances
    in_off = np.cumsum(units, axis=1) - units          # i[in_off[s, d] + k] holds unit k of (s, d) on s
    out_off = np.cumsum(units, axis=0) - units         # o[out_off[s, d] + k] receives it on d
    chains, channel = rcs_chains(schedule) if rcs else ({}, {})
    # loc[r][unit] = (buf, off, id of the run whose receive wrote it, or -1); unit = (s, d, j·T+k)
    loc = [{(r, d, k): ("i", int(in_off[r, d]) + k, -1) for d in range(n) if d != r for k in range(units[r, d])}
           for r in range(n)]
    cut = _Cutter(n, T, out_off, max_cnt)
    hop: dict = {}  # chunk -> hops made so far
    for t, transfers in enumerate(schedule.steps):
        for tr in sorted(transfers, key=lambda x: (x.src, x.dst)):
            u, v = tr.src, tr.dst
            chunks = [tuple(ch) for ch in tr.chunks]
            for ch in chunks:
                hop[ch] = hop.get(ch, 0) + 1
            relayed = [ch for ch in chunks if ch in chains and hop[ch] == 2]   # sent on to an rcs
            chunks = [ch for ch in chunks if not (ch in chains and hop[ch] == 3)]  # the rcs sent them already
            held = loc[u]
            for j in range(instances):
                def units_of(chs):
                    return sorted(((s, d, j * int(T[s, d]) + k) for s, d, k in chs),
                                  key=lambda x: (_BUF_ORDER[held[x][0]], held[x][1]))
                block = units_of(ch for ch in chunks if ch not in relayed)
                nb = len(block)
                for part in range(lanes):
                    piece = block[part * nb // lanes:(part + 1) * nb // lanes]
                    if piece:
                        cut(piece, held, t, j * lanes + (part + t) % lanes, u, v, chains)
                for chain in sorted({chains[ch] for ch in relayed}):
                    piece = units_of(ch for ch in relayed if chains[ch] == chain)
                    cut(piece, held, t, lanes * instances + channel[chain], u, v, chains, forward_to=chain[2])
        for v, x, where in cut.arrived:
            loc[v][x] = where
        cut.arrived = []
    copies = tuple(Copy(r, int(in_off[r, r]) + a, m) for r in range(n) for a, m in _split(int(units[r, r]), max_cnt))
    return Placement(n, ci, lanes * instances + len(set(channel.values())), tuple(cut.runs), copies,
                     tuple(cut.scratch), units)


class _Cutter:
    """Gives chunks their receiver slots and cuts lane blocks into :class:`Run` s (see :func:`place`)."""

    def __init__(self, n: int, T: np.ndarray, out_off: np.ndarray, max_cnt: int | None):
        self.T, self.out_off, self.max_cnt = T, out_off, max_cnt
        self.runs: list[Run] = []
        self.arrived: list = []                # (rank, unit, (buf, off, run id)) landing this step
        self.scratch = [0] * n
        self.reader: dict = {}                 # (rank, buffer, slot) -> run that sends a staged chunk from it

    def __call__(self, block, held, t, lane, u, v, chains, forward_to: int = -1) -> None:
        targets = []
        for x in block:
            if v == x[1] or (x[0], x[1], x[2] % self.T[x[0], x[1]]) in chains:
                targets.append(("o", int(self.out_off[x[0], v]) + x[2]))  # delivered, or staged for an rcs
            else:
                targets.append(("s", self.scratch[v]))
                self.scratch[v] += 1
        a = 0
        while a < len(block):
            b = a + 1
            while (b < len(block) and (not self.max_cnt or b - a < self.max_cnt)
                   and held[block[b]][0] == held[block[a]][0] and held[block[b]][1] == held[block[a]][1] + b - a
                   and targets[b][0] == targets[a][0] and targets[b][1] == targets[a][1] + b - a):
                b += 1
            rid = len(self.runs)
            after = tuple(sorted({held[x][2] for x in block[a:b] if held[x][2] >= 0}))
            buf, off = targets[a]
            recv_after = tuple(sorted({self.reader[(v, buf, o)] for o in range(off, off + b - a)
                                       if (v, buf, o) in self.reader}))
            run = Run(rid, t, lane, u, v, held[block[a]][0], held[block[a]][1], buf, off, b - a, after, recv_after)
            self.runs.append(run)
            if forward_to >= 0:  # v passes the run straight on to forward_to with rcs: same slots, same count
                self.runs.append(Run(rid + 1, t, lane, v, forward_to, buf, off, buf, off, b - a, (rid,), (), rid))
                self._reads(u, run)
                self._reads(v, self.runs[-1])
            self.arrived.extend((v, x, (bf, of, rid)) for x, (bf, of) in zip(block[a:b], targets[a:b])
                                if x[1] != v)
            a = b

    def _reads(self, rank: int, run: Run) -> None:
        """``run`` sends a staged chunk from ``rank``'s output slots: later writes there wait for it."""
        for o in range(run.srcoff, run.srcoff + run.cnt):
            self.reader[(rank, run.srcbuf, o)] = run.id
