"""Schedule IR: the single representation every lowering consumes (Basu et al. §2.2, §4).

A shard ``B[s][d]`` (what rank ``s`` sends rank ``d``) is split into
``chunks_per_shard = C`` equal chunks; chunk ``(origin, dest, index)`` is
``index``-th ``1/C`` of that shard.

* :class:`LinkSchedule` — time-stepped, store-and-forward (tsMCF): per step, a
  list of :class:`Transfer` over real links.  A chunk is held by exactly one node
  at a time: its origin holds it from step 0, sending it moves it to the
  receiver, which holds it from the next step on.  A node only sends chunks it
  holds at the start of the step; a chunk that reaches its destination is
  delivered and never moves again.
* :class:`PathSchedule` — routed (pMCF / MCF-extP): per commodity, its chunks
  and the :class:`Route` each chunk takes.

Both carry the topology (``links``: directed links with capacities, in link
units), the fabric, the method and the LP all-to-all time ``lp_time`` (in
link-times for unit shards) they came from.

**All-to-allv** (``demand``, a :class:`~a2a_compiler.demand.Demand` with volumes
of mean 1).  A path schedule keeps ``C`` chunks per pair and carries the pair
volumes: a chunk of pair ``(s, d)`` is ``D[s, d]/C`` of a unit.  A link schedule
has whole chunks of one size, ``chunk_counts[s][d]`` of them for pair ``(s, d)``
(0 where ``D`` is 0, the diagonal 0); to carry every pair's volume, a chunk is
``u = max D[s, d] / chunk_counts[s][d]`` of a unit (:func:`chunk_weights`).

Families of functions here: JSON (:func:`to_json_dict`, :func:`from_json_dict`,
:func:`dumps`), invariants (:func:`validate`), cost model
(:func:`predicted_time`, :func:`fidelity`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import A2AError, FormatError, echo
from ..fabric import Fabric
from ..topology.puncture import recorded_hosts
from .cost import CostModel, ratio, stepped_time

Chunk = tuple[int, int, int]  # (origin, destination, index)

FORMAT = "a2a-schedule"
#: Version written; version 1 (fabric keys ``link_bw``, ``host_bw``, same bytes/s) is still read.
VERSION = 2


@dataclass(frozen=True)
class Transfer:
    """In one step, ``src`` sends ``chunks`` to its neighbour ``dst``."""

    src: int
    dst: int
    chunks: tuple[Chunk, ...]


@dataclass(frozen=True)
class Route:
    """Chunks ``chunks`` (indices into shard ``src->dst``) follow ``nodes``.

    ``nodes`` starts at ``src`` and ends at ``dst``; node ids are topology ids,
    so hosts (ids < n_ranks) are ranks and larger ids are switches.  ``layer`` is
    the route's virtual layer; ``vcs``, when given, one virtual channel per hop.
    ``step`` is the time step the route runs in (time-stepped routed schedules,
    :mod:`.injection`; steps run one after another, 0 first).
    """

    src: int
    dst: int
    nodes: tuple[int, ...]
    route_id: int
    chunks: tuple[int, ...]
    layer: int = 0
    vcs: tuple[int, ...] | None = None
    step: int = 0


@dataclass(frozen=True, eq=False)
class LinkSchedule:
    """Time-stepped, store-and-forward schedule (tsMCF, §3.1.3, §4): per step, the :class:`Transfer` s over real links.

    With a ``demand``, pair ``(s, d)`` has ``chunk_counts[s][d]`` chunks (``chunks_per_shard`` is then
    the chunks per unit of volume the counts were rounded from)."""

    n_ranks: int
    chunks_per_shard: int
    steps: tuple[tuple[Transfer, ...], ...]
    links: tuple[tuple[int, int, float], ...]
    spec: str
    fabric: Fabric
    method: str
    lp_time: float
    info: dict = field(default_factory=dict)
    demand: object = None
    chunk_counts: np.ndarray | None = None

    def counts(self) -> np.ndarray:
        """Chunks of every pair: ``chunk_counts``, or ``chunks_per_shard`` everywhere (the diagonal too)."""
        if self.chunk_counts is not None:
            return np.asarray(self.chunk_counts, dtype=np.int64)
        return np.full((self.n_ranks, self.n_ranks), self.chunks_per_shard, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class PathSchedule:
    """Routed schedule (pMCF §3.1.4 / MCF-extP §3.2.1, §4): every shard's chunks and the :class:`Route` each takes."""

    n_ranks: int
    chunks_per_shard: int
    routes: tuple[Route, ...]
    links: tuple[tuple[int, int, float], ...]
    n_nodes: int
    spec: str
    fabric: Fabric
    method: str
    lp_time: float
    info: dict = field(default_factory=dict)
    demand: object = None


