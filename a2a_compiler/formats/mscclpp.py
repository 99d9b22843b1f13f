"""MSCCL++ execution plans (JSON): program, reader, writer, and the resolution of channel and buffer ids.

The format is the one microsoft/mscclpp's executor loads
(``src/core/executor/execution_plan.cc``) and its DSL writes
(``mscclpp.language``, ``CollectiveProgram.to_json()``); docs/formats.md
describes it with an example.  A plan names ``name``, ``collective``,
``protocol``, ``inplace`` and ``gpus[]``; each GPU has ``input/output/scratch_chunks``,
``channels`` (memory, port or switch, each ``connected_to`` peers), ``remote_buffers``
(a peer's buffer the GPU writes or reads), ``semaphores`` and ``threadblocks``; each
threadblock lists the GPU channels and remote buffers it uses and its ``ops``.  Ids
are local: an op's ``channel_ids`` index its threadblock's channels of the op's
``channel_type``, a ``buffer_id`` its threadblock's remote buffers of that access type,
a threadblock channel id the GPU's channels of that type, flattened in file order.  Every
operation's ``src_buff`` / ``dst_buff`` are read alike (``execution_plan.cc`` l.520-579), a
``flush``'s too: its ``dst_buff`` entries, not its ``channel_ids``, count the channels it flushes
(:func:`.mscclpp_rules.check_flush`).

:func:`resolve` turns those ids into peers and buffers once, for the rules
(:mod:`.mscclpp_rules`), the verifier and the MPI runtime.  Channel pairing follows
the executor: the k-th channel of a type from rank a to rank b is connected to the
k-th channel of that type from b to a.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..errors import FormatError
from ..files import parse_json
from .record import Record

#: Top-level key of the plan's :class:`~.record.Record` (how ``a2a compile`` made it); the executor
#: reads the keys it knows by name (nlohmann::json in ``execution_plan.cc``) and ignores this one.
RECORD_KEY = "a2a_record"
#: Top-level keys in the DSL's order, and the values the DSL writes by default.
PLAN_DEFAULTS = {"reuse_resources": False, "num_threads_per_block": 1024, "use_double_scratch_buffer": False,
                 "buffer_alignment": 16, "min_message_size": 0, "max_message_size": 2**64 - 1}
CHANNEL_TYPES = ("memory", "port", "switch")
BUFFERS = ("i", "o", "s")
#: Top-level keys of an execution plan: the DSL writes the first four, 'a2a compile' all five.  A JSON object
#: with at least :data:`PLAN_MIN_KEYS` of them is a plan (so a plan missing one key is still checked), one
#: with fewer is other JSON: the IR of 'a2a schedule' has none, a server's config may say "protocol".
PLAN_KEYS = ("gpus", "collective", "protocol", "inplace", RECORD_KEY)
PLAN_MIN_KEYS = 2
#: Largest plan we agree to read (bytes) and deepest nesting (a pipeline inside an op is 8 deep).
MAX_PLAN_BYTES = 256 * 1024 * 1024
MAX_PLAN_DEPTH = 12


@dataclass(frozen=True)
class BuffRef:
    """One ``src_buff`` / ``dst_buff`` entry: a local buffer ``type``, or a remote ``buffer_id``
    (``switch_channel_id`` for switch channels), and the chunk range ``index .. index+size-1``."""

    type: str | None
    buffer_id: int | None
    index: int
    size: int
    switch_channel_id: int | None = None

    def to_json(self) -> dict:
        out: dict = {}
        if self.type is not None:
            out["type"] = self.type
        if self.buffer_id is not None:
            out["buffer_id"] = self.buffer_id
        if self.switch_channel_id is not None:
            out["switch_channel_id"] = self.switch_channel_id
        return {**out, "index": self.index, "size": self.size}


@dataclass(frozen=True)
class Op:
    """An operation: ``name`` (``put``, ``signal``, ``wait``, ``copy``, ...) and the fields it uses;
    ``ops`` are a ``pipeline``'s inner operations, ``extra`` keeps fields this project does not interpret."""

    name: str
    src: tuple[BuffRef, ...] = ()
    dst: tuple[BuffRef, ...] = ()
    channel_type: str | None = None
    channel_ids: tuple[int, ...] | None = None
    semaphore_ids: tuple[int, ...] | None = None
    barrier_id: int | None = None
    num_threadblocks: int | None = None
    ops: tuple["Op", ...] | None = None
    extra: tuple[tuple[str, object], ...] = ()

    def to_json(self) -> dict:
        out: dict = {"name": self.name}
        if self.src:
            out["src_buff"] = [b.to_json() for b in self.src]
        if self.dst:
            out["dst_buff"] = [b.to_json() for b in self.dst]
        if self.channel_ids is not None:
            out["channel_ids"] = list(self.channel_ids)
        if self.channel_type is not None:
            out["channel_type"] = self.channel_type
        if self.semaphore_ids is not None:
            out["semaphore_ids"] = list(self.semaphore_ids)
        if self.barrier_id is not None:
            out["barrier_id"] = self.barrier_id
        if self.num_threadblocks is not None:
            out["num_threadblocks"] = self.num_threadblocks
        out.update(self.extra)
        if self.ops is not None:
            out["ops"] = [o.to_json() for o in self.ops]
        return out


