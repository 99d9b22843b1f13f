"""Lowering a link schedule to an MSCCL program (Basu et al. §4); the format is :mod:`a2a_compiler.formats.msccl`."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ..chunk.ir import LinkSchedule
from ..errors import A2AError
from ..formats.msccl import PROTOS, MscclGpu, MscclProgram, MscclStep, MscclThreadBlock
from ..formats.msccl_rules import (DEFAULT_TARGET, MAX_CHILDREN, MAX_CNT, MAX_DEPID, MAX_OFFSET, MAX_PARSER_NODES,
                                   MAX_PEER_TBS_PER_CHANNEL, MAX_STEPS_PER_TB, MAX_VALUE_LEN, Target, get_target,
                                   parser_nodes)
from . import program_name, record_of
from .placement import Placement, check_balanced_layout, place

#: Largest channel count tried when ``channels`` is left to :func:`lower_msccl`.
MAX_AUTO_CHANNELS = 8


#: Formats that scale further than MSCCL XML, named when a program does not fit.
SCALES_FURTHER = "--emit mpi (MPI path schedules have no per-rank size limit)"


def check_channels(nchannels: int, t: Target, at: str) -> None:
    """Refuse ``nchannels`` (channels x instances) over the channels ``t`` builds; ``at`` names the program."""
    if nchannels > t.max_channels:
        raise A2AError(f"{at} needs {nchannels} channels, over the {t.max_channels} {t.executor} builds; "
                       f"use fewer --channels or --instances")


def check_channel_options(spec: str, channels: int | None, instances: int, target: str | Target | None) -> None:
    """:func:`check_channels` on the fewest channels ``--channels``/``--instances`` allow, before any solve or
    placement (both grow with ``instances``)."""
    check_channels((channels or 1) * instances, get_target(target or DEFAULT_TARGET),
                   f"{spec} (--channels x --instances)")


def lower_msccl(schedule: LinkSchedule, *, channels: int | None = None, instances: int = 1, proto: str = "Simple",
                min_bytes: int = 0, max_bytes: int = 0, rcs: bool = False, name: str | None = None,
                target: str | Target | None = None) -> MscclProgram:
    """Lower a time-stepped link schedule to an MSCCL program (Basu et al. §4).

    Layout (docs/formats.md): tb 0 copies the self shard; then one receive tb
    per (in-neighbour, channel) and one send tb per (out-neighbour, channel).
    Each run of :func:`~a2a_compiler.lower.placement.place` becomes an ``s``
    step on the sender and an ``r`` step on the receiver, in the same order on
    both sides; a relayed chunk sits in scratch and its send depends (``depid``
    / ``deps``, ``nop`` chains for several) on the receive that brought it.
    Receives never wait on anything, and every dependency points to an earlier
    time step, so the program cannot deadlock.

    ``rcs=True`` passes chunks on with ``rcs`` steps where the reference
    allows it (:func:`~a2a_compiler.lower.placement.rcs_chains`), on extra
    channels; it saves scratch but, measured on the §5.2 torus, costs steps,
    thread blocks and predicted time (docs/formats.md), so it is off by default.

    ``channels=None`` picks the fewest channels (up to 8) that keep every tb
    within 64 steps.  ``instances`` splits each chunk into that many parts, each
    run by its own copy of the schedule on its own channels (``nchannels =
    channels·instances``).  ``target`` (``nccl`` | ``rccl``) is the executor whose
    limits the program must meet (:data:`~a2a_compiler.formats.msccl_rules.TARGETS`:
    thread blocks per GPU, channels, the parser's nodes per rank; default ``nccl``); a target named
    here is recorded in the file (:class:`~a2a_compiler.formats.record.Record`).  Raises
    :class:`A2AError`, one line naming the limit, when one cannot be met.

    An all-to-allv schedule (a demand) is lowered in the layout of fixed-size
    buffers (docs/formats.md): ``T[i][j]`` chunks of rank ``i`` for rank ``j`` at
    input offset ``Σ_{k<j} T[i][k]``, landing at output offset ``Σ_{k<i} T[k][j]``,
    every row and column of ``T`` summing to ``nchunksperloop``
    (:func:`~a2a_compiler.chunk.counts.msccl_counts`); other matrices are refused.
    """
    t = get_target(target or DEFAULT_TARGET)
    n = schedule.n_ranks
    if n > MAX_CHILDREN:
        raise A2AError(f"{n} ranks: MSCCL XML holds at most {MAX_CHILDREN} <gpu> elements (the executors' parser "
                       f"keeps {MAX_CHILDREN} children per node); use {SCALES_FURTHER}")
    if proto not in PROTOS:
        raise A2AError(f"proto must be one of {', '.join(PROTOS)}, got {proto!r}")
    if min_bytes < 0 or max_bytes < 0 or (max_bytes and max_bytes < min_bytes):
        raise A2AError(f"need 0 <= minBytes <= maxBytes (0 = unlimited), got {min_bytes}, {max_bytes}")
    if instances < 1 or (channels is not None and channels < 1):
        raise A2AError("channels and instances must be at least 1")
    check_channel_options(schedule.spec, channels, instances, t)
    if schedule.demand is not None:
        check_balanced_layout(schedule, "MSCCL")
        if instances != 1:
            raise A2AError("--instances applies to the plain all-to-all; an all-to-allv file takes --channels")
    candidates = [channels] if channels is not None else range(1, MAX_AUTO_CHANNELS + 1)
    for k in candidates:
        pl = place(schedule, lanes=k, instances=instances, max_cnt=MAX_CNT, rcs=rcs)
        gpus = _lower_gpus(pl)
        longest = max(((len(tb.steps), -g.id, -tb.id) for g in gpus for tb in g.tbs), default=(0, 0, 0))
        longest = (longest[0], -longest[1], -longest[2])
        if longest[0] <= MAX_STEPS_PER_TB:
            break
    else:
        hint = "more --channels" if channels is not None else f"more than {MAX_AUTO_CHANNELS} channels"
        raise A2AError(f"gpu {longest[1]} tb {longest[2]} needs {longest[0]} steps with {k} channel(s) "
                       f"x {instances} instance(s), over the executor's limit of {MAX_STEPS_PER_TB}; "
                       f"use {hint} or fewer chunks per shard")
    _fits(schedule, gpus, pl.lanes, t)
    ncl = n * schedule.chunks_per_shard * instances   # every row and column of the chunk counts sums to it
    if max(ncl, *(g.s_chunks for g in gpus)) > MAX_OFFSET + 1:
        raise A2AError(f"buffers of {max(ncl, *(g.s_chunks for g in gpus))} chunks exceed the executor's "
                       f"offset limit {MAX_OFFSET}; use fewer chunks per shard")
    pname = program_name(schedule, name)
    if len(pname) > MAX_VALUE_LEN:
        if name is not None:
            raise A2AError(f"--name has {len(pname)} characters; the MSCCL parser holds at most {MAX_VALUE_LEN}")
        pname = pname[:MAX_VALUE_LEN]  # a long file: spec
    return MscclProgram(pname, proto, pl.lanes, ncl, n, "alltoall", 0, 1,
                        int(min_bytes), int(max_bytes), tuple(gpus),
                        record_of(schedule, volumes=True, target=None if target is None else t.name))


def _fits(schedule: LinkSchedule, gpus: list[MscclGpu], nchannels: int, t: Target) -> None:
    """Refuse a program over ``t``'s thread blocks per GPU, channels or parser nodes per rank."""
    c = schedule.chunks_per_shard
    at = f"{schedule.spec} at {c} chunk(s) per shard"
    check_channels(nchannels, t, at)
    most = max(gpus, key=lambda g: (len(g.tbs), -g.id))
    if len(most.tbs) > t.max_tbs:
        raise A2AError(f"{at}: gpu {most.id} needs {len(most.tbs)} thread blocks, over {t.executor}'s {t.max_tbs} "
                       f"per GPU; the most this layout fits is {t.max_tbs} (1 copy + one per neighbour, channel "
                       f"and direction)" + (": use fewer --channels or --instances, or " if nchannels > 1 else
                                            " and it has one channel already: use ") + SCALES_FURTHER)
    empty = MscclProgram("", "Simple", 1, 0, len(gpus), "alltoall", 0, 1, 0, 0, tuple(gpus))
    worst = max(gpus, key=lambda g: (parser_nodes(empty, g), -g.id))
    nodes = parser_nodes(empty, worst)
    if nodes > MAX_PARSER_NODES:
        raise A2AError(f"{at}: gpu {worst.id} needs {nodes} MSCCL parser nodes (<algo>, {len(gpus)} <gpu>, "
                       f"{len(worst.tbs)} <tb>, {nodes - 1 - len(gpus) - len(worst.tbs)} <step>), over the "
                       f"executors' {MAX_PARSER_NODES} per rank; fewer chunks per shard (--max-chunks) shrink it, "
                       f"else use {SCALES_FURTHER} (docs/msccl.md lists the largest size per family that fits)")


def _why_so_many(pl: Placement, g: int, what: str) -> str:
    """Why one channel of gpu ``g`` has too many peers' thread blocks, and whether more channels help: the runs
    of step ``t`` start on lane ``t mod K`` (:func:`~.placement.place`), so every channel holds some step's peers
    whole."""
    peers = Counter(step for step, _ in {(r.step, r.src if what == "receive" else r.dst) for r in pl.runs
                                         if (r.dst if what == "receive" else r.src) == g})
    most = max(peers.values())
    if most > MAX_PEER_TBS_PER_CHANNEL:
        return (f"it {'receives from' if what == 'receive' else 'sends to'} {most} peers in one step, and every "
                f"channel carries some step's peers whole, so more --channels cannot help (degree too high for "
                f"MSCCL; use --emit oneccl or mpi)")
    return "more --channels spread the steps over more channels"


def _lower_gpus(pl: Placement) -> list[MscclGpu]:
    n, ncl = pl.n_ranks, pl.n_ranks * pl.chunks_per_shard
    fused = {r.forwards: r for r in pl.runs if r.forwards >= 0}  # received run id -> the run its rcs sends
    out = []
    for g in range(n):
        # thread blocks as (channel, send peer, recv peer): receivers, then rcs relays, then senders
        recv_keys = sorted({(r.lane, -1, r.src) for r in pl.runs if r.dst == g and r.id not in fused})
        rcs_keys = sorted({(r.lane, fused[r.id].dst, r.src) for r in pl.runs if r.dst == g and r.id in fused})
        send_keys = sorted({(r.lane, r.dst, -1) for r in pl.runs if r.src == g and r.forwards < 0})
        for keys, what in ((recv_keys + rcs_keys, "receive"), (rcs_keys + send_keys, "send")):
            per_chan = Counter(lane for lane, _, _ in keys)
            if per_chan and max(per_chan.values()) > MAX_PEER_TBS_PER_CHANNEL:
                raise A2AError(f"gpu {g} needs {max(per_chan.values())} {what} thread blocks on one channel, "
                               f"over the executor's limit of {MAX_PEER_TBS_PER_CHANNEL}; {_why_so_many(pl, g, what)}")
        first = 1 if any(c.rank == g for c in pl.copies) else 0   # tb 0 copies the self shard, if there is one
        tb_id = {key: first + i for i, key in enumerate(recv_keys + rcs_keys + send_keys)}
        steps: dict[int, list[MscclStep]] = {tb: [] for tb in range(first + len(tb_id))}

        def add(tb, type_, srcbuf, srcoff, dstbuf, dstoff, cnt, dep=(-1, -1)):
            steps[tb].append(MscclStep(len(steps[tb]), type_, srcbuf, srcoff, dstbuf, dstoff, cnt, *dep, 0))

        for c in pl.copies:
            if c.rank == g:
                add(0, "cpy", "i", c.off, "o", c.off, c.cnt)
        done_by: dict[int, tuple[int, int]] = {}  # run id -> (tb, step) of its receive (dst g) or send (src g)
        waited: dict[int, dict[int, int]] = {}    # tb -> {tb: last step it waited for}

        def wait_for(tb, run_ids):
            """Dependencies on the steps that did ``run_ids`` here: nops for all but the last, which is returned."""
            seen = waited.setdefault(tb, {})
            need: dict[int, int] = {}
            for a in run_ids:
                dtb, ds = done_by[a]
                if dtb != tb and seen.get(dtb, -1) < ds and need.get(dtb, -1) < ds:
                    need[dtb] = ds
            deps = sorted(need.items()) or [(-1, -1)]
            for dep in deps[:-1]:
                add(tb, "nop", "i", -1, "o", -1, 0, dep)
            seen.update(need)
            return deps[-1]

        for r in pl.runs:
            if r.dst == g:
                fwd = fused.get(r.id)
                tb = tb_id[(r.lane, fwd.dst, r.src) if fwd else (r.lane, -1, r.src)]
                dep = wait_for(tb, r.recv_after)  # a staged chunk's slot: its copy must have left first
                done_by[r.id] = (tb, len(steps[tb]))
                if fwd:  # receive, copy and send on from the same slot (src = dst by the executor's rule)
                    done_by[fwd.id] = done_by[r.id]
                    add(tb, "rcs", r.dstbuf, r.dstoff, r.dstbuf, r.dstoff, r.cnt, dep)
                else:
                    add(tb, "r", r.srcbuf, r.srcoff, r.dstbuf, r.dstoff, r.cnt, dep)
            elif r.src == g and r.forwards < 0:
                tb = tb_id[(r.lane, r.dst, -1)]
                dep = wait_for(tb, r.after)
                done_by[r.id] = (tb, len(steps[tb]))
                add(tb, "s", r.srcbuf, r.srcoff, r.dstbuf, r.dstoff, r.cnt, dep)
        targets = {(st.depid, st.deps) for rows in steps.values() for st in rows if st.depid >= 0}
        if any(tb > MAX_DEPID for tb, _ in targets):
            raise A2AError(f"gpu {g}: a dependency on thread block {max(tb for tb, _ in targets)} "
                           f"exceeds the executor's depid limit {MAX_DEPID}; use fewer channels")
        tbs = [MscclThreadBlock(0, -1, -1, 0, _freeze(0, steps[0], targets))] if first else []
        tbs += [MscclThreadBlock(i, send, recv, lane, _freeze(i, steps[i], targets))
                for (lane, send, recv), i in tb_id.items()]
        out.append(MscclGpu(g, ncl, ncl, pl.scratch[g], tuple(tbs)))
    return out


def _freeze(tb: int, steps: list[MscclStep], targets: set) -> tuple[MscclStep, ...]:
    """The steps of ``tb`` with ``hasdep=1`` on those another step depends on."""
    return tuple(replace(st, hasdep=1) if (tb, st.s) in targets else st for st in steps)
