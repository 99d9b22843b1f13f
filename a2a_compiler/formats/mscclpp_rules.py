"""The MSCCL++ executor's rules for an all-to-all execution plan, in one place.

Facts from microsoft/mscclpp (``src/core/include/execution_common.hpp``,
``src/core/executor/execution_plan.cc``, ``executor.cc``; docs/msccl.md cites
them): the device plan of a threadblock holds at most ``MAX_OPERATION`` = 64
operations (a ``pipeline`` and each of its inner operations count), 16 channels
of each type (``MAX_CHANNEL``) and 16 remote buffers of each access type, an
operation names at most 8 channels (``MAX_CHANNEL_PER_OPERATION``), 10 buffers
(2 local + 8 remote) and 16 device semaphores; barriers are numbered below 16.
The loader reads ``gpus[rank]`` and requires its ``id`` to be ``rank``; channels
pair in order per peer (the k-th to the k-th, memory channels before port
channels, so two ranks must list the same number of memory channels to each other
when they also share port channels).  A ``flush`` flushes port channel ``channel_ids[i]`` for
each ``dst_buff`` entry ``i`` only (:func:`check_flush`).  Each family below records errors in a
:class:`~a2a_compiler.formats.msccl_rules.Findings`.
"""

from __future__ import annotations

from collections import Counter

from .msccl_rules import Findings
from .mscclpp import BUFFERS, CHANNEL_TYPES, Gpu, MscclppProgram, Op, gpu_channels

MAX_OPERATION = 64
MAX_CHANNEL = 16
MAX_CHANNEL_PER_OPERATION = 8
MAX_BUFFERS_PER_OPERATION = 2 + MAX_CHANNEL_PER_OPERATION
MAX_DEVICE_SEMAPHORES = 16
MAX_DEVICE_SYNCERS = 16
PROTOCOLS = ("Simple", "LL")
#: Operations an all-to-all plan may use, and whether each needs ``channel_ids`` (``None``: only on port channels).
DATA_OPS = {"put": None, "pws": True, "pwsf": True, "get": False, "copy": False}
SYNC_OPS = {"signal": True, "rlxsignal": True, "wait": True, "rlxwait": True, "flush": True,
            "nop": False, "barrier": False, "sem_acquire": False, "sem_release": False, "pipeline": False}
#: Operations the executor knows that reduce or use packets/switches: no place in a plain all-to-all here.
OTHER_OPS = ("re", "res", "rre", "rres", "ppkt", "rppkt", "respkt", "cpkt", "upkt", "repkt", "recpkt", "recspkt",
             "glres", "gstore", "gstorepkt")


def check_rules(p: MscclppProgram) -> Findings:
    """Every rule; ``sound`` in the result means the plan can be resolved, simulated and run."""
    f = Findings()
    check_plan(p, f)
    if f.sound:
        for g in p.gpus:
            check_gpu(p, g, f)
    if f.sound:
        check_pairing(p, f)
    f.sound = not f.errors
    return f


def check_plan(p: MscclppProgram, f: Findings) -> None:
    """Top level: collective, protocol, gpu ids, chunk counts."""
    if p.collective != "alltoall":
        f.error(f"plan: collective={p.collective!r}, expected 'alltoall'", True)
    if p.protocol not in PROTOCOLS:
        f.error(f"plan: protocol={p.protocol!r}, must be one of {', '.join(PROTOCOLS)}")
    n = len(p.gpus)
    if n < 1:
        f.error("plan: no gpus", True)
        return
    for rank, g in enumerate(p.gpus):
        if g.id != rank:
            f.error(f"gpus[{rank}]: id={g.id}; the executor reads gpus[rank] and requires id == rank", True)
        if g.input_chunks != g.output_chunks or g.input_chunks < n or g.input_chunks % n:
            f.error(f"gpu {g.id}: input_chunks={g.input_chunks} output_chunks={g.output_chunks}; an all-to-all of "
                    f"{n} ranks needs both equal to {n} x chunks per peer", True)
        if g.scratch_chunks < 0:
            f.error(f"gpu {g.id}: scratch_chunks={g.scratch_chunks} is negative", True)
    if f.sound and len({g.input_chunks for g in p.gpus}) > 1:
        f.error(f"plan: gpus declare different input_chunks {sorted({g.input_chunks for g in p.gpus})}", True)


