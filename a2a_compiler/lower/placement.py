"""Buffer placement of a time-stepped link schedule (Basu et al. §4, "Link-based Schedules").

Shared by the MSCCL and oneCCL lowerings.  Every chunk gets a concrete buffer
location on every rank it visits:

* chunk ``(s, d, k)`` starts in ``i[d·C+k]`` on ``s`` and ends in ``o[s·C+k]`` on ``d``;
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
"""

from __future__ import annotations

from dataclasses import dataclass

from ..chunk.ir import LinkSchedule, validate
from ..errors import A2AError

_BUF_ORDER = {"i": 0, "o": 1, "s": 2}


@dataclass(frozen=True)
class Run:
    """``cnt`` chunks moved ``src -> dst`` in schedule step ``step`` on ``lane``.

    ``after`` lists the ids of the earlier runs whose receives wrote the chunks
    this run reads on ``src`` (its data dependencies).
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
    lanes: int             # K·I
    runs: tuple[Run, ...]
    copies: tuple[Copy, ...]
    scratch: tuple[int, ...]  # scratch slots used per rank


def check_store_and_forward(fabric) -> None:
    """Refuse NIC forwarding with a host bandwidth: the link lowerings relay every chunk through
    the ranks' scratch buffers (host store-and-forward, Basu et al. §3.2.2), so a schedule priced
    as NIC cut-through would claim a time its program cannot reach."""
    if fabric.forwarding == "nic" and fabric.host_bw is not None:
        raise A2AError("--forwarding nic cannot be lowered to MSCCL or oneCCL: their programs relay chunks "
                       "through the ranks' scratch buffers (host store-and-forward), where relayed traffic "
                       "crosses the host bandwidth too; use --forwarding host, or --emit mpi for NIC-routed paths")


def _split(n: int, max_cnt: int | None):
    """Offsets/lengths cutting ``n`` consecutive chunks into pieces of at most ``max_cnt``."""
    size = max_cnt or n
    return [(a, min(size, n - a)) for a in range(0, n, size)]


def place(schedule: LinkSchedule, *, lanes: int = 1, instances: int = 1, max_cnt: int | None = None) -> Placement:
    """Assign buffers to every chunk move of ``schedule``; see the module docstring.

    The schedule's invariants are checked first (:func:`a2a_compiler.chunk.ir.validate`:
    real links, a chunk sent only by its holder, delivered exactly once), so an
    invalid schedule raises :class:`~a2a_compiler.errors.FormatError`.
    """
    if lanes < 1 or instances < 1:
        raise A2AError("channels and instances must be at least 1")
    check_store_and_forward(schedule.fabric)
    validate(schedule)
    n, c = schedule.n_ranks, schedule.chunks_per_shard
    ci = c * instances
    # loc[r][unit] = (buf, off, id of the run whose receive wrote it, or -1); unit = (s, d, j·C+k)
    loc = [{(r, d, k): ("i", d * ci + k, -1) for d in range(n) if d != r for k in range(ci)} for r in range(n)]
    scratch = [0] * n
    runs: list[Run] = []
    for t, transfers in enumerate(schedule.steps):
        arrived = []
        for tr in sorted(transfers, key=lambda x: (x.src, x.dst)):
            u, v = tr.src, tr.dst
            chunks = [tuple(ch) for ch in tr.chunks]
            held = loc[u]
            for j in range(instances):
                units = sorted(((s, d, j * c + k) for s, d, k in chunks),
                               key=lambda x: (_BUF_ORDER[held[x][0]], held[x][1]))
                nb = len(units)
                for part in range(lanes):
                    block = units[part * nb // lanes:(part + 1) * nb // lanes]
                    if block:
                        lane = j * lanes + (part + t) % lanes
                        _cut(block, held, runs, arrived, scratch, t, lane, u, v, ci, max_cnt)
        for v, x, where in arrived:
            loc[v][x] = where
    copies = tuple(Copy(r, r * ci + a, m) for r in range(n) for a, m in _split(ci, max_cnt))
    return Placement(n, ci, lanes * instances, tuple(runs), copies, tuple(scratch))


def _cut(block, held, runs, arrived, scratch, t, lane, u, v, ci, max_cnt) -> None:
    """Give ``block``'s chunks receiver slots and cut it into contiguous :class:`Run` s."""
    targets = []
    for x in block:
        if v == x[1]:
            targets.append(("o", x[0] * ci + x[2]))
        else:
            targets.append(("s", scratch[v]))
            scratch[v] += 1
    a = 0
    while a < len(block):
        b = a + 1
        while (b < len(block) and (not max_cnt or b - a < max_cnt)
               and held[block[b]][0] == held[block[a]][0] and held[block[b]][1] == held[block[a]][1] + b - a
               and targets[b][0] == targets[a][0] and targets[b][1] == targets[a][1] + b - a):
            b += 1
        rid = len(runs)
        after = tuple(sorted({held[x][2] for x in block[a:b] if held[x][2] >= 0}))
        runs.append(Run(rid, t, lane, u, v, held[block[a]][0], held[block[a]][1],
                        targets[a][0], targets[a][1], b - a, after))
        arrived.extend((v, x, (buf, off, rid)) for x, (buf, off) in zip(block[a:b], targets[a:b]) if buf == "s")
        a = b