Schedule = LinkSchedule | PathSchedule


# ------------------------------------------------------------------- invariants
def _chunk_name(c: Chunk) -> str:
    return f"chunk ({c[0]},{c[1]},{c[2]})"


def validate(schedule: Schedule) -> None:
    """Check the IR invariants; raise :class:`FormatError` naming the broken chunk/step/route.

    Both kinds: every shard ``(s, d)``, ``s != d``, is covered by its ``C`` chunks
    (``chunk_counts[s][d]`` in a link schedule with a demand) exactly once, and chunks end
    at their destination; a demand has one volume per rank pair.  Link schedules:
    transfers use real links, a node only sends chunks it holds, a chunk moves
    at most once per step and never after delivery.  Path schedules: routes
    start at ``src``, end at ``dst`` and follow real links.
    """
    n, C = schedule.n_ranks, schedule.chunks_per_shard
    if n < 1 or C < 1:
        raise FormatError(f"n_ranks and chunks_per_shard must be >= 1, got {n} and {C}")
    if schedule.demand is not None and schedule.demand.n != n:
        raise FormatError(f"the demand matrix is {schedule.demand.n} x {schedule.demand.n} for {n} ranks")
    if isinstance(schedule, LinkSchedule) and schedule.chunk_counts is not None:
        T = np.asarray(schedule.chunk_counts)
        if schedule.demand is None or T.shape != (n, n) or np.any(T < 0) or np.any(np.diag(T) != 0) \
                or np.any((T > 0) != (schedule.demand.volumes > 0)):
            raise FormatError("chunk_counts must come with a demand: N x N counts >= 0, 0 on the diagonal, "
                              "positive exactly where the demand is")
    links = {(u, v) for u, v, _ in schedule.links}
    if isinstance(schedule, LinkSchedule):
        _validate_link(schedule, links)
    else:
        _validate_path(schedule, links)


def _validate_link(sch: LinkSchedule, links: set) -> None:
    n, C = sch.n_ranks, sch.chunks_per_shard
    T = C if sch.chunk_counts is None else np.asarray(sch.chunk_counts)   # never n x n for a claimed n

    def count(o, d):
        return T if sch.chunk_counts is None else int(T[o, d]) if 0 <= o < n and 0 <= d < n else 0

    holder: dict[Chunk, int] = {}
    delivered: dict[Chunk, int] = {}
    for t, step in enumerate(sch.steps):
        moved: dict[Chunk, int] = {}
        for tr in step:
            if (tr.src, tr.dst) not in links:
                raise FormatError(f"step {t}: transfer {tr.src}->{tr.dst} is not a link of {sch.spec}")
            for c in tr.chunks:
                o, d, i = c
                if not (0 <= o < n and 0 <= d < n and o != d and 0 <= i < count(o, d)):
                    raise FormatError(f"step {t}: {_chunk_name(c)} is not a chunk of {n} ranks x "
                                      + (f"{C} chunks per shard" if sch.chunk_counts is None else
                                         f"{count(o, d)} chunks of that pair"))
                if c in moved:
                    raise FormatError(f"step {t}: {_chunk_name(c)} is sent twice in the same step")
                if c in delivered:
                    raise FormatError(
                        f"step {t}: {_chunk_name(c)} was already delivered to rank {d} in step {delivered[c]}")
                held = holder.get(c, o)
                if held != tr.src:
                    raise FormatError(
                        f"step {t}: rank {tr.src} sends {_chunk_name(c)} but does not hold it (rank {held} does)")
                moved[c] = tr.dst
        for c, v in moved.items():
            holder[c] = v
            if v == c[1]:
                delivered[c] = t
    missing = _first_missing(n, T, delivered)
    if missing is not None:
        raise FormatError(f"{_chunk_name(missing)} is never delivered (it ends at rank "
                          f"{holder.get(missing, missing[0])}, not {missing[1]})")