@dataclass(frozen=True)
class ThreadBlock:
    """``id``, ``ops``, the GPU channels it uses (``(type, ids)`` per entry) and its remote buffers
    (``(access_channel_type, remote buffer ids)`` per entry)."""

    id: int
    ops: tuple[Op, ...]
    channels: tuple[tuple[str, tuple[int, ...]], ...] = ()
    remote_buffer_refs: tuple[tuple[str, tuple[int, ...]], ...] = ()

    def to_json(self) -> dict:
        return {"id": self.id, "ops": [o.to_json() for o in self.ops],
                "channels": [{"channel_type": t, "channel_ids": list(ids)} for t, ids in self.channels],
                "remote_buffer_refs": [{"access_channel_type": t, "remote_buffer_ids": list(ids)}
                                       for t, ids in self.remote_buffer_refs]}


@dataclass(frozen=True)
class Channel:
    """One ``channels`` entry of a GPU: a channel of ``channel_type`` to each peer in ``connected_to``
    (switch channels keep their ``buffer_type`` and ``rank_groups`` in ``extra``)."""

    channel_type: str
    connected_to: tuple[int, ...]
    extra: tuple[tuple[str, object], ...] = ()

    def to_json(self) -> dict:
        return {"channel_type": self.channel_type, "connected_to": list(self.connected_to), **dict(self.extra)}


@dataclass(frozen=True)
class RemoteBuffer:
    """A buffer ``type`` of ``rank`` this GPU reaches over channels of ``access_channel_types``."""

    rank: int
    type: str
    access_channel_types: tuple[str, ...]

    def to_json(self) -> dict:
        return {"rank": self.rank, "type": self.type, "access_channel_types": list(self.access_channel_types)}


@dataclass(frozen=True)
class Gpu:
    """One rank of the plan."""

    id: int
    input_chunks: int
    output_chunks: int
    scratch_chunks: int
    threadblocks: tuple[ThreadBlock, ...]
    channels: tuple[Channel, ...] = ()
    remote_buffers: tuple[RemoteBuffer, ...] = ()
    semaphores: tuple[int, ...] = ()   # initial values

    def to_json(self) -> dict:
        return {"id": self.id, "input_chunks": self.input_chunks, "output_chunks": self.output_chunks,
                "scratch_chunks": self.scratch_chunks, "threadblocks": [t.to_json() for t in self.threadblocks],
                "channels": [c.to_json() for c in self.channels],
                "remote_buffers": [r.to_json() for r in self.remote_buffers],
                "semaphores": [{"init_value": v} for v in self.semaphores]}


@dataclass(frozen=True)
class MscclppProgram:
    """An MSCCL++ execution plan; ``options`` holds the optional top-level keys (:data:`PLAN_DEFAULTS`)."""

    name: str
    collective: str
    protocol: str
    inplace: bool
    gpus: tuple[Gpu, ...]
    options: tuple[tuple[str, object], ...] = field(default_factory=lambda: tuple(PLAN_DEFAULTS.items()))
    record: Record | None = None  # how the file was made (spec, method, fabric, LP times): top-level "a2a_record"

    @property
    def nranks(self) -> int:
        return len(self.gpus)

    @property
    def chunks_per_shard(self) -> int:
        """Chunks per peer: the all-to-all's ``input_chunks / nranks`` (0 when it does not divide)."""
        n = len(self.gpus)
        c = self.gpus[0].input_chunks if self.gpus else 0
        return c // n if n and c % n == 0 else 0