def check_gpu(p: MscclppProgram, g: Gpu, f: Findings) -> None:
    """One GPU: channels, remote buffers, semaphores, threadblock ids, and every operation."""
    n = len(p.gpus)
    gw = f"gpu {g.id}"
    for c in g.channels:
        if c.channel_type not in CHANNEL_TYPES:
            f.error(f"{gw}: channel_type {c.channel_type!r} is not one of {', '.join(CHANNEL_TYPES)}", True)
        bad = [x for x in c.connected_to if not 0 <= x < n or x == g.id]
        if bad:
            f.error(f"{gw}: channel connected_to {bad[0]}, not another rank (0..{n - 1})", True)
    for i, r in enumerate(g.remote_buffers):
        if not 0 <= r.rank < n or r.rank == g.id or r.type not in BUFFERS or \
                any(t not in ("memory", "port") for t in r.access_channel_types):
            f.error(f"{gw}: remote_buffers[{i}] = rank {r.rank} buffer {r.type!r} via {list(r.access_channel_types)}: "
                    f"needs another rank, a buffer i/o/s and memory or port access", True)
    ids = sorted(t.id for t in g.threadblocks)
    if ids != list(range(len(ids))):
        f.error(f"{gw}: threadblock ids {ids[:8]} must be 0..{len(ids) - 1}", True)
    counts = {kind: len(v) for kind, v in gpu_channels(g).items()}
    sizes = {"i": g.input_chunks, "o": g.output_chunks, "s": g.scratch_chunks}
    for tb in g.threadblocks:
        tw = f"{gw} tb {tb.id}"
        per_type = Counter()
        for kind, chan_ids in tb.channels:
            per_type[kind] += len(chan_ids)
            if kind not in CHANNEL_TYPES or any(not 0 <= i < counts.get(kind, 0) for i in chan_ids):
                f.error(f"{tw}: {kind} channel ids {list(chan_ids)} outside the GPU's {counts.get(kind, 0)} "
                        f"{kind} channels", True)
        refs = Counter()
        for kind, buf_ids in tb.remote_buffer_refs:
            refs[kind] += len(buf_ids)
            if any(not 0 <= i < len(g.remote_buffers) for i in buf_ids):
                f.error(f"{tw}: remote buffer ids {list(buf_ids)} outside the GPU's {len(g.remote_buffers)}", True)
        for kind, cnt in sorted((per_type + refs).items()):
            if max(per_type[kind], refs[kind]) > MAX_CHANNEL:
                f.error(f"{tw}: {max(per_type[kind], refs[kind])} {kind} channels or remote buffers, over the "
                        f"executor's {MAX_CHANNEL} per threadblock")
        flat = [o for op in tb.ops for o in (op, *(op.ops or ()))]
        if len(flat) > MAX_OPERATION:
            f.error(f"{tw}: {len(flat)} operations, over the executor's limit of {MAX_OPERATION} per threadblock")
        for k, op in enumerate(tb.ops):
            _check_op(op, f"{tw} op {k}", per_type, refs, sizes, len(g.semaphores), f, inner=False)


def _check_op(op: Op, w: str, chans: Counter, refs: Counter, sizes: dict, nsem: int, f: Findings,
              inner: bool) -> None:
    if op.name in OTHER_OPS:
        f.error(f"{w}: {op.name!r} (a reduction, packet or switch operation) has no place in an all-to-all", True)
        return
    if op.name not in DATA_OPS and op.name not in SYNC_OPS:
        f.error(f"{w}: unknown operation {op.name!r}", True)
        return
    if op.name == "pipeline":
        if inner or not op.ops:
            f.error(f"{w}: a pipeline needs inner ops and cannot be nested", True)
        for j, o in enumerate(op.ops or ()):
            _check_op(o, f"{w}.{j}", chans, refs, sizes, nsem, f, inner=True)
        return
    kind = op.channel_type
    needs = DATA_OPS.get(op.name, SYNC_OPS.get(op.name))
    if needs is None:
        needs = kind == "port"
    if op.name == "put" and kind not in ("memory", "port"):
        f.error(f"{w}: put needs channel_type memory or port", True)
    ids = op.channel_ids or ()
    if needs and not ids:
        f.error(f"{w}: {op.name} on {kind} channels needs channel_ids", True)
    if ids and (kind not in ("memory", "port") or any(not 0 <= i < chans[kind] for i in ids)):
        f.error(f"{w}: channel_ids {list(ids)} outside the threadblock's {chans[kind]} {kind} channels", True)
    if op.name in ("wait", "rlxwait") and len(set(ids)) < len(ids):
        f.error(f"{w}: channel_ids {list(ids)} name a channel twice (two threads would race on its expected count)")
    if len(ids) > MAX_CHANNEL_PER_OPERATION:
        f.error(f"{w}: {len(ids)} channels, over the executor's {MAX_CHANNEL_PER_OPERATION} per operation")
    if len(op.src) > MAX_BUFFERS_PER_OPERATION or len(op.dst) > MAX_BUFFERS_PER_OPERATION:
        f.error(f"{w}: more than {MAX_BUFFERS_PER_OPERATION} source or destination buffers")
    sems = op.semaphore_ids or ()
    if op.name in ("sem_acquire", "sem_release") and (not sems or any(not 0 <= s < nsem for s in sems)):
        f.error(f"{w}: semaphore_ids {list(sems)} must name the GPU's {nsem} semaphores", True)
    if len(sems) > MAX_DEVICE_SEMAPHORES:
        f.error(f"{w}: {len(sems)} semaphores, over the executor's {MAX_DEVICE_SEMAPHORES} per operation")
    if op.name == "barrier" and (op.barrier_id is None or not 0 <= op.barrier_id < MAX_DEVICE_SYNCERS
                                 or not op.num_threadblocks or op.num_threadblocks < 1):
        f.error(f"{w}: barrier needs barrier_id in 0..{MAX_DEVICE_SYNCERS - 1} and num_threadblocks >= 1", True)
    if op.name == "flush":
        check_flush(op, w, refs, sizes, f)
    if op.name in DATA_OPS:
        remote_src, remote_dst = op.name == "get", op.name in ("put", "pws", "pwsf")
        if not op.src or len(op.src) != len(op.dst):
            f.error(f"{w}: {op.name} needs one src_buff per dst_buff entry", True)
        if kind == "port" and remote_dst and len(ids) != len(op.dst):
            f.error(f"{w}: a port put names one channel per destination ({len(op.dst)}), got {len(ids)}", True)
        for side, bufs, remote in (("src_buff", op.src, remote_src), ("dst_buff", op.dst, remote_dst)):
            for b in bufs:
                if b.size < 1 or b.index < 0:
                    f.error(f"{w}: {side} index={b.index} size={b.size}; need index >= 0 and size >= 1", True)
                if remote:
                    if b.buffer_id is None or not 0 <= b.buffer_id < refs[kind]:
                        f.error(f"{w}: {side} buffer_id {b.buffer_id} outside the threadblock's {refs[kind]} "
                                f"{kind} remote buffers", True)
                elif b.type not in BUFFERS:
                    f.error(f"{w}: {side} type {b.type!r} must be i, o or s", True)
                elif b.index + b.size > sizes[b.type]:
                    f.error(f"{w}: {side} {b.type}[{b.index}..{b.index + b.size - 1}] outside the {sizes[b.type]}-chunk "
                            f"buffer", True)
        for a, b in zip(op.src, op.dst):
            if a.size != b.size:
                f.error(f"{w}: {op.name} moves {a.size} chunk(s) into {b.size}", True)


