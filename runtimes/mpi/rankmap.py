"""Rank maps: which topology host each MPI process plays (docs/formats.md, "Rank maps").

A schedule's rank ``i`` is host ``i`` of its topology; on a cluster the
launcher decides where MPI ranks run.  A rank map file names, for each
machine, the topology host (or hosts) that it is cabled as::

    # machine (MPI_Get_processor_name)   topology host
    node-a    0
    node-b    h3              # a host name of the topology (needs its topology)
    node-c    2
    node-c    5               # a second process on node-c plays host 5

One line per process: a machine listed ``k`` times runs ``k`` ranks, and its
ranks in increasing MPI rank order play its lines' hosts in file order.  The
map is checked against the machines the ranks really run on
(:func:`RankMap.place`); every mismatch is refused in one line.  This module is
plain Python (no MPI): :class:`runtimes.mpi.Alltoall` gathers the processor
names and applies the placement.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from a2a_compiler.errors import FormatError

#: A rank map is a small text file; anything larger is refused unread.
MAX_MAP_BYTES = 16 * 1024 * 1024
_COMMENT = re.compile(r"(^|\s)#.*$")


@dataclass(frozen=True)
class Placement:
    """One line of a rank map: machine ``host`` plays topology host ``node`` (``line`` in ``source``)."""

    host: str
    node: int
    line: int


@dataclass(frozen=True)
class RankMap:
    """A parsed rank map: one :class:`Placement` per process, in file order.

    ``n_hosts`` is the host count of the topology the nodes were resolved
    against (``None`` when the map used host ids only and no topology was given).
    """

    source: str
    placements: tuple[Placement, ...]
    n_hosts: int | None = None

    @classmethod
    def parse(cls, text: str, source: str = "<rank map>", topology=None) -> "RankMap":
        """Parse ``HOSTNAME NODE`` lines; ``NODE`` is a host id or, given ``topology``, a host name.

        ``topology`` is a :class:`~a2a_compiler.topology.Topology` or a spec
        string; its hosts' names (e.g. ``h3`` of a fat tree, or an ``ibnet:``
        fabric's node names) may then name the nodes.  ``NODE`` is the rest
        of the line, so names may contain spaces; ``#`` starts a comment.
        """
        names = _host_names(topology)
        by_name = {name: i for i, name in enumerate(names)} if names is not None else {}
        placements, seen = [], {}
        for lineno, raw in enumerate(text.splitlines(), 1):
            line = _COMMENT.sub("", raw).strip()
            if not line:
                continue
            where = f"{source}:{lineno}"
            host, token = (re.split(r"\s+", line, maxsplit=1) + [""])[:2]
            if not token:
                raise FormatError(f"{where}: expected 'HOSTNAME NODE', got {line!r}")
            if token.startswith("slots=") or " slots=" in token:
                raise FormatError(f"{where}: 'slots=' is not used in a rank map: list a machine once per process "
                                  f"it runs, each line with the topology host that process plays")
            node = _resolve(token, by_name, names, topology, where)
            if node in seen:
                raise FormatError(f"{where}: host {token!r} is already played by {seen[node][0]!r} "
                                  f"(line {seen[node][1]})")
            seen[node] = (host, lineno)
            placements.append(Placement(host, node, lineno))
        if not placements:
            raise FormatError(f"{source}: the rank map lists no process")
        return cls(source, tuple(placements), None if names is None else len(names))

    @classmethod
    def load(cls, path, topology=None) -> "RankMap":
        """Read and parse a rank map file (see :meth:`parse`)."""
        from a2a_compiler.files import read_bytes

        data = read_bytes(path, MAX_MAP_BYTES)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FormatError(f"{path}: not UTF-8 text (byte {exc.start})") from None
        return cls.parse(text, str(path), topology)

    def place(self, processor_names: list[str], nranks: int) -> np.ndarray:
        """The topology host of every MPI rank, given each rank's processor name.

        ``nranks`` is the schedule's rank count.  Raises :class:`FormatError`
        naming the first rank whose machine the map does not expect (with its
        processor name and what the map expected), or the map's line no rank runs on.
        """
        P = self.placements
        if self.n_hosts is not None and self.n_hosts != nranks:
            raise FormatError(f"{self.source}: the map's topology has {self.n_hosts} hosts but the schedule has "
                              f"{nranks} ranks")
        if len(P) != nranks or len(processor_names) != nranks:
            raise FormatError(f"{self.source}: the map lists {len(P)} process{'es' if len(P) > 1 else ''} but the "
                              f"schedule has {nranks} ranks")
        high = max(p.node for p in P)
        if high >= nranks:
            line = next(p.line for p in P if p.node == high)
            raise FormatError(f"{self.source}:{line}: host {high} is not a host of the schedule (0..{nranks - 1})")
        lines: dict[str, list[Placement]] = defaultdict(list)
        for p in P:
            lines[p.host].append(p)
        taken: dict[str, int] = defaultdict(int)
        nodes = np.full(len(processor_names), -1, dtype=np.int64)
        problem = None
        for rank, name in enumerate(processor_names):
            host = _match(name, lines)
            if host is not None and taken[host] < len(lines[host]):
                nodes[rank] = lines[host][taken[host]].node
                taken[host] += 1
            elif problem is None:
                problem = (rank, name, host)
        idle = [p for h, ps in lines.items() for p in ps[taken[h]:]]
        idle.sort(key=lambda p: p.line)
        expected = ""
        if idle:
            k = taken[idle[0].host]
            expected = (f"; the map expects a process on {idle[0].host!r} (line {idle[0].line}), where "
                        f"{'none runs' if not k else f'only {k} run' + ('s' if k == 1 else '')}")
        if problem is not None:  # as many lines as ranks: a rank without a line leaves a line without a rank
            rank, name, host = problem
            if host is None:
                raise FormatError(f"{self.source}: rank {rank} runs on {name!r}, which the rank map does not "
                                  f"list{expected}")
            n = len(lines[host])
            raise FormatError(f"{self.source}: rank {rank} runs on {name!r}, which the rank map lists for "
                              f"{n} process{'es' if n > 1 else ''} (line{'s' if n > 1 else ''} "
                              f"{', '.join(str(p.line) for p in lines[host])}) but {taken[host] + 1} run there"
                              f"{expected}")
        return nodes


def _host_names(topology) -> list[str] | None:
    if topology is None:
        return None
    if isinstance(topology, str):
        from a2a_compiler.topology import from_spec

        topology = from_spec(topology)
    return list(topology.names[:topology.n_hosts])


def _resolve(token: str, by_name: dict, names, topology, where: str) -> int:
    """A node token -> host id: a host name of the topology, else a decimal host id."""
    if token in by_name:
        return by_name[token]
    if token.isdecimal():
        node = int(token)
        if names is not None and node >= len(names):
            raise FormatError(f"{where}: host {node} is not a host of the topology (0..{len(names) - 1})")
        return node
    if names is None:
        raise FormatError(f"{where}: {token!r} is not a host id; host names need the topology (--topology SPEC)")
    spec = getattr(topology, "spec", topology)
    raise FormatError(f"{where}: {token!r} is neither a host id nor a host name of {spec}")


def _match(name: str, lines: dict) -> str | None:
    """The map's machine for processor name ``name``: the same name, else its short (first-label) form."""
    if name in lines:
        return name
    short = name.split(".", 1)[0]
    return short if short in lines else None


def place_ranks(rank_map, processor_names: list[str] | None, nranks: int, topology=None) -> np.ndarray:
    """The topology host every MPI rank plays.

    ``rank_map`` is ``None`` (rank ``r`` plays host ``r``), a rank map file
    path (host names resolved against ``topology``, see :meth:`RankMap.parse`),
    or a :class:`RankMap`, checked against the ranks' ``processor_names``
    (``MPI_Get_processor_name``).
    """
    if rank_map is None:
        return np.arange(nranks, dtype=np.int64)
    rmap = rank_map if isinstance(rank_map, RankMap) else RankMap.load(rank_map, topology)
    return rmap.place(processor_names, nranks)
