"""Time-stepped MCF (tsMCF) on the time-expanded graph (Basu et al. §3.1.3, eqs. (15)–(20)).

The time-expanded graph has layers ``0..L`` (``L = l_max``); step ``t`` moves
data from layer ``t`` to layer ``t+1`` over a link ``u_t -> v_{t+1}`` or keeps it
at its node (a hold arc ``u_t -> u_{t+1}``, buffering).  Data of commodity
``(s, d)`` starts at ``s_0`` and is *sunk* at ``d`` when it arrives there over a
link.  The LP minimises the schedule duration ``Σ_t U_t`` subject to

* link capacity per step (16): ``Σ_k f_{k,e,t} <= U_t · cap_e``;
* flow conservation at every ``(u, t)`` (equivalent to (17)–(18) with explicit
  hold arcs) and unit demand (19);
* the host–NIC bottleneck per step (§3.2.2, Fig. 2), when ``fabric.host_bw`` is
  set, with ``hc = fabric.host_capacity``: ``forwarding="host"`` — every byte a
  node receives in step ``t`` and every byte it sends in step ``t`` crosses its
  host–NIC link: ``Σ_in load_t(v) <= U_t·hc`` and ``Σ_out load_t(v) <= U_t·hc``;
  ``forwarding="nic"`` — only the bytes a node sources (its own data leaving it)
  and sinks (data arriving at its destination) count.

Flows are per unit demand, so ``Σ_t U_t`` is the all-to-all time in link-times
and the equivalent concurrent flow is ``F = 1/Σ_t U_t``.

Two solvers share one LP builder (:func:`_ts_lp`), parameterised by *groups*
(a source and its sinks):

* the full per-commodity LP (one group per ``(s, d)``), the reference;
* the decomposed LP (§3.1.2 applied to §3.1.3): a master LP over one group per
  source (aggregated flows sunk at every other node), then an exact split of
  each source's flow on the time-expanded DAG into its destinations
  (:func:`_split_by_destination`).  A single-source flow on a DAG always
  decomposes into source–sink paths, so the master optimum *is* the full
  optimum and the split keeps every per-step link and host load.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from ..errors import A2AError
from ..fabric import Fabric
from ..numeric import dot
from ..topology.metrics import DistanceStats, distance_bound, distance_stats, host_distances, require_connected
from ..topology.model import Topology
from .certificate import dual_upper_bound, time_expanded_bound
from .lp import solve_lp
from .result import FlowSolution
from .symmetry import Symmetry, find_symmetry, wanted

#: Relative improvement of ``Σ_t U_t`` below which the automatic l_max search stops.
STEP_TOLERANCE = 1e-3
#: The automatic search tries at most ``diameter + MAX_EXTRA_STEPS`` steps.
MAX_EXTRA_STEPS = 6
#: ``solver="auto"`` uses simplex up to this many LP columns, interior point above.
SIMPLEX_MAX_COLUMNS = 10_000
#: Interior-point LPs above this many columns run HiGHS presolve first (it removes most hold and
#: sink columns): the plain 6-step LP of jellyfish:64,4,seed=1 (142 982 columns) 17.2 s CPU instead
#: of 28.7 s, same optimum.  Smaller LPs keep the solutions the shipped schedules were made from.
PRESOLVE_MIN_COLUMNS = 50_000
#: Flows below this (per unit demand) are LP noise and dropped.
FLOW_EPS = 1e-9


@dataclass(frozen=True, eq=False)
class _Groups:
    """LP commodity groups: group ``g`` starts at ``source[g]``; sink ``j`` of
    group ``sink_group[j]`` absorbs ``sink_amount[j]`` (default 1) at node ``sink_node[j]``."""

    source: np.ndarray
    sink_group: np.ndarray
    sink_node: np.ndarray
    sink_amount: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class _TSLPSolution:
    objective: float
    U: np.ndarray        # (L,) step loads
    flow: np.ndarray     # (G, L, E) link flows per group and step
    hold: np.ndarray     # (G, L-1, N) hold arcs layer t -> t+1, t = 0..L-2
    sink: np.ndarray     # (J, L) sunk at layer t+1 (arrived in step t)
    seconds: float
    lengths: tuple       # |duals| of the capacity rows: links (L, E), host ingress and egress (L, N) or None
    solver: str          # the HiGHS algorithm that solved it (``auto`` resolved)


def time_lower_bound(topology: Topology, fabric: Fabric, stats: DistanceStats | None = None,
                     demand=None) -> float:
    """A lower bound on ``Σ_t U_t`` for any number of steps.

    The link term is the distance bound ``1/F`` (:func:`distance_bound`).  With a
    host–NIC bottleneck (``hc`` per direction), host forwarding puts every hop
    through a host: ``Σ_t U_t · N · hc >= Σ_{s,d} dist(s, d)``; NIC forwarding
    still makes each host source ``N-1`` shards: ``Σ_t U_t · hc >= N-1``.  With a
    ``demand`` each pair counts ``D[s, d]`` times, and a host sources its row sum and
    sinks its column sum.
    """
    stats = stats or distance_stats(topology)
    if demand is None:
        bound = 1.0 / distance_bound(topology, stats)
        if fabric.host_bw is not None:
            n, hc = topology.n_hosts, fabric.host_capacity
            bound = max(bound, stats.total / (n * hc) if fabric.forwarding == "host" else (n - 1) / hc)
        return bound
    total = dot(host_distances(topology), demand.volumes)
    bound = total / math.fsum(topology.capacity.tolist())
    if fabric.host_bw is not None:
        n, hc = topology.n_hosts, fabric.host_capacity
        ends = max(demand.row_sums().max(), demand.col_sums().max()) / hc
        bound = max(bound, ends, total / (n * hc) if fabric.forwarding == "host" else 0.0)
    return bound


def static_time_bound(topology: Topology, fabric: Fabric, sol: _TSLPSolution, distance: float) -> float:
    """A certified lower bound on ``Σ_t U_t`` for *every* number of steps, from an ``L``-step LP's duals.

    Summed over steps, a time-stepped flow is a static flow whose load on link ``e`` is at most
    ``Σ_t U_t · cap_e``, so the static MCF time ``1/F`` bounds every schedule.  Weak duality
    (:func:`~a2a_compiler.solve.certificate.dual_upper_bound`) bounds ``F`` with any lengths; the LP's
    link duals summed over its steps are the candidate (on links only: with a host bandwidth the
    distance bound ``distance`` of :func:`time_lower_bound` is returned).  When the ``L``-step
    optimum meets this bound, more steps cannot help: ``jellyfish:64,4,seed=1`` stops at
    ``L = 6`` (53.33 = the MCF time) instead of solving the 7-step LP too.
    """
    if fabric.host_bw is not None:
        return distance
    return max(distance, 1.0 / dual_upper_bound(topology, sol.lengths[0].sum(axis=0)))


def _check(topology: Topology) -> None:
    if topology.n_switches:
        raise A2AError(
            f"{topology.spec}: tsmcf schedules host-forwarded chunks over direct links; "
            f"this topology has {topology.n_switches} switch(es) — use pmcf or mcf-extp"
        )
    if topology.n_hosts < 2:
        raise A2AError(f"{topology.spec}: all-to-all needs at least 2 hosts")


def _ts_lp(topology: Topology, fabric: Fabric, L: int, groups: _Groups, solver: str,
           symmetry: Symmetry | None = None, progress=None) -> _TSLPSolution:
    """Build and solve the time-stepped LP (15)–(20) for ``groups`` over ``L`` steps.

    Column blocks: link flows ``(g, t, e)``, holds ``(g, t, u)`` for ``t < L-1``,
    sinks ``(j, t)``, step loads ``U_t``.  With ``symmetry`` (groups = its orbit
    representatives) the per-step link and host rows are one per orbit, each
    flow counted ``link_mult`` / ``node_mult`` times (the quotient LP of
    :mod:`~a2a_compiler.solve.symmetry`).
    """
    N, E = topology.n_nodes, topology.n_links
    src, dst, cap = topology.src, topology.dst, topology.capacity
    if symmetry is None:
        link_row, link_mult, row_cap = np.arange(E), np.ones(E), cap
        node_row, node_mult = np.arange(N), np.ones(N)
    else:
        link_row, link_mult, row_cap = symmetry.link_class, symmetry.link_mult, cap[symmetry.class_link]
        node_row, node_mult = symmetry.node_class, symmetry.node_mult
    C, V = len(row_cap), int(node_row.max()) + 1
    G, J = len(groups.source), len(groups.sink_group)
    H = max(L - 1, 0)
    n_f, n_h, n_s = G * L * E, G * H * N, J * L
    o_h, o_s, o_u = n_f, n_f + n_h, n_f + n_h + n_s
    n_col = o_u + L

    # Index grids.
    fg, ft, fe = (a.ravel() for a in np.meshgrid(np.arange(G), np.arange(L), np.arange(E), indexing="ij"))
    f_col = np.arange(n_f)
    hg, ht, hu = (a.ravel() for a in np.meshgrid(np.arange(G), np.arange(H), np.arange(N), indexing="ij"))
    h_col = o_h + np.arange(n_h)
    sj, st = (a.ravel() for a in np.meshgrid(np.arange(J), np.arange(L), indexing="ij"))
    s_col = o_s + np.arange(n_s)
    sg, sv = groups.sink_group[sj], groups.sink_node[sj]

    rows, cols, vals = [], [], []

    def add(r, c, v):
        rows.append(np.asarray(r))
        cols.append(np.asarray(c))
        vals.append(np.broadcast_to(np.asarray(v, dtype=float), np.shape(r)))

    # Conservation at (g, layer, u): out - in = supply.   row = (g*(L+1) + layer)*N + u
    def cons(g, layer, u):
        return (g * (L + 1) + layer) * N + u

    add(cons(fg, ft, src[fe]), f_col, 1.0)              # leaves u at layer t
    add(cons(fg, ft + 1, dst[fe]), f_col, -1.0)         # enters v at layer t+1
    add(cons(hg, ht, hu), h_col, 1.0)
    add(cons(hg, ht + 1, hu), h_col, -1.0)
    add(cons(sg, st + 1, sv), s_col, 1.0)               # sunk at layer t+1
    n_cons = G * (L + 1) * N
    supply = np.zeros(n_cons)
    np.add.at(supply, cons(np.arange(G), 0, groups.source),
              np.bincount(groups.sink_group, minlength=G) if groups.sink_amount is None
              else np.bincount(groups.sink_group, weights=groups.sink_amount, minlength=G))
    lo, hi = [supply], [supply]
    r0 = n_cons

    # A sink only absorbs what arrived over a link in that step: sink(j,t) - Σ_in f(g,t,e) <= 0.
    in_links = sp.csr_array((np.ones(E), (dst, np.arange(E))), shape=(N, E))
    jj, ee = sp.coo_array(in_links[sv]).coords
    add(r0 + np.arange(n_s), s_col, 1.0)
    add(r0 + jj, (sg[jj] * L + st[jj]) * E + ee, -1.0)
    lo.append(np.full(n_s, -np.inf)), hi.append(np.zeros(n_s))
    r0 += n_s

    # Demand (19): Σ_t sink(j, t) = 1 (its amount, with a demand matrix).
    add(r0 + sj, s_col, 1.0)
    amount = np.ones(J) if groups.sink_amount is None else groups.sink_amount
    lo.append(amount), hi.append(amount)
    r0 += J

    # Link capacity per step (16): Σ_g f(g,t,e) - cap_e U_t <= 0 (per link orbit under symmetry).
    cap_rows = r0
    add(r0 + ft * C + link_row[fe], f_col, link_mult[fe])
    tc_t, tc_c = np.divmod(np.arange(L * C), C)
    add(r0 + tc_t * C + tc_c, o_u + tc_t, -row_cap[tc_c])
    lo.append(np.full(L * C, -np.inf)), hi.append(np.zeros(L * C))
    r0 += L * C

    # Host–NIC bottleneck per step (§3.2.2): two rows per (t, host), in and out (per host orbit).
    if fabric.host_bw is not None:
        hc = fabric.host_capacity
        tv_t, tv_v = np.divmod(np.arange(L * V), V)
        r_in, r_out = r0 + tv_t * V + tv_v, r0 + L * V + tv_t * V + tv_v
        if fabric.forwarding == "host":
            add(r_in[ft * V + node_row[dst[fe]]], f_col, node_mult[dst[fe]])
            add(r_out[ft * V + node_row[src[fe]]], f_col, node_mult[src[fe]])
        else:   # nic: only sunk bytes (in) and the source's own bytes (out)
            add(r_in[st * V + node_row[sv]], s_col, node_mult[sv])
            own = src[fe] == groups.source[fg]
            add(r_out[ft[own] * V + node_row[src[fe[own]]]], f_col[own], node_mult[src[fe[own]]])
        add(np.concatenate([r_in, r_out]), o_u + np.concatenate([tv_t, tv_t]), -hc)
        lo.append(np.full(2 * L * V, -np.inf)), hi.append(np.zeros(2 * L * V))
        r0 += 2 * L * V

    A = sp.csc_array((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(r0, n_col))
    c = np.zeros(n_col)
    c[o_u:] = 1.0
    if solver == "auto":
        solver = "simplex" if n_col <= SIMPLEX_MAX_COLUMNS else "ipm"
    if progress:
        progress(f"tsmcf: {L} steps, LP {r0} rows, {n_col} columns, {A.nnz} nonzeros; solving with {solver}")
    res = solve_lp(c, A, np.concatenate(lo), np.concatenate(hi), solver=solver, label=f"tsmcf LP ({L} steps)",
                   progress=progress, options={"presolve": "on"} if solver == "ipm" and n_col > PRESOLVE_MIN_COLUMNS
                   else None)
    x = np.maximum(res.x, 0.0)
    x[x < FLOW_EPS] = 0.0
    # dual lengths per link and host; an orbit's dual spread over its members (Symmetry.lengths)
    duals = np.abs(res.row_dual[cap_rows:])
    links = link_mult * duals[:L * C].reshape(L, C)[:, link_row]
    hosts = (node_mult * duals[L * C:].reshape(2, L, V)[:, :, node_row] if fabric.host_bw is not None
             else (None, None))
    return _TSLPSolution(
        objective=res.objective,
        U=x[o_u:].copy(),
        flow=x[:n_f].reshape(G, L, E),
        hold=x[o_h:o_s].reshape(G, H, N),
        sink=x[o_s:o_u].reshape(J, L),
        seconds=res.seconds,
        lengths=(links, *hosts),
        solver=res.solver,
    )


def _source_groups(n: int, sources: np.ndarray | None = None, demand=None) -> _Groups:
    """One group per source (default: every node), sinking one unit (``D[s, v]`` with a
    ``demand``) at every other node ``v``."""
    sources = np.arange(n) if sources is None else np.asarray(sources, dtype=np.int64)
    g, v = np.divmod(np.arange(len(sources) * n), n)
    keep = v != sources[g]
    amount = None if demand is None else np.asarray(demand.volumes)[sources[g[keep]], v[keep]]
    return _Groups(sources, g[keep], v[keep], amount)


def _expand(sol: _TSLPSolution, symmetry: Symmetry) -> _TSLPSolution:
    """The every-source solution of :func:`_source_groups` from the orbit representatives' solution."""
    R, L, _ = sol.flow.shape
    N = len(symmetry.source_rep)
    sink = np.zeros((R, L, N))
    g, v = np.divmod(np.arange(R * N), N)
    keep = v != symmetry.reps[g]
    sink[g[keep], :, v[keep]] = sol.sink
    sink = symmetry.expand_sources(sink, lambda e: symmetry.node_perm[e])          # (N, L, N)
    s, v = np.divmod(np.arange(N * N), N)
    return _TSLPSolution(
        objective=sol.objective,
        U=sol.U,
        flow=symmetry.expand_sources(sol.flow, lambda e: symmetry.link_perm[e]),
        hold=symmetry.expand_sources(sol.hold, lambda e: symmetry.node_perm[e]),
        sink=sink[s[s != v], :, v[s != v]],
        seconds=sol.seconds,
        lengths=sol.lengths,
        solver=sol.solver,
    )


