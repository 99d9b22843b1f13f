"""In-memory forms of the three lowered file formats (see docs/formats.md).

Each maps one-to-one onto its XML file: the lowering passes build them, the
writers serialise them, the parsers read them back (from our files or other
tools'), and the verifier and the MPI runtime consume them.
"""

from __future__ import annotations

from dataclasses import dataclass

# ------------------------------------------------------------------ MSCCL XML


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
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    tbs: tuple[MscclThreadBlock, ...]


@dataclass(frozen=True)
class MscclProgram:
    """``<algo>``: attribute values as parsed; ``gpus`` in id order."""

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


# --------------------------------------------------------- oneCCL-style XML


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
    id: int
    i_chunks: int
    o_chunks: int
    s_chunks: int
    steps: tuple[tuple[OnecclOp, ...], ...]


@dataclass(frozen=True)
class OnecclProgram:
    name: str
    nranks: int
    chunks_per_shard: int
    nsteps: int
    ranks: tuple[OnecclRank, ...]
    lp_time: float | None = None  # all-to-all time 1/F of the LP the schedule came from (link-times)


# ------------------------------------------------------ MPI path schedule XML


@dataclass(frozen=True)
class PathSend:
    """Rank ``src`` sends chunks ``chunks`` of its shard for ``dst`` along ``nodes``."""

    src: int
    dst: int
    route_id: int
    layer: int
    nodes: tuple[int, ...]
    chunks: tuple[int, ...]


@dataclass(frozen=True)
class MpiPathProgram:
    name: str
    nranks: int
    nnodes: int
    chunks_per_shard: int
    sends: tuple[PathSend, ...]
    lp_time: float | None = None  # all-to-all time 1/F of the LP the schedule came from (link-times)