def _first_missing(n: int, counts, present: dict) -> Chunk | None:
    """The first chunk (in (origin, dest, index) order) not in ``present``; ``counts`` is the chunks
    per shard (an int) or per pair (an ``n x n`` array).

    ``present`` holds valid chunks only, so when it is short the scan stops
    within ``len(present) + 1`` chunks: the cost is bounded by the file, not by
    the ``n_ranks`` and ``chunks_per_shard`` it claims.
    """
    if isinstance(counts, int):
        total, count = n * (n - 1) * counts, (lambda o, d: counts)
    else:
        total, count = int(counts.sum() - np.trace(counts)), (lambda o, d: int(counts[o, d]))
    if len(present) == total:
        return None
    for o in range(n):
        for d in range(n):
            for i in range(count(o, d) if o != d else 0):
                if (o, d, i) not in present:
                    return (o, d, i)
    return None


def _validate_path(sch: PathSchedule, links: set) -> None:
    n, C = sch.n_ranks, sch.chunks_per_shard
    owner: dict[tuple[int, int, int], int] = {}
    ids: set[tuple[int, int, int]] = set()
    for r in sch.routes:
        name = f"route {r.route_id} of shard {r.src}->{r.dst}"
        if not (0 <= r.src < n and 0 <= r.dst < n and r.src != r.dst):
            raise FormatError(f"{name}: src and dst must be distinct ranks in 0..{n - 1}")
        if (r.src, r.dst, r.route_id) in ids:
            raise FormatError(f"{name}: duplicate route id")
        ids.add((r.src, r.dst, r.route_id))
        if len(r.nodes) < 2 or r.nodes[0] != r.src or r.nodes[-1] != r.dst:
            raise FormatError(f"{name}: nodes {list(r.nodes)} must run from {r.src} to {r.dst}")
        if r.vcs is not None and (len(r.vcs) != len(r.nodes) - 1 or min(r.vcs, default=0) < 0):
            raise FormatError(f"{name}: vcs {list(r.vcs)} must give one virtual channel >= 0 per hop")
        if r.step < 0:
            raise FormatError(f"{name}: step {r.step} must be >= 0")
        for u, v in zip(r.nodes, r.nodes[1:]):
            if (u, v) not in links:
                raise FormatError(f"{name}: hop {u}->{v} is not a link of {sch.spec}")
        for i in r.chunks:
            if not 0 <= i < C:
                raise FormatError(f"{name}: chunk index {i} outside 0..{C - 1}")
            key = (r.src, r.dst, i)
            if key in owner:
                raise FormatError(f"{_chunk_name(key)} is delivered twice (routes {owner[key]} and {r.route_id})")
            owner[key] = r.route_id
    missing = _first_missing(n, C, owner)
    if missing is not None:
        o, d, _ = missing
        raise FormatError(f"{_chunk_name(missing)} is on no route (shard {o}->{d} not fully covered)")


# ------------------------------------------------------------------ cost model
def cost_model(schedule: Schedule):
    """The :class:`~a2a_compiler.chunk.cost.CostModel` of ``schedule``'s links and fabric."""
    return CostModel.from_links(schedule.links, schedule.n_ranks, schedule.fabric)


def link_chunk_volume(volumes: np.ndarray, counts: np.ndarray) -> float:
    """``u = max D[s, d] / T[s, d]``: the one chunk size (in units) that carries every pair's volume
    in whole chunks of a link program (uniform chunks, as MSCCL's buffers have them)."""
    pos = counts > 0
    return float(np.max(np.asarray(volumes)[pos] / counts[pos]))