def _commodity_groups(n: int, demand=None) -> _Groups:
    s, d = np.divmod(np.arange(n * n), n)
    keep = s != d
    k = int(keep.sum())
    return _Groups(s[keep], np.arange(k), d[keep], None if demand is None else demand.of_pairs(s[keep], d[keep]))


def _split_by_destination(topology: Topology, sol: _TSLPSolution) -> tuple[np.ndarray, ...]:
    """Split each source's aggregated time-expanded flow into per-destination flows.

    Proportional (exact) flow decomposition on the DAG, backwards from the last
    layer: ``φ[d, v]`` is how much of the flow through node-time ``v_t`` ends at
    ``d``; an arc into ``v_t`` carrying ``a`` is split as ``a·φ[d, v]/Σ_d φ[·, v]``.
    Conservation per destination follows from the aggregate conservation.
    Returns COO ``(row = s*N+d, col = t*E+e, value)``.
    """
    N, E = topology.n_nodes, topology.n_links
    src, dst = topology.src, topology.dst
    G, L, _ = sol.flow.shape
    out_links = sp.csr_array((np.ones(E), (src, np.arange(E))), shape=(N, E))
    sinks = sol.sink.reshape(N, N - 1, L)   # source groups: sink j = s*(N-1) + (index of v among v != s)
    rows, cols, vals = [], [], []
    eye = np.eye(N)
    for s in range(N):
        others = np.delete(np.arange(N), s)
        sunk = np.zeros((N, L))              # sunk[v, t]
        sunk[others] = sinks[s]
        phi = eye * sunk[:, L - 1]           # layer L: φ[d, v] = sink at v for d = v
        for t in range(L - 1, -1, -1):
            total = phi.sum(axis=0)
            ratio = np.divide(phi, total, out=np.zeros_like(phi), where=total > FLOW_EPS)
            f = sol.flow[s, t] * ratio[:, dst]                 # (d, e)
            phi = (out_links @ f.T).T
            if t < L - 1:
                phi = phi + sol.hold[s, t] * ratio
            if t > 0:
                phi = phi + eye * sunk[:, t - 1]
            d, e = np.nonzero(f > FLOW_EPS)
            keep = d != s
            rows.append(s * N + d[keep])
            cols.append(t * E + e[keep])
            vals.append(f[d[keep], e[keep]])
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(vals)


