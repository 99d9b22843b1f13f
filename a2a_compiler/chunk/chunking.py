"""Chunking: turn fractional flows into whole chunks (Basu et al. §4).

Each shard is split into ``C`` equal chunks; a chunk follows one path.

* Link schedules (tsMCF): each source's time-expanded flow is decomposed into
  time-expanded paths (:func:`time_paths`), grouped by destination; a path's
  weight is rounded to a multiple of ``1/C`` and the chunks follow it step by
  step.  Conservation holds by construction (a chunk is one path).
* Path schedules (pMCF / MCF-extP): chunks are assigned to the solution's
  weighted paths.

In both cases rounding is *largest remainder* (every shard gets exactly ``C``
chunks), followed by :func:`rebalance`, a local search that moves single chunks
between the candidate paths of a shard to lower the predicted time
(:func:`a2a_compiler.chunk.ir.predicted_time`).  :func:`choose_chunks` tries a
few ``C`` and keeps the smallest one reaching the fidelity target.

With a demand matrix (:mod:`a2a_compiler.demand`) a path schedule keeps ``C``
chunks per pair, each weighing its pair's volume ``/C``; a link schedule gets
whole chunks of one size, ``T[s, d] ≈ C·D[s, d]`` of them per pair
(:func:`~a2a_compiler.chunk.counts.chunk_counts`; rows and columns summing to
``N·C`` when the matrix is balanced, as MSCCL's buffers need), each weighing
``u = max D/T`` (:func:`~a2a_compiler.chunk.ir.link_chunk_volume`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import A2AError
from ..numeric import TIE, better, dot, snap
from ..solve.result import FlowSolution
from ..topology.model import Topology
from .cost import CostModel, fidelity_text, ratio
from .counts import chunk_counts, msccl_counts
from .ir import LinkSchedule, PathSchedule, Route, Transfer, link_chunk_volume

#: ``C`` values tried (those <= max_chunks, plus max_chunks itself).
CHUNK_CANDIDATES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: Most chunks of a whole schedule (shards x C) for a C above :data:`CHUNK_CANDIDATES`: about 1 GB of search.
MAX_CHUNKS_TOTAL = 2**22
#: Fidelity (lp_time / predicted_time) that is good enough to stop at a smaller C.
FIDELITY_TARGET = 0.97
#: Path weights below this are LP noise.
WEIGHT_EPS = 1e-9
#: Upper bound on local-search sweeps over all shards.
MAX_SWEEPS = 30
#: The local search stops after this many sweeps in a row that did not lower the predicted time.
IDLE_SWEEPS = 2


# ----------------------------------------------------------------- rounding
def largest_remainder(weights: np.ndarray, C: int) -> np.ndarray:
    """Integers ``n_p >= 0`` with ``Σ n_p = C`` closest to ``C·w/Σw`` (Hamilton's method).

    Shares are snapped (:func:`~a2a_compiler.numeric.snap`) so that equal weights tie exactly;
    ties go to the earlier path, so the result is deterministic.
    """
    x = snap(C * np.asarray(weights, dtype=float) / float(np.sum(weights)))
    n = np.floor(x + 1e-9).astype(np.int64)
    short = C - int(n.sum())
    if short > 0:
        order = np.lexsort((np.arange(len(x)), -(x - n)))
        n[order[:short]] += 1
    return n


# ------------------------------------------------------------- load model
@dataclass(frozen=True, eq=False)
class _Resources:
    """The cost model's resources (:class:`~a2a_compiler.chunk.cost.CostModel`) repeated once
    per step: the predicted time is ``Σ_group max_{r in group} count_r / (C·cap_r)``.
    Group ``g`` owns the contiguous block ``[g*width, (g+1)*width)``."""

    cap: np.ndarray
    width: int
    n_groups: int


def _candidate_resources(model: CostModel, n_groups: int, cands: dict, hops_of) -> tuple[_Resources, list]:
    """Resources of every candidate path: ``hops_of(nodes)`` lists its hops as ``(group, u, v)``."""
    width = model.width
    rows = []  # (path number, group, u, v, origin, dest)
    for i, ((s, d), plist) in enumerate([(sd, p) for sd, plist in cands.items() for p in plist]):
        rows += [(i, g, u, v, s, d) for g, u, v in hops_of(plist[1])]
    path, group, u, v, o, d = np.array(rows, dtype=np.int64).reshape(-1, 6).T
    hop, res = model.hop_resources(model.link_index(u, v), u, v, o, d)
    order = np.lexsort((hop, path[hop]))
    owner, ids = path[hop][order], (group[hop] * width + res)[order]
    flat = np.split(ids, np.flatnonzero(np.diff(owner)) + 1) if len(owner) else []
    n_paths = [len(plist) for plist in cands.values()]
    paths, k = [], 0
    for m in n_paths:
        paths.append(flat[k:k + m])
        k += m
    return _Resources(np.tile(model.capacity, n_groups), width, n_groups), paths


@dataclass(eq=False)
class _Assignment:
    """Chunk counts per candidate path of every shard, with the resulting loads.

    A path uses each resource at most once (one hop per step; hops of a simple
    route are distinct links and distinct host directions).  A chunk of shard ``k``
    weighs ``weight[k] / C`` (``weight`` default 1: ``C`` is the divisor of
    :func:`~a2a_compiler.chunk.ir.chunk_weights`).

    Each shard's candidate paths are one padded ``(paths, m)`` array of resource
    ids (``pad``: the extra resource ``G·W`` of load 0 in the extra group ``G``, whose
    maximum is ``+inf``), so a shard's moves are priced in one vectorised step.
    """

    res: _Resources
    C: int
    paths: list[list[np.ndarray]]     # per shard: resource ids of each candidate path
    counts: list[np.ndarray]          # per shard: chunks on each candidate path
    weight: list[float] | None = None  # per shard: weight of one of its chunks (default 1)

    def __post_init__(self):
        G, W = self.res.n_groups, self.res.width
        pad = G * W
        self.inc = np.append(1.0 / (self.C * self.res.cap), 0.0)
        if self.weight is None:
            self.weight = [1.0] * len(self.paths)
        self.load = np.zeros(pad + 1)
        self.load2d = self.load[:pad].reshape(G, W)     # a view: per-group rows
        self.table = []                                 # per shard: (paths, m) resource ids, padded
        lengths = np.array([len(p) for paths in self.paths for p in paths], dtype=np.int64)
        flat = np.concatenate([p for paths in self.paths for p in paths]) if len(lengths) else np.zeros(0, np.int64)
        owner = np.repeat(np.arange(len(lengths)), lengths)
        if len(np.unique(owner * (pad + 1) + flat)) != len(flat):
            raise A2AError("a candidate path crosses the same link or host link twice; routes must be simple")
        m = int(lengths.max(initial=1))
        padded = np.full((len(lengths), m), pad, dtype=np.int64)
        padded[owner, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
        first = 0
        per_chunk = []
        for paths, n, w in zip(self.paths, self.counts, self.weight):
            self.table.append(padded[first:first + len(paths)])
            per_chunk.append(np.repeat(np.asarray(n, dtype=float) * w, m).reshape(len(paths), m))
            first += len(paths)
        if len(lengths):
            np.add.at(self.load, padded.ravel(), (np.concatenate(per_chunk) * self.inc[padded]).ravel())
        self.group = [r // W for r in self.table]       # pad -> group G
        self.gmax_all = np.append(self.load2d.max(axis=1), np.inf)
        self.gmax = self.gmax_all[:G]                   # a view

    def time(self) -> float:
        return float(self.gmax.sum())

    def critical(self, k: int, tol: float) -> np.ndarray:
        """Which paths of shard ``k`` touch a resource at its step's maximum?"""
        return np.any(self.load[self.table[k]] >= self.gmax_all[self.group[k]] - tol, axis=1)

    def try_moves(self, k: int, p: int) -> tuple[np.ndarray, np.ndarray]:
        """(Δ predicted time, Δ Σ load²) of moving one chunk of shard ``k`` from path p to each path q."""
        R, grp = self.table[k], self.group[k]
        G = self.res.n_groups
        w = self.weight[k]
        rp = R[p]
        lp, lq = self.load[rp], self.load[R]
        ip, iq = w * self.inc[rp], w * self.inc[R]
        d2 = dot(ip, ip - 2 * lp) + (iq * (iq + 2 * lq)).sum(axis=1)
        gp = grp[p][grp[p] < G]
        self.load[rp] = lp - ip
        removed = self.gmax_all.copy()
        removed[gp] = self.load2d[gp].max(axis=1)
        new = np.repeat(removed[None, :], len(R), axis=0)
        np.maximum.at(new, (np.repeat(np.arange(len(R)), R.shape[1]), grp.ravel()), (self.load[R] + iq).ravel())
        self.load[rp] = lp
        return (new[:, :G] - self.gmax).sum(axis=1), d2

    def move(self, k: int, p: int, q: int) -> None:
        R, grp = self.table[k], self.group[k]
        G, w = self.res.n_groups, self.weight[k]
        rp, rq = R[p], R[q]
        self.load[rp] -= w * self.inc[rp]
        self.load[rq] += w * self.inc[rq]
        touched = np.union1d(grp[p], grp[q])
        touched = touched[touched < G]
        self.gmax[touched] = self.load2d[touched].max(axis=1)
        self.counts[k][p] -= 1
        self.counts[k][q] += 1


def rebalance(asg: _Assignment, max_sweeps: int = MAX_SWEEPS) -> None:
    """Local search: move single chunks between candidate paths of a shard.

    Only chunks on a path touching a bottleneck resource (at its step's
    maximum) are moved; a move is taken if it lowers the predicted time, or
    keeps it and lowers Σ load² (spreading load so later moves can cut the max).
    A sweep visits every shard; the search stops after a sweep that took no move, after
    :data:`IDLE_SWEEPS` sweeps in a row that did not lower the predicted time by more
    than :data:`~a2a_compiler.numeric.TIE` (spreading alone went on without a gain for 20
    of the 23 sweeps of jellyfish:64,4,seed=1 at C = 4), or after ``max_sweeps``.
    Deterministic: shards and paths are visited in order, the best move wins, and
    moves within :data:`~a2a_compiler.numeric.TIE` of each other tie to the lower index.
    """
    tol = TIE
    idle = 0
    for _ in range(max_sweeps):
        before, moved = asg.time(), False
        for k, paths in enumerate(asg.paths):
            if len(paths) < 2:
                continue
            counts = asg.counts[k]
            crit = asg.critical(k, tol)
            for p in range(len(paths)):
                while counts[p] > 0 and crit[p]:
                    dts, d2s = asg.try_moves(k, p)
                    ok = (dts < -tol) | ((dts <= tol) & (d2s < -tol))
                    ok[p] = False
                    best, best_q = None, -1
                    for q in np.flatnonzero(ok).tolist():
                        if better((dts[q], d2s[q]), best):
                            best, best_q = (dts[q], d2s[q]), q
                    if best_q < 0:
                        break
                    asg.move(k, p, best_q)
                    moved = True
                    crit = asg.critical(k, tol)
        idle = idle + 1 if asg.time() >= before - tol else 0
        if not moved or idle >= IDLE_SWEEPS:
            return


# --------------------------------------------------------- link schedules
def time_paths(topology: Topology, solution: FlowSolution) -> dict[tuple[int, int], list[tuple[float, tuple]]]:
    """Decompose every source's time-expanded flow into weighted time-expanded paths.

    For source ``s`` the aggregated flow (all its commodities) lives on the DAG
    of node-times ``(u, t)``: link arcs ``u_t -> v_{t+1}`` and hold arcs
    ``u_t -> u_{t+1}`` carrying what stays at ``u`` (including delivered data).
    At the last layer exactly one unit sits at every ``d != s``, so each path
    of a greedy decomposition (follow the fullest arc, subtract the bottleneck)
    ends at some destination ``d``; it becomes a candidate path of shard
    ``(s, d)``, cut at its first arrival at ``d``.  Returns, per shard, a list
    of ``(weight, nodes)`` with ``nodes[t]`` the chunk's node at layer ``t``.
    With a demand each commodity's flow is its volume times its per-unit flow
    (``D[s, d]`` sits at ``d`` at the end; pairs of volume 0 get no path).
    """
    N, E, L = topology.n_hosts, topology.n_links, solution.n_steps
    src, dst = topology.src, topology.dst
    flows = solution.link_flows.tocsr()
    flows.data = snap(flows.data)
    volumes = None if solution.demand is None else np.asarray(solution.demand.volumes)
    out_links = [np.flatnonzero(src == u).tolist() for u in range(N)]
    dst_of = dst.tolist()
    result: dict[tuple[int, int], list] = {}
    for s in range(N):
        rows = flows[[s * N + d for d in range(N)]]
        if volumes is None:
            agg = np.asarray(rows.sum(axis=0)).reshape(L, E)
        else:
            agg = snap(np.asarray(rows.multiply(volumes[s][:, None]).sum(axis=0)).reshape(L, E))
        net = np.zeros((L + 1, N))
        net[0, s] = N - 1 if volumes is None else float(volumes[s].sum())
        for t in range(L):
            net[t + 1] = (net[t] + np.bincount(dst, weights=agg[t], minlength=N)
                          - np.bincount(src, weights=agg[t], minlength=N))
        hold = np.maximum(net[:L] - np.stack([np.bincount(src, weights=agg[t], minlength=N) for t in range(L)]), 0)
        res_link, res_hold = agg.tolist(), hold.tolist()   # Python floats: the same IEEE arithmetic, faster
        while True:
            u, nodes, arcs = s, [s], []
            for t in range(L):
                link_t = res_link[t]
                j, best = -1, 0.0
                for e in out_links[u]:       # the first fullest out-link, as np.argmax
                    if j < 0 or link_t[e] > best:
                        j, best = e, link_t[e]
                if j >= 0 and best >= res_hold[t][u]:
                    arcs.append((t, j, best))
                    u = dst_of[j]
                else:
                    arcs.append((t, -1 - u, res_hold[t][u]))
                nodes.append(u)
            w = min(a[2] for a in arcs)
            if w <= WEIGHT_EPS:
                break
            for t, e, _ in arcs:
                if e >= 0:
                    res_link[t][e] -= w
                else:
                    res_hold[t][-1 - e] -= w
            d = nodes[-1]
            if d == s:
                continue   # numerical residue returning to the source
            first = next(t for t, v in enumerate(nodes) if v == d)
            nodes = nodes[:first + 1] + [d] * (L - first)
            result.setdefault((s, d), []).append((w, tuple(nodes)))
    return result


def _link_paths(topology, solution, cands) -> tuple[_Resources, list[list[np.ndarray]]]:
    """Resources of every candidate time path (one group per step)."""
    L = solution.n_steps
    return _candidate_resources(CostModel.from_topology(topology, solution.fabric), L, cands,
                                lambda nodes: [(t, nodes[t], nodes[t + 1]) for t in range(L)
                                               if nodes[t] != nodes[t + 1]])


def _link_schedule(topology, solution, C, cands, counts, chunk_counts=None) -> LinkSchedule:
    L = solution.n_steps
    moves: dict[tuple[int, int, int], list] = {}
    for ((s, d), plist), n in zip(cands.items(), counts):
        i = 0
        for (_, nodes), k in zip(plist, n.tolist()):
            chunks = [(s, d, i + j) for j in range(k)]
            i += k
            for t in range(L):
                if k and nodes[t] != nodes[t + 1]:
                    moves.setdefault((t, nodes[t], nodes[t + 1]), []).extend(chunks)
    steps = []
    for t in range(L):
        step = tuple(Transfer(u, v, tuple(sorted(moves[(tt, u, v)])))
                     for (tt, u, v) in sorted(moves) if tt == t)
        if step:
            steps.append(step)
    return LinkSchedule(
        n_ranks=topology.n_hosts, chunks_per_shard=C, steps=tuple(steps),
        links=_links(topology), spec=topology.spec, fabric=solution.fabric, method=solution.method,
        lp_time=solution.lp_time, info={"lp_steps": L}, demand=solution.demand, chunk_counts=chunk_counts,
    )


def _links(topology: Topology) -> tuple[tuple[int, int, float], ...]:
    return tuple((int(u), int(v), float(c)) for u, v, c in zip(topology.src, topology.dst, topology.capacity))


def chunk_link_schedule(topology: Topology, solution: FlowSolution, *, max_chunks: int = 16,
                        chunks: int | None = None, min_fidelity: float | None = None, program_time=None,
                        progress=None, search: ChunkSearch | None = None) -> LinkSchedule:
    """Chunk a tsMCF solution into a :class:`LinkSchedule` (``C`` as in :func:`choose_chunks`).

    With a demand, ``C`` is chunks per unit of volume: pair ``(s, d)`` gets ``T[s, d]``
    whole chunks (module docstring), balanced rows and columns (``N·C`` each) when the
    matrix is balanced.
    """
    if solution.link_flows is None:
        raise A2AError(f"{solution.method} solution has no link flows to chunk")
    cands = time_paths(topology, solution)
    demand = solution.demand
    _check_covered(topology.n_hosts, cands, solution.method, demand)
    res, paths = _link_paths(topology, solution, cands)
    shape = None
    if demand is not None:
        balanced = demand.balanced()

        def counts_of(C):
            return msccl_counts(demand, C) if balanced else chunk_counts(demand, C)

        def shape(C):
            try:
                T = counts_of(C)
            except A2AError:
                return None              # no balanced rounding at this C
            u = link_chunk_volume(demand.volumes, T)
            return [int(T[s, d]) for s, d in cands], [u] * len(cands), 1

        def build(C, counts):
            return _link_schedule(topology, solution, C, cands, counts, counts_of(C))
    else:
        def build(C, counts):
            return _link_schedule(topology, solution, C, cands, counts)
    return choose_chunks(res, paths, cands, solution.lp_time, build, max_chunks=max_chunks, chunks=chunks,
                         min_fidelity=min_fidelity, program_time=program_time, progress=progress, shape=shape,
                         search=search)


# --------------------------------------------------------- path schedules
def chunk_path_schedule(topology: Topology, solution: FlowSolution, *, max_chunks: int = 16,
                        chunks: int | None = None, min_fidelity: float | None = None, program_time=None,
                        progress=None, search: ChunkSearch | None = None) -> PathSchedule:
    """Chunk weighted paths (pMCF / MCF-extP) into a :class:`PathSchedule`.

    Chunks go to paths in proportion to their weights: exactly when every
    weight is a multiple of ``1/C`` (the highest-common-factor rule of §4),
    otherwise by largest remainder, then :func:`rebalance`.
    """
    cands: dict[tuple[int, int], list] = {}
    for p in solution.paths:
        w = float(snap(p.weight))
        if w > WEIGHT_EPS:
            cands.setdefault((p.src, p.dst), []).append((w, tuple(p.nodes)))
    cands = dict(sorted(cands.items()))
    _check_covered(topology.n_hosts, cands, solution.method)
    res, paths = path_resources(topology, solution.fabric, cands)
    shape = None
    if solution.demand is not None:
        weight = [float(solution.demand.volumes[s, d]) for s, d in cands]

        def shape(C):
            return [C] * len(cands), weight, C

    def build(C, counts):
        routes = []
        for ((s, d), plist), n in zip(cands.items(), counts):
            i = rid = 0
            for (_, nodes), k in zip(plist, n.tolist()):
                if k:
                    routes.append(Route(s, d, nodes, rid, tuple(range(i, i + k))))
                    i += k
                    rid += 1
        return PathSchedule(
            n_ranks=topology.n_hosts, chunks_per_shard=C, routes=tuple(routes), links=_links(topology),
            n_nodes=topology.n_nodes, spec=topology.spec, fabric=solution.fabric, method=solution.method,
            lp_time=solution.lp_time, demand=solution.demand,
        )

    return choose_chunks(res, paths, cands, solution.lp_time, build, max_chunks=max_chunks, chunks=chunks,
                         min_fidelity=min_fidelity, program_time=program_time, progress=progress, shape=shape,
                         search=search)


def path_resources(topology: Topology, fabric, cands: dict) -> tuple[_Resources, list[list[np.ndarray]]]:
    """The cost model's resources of every candidate route (all routes carry their chunks at once):
    ``cands`` maps each shard ``(s, d)`` to its ``[(weight, nodes), ...]``."""
    return _candidate_resources(CostModel.from_topology(topology, fabric), 1, cands,
                                lambda nodes: [(0, u, v) for u, v in zip(nodes, nodes[1:])])


def _check_covered(n: int, cands: dict, method: str, demand=None) -> None:
    """Every shard has a candidate path (with a ``demand``, every shard of positive volume)."""
    for s in range(n):
        for d in range(n):
            if s != d and (s, d) not in cands and (demand is None or demand.volumes[s, d] > 0):
                raise A2AError(f"{method} solution carries no flow for shard {s}->{d}; cannot chunk it")


# ------------------------------------------------------------ choosing C
def chunk_candidates(max_chunks: int) -> list[int]:
    """The chunk counts ``C`` :func:`choose_chunks` tries: :data:`CHUNK_CANDIDATES` up to ``max_chunks``, and ``max_chunks`` (§4)."""
    if max_chunks < 1:
        raise A2AError(f"--max-chunks must be >= 1, got {max_chunks}")
    return sorted({c for c in CHUNK_CANDIDATES if c <= max_chunks} | {max_chunks})


@dataclass
class ChunkSearch:
    """What :func:`choose_chunks` may choose, and what it found beyond its choice.

    ``accept(C)``: whether the file may have ``C`` chunks per shard (``None``: any), e.g. the counts an
    executor selects at power-of-two sizes (:func:`a2a_compiler.formats.msccl_rules.is_power_of_two`).
    Filled in by the search: ``refused``, why it stopped before its last candidate (a larger ``C`` over a
    format limit); ``unrestricted``, ``(C, fidelity)`` of a better count outside ``accept``, found only
    when no accepted count reaches the fidelity target; ``stepped``, when programs are priced
    (``program_time``), ``(C, fidelity)`` of the first count whose schedule run in its own steps (as
    oneCCL-style programs run) reaches the target, else of the best.
    """

    accept: object = None
    refused: str | None = None
    unrestricted: tuple[int, float] | None = None
    stepped: tuple[int, float] | None = None


def choose_chunks(res: _Resources, paths: list[list[np.ndarray]], cands: dict, lp_time: float, build, *,
                  max_chunks: int = 16, chunks: int | None = None, min_fidelity: float | None = None,
                  program_time=None, progress=None, shape=None, search: ChunkSearch | None = None):
    """Round and :func:`rebalance` for each ``C`` in :func:`chunk_candidates` and keep the
    smallest ``C`` whose fidelity ``lp_time / time`` reaches ``min_fidelity``, else the
    best (``chunks`` fixes ``C`` instead); returns ``build(C, counts)``, the schedule.

    ``time`` is the schedule's stepped time (:func:`a2a_compiler.chunk.cost.stepped_time`,
    which the local search minimises) or, given ``program_time(schedule)``, the time of
    the program that will be emitted from it (MSCCL: its dataflow time), so ``C`` is
    chosen on what is written; a ``C`` whose program ``program_time`` refuses
    (:class:`A2AError`: over a format limit) ends the search, and with no ``C`` left the
    refusal is raised.  Without ``min_fidelity`` the target is :data:`FIDELITY_TARGET`
    and falling short is fine; with it, falling short raises :class:`A2AError` naming
    the best ``C`` found.  ``shape(C)``, for a demand, gives
    ``(chunks of each shard, weight of each shard's chunk, divisor)`` (default: ``C``
    chunks of weight 1 each, divisor ``C``).  ``search`` (a :class:`ChunkSearch`) restricts
    the counts and receives what the search saw beyond its choice.
    """
    if min_fidelity is not None and not 0 < min_fidelity <= 1:
        raise A2AError(f"--min-fidelity must be in (0, 1], got {min_fidelity}")
    search = search or ChunkSearch()
    target = FIDELITY_TARGET if min_fidelity is None else min_fidelity
    weights = [np.array([w for w, _ in plist]) for plist in cands.values()]
    top = chunks or max_chunks
    if top > CHUNK_CANDIDATES[-1] and top * len(weights) > MAX_CHUNKS_TOTAL:
        raise A2AError(f"{top} chunks per shard x {len(weights)} shards is over {MAX_CHUNKS_TOTAL} chunks "
                       f"(a2a_compiler.chunk.chunking.MAX_CHUNKS_TOTAL); use at most "
                       f"{max(CHUNK_CANDIDATES[-1], MAX_CHUNKS_TOTAL // len(weights))}")

    def scan(counts_tried, first=True):
        """The best ``(fidelity, C, schedule, counts)`` over ``counts_tried``, stopping at the target or a refusal
        (``first``: the counts allowed, whose stepped fidelity ``search.stepped`` records)."""
        best = None
        for C in counts_tried:
            form = shape(C) if shape is not None else ([C] * len(weights), None, C)
            if form is None:
                if progress:
                    progress(f"chunking: C = {C} -> no whole-chunk counts keep every row and column balanced")
                continue
            totals, weight, divisor = form
            asg = _Assignment(res, divisor, paths, [largest_remainder(w, t) for w, t in zip(weights, totals)], weight)
            rebalance(asg)
            # without program_time only the kept C is built
            schedule = None if program_time is None else build(C, asg.counts)
            try:
                fid = ratio(lp_time, asg.time() if program_time is None else program_time(schedule))
            except A2AError as exc:  # the program outgrows its format's limits; larger C only grow it
                search.refused = search.refused or f"C = {C} does not fit: {exc}"
                if progress:
                    progress(f"chunking: C = {C} -> does not fit: {exc}")
                if best is None:
                    raise
                break
            if progress:
                progress(f"chunking: C = {C} -> fidelity {fidelity_text(fid)}")
            if program_time is not None and first:
                steps = ratio(lp_time, asg.time())
                if search.stepped is None or search.stepped[1] < target - TIE and steps > search.stepped[1] + 1e-12:
                    search.stepped = (C, steps)
            if best is None or fid > best[0] + 1e-12:
                best = (fid, C, schedule, asg.counts)
            if fid >= target - TIE:
                break
        return best

    candidates = [chunks] if chunks is not None else chunk_candidates(max_chunks)
    accepted = [C for C in candidates if search.accept is None or search.accept(C)]
    best = scan(accepted)
    if best is None:
        raise A2AError(f"no chunk count up to {max(chunks or 0, max_chunks)} gives whole chunks per pair with every "
                       f"row and column summing to N*C; raise --max-chunks")
    others = [C for C in candidates if C not in accepted]
    if others and best[0] < target - TIE:
        refused, search.refused = search.refused, None
        try:
            alt = scan(others, first=False)
        except A2AError:
            alt = None
        search.refused = refused
        if alt is not None and alt[0] > best[0] + 1e-12:
            search.unrestricted = (alt[1], alt[0])
    if min_fidelity is not None and best[0] < min_fidelity - TIE:
        raise A2AError(f"no chunk count up to {max(chunks or 0, max_chunks)} reaches fidelity {min_fidelity:g}: "
                       f"the best is {fidelity_text(best[0])} at C = {best[1]} (rounded down)"
                       + (f" ({search.refused})" if search.refused else "")
                       + (f"; --any-chunks gives {fidelity_text(search.unrestricted[1])} at C = "
                          f"{search.unrestricted[0]}, a count the executor does not select at power-of-two sizes"
                          if search.unrestricted else "")
                       + "; raise --max-chunks or lower --min-fidelity")
    return best[2] if best[2] is not None else build(best[1], best[3])