def chunk_weights(schedule: Schedule) -> tuple[np.ndarray | None, int]:
    """``(weight, divisor)``: a chunk of pair ``(s, d)`` is ``weight[s, d] / divisor`` of a unit.

    Uniform: ``(None, C)`` (weight 1); a path schedule with a demand ``(D, C)``; a link
    schedule with a demand ``(u everywhere, 1)`` (:func:`link_chunk_volume`).
    """
    if schedule.demand is None:
        return None, schedule.chunks_per_shard
    if isinstance(schedule, PathSchedule):
        return np.asarray(schedule.demand.volumes), schedule.chunks_per_shard
    u = link_chunk_volume(schedule.demand.volumes, schedule.counts())
    return np.full((schedule.n_ranks, schedule.n_ranks), u), 1


def step_loads(schedule: Schedule) -> np.ndarray:
    """Chunks per resource of the cost model (links, host ingress, host egress) in each step, each
    chunk weighted by :func:`chunk_weights` (in units of ``1/divisor``).

    A link schedule has one row per time step; a path schedule one row per
    time step of its routes (every route of a step carries its chunks at once).
    """
    model = cost_model(schedule)
    weight, _ = chunk_weights(schedule)
    if isinstance(schedule, LinkSchedule):
        hops = [(t, tr.src, tr.dst, o, d) for t, step in enumerate(schedule.steps) for tr in step
                for o, d, _ in tr.chunks]
        t, u, v, o, d = np.array(hops, dtype=np.int64).reshape(-1, 5).T
        return model.step_loads(t, model.link_index(u, v), u, v, o, d, len(schedule.steps),
                                counts=None if weight is None else weight[o, d])
    hops = [(r.step, a, b, r.src, r.dst, len(r.chunks)) for r in schedule.routes for a, b in zip(r.nodes, r.nodes[1:])]
    t, u, v, o, d, k = np.array(hops, dtype=np.int64).reshape(-1, 6).T
    return model.step_loads(t, model.link_index(u, v), u, v, o, d, path_steps(schedule),
                            counts=k if weight is None else k * weight[o, d])


def path_steps(schedule: PathSchedule) -> int:
    """Number of time steps of a routed schedule (1 unless :mod:`.injection` stepped it)."""
    return 1 + max((r.step for r in schedule.routes), default=0)


def predicted_time(schedule: Schedule) -> float:
    """All-to-all time of the chunked schedule in link-times (unit shards): the stepped
    execution of :mod:`a2a_compiler.chunk.cost`, ``Σ_t max_r load_{t,r} / (C·cap_r)``."""
    return stepped_time(step_loads(schedule), cost_model(schedule).capacity, chunk_weights(schedule)[1])[0]


def fidelity(schedule: Schedule) -> float:
    """``lp_time / predicted_time`` (<= 1: ``lp_time`` is a certified bound; 1 means chunking lost nothing)."""
    return ratio(schedule.lp_time, predicted_time(schedule))


# ------------------------------------------------------------------------ JSON
def to_json_dict(schedule: Schedule) -> dict:
    """Plain-JSON form (see docs/formats.md, "Schedule IR JSON")."""
    d = {
        "format": FORMAT,
        "version": VERSION,
        "spec": schedule.spec,
        "method": schedule.method,
        "fabric": schedule.fabric.to_json_dict(),
        "n_ranks": schedule.n_ranks,
        "chunks_per_shard": schedule.chunks_per_shard,
        "lp_time": schedule.lp_time,
        "info": schedule.info,
        "links": [[int(u), int(v), float(c)] for u, v, c in schedule.links],
    }
    if schedule.demand is not None:
        d["demand"] = schedule.demand.to_json_dict(max_ranks=MAX_RANKS_RECORDED)
    if isinstance(schedule, LinkSchedule) and schedule.chunk_counts is not None:
        d["chunk_counts"] = np.asarray(schedule.chunk_counts).tolist()
    if isinstance(schedule, LinkSchedule):
        d["kind"] = "link"
        d["n_nodes"] = schedule.n_ranks
        d["steps"] = [
            [{"src": tr.src, "dst": tr.dst, "chunks": [list(c) for c in tr.chunks]} for tr in step]
            for step in schedule.steps
        ]
    else:
        d["kind"] = "path"
        d["n_nodes"] = schedule.n_nodes
        d["routes"] = [
            {"src": r.src, "dst": r.dst, "route_id": r.route_id, "layer": r.layer,
             "nodes": list(r.nodes), "chunks": list(r.chunks), **({"vcs": list(r.vcs)} if r.vcs is not None else {}),
             **({"step": r.step} if r.step else {})}
            for r in schedule.routes
        ]
    return d


