"""oneCCL-style XML: program, reader and writer (Basu et al. §4; contract in docs/formats.md).

``<oneccl_algo>`` → one ``<rank>`` per rank → ``<step id=t>`` (asynchronous
``copy``/``send``/``recv`` operations) each followed by ``<sync after=t/>``.
An all-to-allv program gives every ``<rank>`` its row of chunk counts
(``chunks="T[r][0] ..."``; the buffers follow that layout) and of demand volumes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FormatError
from .record import Record
from .xmlutil import (MAX_BUFFER_CHUNKS, attr_int, attr_str, demand_attrs, demand_rows, element, expect_root,
                      rank_elements, reader, root_element, serialize, where)

ROOT = "oneccl_algo"
OP_KINDS = ("copy", "send", "recv")


# ------------------------------------------------------------------ program


@dataclass(frozen=True)
class OnecclOp:
    """One asynchronous operation of a step.

    ``send``: reads ``cnt`` chunks at ``srcbuf[srcoff]`` and sends them to ``peer``.
    ``recv``: receives ``cnt`` chunks from ``peer`` into ``dstbuf[dstoff]``.
    ``copy``: local copy ``srcbuf[srcoff] -> dstbuf[dstoff]`` (``peer`` = -1).
    Unused buffer fields are ``""`` and offsets ``-1``.
    """

    kind: str
    peer: int
    srcbuf: str
    srcoff: int
    dstbuf: str
    dstoff: int
    cnt: int


@dataclass(frozen=True)
class OnecclRank:
    """``<rank id i_chunks o_chunks s_chunks>``: buffer sizes in chunks and the operations of every step."""

    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    steps: tuple[tuple[OnecclOp, ...], ...]


@dataclass(frozen=True)
class OnecclProgram:
    """``<oneccl_algo>``: ``ranks`` in id order, every rank with ``nsteps`` steps."""

    name: str
    nranks: int
    chunks_per_shard: int
    nsteps: int
    ranks: tuple[OnecclRank, ...]
    record: Record | None = None  # how the file was made (spec, method, fabric, demand, LP times)
    chunk_counts: tuple[tuple[int, ...], ...] | None = None  # all-to-allv: chunks per pair (rows: senders)
    volumes: tuple[tuple[float, ...], ...] | None = None     # all-to-allv: the demand's volumes

    def counts(self):
        """Chunks of every pair: :attr:`chunk_counts`, or ``chunks_per_shard`` everywhere."""
        import numpy as np

        if self.chunk_counts is not None:
            return np.array(self.chunk_counts, dtype=np.int64)
        return np.full((self.nranks, self.nranks), self.chunks_per_shard, dtype=np.int64)


# ------------------------------------------------------------------ reading


def _op(el, source: str) -> OnecclOp:
    kind = el.tag
    cnt = attr_int(el, "cnt", source, 1)
    if kind == "copy":
        return OnecclOp("copy", -1, attr_str(el, "srcbuf", source), attr_int(el, "srcoff", source),
                        attr_str(el, "dstbuf", source), attr_int(el, "dstoff", source), cnt)
    peer = attr_int(el, "peer", source)
    buf, off = attr_str(el, "buf", source), attr_int(el, "off", source)
    if kind == "send":
        return OnecclOp("send", peer, buf, off, "", -1, cnt)
    return OnecclOp("recv", peer, "", -1, buf, off, cnt)


def oneccl_from_element(root, source: str) -> OnecclProgram:
    """Build the program from a parsed ``<oneccl_algo>`` element.

    Structure is checked here (step ids ``0..nsteps-1`` in order on every rank,
    each followed by its ``<sync after=t/>``, rank ids in order); data movement
    is checked by the verifier.
    """
    expect_root(root, ROOT, source)
    coll = attr_str(root, "coll", source)
    if coll != "alltoall":
        raise FormatError(f"{where(root, source)} coll={coll!r}, only 'alltoall' is supported")
    nranks = attr_int(root, "nranks", source)
    cps = attr_int(root, "chunks_per_shard", source)
    nsteps = attr_int(root, "nsteps", source)
    ncl = attr_int(root, "nchunksperloop", source, nranks * cps)
    if nranks < 1 or cps < 1 or nsteps < 0 or ncl != nranks * cps:
        raise FormatError(f"{where(root, source)} needs nranks >= 1, chunks_per_shard >= 1, nsteps >= 0 "
                          f"and nchunksperloop = nranks*chunks_per_shard (got {nranks}, {cps}, {nsteps}, {ncl})")
    if ncl > MAX_BUFFER_CHUNKS:
        raise FormatError(f"{where(root, source)} nchunksperloop={ncl} exceeds the limit of {MAX_BUFFER_CHUNKS}")
    ranks = []
    rank_els = rank_elements(root, nranks, source)
    counts = demand_rows(rank_els, "chunks", source, nranks, int)
    volumes = demand_rows(rank_els, "volumes", source, nranks)
    if counts is not None and (volumes is None or sum(map(sum, counts)) > MAX_BUFFER_CHUNKS * nranks):
        raise FormatError(f"{source}: chunks= (an all-to-allv layout) needs volumes= too, and at most "
                          f"{MAX_BUFFER_CHUNKS} chunks per rank")
    for r in rank_els:
        rid = attr_int(r, "id", source)
        if rid != len(ranks):
            raise FormatError(f"{where(r, source)} id={rid}, expected {len(ranks)} (ranks in id order)")
        steps, expect_sync = [], None
        for el in r:
            if not isinstance(el.tag, str):
                continue
            if el.tag == "step":
                if expect_sync is not None:
                    raise FormatError(f"{where(el, source)} step {len(steps)} follows step {expect_sync} "
                                      f"without <sync after=\"{expect_sync}\"/>")
                sid = attr_int(el, "id", source)
                if sid != len(steps):
                    raise FormatError(f"{where(el, source)} id={sid}, expected {len(steps)} (steps in order)")
                ops = []
                for o in el:
                    if not isinstance(o.tag, str):
                        continue
                    if o.tag not in OP_KINDS:
                        raise FormatError(f"{where(o, source)} is not an operation (copy, send, recv)")
                    ops.append(_op(o, source))
                steps.append(tuple(ops))
                expect_sync = sid
            elif el.tag == "sync":
                after = attr_int(el, "after", source)
                if after != expect_sync:
                    raise FormatError(f"{where(el, source)} after={after} does not follow step {after}")
                expect_sync = None
            else:
                raise FormatError(f"{where(el, source)} is not allowed inside <rank>")
        if expect_sync is not None:
            raise FormatError(f"{where(r, source)} {rid}: step {expect_sync} has no <sync after=\"{expect_sync}\"/>")
        if len(steps) != nsteps:
            raise FormatError(f"{where(r, source)} {rid} lists {len(steps)} steps, nsteps={nsteps}")
        s_chunks = attr_int(r, "s_chunks", source, 0)
        if s_chunks > MAX_BUFFER_CHUNKS:
            raise FormatError(f"{where(r, source)} s_chunks={s_chunks} exceeds the limit of {MAX_BUFFER_CHUNKS}")
        ranks.append(OnecclRank(rid, attr_int(r, "i_chunks", source), attr_int(r, "o_chunks", source),
                                s_chunks, tuple(steps)))
    return OnecclProgram(attr_str(root, "name", source, ""), nranks, cps, nsteps, tuple(ranks),
                         Record.from_root(root, source), counts, volumes)


parse_oneccl = reader(oneccl_from_element, "oneccl")


# ------------------------------------------------------------------ writing


def oneccl_to_xml(program: OnecclProgram) -> bytes:
    """Serialise ``program`` per docs/formats.md (deterministic bytes)."""
    p = program
    root = root_element(ROOT, p, [("name", p.name), ("coll", "alltoall"), ("nranks", p.nranks),
                                  ("chunks_per_shard", p.chunks_per_shard),
                                  ("nchunksperloop", p.nranks * p.chunks_per_shard), ("nsteps", p.nsteps)])
    for r in p.ranks:
        re_ = element(root, "rank", [("id", r.id), ("i_chunks", r.i_chunks), ("o_chunks", r.o_chunks),
                                     ("s_chunks", r.s_chunks), *demand_attrs(p, r.id)])
        for t, ops in enumerate(r.steps):
            se = element(re_, "step", [("id", t)])
            for o in ops:
                if o.kind == "copy":
                    element(se, "copy", [("srcbuf", o.srcbuf), ("srcoff", o.srcoff),
                                         ("dstbuf", o.dstbuf), ("dstoff", o.dstoff), ("cnt", o.cnt)])
                elif o.kind == "send":
                    element(se, "send", [("peer", o.peer), ("buf", o.srcbuf), ("off", o.srcoff), ("cnt", o.cnt)])
                else:
                    element(se, "recv", [("peer", o.peer), ("buf", o.dstbuf), ("off", o.dstoff), ("cnt", o.cnt)])
            element(re_, "sync", [("after", t)])
    return serialize(root)