# ------------------------------------------------------------------ reading


def _where(path: list) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path) or "plan"


def _get(obj, key, path, kind, default=...):
    if not isinstance(obj, dict):
        raise FormatError(f"{_where(path)} must be a JSON object")
    if key not in obj:
        if default is ...:
            raise FormatError(f"{_where(path)} is missing {key!r}")
        return default
    v = obj[key]
    ok = {"int": isinstance(v, int) and not isinstance(v, bool), "str": isinstance(v, str),
          "bool": isinstance(v, bool), "list": isinstance(v, list), "dict": isinstance(v, dict)}[kind]
    if not ok:
        raise FormatError(f"{_where(path + [key])} must be {'an' if kind == 'int' else 'a'} {kind}, got {v!r:.40}")
    if kind == "int" and abs(v) > 2**64:
        raise FormatError(f"{_where(path + [key])} is out of range")
    return v


def _ints(obj, key, path, default=None):
    v = _get(obj, key, path, "list", default)
    if v is default:
        return default
    if not all(isinstance(x, int) and not isinstance(x, bool) and abs(x) <= 2**31 for x in v):
        raise FormatError(f"{_where(path + [key])} must be a list of integers")
    return tuple(v)


def _buff(b, path) -> BuffRef:
    return BuffRef(_get(b, "type", path, "str", None), _get(b, "buffer_id", path, "int", None),
                   _get(b, "index", path, "int"), _get(b, "size", path, "int"),
                   _get(b, "switch_channel_id", path, "int", None))


_OP_KEYS = {"name", "src_buff", "dst_buff", "channel_type", "channel_ids", "semaphore_ids", "barrier_id",
            "num_threadblocks", "ops"}


def _op(o, path, depth=0) -> Op:
    if depth > 2:
        raise FormatError(f"{_where(path)}: pipelines nested too deeply")
    src = tuple(_buff(b, path + ["src_buff", i]) for i, b in enumerate(_get(o, "src_buff", path, "list", [])))
    dst = tuple(_buff(b, path + ["dst_buff", i]) for i, b in enumerate(_get(o, "dst_buff", path, "list", [])))
    inner = _get(o, "ops", path, "list", None)
    return Op(_get(o, "name", path, "str"), src, dst, _get(o, "channel_type", path, "str", None),
              _ints(o, "channel_ids", path), _ints(o, "semaphore_ids", path), _get(o, "barrier_id", path, "int", None),
              _get(o, "num_threadblocks", path, "int", None),
              None if inner is None else tuple(_op(x, path + ["ops", i], depth + 1) for i, x in enumerate(inner)),
              tuple((k, v) for k, v in o.items() if k not in _OP_KEYS))


def _option(obj, key, default):
    """A top-level option as the executor reads it (``execution_plan.cc`` l.131-133: ``obj.value(key, default)``
    into a ``bool``, ``int`` or ``uint64_t``): a bool, or an integer in 0 .. 2**64-1; ``buffer_alignment``
    at least 1 (``checkMessageSize`` divides by it, l.299-311)."""
    if isinstance(default, bool):
        return _get(obj, key, [], "bool", default)
    v = _get(obj, key, [], "int", default)
    least = 1 if key == "buffer_alignment" else 0
    if not least <= v <= 2**64 - 1:
        raise FormatError(f"{_where([key])} must lie in {least} .. 2**64-1, got {v}")
    return v


def mscclpp_from_json(obj, source: str = "<mscclpp>") -> MscclppProgram:
    """Build the program from a decoded plan; a missing or mistyped field raises :class:`FormatError`
    naming its JSON path.  Semantic rules (ids in range, limits) are :mod:`.mscclpp_rules`'."""
    try:
        return _plan(obj)
    except FormatError as exc:
        raise FormatError(f"{source}: {exc}") from None


