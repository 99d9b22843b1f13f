"""MSCCL XML: reader and writer (the MSCCL executor's algorithm format).

The writer emits exactly what the executor's hand-written tokenizer accepts
(see docs/formats.md and the reference notes): no XML declaration, two-space
indentation, one line per tag, double quotes, attributes in the executor's
order.  The reader is tolerant so that files written by other tools
(msccl-tools' ``ncclize``/``ir_to_xml``) load; the strict executor rules live in
:mod:`a2a_compiler.verify.msccl_rules`.
"""

from __future__ import annotations

from collections import Counter

from ..chunk.ir import LinkSchedule
from ..errors import A2AError
from ..io import parse_xml
from ._xml import attr_int, attr_str, children, element, expect_root, program_name, serialize
from .placement import Placement, place
from .programs import MscclGpu, MscclProgram, MscclStep, MscclThreadBlock

ROOT = "algo"
#: ``<algo>`` attributes in the executor's (and msccl-tools') order.
ALGO_ATTRS = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll",
              "inplace", "outofplace", "minBytes", "maxBytes")
GPU_ATTRS = ("id", "i_chunks", "o_chunks", "s_chunks")
TB_ATTRS = ("id", "send", "recv", "chan")
PROTOS = ("Simple", "LL", "LL128")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


# ------------------------------------------------------------------ reading


def parse_msccl(data: bytes, source: str = "<msccl>") -> MscclProgram:
    """Parse MSCCL XML bytes (hardened parser) into an :class:`MscclProgram`."""
    return msccl_from_element(parse_xml(data, source), source)


def msccl_from_element(root, source: str) -> MscclProgram:
    """Build the program from a parsed ``<algo>`` element.

    Missing optional attributes get msccl-tools' defaults (``cnt`` 1, no
    dependency, ``buf``/``off`` accepted for the newer single-buffer form);
    malformed integers and missing structural ids raise :class:`FormatError`.
    """
    expect_root(root, ROOT, source)
    gpus = []
    for g in children(root, "gpu", source):
        tbs = []
        for t in children(g, "tb", source, allowed=("copy",)):
            steps = []
            for pos, s in enumerate(children(t, "step", source)):
                off = attr_int(s, "off", source, -1)
                buf = s.get("buf")
                steps.append(MscclStep(
                    s=attr_int(s, "s", source, pos),
                    type=attr_str(s, "type", source),
                    srcbuf=attr_str(s, "srcbuf", source, buf or "i"),
                    srcoff=attr_int(s, "srcoff", source, off),
                    dstbuf=attr_str(s, "dstbuf", source, buf or "o"),
                    dstoff=attr_int(s, "dstoff", source, off),
                    cnt=attr_int(s, "cnt", source, 1),
                    depid=attr_int(s, "depid", source, -1),
                    deps=attr_int(s, "deps", source, -1),
                    hasdep=attr_int(s, "hasdep", source, 0),
                ))
            tbs.append(MscclThreadBlock(
                id=attr_int(t, "id", source),
                send=attr_int(t, "send", source, -1),
                recv=attr_int(t, "recv", source, -1),
                chan=attr_int(t, "chan", source, 0),
                steps=tuple(steps),
            ))
        gpus.append(MscclGpu(
            id=attr_int(g, "id", source),
            i_chunks=attr_int(g, "i_chunks", source, 0),
            o_chunks=attr_int(g, "o_chunks", source, 0),
            s_chunks=attr_int(g, "s_chunks", source, 0),
            tbs=tuple(tbs),
        ))
    inplace = attr_int(root, "inplace", source, 0)
    return MscclProgram(
        name=attr_str(root, "name", source, ""),
        proto=attr_str(root, "proto", source, "Simple"),
        nchannels=attr_int(root, "nchannels", source, 1),
        nchunksperloop=attr_int(root, "nchunksperloop", source, 0),
        ngpus=attr_int(root, "ngpus", source, len(gpus)),
        coll=attr_str(root, "coll", source, ""),
        inplace=inplace,
        outofplace=attr_int(root, "outofplace", source, 1 - inplace),
        min_bytes=attr_int(root, "minBytes", source, 0),
        max_bytes=attr_int(root, "maxBytes", source, 0),
        gpus=tuple(gpus),
    )