def check_flush(op: Op, w: str, refs: Counter, sizes: dict, f: Findings) -> None:
    """A ``flush`` waits on port channel ``channel_ids[i]`` for each ``dst_buff`` entry ``i``: the loader sets
    ``nOutputs`` from ``dst_buff`` alone (microsoft/mscclpp ``src/core/executor/execution_plan.cc`` l.550-551)
    and ``handleFlush`` loops over it, indexing port channels whatever ``channel_type`` says
    (``src/core/include/execution_kernel.hpp`` l.120-127).  The loader reads each entry as a put's
    destination: ``index``, ``size`` and a local ``type`` or a ``buffer_id`` among the threadblock's port
    remote buffers (l.552-578).  Without an entry per channel a flush is (partly) a no-op: a warning, the
    simulation (:func:`~a2a_compiler.verify.simulate.simulate_mscclpp`) reports the race it leaves."""
    ids = op.channel_ids or ()
    if op.channel_type != "port":
        f.error(f"{w}: flush on {op.channel_type} channels; the executor flushes port channels only", True)
    if len(op.dst) > len(ids):
        f.error(f"{w}: flush has {len(op.dst)} dst_buff entries for {len(ids)} channel_ids; the executor flushes "
                f"channel_ids[i] for each entry i (execution_kernel.hpp l.120-127)", True)
    elif len(op.dst) < len(ids):
        what = f"only {len(op.dst)} dst_buff entries, so it flushes only {list(ids[:len(op.dst)])}" if op.dst else \
            "no dst_buff entry, so it flushes nothing"
        f.warn(f"{w}: flush of port channels {list(ids)} has {what}: the executor flushes one channel per dst_buff "
               f"entry (execution_plan.cc l.550-551, execution_kernel.hpp l.120-127)")
    for b in op.dst:
        if b.buffer_id is not None:
            if not 0 <= b.buffer_id < refs["port"]:
                f.error(f"{w}: flush dst_buff buffer_id {b.buffer_id} outside the threadblock's {refs['port']} port "
                        f"remote buffers", True)
        elif b.type not in BUFFERS or b.index < 0 or b.size < 0 or b.index + b.size > sizes[b.type]:
            f.error(f"{w}: flush dst_buff needs a buffer_id or a type i, o or s with index and size inside it", True)


def check_pairing(p: MscclppProgram, f: Findings) -> None:
    """Two ranks with port channels to each other list the same number of memory channels to each other
    (the executor pairs connections by one counter per peer, memory before port)."""
    per = [gpu_channels(g) for g in p.gpus]
    count = Counter()
    for g, chans in zip(p.gpus, per):
        for kind, lst in chans.items():
            for peer, _ in lst:
                count[(kind, g.id, peer)] += 1
    for (kind, a, b), cnt in sorted(count.items()):
        if kind == "port" and a < b and count[("memory", a, b)] != count[("memory", b, a)]:
            f.error(f"gpus {a} and {b}: {count[('memory', a, b)]} and {count[('memory', b, a)]} memory channels to "
                    f"each other besides port channels; the executor pairs connections in order, so their port "
                    f"channels would meet memory channels", True)