def _plan(obj) -> MscclppProgram:
    gpus = []
    for gi, g in enumerate(_get(obj, "gpus", [], "list")):
        p = ["gpus", gi]
        tbs = []
        for ti, t in enumerate(_get(g, "threadblocks", p, "list")):
            tp = p + ["threadblocks", ti]
            chans = tuple((_get(c, "channel_type", tp + ["channels", i], "str"),
                           _ints(c, "channel_ids", tp + ["channels", i]))
                          for i, c in enumerate(_get(t, "channels", tp, "list", [])))
            refs = tuple((_get(r, "access_channel_type", tp + ["remote_buffer_refs", i], "str"),
                          _ints(r, "remote_buffer_ids", tp + ["remote_buffer_refs", i]))
                         for i, r in enumerate(_get(t, "remote_buffer_refs", tp, "list", [])))
            ops = tuple(_op(o, tp + ["ops", i]) for i, o in enumerate(_get(t, "ops", tp, "list")))
            tbs.append(ThreadBlock(_get(t, "id", tp, "int"), ops, chans, refs))
        channels = []
        for ci, c in enumerate(_get(g, "channels", p, "list", [])):
            cp = p + ["channels", ci]
            kind = _get(c, "channel_type", cp, "str")
            peers = _ints(c, "connected_to", cp, ()) if kind != "switch" else ()
            channels.append(Channel(kind, peers, tuple((k, v) for k, v in c.items()
                                                       if k not in ("channel_type", "connected_to"))))
        remote = tuple(RemoteBuffer(_get(r, "rank", p + ["remote_buffers", i], "int"),
                                    _get(r, "type", p + ["remote_buffers", i], "str"),
                                    tuple(_get(r, "access_channel_types", p + ["remote_buffers", i], "list")))
                       for i, r in enumerate(_get(g, "remote_buffers", p, "list", [])))
        sems = tuple(_get(s, "init_value", p + ["semaphores", i], "int")
                     for i, s in enumerate(_get(g, "semaphores", p, "list", [])))
        gpus.append(Gpu(_get(g, "id", p, "int"), _get(g, "input_chunks", p, "int"), _get(g, "output_chunks", p, "int"),
                        _get(g, "scratch_chunks", p, "int"), tuple(tbs), tuple(channels), remote, sems))
    options = tuple((k, _option(obj, k, v)) for k, v in PLAN_DEFAULTS.items())
    record = None if obj.get(RECORD_KEY) is None else Record.from_json_dict(obj[RECORD_KEY], RECORD_KEY)
    return MscclppProgram(_get(obj, "name", [], "str"), _get(obj, "collective", [], "str"),
                          _get(obj, "protocol", [], "str"), _get(obj, "inplace", [], "bool"), tuple(gpus), options,
                          record)


def parse_mscclpp(data: bytes, source: str = "<mscclpp>") -> MscclppProgram:
    """Decode and read an execution plan (size and nesting bounded)."""
    if len(data) > MAX_PLAN_BYTES:
        raise FormatError(f"{source}: plan is {len(data)} bytes, over the {MAX_PLAN_BYTES}-byte limit")
    depth = level = 0
    for ch in data:  # bound nesting before json recurses (bytes: '[' 91, '{' 123, ']' 93, '}' 125)
        if ch in (91, 123):
            level += 1
            depth = max(depth, level)
        elif ch in (93, 125):
            level -= 1
    if depth > MAX_PLAN_DEPTH * 2:
        raise FormatError(f"{source}: JSON nested {depth} deep, more than an execution plan needs")
    obj = parse_json(data, source)
    if not isinstance(obj, dict):
        raise FormatError(f"{source}: an execution plan is a JSON object")
    if not is_plan(obj):
        kind = obj.get("format") if isinstance(obj.get("format"), str) else None
        if kind == "a2a-schedule":
            raise FormatError(f"{source}: the schedule IR of 'a2a schedule', not a lowered schedule: lower it with "
                              f"'a2a compile --from-ir {source} --emit FORMAT'")
        raise FormatError(f"{source}: not a schedule: " + (f"{kind:.40} JSON" if kind else "a JSON object")
                          + f" without {PLAN_MIN_KEYS} of an execution plan's keys ({', '.join(PLAN_KEYS)})")
    return mscclpp_from_json(obj, source)


def is_plan(obj) -> bool:
    """Whether decoded JSON is an execution plan (a JSON object with :data:`PLAN_MIN_KEYS` of :data:`PLAN_KEYS`)."""
    return isinstance(obj, dict) and sum(k in obj for k in PLAN_KEYS) >= PLAN_MIN_KEYS