# ------------------------------------------------------------------ writing


def msccl_to_xml(program: MscclProgram) -> bytes:
    """Serialise ``program`` in the executor's layout (deterministic bytes)."""
    p = program
    root = element(None, ROOT, [
        ("name", p.name), ("proto", p.proto), ("nchannels", p.nchannels),
        ("nchunksperloop", p.nchunksperloop), ("ngpus", p.ngpus), ("coll", p.coll),
        ("inplace", p.inplace), ("outofplace", p.outofplace),
        ("minBytes", p.min_bytes), ("maxBytes", p.max_bytes),
    ])
    for g in p.gpus:
        ge = element(root, "gpu", [("id", g.id), ("i_chunks", g.i_chunks),
                                   ("o_chunks", g.o_chunks), ("s_chunks", g.s_chunks)])
        for t in g.tbs:
            te = element(ge, "tb", [("id", t.id), ("send", t.send), ("recv", t.recv), ("chan", t.chan)])
            for s in t.steps:
                element(te, "step", [(k, getattr(s, k)) for k in STEP_ATTRS])
    return serialize(root)


# ------------------------------------------------------------------ lowering

#: Executor limits (reference notes, msccl-executor-nccl).
MAX_STEPS_PER_TB = 64
MAX_CNT = 71
MAX_DEPID = 127
MAX_OFFSET = 32767
MAX_PEER_TBS_PER_CHANNEL = 32
#: Largest channel count tried when ``channels`` is left to :func:`lower_msccl`.
MAX_AUTO_CHANNELS = 8


def lower_msccl(schedule: LinkSchedule, *, channels: int | None = None, instances: int = 1, proto: str = "Simple",
                min_bytes: int = 0, max_bytes: int = 0, name: str | None = None) -> MscclProgram:
    """Lower a time-stepped link schedule to an MSCCL program (Basu et al. §4).

    Layout (docs/formats.md): tb 0 copies the self shard; then one receive tb
    per (in-neighbour, channel) and one send tb per (out-neighbour, channel).
    Each run of :func:`~a2a_compiler.lower.placement.place` becomes an ``s``
    step on the sender and an ``r`` step on the receiver, in the same order on
    both sides; a relayed chunk sits in scratch and its send depends (``depid``
    / ``deps``, ``nop`` chains for several) on the receive that brought it.
    Receives never wait on anything, and every dependency points to an earlier
    time step, so the program cannot deadlock.

    ``channels=None`` picks the fewest channels (up to 8) that keep every tb
    within 64 steps.  ``instances`` splits each chunk into that many parts, each
    run by its own copy of the schedule on its own channels (``nchannels =
    channels·instances``).  Raises :class:`A2AError` when an executor limit
    cannot be met.
    """
    if proto not in PROTOS:
        raise A2AError(f"proto must be one of {', '.join(PROTOS)}, got {proto!r}")
    if min_bytes < 0 or max_bytes < 0 or (max_bytes and max_bytes < min_bytes):
        raise A2AError(f"need 0 <= minBytes <= maxBytes (0 = unlimited), got {min_bytes}, {max_bytes}")
    if instances < 1 or (channels is not None and channels < 1):
        raise A2AError("channels and instances must be at least 1")
    candidates = [channels] if channels is not None else range(1, MAX_AUTO_CHANNELS + 1)
    for k in candidates:
        gpus = _lower_gpus(place(schedule, lanes=k, instances=instances, max_cnt=MAX_CNT))
        longest = max(((len(tb.steps), -g.id, -tb.id) for g in gpus for tb in g.tbs), default=(0, 0, 0))
        longest = (longest[0], -longest[1], -longest[2])
        if longest[0] <= MAX_STEPS_PER_TB:
            break
    else:
        hint = "more --channels" if channels is not None else f"more than {MAX_AUTO_CHANNELS} channels"
        raise A2AError(f"gpu {longest[1]} tb {longest[2]} needs {longest[0]} steps with {k} channel(s) "
                       f"x {instances} instance(s), over the executor's limit of {MAX_STEPS_PER_TB}; "
                       f"use {hint} or fewer chunks per shard")
    n = schedule.n_ranks
    ncl = n * schedule.chunks_per_shard * instances
    if max(ncl, *(g.s_chunks for g in gpus)) > MAX_OFFSET + 1:
        raise A2AError(f"buffers of {max(ncl, *(g.s_chunks for g in gpus))} chunks exceed the executor's "
                       f"offset limit {MAX_OFFSET}; use fewer chunks per shard")
    return MscclProgram(program_name(schedule, name), proto, k * instances, ncl, n, "alltoall", 0, 1,
                        int(min_bytes), int(max_bytes), tuple(gpus))