def _dump(value, expand: int, indent: str = "") -> str:
    """JSON with sorted keys; the first ``expand`` list levels get one item per line."""
    if expand and isinstance(value, list) and value:
        inner = indent + " "
        items = [inner + _dump(v, expand - 1, inner) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + indent + "]"
    return json.dumps(value, sort_keys=True)


def dumps(schedule: Schedule) -> str:
    """Deterministic text: sorted keys, one link / transfer / route per line."""
    d = to_json_dict(schedule)
    depth = {"links": 1, "steps": 2, "routes": 1, "chunk_counts": 1}
    body = ",\n".join(f" {json.dumps(k)}: {_dump(d[k], depth.get(k, 0), ' ')}" for k in sorted(d))
    return "{\n" + body + "\n}\n"


def _int(value, what: str, lo: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise FormatError(f"{what} must be an integer, got {value!r}")
    if lo is not None and value < lo:
        raise FormatError(f"{what} must be >= {lo}, got {value}")
    return value


def _num(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise FormatError(f"{what} must be a finite number, got {value!r}")
    return float(value)


def _list(value, what: str) -> list:
    if not isinstance(value, list):
        raise FormatError(f"{what} must be a list, got {type(value).__name__}")
    return value


def _ints(value, what: str) -> tuple[int, ...]:
    return tuple(_int(x, f"{what}[{i}]") for i, x in enumerate(_list(value, what)))


#: The schedule IR records the demand's volumes up to this many ranks (its cost model needs them).
MAX_RANKS_RECORDED = 1 << 30


def _demand(d, source: str):
    """The :class:`~a2a_compiler.demand.Demand` a schedule recorded, or ``None``."""
    if d is None:
        return None
    if not isinstance(d, dict) or not isinstance(d.get("volumes"), list):
        raise FormatError("demand must be an object with the volumes matrix")
    from ..demand import Demand

    try:
        return Demand.from_volumes(d["volumes"], str(d.get("source", source)))
    except (A2AError, ValueError, TypeError) as exc:
        raise FormatError(f"demand: {exc}") from None


def from_json_dict(d, source: str = "<json>") -> Schedule:
    """Parse and :func:`validate` a schedule; any problem raises :class:`FormatError` naming ``source``."""
    try:
        return _from_json_dict(d, source)
    except FormatError as exc:
        msg = str(exc)
        raise FormatError(msg if msg.startswith(source) else f"{source}: {msg}") from None


def _from_json_dict(d, source: str) -> Schedule:
    if not isinstance(d, dict) or d.get("format") != FORMAT:
        raise FormatError(f"not an {FORMAT} file (missing \"format\": \"{FORMAT}\")")
    if d.get("version") not in (1, VERSION):
        raise FormatError(f"unsupported version {d.get('version')!r} (this reader knows 1 and {VERSION})")
    try:
        kind = d["kind"]
        fab = d["fabric"]
        if not isinstance(fab, dict):
            raise FormatError("fabric must be an object")
        try:
            fabric = Fabric.from_json_dict(fab)
        except A2AError as exc:
            raise FormatError(f"fabric: {exc}") from None
        common = dict(
            n_ranks=_int(d["n_ranks"], "n_ranks", 1),
            chunks_per_shard=_int(d["chunks_per_shard"], "chunks_per_shard", 1),
            spec=str(d["spec"]),
            fabric=fabric,
            method=str(d["method"]),
            lp_time=_num(d["lp_time"], "lp_time"),
            info=d.get("info", {}) if isinstance(d.get("info", {}), dict) else {},
            demand=_demand(d.get("demand"), source),
        )
        hosts = recorded_hosts(common["spec"])   # what 'a2a compile' records and 'a2a verify' rebuilds
        if hosts is not None and hosts != common["n_ranks"]:
            raise FormatError(f"spec {echo(common['spec'])} has {hosts} hosts, but n_ranks is {common['n_ranks']}")
        n_nodes = _int(d["n_nodes"], "n_nodes", common["n_ranks"])
        links = []
        for e, link in enumerate(_list(d["links"], "links")):
            if not isinstance(link, list) or len(link) != 3:
                raise FormatError(f"links[{e}] must be [src, dst, capacity], got {link!r}")
            u, v = _int(link[0], f"links[{e}] src", 0), _int(link[1], f"links[{e}] dst", 0)
            c = _num(link[2], f"links[{e}] capacity")
            if u >= n_nodes or v >= n_nodes or u == v or c <= 0:
                raise FormatError(f"links[{e}] = {link!r} is not a link between distinct nodes 0..{n_nodes - 1} "
                                  f"with positive capacity")
            links.append((u, v, c))
        common["links"] = tuple(links)
        if kind == "link":
            if n_nodes != common["n_ranks"]:
                raise FormatError("a link schedule has no switches: n_nodes must equal n_ranks")
            steps = []
            for t, step in enumerate(_list(d["steps"], "steps")):
                transfers = []
                for k, tr in enumerate(_list(step, f"steps[{t}]")):
                    where = f"step {t} transfer {k}"
                    if not isinstance(tr, dict):
                        raise FormatError(f"{where} must be an object")
                    chunks = []
                    for c in _list(tr["chunks"], f"{where} chunks"):
                        if not isinstance(c, list) or len(c) != 3:
                            raise FormatError(f"{where}: chunk {c!r} must be [origin, destination, index]")
                        chunks.append(_ints(c, f"{where} chunk"))
                    transfers.append(Transfer(_int(tr["src"], f"{where} src"), _int(tr["dst"], f"{where} dst"),
                                              tuple(chunks)))
                steps.append(tuple(transfers))
            counts = d.get("chunk_counts")
            if counts is not None:
                counts = np.array([_ints(row, "chunk_counts row") for row in _list(counts, "chunk_counts")],
                                  dtype=np.int64)
            sch = LinkSchedule(steps=tuple(steps), chunk_counts=counts, **common)
        elif kind == "path":
            routes = []
            for k, r in enumerate(_list(d["routes"], "routes")):
                where = f"routes[{k}]"
                if not isinstance(r, dict):
                    raise FormatError(f"{where} must be an object")
                nodes = _ints(r["nodes"], f"{where} nodes")
                if any(not 0 <= v < n_nodes for v in nodes):
                    raise FormatError(f"{where}: node id outside 0..{n_nodes - 1}")
                routes.append(Route(_int(r["src"], f"{where} src"), _int(r["dst"], f"{where} dst"), nodes,
                                    _int(r["route_id"], f"{where} route_id", 0), _ints(r["chunks"], f"{where} chunks"),
                                    _int(r.get("layer", 0), f"{where} layer", 0),
                                    _ints(r["vcs"], f"{where} vcs") if r.get("vcs") is not None else None,
                                    _int(r.get("step", 0), f"{where} step", 0)))
            sch = PathSchedule(routes=tuple(routes), n_nodes=n_nodes, **common)
        else:
            raise FormatError(f"kind must be \"link\" or \"path\", got {kind!r}")
    except KeyError as exc:
        raise FormatError(f"missing field {exc}") from None
    except TypeError as exc:
        raise FormatError(f"malformed field: {exc}") from None
    validate(sch)
    return sch