def looks_like_plan(data: bytes) -> bool:
    """True when ``data`` is read as JSON: its first non-blank byte (after a UTF-8 byte-order mark) is not
    XML's ``<`` (a JSON scalar such as ``null`` or ``"text"`` is JSON, not malformed XML); an empty file is
    left to the XML reader, which says it is empty."""
    head = data.lstrip()
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] not in (b"<", b"")


# ------------------------------------------------------------------ writing


def mscclpp_to_json(program: MscclppProgram) -> bytes:
    """Serialise in the DSL's key order, two-space indented (deterministic bytes)."""
    p = program
    opts = dict(p.options)
    obj = {"name": p.name, "collective": p.collective, "protocol": p.protocol, "inplace": p.inplace,
           "reuse_resources": opts.get("reuse_resources", False), "gpus": [g.to_json() for g in p.gpus],
           **{k: opts.get(k, v) for k, v in PLAN_DEFAULTS.items() if k != "reuse_resources"},
           **({} if p.record is None else {RECORD_KEY: p.record.to_json_dict()})}
    return (json.dumps(obj, indent=2) + "\n").encode()


# ---------------------------------------------------------------- resolving


@dataclass(frozen=True)
class ChannelEnd:
    """A threadblock's channel resolved: ``peer`` rank, ``type``, and ``pair`` = (type, low rank, high
    rank, k), the same on both ends of the connection; ``gpu_index`` is its index in the GPU's
    channels of that type."""

    peer: int
    type: str
    pair: tuple
    gpu_index: int


@dataclass(frozen=True)
class Resolved:
    """For one GPU: per threadblock, its channels (``ChannelEnd`` per tb-local id, by type) and its
    remote buffers (``(rank, buffer)`` per tb-local id, by access type)."""

    channels: tuple[dict[str, tuple[ChannelEnd, ...]], ...]
    remote: tuple[dict[str, tuple[tuple[int, str], ...]], ...]


def gpu_channels(g: Gpu) -> dict[str, list[tuple[int, int]]]:
    """``type -> [(peer, k)]``: the GPU's channels of each type in file order, ``k`` counting the earlier
    channels of that type to the same peer (the executor's pairing key)."""
    out: dict[str, list[tuple[int, int]]] = {}
    seen: dict = {}
    for c in g.channels:
        for peer in c.connected_to:
            k = seen.get((c.channel_type, peer), 0)
            seen[(c.channel_type, peer)] = k + 1
            out.setdefault(c.channel_type, []).append((peer, k))
    return out


def resolve(p: MscclppProgram) -> list[Resolved]:
    """Every GPU's threadblock-local ids resolved; ids out of range raise :class:`FormatError`
    (:mod:`.mscclpp_rules` reports them first, with locations)."""
    out = []
    for g in p.gpus:
        by_type = gpu_channels(g)
        chans, remote = [], []
        for tb in g.threadblocks:
            mine: dict[str, list[ChannelEnd]] = {}
            for kind, ids in tb.channels:
                for i in ids:
                    if not 0 <= i < len(by_type.get(kind, ())):
                        raise FormatError(f"gpu {g.id} tb {tb.id}: {kind} channel {i} is not one of the GPU's "
                                          f"{len(by_type.get(kind, ()))} {kind} channels")
                    peer, k = by_type[kind][i]
                    mine.setdefault(kind, []).append(
                        ChannelEnd(peer, kind, (kind, min(g.id, peer), max(g.id, peer), k), i))
            bufs: dict[str, list[tuple[int, str]]] = {}
            for kind, ids in tb.remote_buffer_refs:
                for i in ids:
                    if not 0 <= i < len(g.remote_buffers):
                        raise FormatError(f"gpu {g.id} tb {tb.id}: remote buffer {i} is not one of the GPU's "
                                          f"{len(g.remote_buffers)}")
                    bufs.setdefault(kind, []).append((g.remote_buffers[i].rank, g.remote_buffers[i].type))
            chans.append({k: tuple(v) for k, v in mine.items()})
            remote.append({k: tuple(v) for k, v in bufs.items()})
        out.append(Resolved(tuple(chans), tuple(remote)))
    return out
