"""MSCCL XML (the MSCCL executor's algorithm format): program, reader and writer.

The writer emits exactly what the executor's hand-written tokenizer accepts
(see docs/formats.md and the reference notes): no XML declaration, two-space
indentation, one line per tag, double quotes, attributes in the executor's
order.  The reader is tolerant so that files written by other tools
(msccl-tools' ``ncclize``/``ir_to_xml``) load; the strict executor rules live in
:mod:`a2a_compiler.formats.msccl_rules`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .record import Record
from .xmlutil import attr_int, attr_str, children, element, expect_root, reader, root_element, serialize

ROOT = "algo"
#: ``<algo>`` attributes in the executor's (and msccl-tools') order.
ALGO_ATTRS = ("name", "proto", "nchannels", "nchunksperloop", "ngpus", "coll",
              "inplace", "outofplace", "minBytes", "maxBytes")
GPU_ATTRS = ("id", "i_chunks", "o_chunks", "s_chunks")
TB_ATTRS = ("id", "send", "recv", "chan")
PROTOS = ("Simple", "LL", "LL128")
STEP_ATTRS = ("s", "type", "srcbuf", "srcoff", "dstbuf", "dstoff", "cnt", "depid", "deps", "hasdep")


# ------------------------------------------------------------------ program


@dataclass(frozen=True)
class MscclStep:
    """``<step s type srcbuf srcoff dstbuf dstoff cnt depid deps hasdep/>``."""

    s: int
    type: str
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int
    depid: int
    deps: int
    hasdep: int


@dataclass(frozen=True)
class MscclThreadBlock:
    """``<tb id send recv chan>``: sends go to ``send``, receives come from ``recv``."""

    id: int
    send: int
    recv: int
    chan: int
    steps: tuple[MscclStep, ...]


@dataclass(frozen=True)
class MscclGpu:
    """``<gpu id i_chunks o_chunks s_chunks>``: buffer sizes in chunks and the thread blocks."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[MscclThreadBlock, ...]


@dataclass(frozen=True)
class MscclProgram:
    """``<algo>``: attribute values as parsed; ``gpus`` sorted by id (files may list them in any order)."""

    name: str
    proto: str
    nchannels: int
    nchunksperloop: int
    ngpus: int
    coll: str
    inplace: int
    outofplace: int
    min_bytes: int
    max_bytes: int
    gpus: tuple[MscclGpu, ...]
    record: Record | None = None  # how the file was made (a comment: the executor allows 16 attributes)


# ------------------------------------------------------------------ reading


def msccl_from_element(root, source: str) -> MscclProgram:
    """Build the program from a parsed ``<algo>`` element.

    Missing optional attributes get msccl-tools' defaults (``cnt`` 1, no
    dependency, ``buf``/``off`` accepted for the newer single-buffer form); a
    missing id or step type reads as ``-1`` / ``""``, which the executor rules
    (:mod:`.msccl_rules`) report: the file is readable but invalid.  Malformed
    integers raise :class:`FormatError` (unreadable).
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
                    type=attr_str(s, "type", source, ""),
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
                id=attr_int(t, "id", source, -1),
                send=attr_int(t, "send", source, -1),
                recv=attr_int(t, "recv", source, -1),
                chan=attr_int(t, "chan", source, 0),
                steps=tuple(steps),
            ))
        gpus.append(MscclGpu(
            id=attr_int(g, "id", source, -1),
            i_chunks=attr_int(g, "i_chunks", source, 0),
            o_chunks=attr_int(g, "o_chunks", source, 0),
            s_chunks=attr_int(g, "s_chunks", source, 0),
            tbs=tuple(tbs),
        ))
    gpus.sort(key=lambda g: g.id)
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
        record=Record.from_root(root, source),
    )


parse_msccl = reader(msccl_from_element, "msccl")


# ------------------------------------------------------------------ writing


def msccl_to_xml(program: MscclProgram) -> bytes:
    """Serialise ``program`` in the executor's layout (deterministic bytes)."""
    p = program
    root = root_element(ROOT, p, [
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