def tsmcf(
    topology: Topology,
    fabric: Fabric,
    *,
    steps: int | None = None,
    decomposed: bool = True,
    symmetry: str | bool = "auto",
    solver: str = "auto",
    progress=None,
    demand=None,
) -> FlowSolution:
    """Optimal time-stepped all-to-all flow (Basu et al. §3.1.3, eqs. (15)–(20)).

    Parameters
    ----------
    topology : a switchless topology (chunks are forwarded by hosts over links).
    fabric : link/host bandwidths and forwarding mode; ``host_bw`` adds the
        per-step host–NIC constraints (§3.2.2).
    steps : ``l_max``, the number of time steps.  ``None`` chooses it: try
        ``diameter, diameter+1, ...`` while ``Σ_t U_t`` improves by more than
        :data:`STEP_TOLERANCE` (relative), at most ``diameter + MAX_EXTRA_STEPS``.
    decomposed : solve the source-grouped master LP and split flows per
        destination (default, scales to hundreds of nodes); ``False`` solves the
        full per-commodity LP (reference).
    symmetry : ``"on"``: quotient the decomposed LP by the largest checked
        automorphism group acting freely on the hosts
        (:mod:`~a2a_compiler.solve.symmetry`; one source per orbit: hypercubes
        and tori solve one source's flow), then move that flow to every source.
        Same optimum; ``info["symmetry"]``.  ``"auto"`` (default): only when the
        plain LP at ``diameter`` steps has more than
        :data:`~a2a_compiler.solve.symmetry.AUTO_MIN_COLUMNS` columns; ``"off"``: never.
    solver : HiGHS solver for the LPs (``simplex``, ``ipm``, ``pdlp``) or ``auto``:
        simplex for LPs of at most :data:`SIMPLEX_MAX_COLUMNS` columns (its
        vertex solutions on small symmetric graphs have round weights that
        chunk exactly), interior point above (simplex stalls on these
        degenerate LPs: hypercube:5 at 5 steps 30 s vs 3.4 s, genkautz:32,4 at
        4 steps 17 s vs 1.4 s, and the IPM flows chunk better there).
    progress : optional callable receiving one-line progress messages.
    demand : a :class:`~a2a_compiler.demand.Demand`: commodity ``(s, d)`` ships
        ``D[s, d]`` (eq. 19's right-hand side); the quotient keeps only the
        automorphisms leaving ``D`` invariant.  Flows stay per unit of each pair.

    Returns
    -------
    FlowSolution with ``n_steps = l_max``, ``step_loads = U_t``, per-step
    per-commodity link flows (column ``t*n_links + e``), ``concurrent_flow =
    1/Σ_t U_t``.  ``upper_bound`` is certified by weak duality on the LP's
    dual lengths (:func:`~a2a_compiler.solve.certificate.time_expanded_bound`):
    no ``l_max``-step fractional schedule is faster than ``1/upper_bound``.
    ``info["distance_bound_time"]`` (:func:`time_lower_bound`) bounds
    ``Σ_t U_t`` from below for every ``l_max``; ``info["objective_by_steps"]``
    lists the ``[l_max, Σ_t U_t]`` pairs tried.
    """
    _check(topology)
    require_connected(topology)
    stats = distance_stats(topology)
    diam = int(stats.diameter)
    if steps is not None and steps < diam:
        raise A2AError(f"--steps {steps}: a {topology.spec} schedule needs at least diameter = {diam} steps")
    candidates = [steps] if steps is not None else range(diam, diam + MAX_EXTRA_STEPS + 1)
    bound = time_lower_bound(topology, fabric, stats, demand)
    t0 = time.perf_counter()
    plain_columns = topology.n_nodes * candidates[0] * topology.n_links
    sym = find_symmetry(topology) if decomposed and wanted(symmetry, plain_columns) else None
    if sym is not None and demand is not None:
        sym = sym.stabiliser(demand)
    if sym is not None and sym.order == 1:
        sym = None
    if progress and sym is not None:
        progress(f"symmetry: {sym.family}; LP over {len(sym.reps)} of {topology.n_hosts} sources")
    if not decomposed:
        groups = _commodity_groups(topology.n_nodes, demand)
    else:
        groups = _source_groups(topology.n_nodes, None if sym is None else sym.reps, demand)
    best, tried = None, []
    for L in candidates:
        sol = _ts_lp(topology, fabric, L, groups, solver, sym, progress)
        tried.append([L, sol.objective])
        if progress:
            progress(f"tsmcf: {L} steps -> sum U_t = {sol.objective:.6g} ({sol.seconds:.2f} s LP)")
        if best is not None and sol.objective > best.objective * (1 - STEP_TOLERANCE):
            break
        best = sol
        if sol.objective <= static_time_bound(topology, fabric, sol, bound) * (1 + STEP_TOLERANCE):
            break   # more steps cannot beat the static MCF bound
    lp_seconds = time.perf_counter() - t0
    if sym is not None:
        best = _expand(best, sym)
    L = best.flow.shape[1]
    N, E = topology.n_nodes, topology.n_links
    t1 = time.perf_counter()
    if decomposed:
        r, c, v = _split_by_destination(topology, best)
    else:
        g, t, e = np.nonzero(best.flow)
        grp = _commodity_groups(N)
        r, c, v = grp.source[g] * N + grp.sink_node[g], t * E + e, best.flow[g, t, e]
    if demand is not None:  # per unit of each pair's volume
        vol = np.asarray(demand.volumes).reshape(N * N)[r]
        keep = vol > 0
        r, c, v = r[keep], c[keep], v[keep] / vol[keep]
    flows = sp.csr_array((v, (r, c)), shape=(N * N, L * E))
    total = float(best.U.sum())
    F = 1.0 / total
    certified = max(bound, time_expanded_bound(topology, fabric, *best.lengths, demand=demand))
    return FlowSolution(
        method="tsmcf",
        spec=topology.spec,
        fabric=fabric,
        n_hosts=topology.n_hosts,
        n_links=E,
        concurrent_flow=F,
        upper_bound=max(F, 1.0 / certified),
        timings={"lp": lp_seconds, "split": time.perf_counter() - t1},
        n_steps=L,
        step_loads=best.U.copy(),
        link_flows=flows,
        info={"l_max": L, "diameter": diam, "distance_bound_time": bound, "decomposed": decomposed, "solver": best.solver,
              "symmetry": (sym or Symmetry.trivial(topology)).summary(), "objective_by_steps": tried},
        demand=demand,
    )
