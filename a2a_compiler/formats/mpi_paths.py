"""MPI path schedule XML: program, reader and writer (Basu et al. §4 "Path-based Schedules").

``<mpi_paths>`` → one ``<rank id [volumes]>`` per rank → ``<send dst route_id layer route [vcs] [step] chunks/>``
(contract in docs/formats.md).  An all-to-allv program records every rank's row of
demand volumes: chunk ``k`` of pair ``(s, d)`` is ``1/C`` of that pair's volume.
Version 1 runs every send at once; version 2 (``version="2" nsteps="S"``) adds
time steps: ``step`` on each send, steps run one after another.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import FormatError, echo
from .record import Record
from .xmlutil import (MAX_BUFFER_CHUNKS, attr_int, attr_ints, attr_str, children, demand_attrs, demand_rows, element,
                      expect_root, rank_elements, reader, root_element, serialize, where)

ROOT = "mpi_paths"
#: Format versions this reader knows: 1 (all sends at once), 2 (time steps).
VERSIONS = (1, 2)


# ------------------------------------------------------------------ program


@dataclass(frozen=True)
class PathSend:
    """Rank ``src`` sends chunks ``chunks`` of its shard for ``dst`` along ``nodes``.

    ``layer`` is the route's virtual layer; ``vcs``, when given, one virtual
    channel per hop instead (a route that changes channel on the way).
    ``step`` is the time step the send belongs to (version 2 files).
    """

    src: int
    dst: int
    route_id: int
    layer: int
    nodes: tuple[int, ...]
    chunks: tuple[int, ...]
    vcs: tuple[int, ...] | None = None
    step: int = 0

    @property
    def channels(self) -> tuple[int, ...]:
        """The virtual channel of every hop: ``vcs``, or ``layer`` on every hop."""
        return self.vcs if self.vcs is not None else (self.layer,) * max(len(self.nodes) - 1, 0)


@dataclass(frozen=True)
class MpiPathProgram:
    """``<mpi_paths>``: every rank's sends; node ids >= ``nranks`` are switches; ``nsteps`` time steps
    (1: every send at once, a version 1 file)."""

    name: str
    nranks: int
    nnodes: int
    chunks_per_shard: int
    sends: tuple[PathSend, ...]
    record: Record | None = None  # how the file was made (spec, method, fabric, demand, LP times)
    volumes: tuple[tuple[float, ...], ...] | None = None  # all-to-allv: the demand's volumes (rows: senders)
    nsteps: int = 1


# ------------------------------------------------------------------ reading


def mpi_paths_from_element(root, source: str) -> MpiPathProgram:
    """Build the program from a parsed ``<mpi_paths>`` element (ranks in id order)."""
    expect_root(root, ROOT, source)
    coll = attr_str(root, "coll", source)
    if coll != "alltoall":
        raise FormatError(f"{where(root, source)} coll={coll!r}, only 'alltoall' is supported")
    nranks = attr_int(root, "nranks", source)
    nnodes = attr_int(root, "nnodes", source, nranks)
    cps = attr_int(root, "chunks_per_shard", source)
    ncl = attr_int(root, "nchunksperloop", source, nranks * cps)
    if nranks < 1 or cps < 1 or nnodes < nranks or ncl != nranks * cps:
        raise FormatError(f"{where(root, source)} needs nranks >= 1, nnodes >= nranks, chunks_per_shard >= 1 "
                          f"and nchunksperloop = nranks*chunks_per_shard (got {nranks}, {nnodes}, {cps}, {ncl})")
    if ncl > MAX_BUFFER_CHUNKS:
        raise FormatError(f"{where(root, source)} nchunksperloop={ncl} exceeds the limit of {MAX_BUFFER_CHUNKS}")
    version = attr_int(root, "version", source, 1)
    if version not in VERSIONS:
        raise FormatError(f"{where(root, source)} version={version}; this reader knows versions "
                          f"{', '.join(map(str, VERSIONS))}")
    nsteps = attr_int(root, "nsteps", source, 1) if version >= 2 else 1
    if version < 2 and root.get("nsteps") is not None:
        raise FormatError(f"{where(root, source)} nsteps needs version=\"2\"")
    if not 1 <= nsteps <= MAX_BUFFER_CHUNKS:
        raise FormatError(f"{where(root, source)} nsteps={nsteps} must be in 1..{MAX_BUFFER_CHUNKS}")
    sends = []
    rank_els = rank_elements(root, nranks, source)
    volumes = demand_rows(rank_els, "volumes", source, nranks)
    for i, r in enumerate(rank_els):
        rid = attr_int(r, "id", source)
        if rid != i:
            raise FormatError(f"{where(r, source)} id={rid}, expected {i} (ranks in id order)")
        for s in children(r, "send", source):
            nodes = attr_ints(s, "route", source)
            vcs = attr_ints(s, "vcs", source) if s.get("vcs") is not None else None
            if vcs is not None and (len(vcs) != len(nodes) - 1 or min(vcs, default=0) < 0):
                raise FormatError(f"{where(s, source)} vcs={echo(s.get('vcs'))} must give one virtual channel >= 0 "
                                  f"per hop of route={echo(s.get('route'))} ({max(len(nodes) - 1, 0)} hops)")
            if version < 2 and s.get("step") is not None:
                raise FormatError(f"{where(s, source)} step needs version=\"2\" on <{ROOT}>")
            step = attr_int(s, "step", source, 0)
            if not 0 <= step < nsteps:
                raise FormatError(f"{where(s, source)} step={step} outside 0..{nsteps - 1}")
            sends.append(PathSend(
                src=rid,
                dst=attr_int(s, "dst", source),
                route_id=attr_int(s, "route_id", source),
                layer=attr_int(s, "layer", source, 0),
                nodes=nodes,
                chunks=attr_ints(s, "chunks", source),
                vcs=vcs,
                step=step,
            ))
    return MpiPathProgram(attr_str(root, "name", source, ""), nranks, nnodes, cps, tuple(sends),
                          Record.from_root(root, source), volumes, nsteps)


parse_mpi_paths = reader(mpi_paths_from_element, "mpi_paths")


# ------------------------------------------------------------------ writing


def mpi_paths_to_xml(program: MpiPathProgram) -> bytes:
    """Serialise ``program`` per docs/formats.md; sends are grouped by source rank, in program order.
    A program with one step is written as version 1 (no ``version``, ``nsteps`` or ``step``)."""
    p = program
    stepped = p.nsteps > 1
    root = root_element(ROOT, p, [("name", p.name), ("coll", "alltoall")] + ([("version", 2)] if stepped else []) + [
        ("nranks", p.nranks), ("nnodes", p.nnodes), ("chunks_per_shard", p.chunks_per_shard),
        ("nchunksperloop", p.nranks * p.chunks_per_shard)] + ([("nsteps", p.nsteps)] if stepped else []))
    rank_els = [element(root, "rank", [("id", r), *demand_attrs(p, r)]) for r in range(p.nranks)]
    for s in p.sends:
        if not 0 <= s.src < p.nranks:
            raise FormatError(f"send from rank {s.src} outside 0..{p.nranks - 1}")
        element(rank_els[s.src], "send", [
            ("dst", s.dst), ("route_id", s.route_id), ("layer", s.layer), ("route", " ".join(map(str, s.nodes))),
        ] + ([("vcs", " ".join(map(str, s.vcs)))] if s.vcs is not None else [])
            + ([("step", s.step)] if stepped else []) + [("chunks", " ".join(map(str, s.chunks)))])
    return serialize(root)