def _lower_gpus(pl: Placement) -> list[MscclGpu]:
    n, ncl = pl.n_ranks, pl.n_ranks * pl.chunks_per_shard
    out = []
    for g in range(n):
        recv_keys = sorted({(r.lane, r.src) for r in pl.runs if r.dst == g})
        send_keys = sorted({(r.lane, r.dst) for r in pl.runs if r.src == g})
        for keys, what in ((recv_keys, "receive"), (send_keys, "send")):
            per_chan = Counter(lane for lane, _ in keys)
            if per_chan and max(per_chan.values()) > MAX_PEER_TBS_PER_CHANNEL:
                raise A2AError(f"gpu {g} needs {max(per_chan.values())} {what} thread blocks on one channel, "
                               f"over the executor's limit of {MAX_PEER_TBS_PER_CHANNEL} (degree too high)")
        recv_id = {key: 1 + i for i, key in enumerate(recv_keys)}
        send_id = {key: 1 + len(recv_keys) + i for i, key in enumerate(send_keys)}
        steps: dict[int, list[list]] = {tb: [] for tb in range(1 + len(recv_keys) + len(send_keys))}
        steps[0] = [["cpy", "i", c.off, "o", c.off, c.cnt, -1, -1] for c in pl.copies if c.rank == g]
        written_by: dict[int, tuple[int, int]] = {}  # run id -> (recv tb, step)
        waited: dict[int, dict[int, int]] = {}       # send tb -> {recv tb: last step waited for}
        for r in pl.runs:
            if r.dst == g:
                tb = recv_id[(r.lane, r.src)]
                written_by[r.id] = (tb, len(steps[tb]))
                steps[tb].append(["r", r.dstbuf, r.dstoff, r.dstbuf, r.dstoff, r.cnt, -1, -1])
            elif r.src == g:
                tb = send_id[(r.lane, r.dst)]
                seen = waited.setdefault(tb, {})
                need: dict[int, int] = {}
                for a in r.after:
                    dtb, ds = written_by[a]
                    if seen.get(dtb, -1) < ds and need.get(dtb, -1) < ds:
                        need[dtb] = ds
                deps = sorted(need.items()) or [(-1, -1)]
                for dtb, ds in deps[:-1]:
                    steps[tb].append(["nop", "i", -1, "o", -1, 0, dtb, ds])
                steps[tb].append(["s", r.srcbuf, r.srcoff, r.srcbuf, r.srcoff, r.cnt, *deps[-1]])
                seen.update(need)
        targets = {(row[6], row[7]) for rows in steps.values() for row in rows if row[6] >= 0}
        if any(tb > MAX_DEPID for tb, _ in targets):
            raise A2AError(f"gpu {g}: a dependency on thread block {max(tb for tb, _ in targets)} "
                           f"exceeds the executor's depid limit {MAX_DEPID}; use fewer channels")
        tbs = [MscclThreadBlock(0, -1, -1, 0, _freeze(0, steps[0], targets))]
        tbs += [MscclThreadBlock(i, -1, peer, lane, _freeze(i, steps[i], targets)) for (lane, peer), i in recv_id.items()]
        tbs += [MscclThreadBlock(i, peer, -1, lane, _freeze(i, steps[i], targets)) for (lane, peer), i in send_id.items()]
        out.append(MscclGpu(g, ncl, ncl, pl.scratch[g], tuple(tbs)))
    return out


def _freeze(tb: int, rows: list[list], targets: set) -> tuple[MscclStep, ...]:
    return tuple(MscclStep(s, *row, int((tb, s) in targets)) for s, row in enumerate(rows))
