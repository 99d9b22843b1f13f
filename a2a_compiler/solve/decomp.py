"""Decomposed link-based MCF for scale (Basu et al. §3.1.2).

1. **Master LP** (eqs. 6–9): one flow per *source* (``N·|E|`` variables instead of
   ``N(N-1)·|E|``), each source sinking ``F`` at every other host.  By default
   it is quotiented by the largest checked automorphism group of the solve
   graph acting freely on the hosts (:mod:`~a2a_compiler.solve.symmetry`): one
   source per host orbit and one capacity row per link orbit, same optimum.
2. **Per-source split** into per-commodity link flows, in parallel over sources
   (orbit representatives; every other source's paths are their images):

   * ``child="paths"`` (default): the exact cycle-cancelling path decomposition
     :func:`~a2a_compiler.solve.certificate.decompose_flow` of the source's flow;
   * ``child="lp"``: the paper's child LP (eqs. 10–14), minimum total flow within
     the master's per-source link flows, then cleaned by the same decomposition.

Parallelism uses standard executors only: local processes
(:class:`multiprocessing.pool.Pool`, ``workers=N``) or MPI ranks
(:class:`mpi4py.futures.MPIPoolExecutor`, ``mpi=True``, launched as
``mpiexec -n K python -m mpi4py.futures -m a2a_compiler solve ... --mpi``).
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import signal
import time

import numpy as np
import scipy.sparse as sp

from ..errors import A2AError
from ..fabric import Fabric
from ..progress import tick_of
from ..topology.model import Topology
from .certificate import Routing, decompose_commodities, decompose_flow, dual_upper_bound, solve_graph
from .gpu import unavailable
from .lp import WAKE_INTERVAL, solve_lp
from .mcf import DEFAULT_SOLVER, PDLP_ABOVE_NNZ, certify_routing, finish, flow_lp, lp_info, pick_solver, solve_flow_lp
from .pricing import PRICING_MODES, ROUND_SOLVERS, priced_master_lp
from .result import FlowSolution
from .symmetry import AUTO_MIN_COLUMNS, Symmetry, find_symmetry, wanted

CHILD_MODES = ("paths", "lp")

_GRAPH: Topology | None = None  # graph shipped once per worker process (executor initializer)


def _install(graph: Topology) -> None:
    global _GRAPH
    _GRAPH = graph


def split_source(graph: Topology, source: int, flow: np.ndarray, child: str = "paths",
                 solver: str = DEFAULT_SOLVER, amounts: np.ndarray | None = None) -> Routing:
    """Per-commodity paths of one source's master flow (§3.1.2 step 2), delivering ``amounts[d]``
    (default 1) to every host ``d``."""
    nh = graph.n_hosts
    if child == "paths":
        demand = np.zeros(graph.n_nodes)
        demand[:nh] = 1.0 if amounts is None else amounts
        demand[source] = 0.0
        return decompose_flow(graph, source, flow, demand)
    # Child LP (eqs. 10-14): minimum total flow delivering every destination its amount
    # within the source's master flow (U fixed to 1).  Capacities get 1e-7 relative
    # slack for the master LP's tolerance; the certified F accounts for it.  The LP is barely feasible,
    # and IPX can stop just outside its own tolerances (jellyfish:128): its point is taken all the same.
    # Only the primal is used, so HiGHS presolves it: jellyfish:128's child LPs 0.2-0.33 s against
    # 2.6-3.9 s without (docs/solver.md).
    dests = np.array([d for d in range(nh) if d != source and (amounts is None or amounts[d] > 0)])
    amount = np.ones(len(dests)) if amounts is None else np.asarray(amounts, dtype=float)[dests]
    sinks = sp.coo_array((amount, (np.arange(len(dests)), dests)), shape=(len(dests), graph.n_nodes))
    A, lower, upper = flow_lp(graph, np.full(len(dests), source), sinks,
                              capacity=flow * (1 + 1e-7) + 1e-9 * float(flow.max(initial=0.0)))
    c = np.ones(A.shape[1])
    c[0] = 0.0
    col_fixed = np.zeros(A.shape[1])
    col_fixed[0] = 1.0
    res = solve_lp(c, A, lower, upper, col_fixed, np.where(col_fixed > 0, 1.0, np.inf),
                   solver=pick_solver("auto" if solver == "cupdlpx" else solver, A.nnz), options={"presolve": "on"},
                   inexact_ok=True)
    flows = res.x[1:].reshape(len(dests), graph.n_links)
    return decompose_commodities(graph, np.full(len(dests), source), dests, flows, amount)


def _split_chunk(graph: Topology, sources: np.ndarray, flows: np.ndarray, child: str, solver: str,
                 amounts: np.ndarray | None = None) -> Routing:
    return Routing.concat(split_source(graph, int(s), f, child, solver, None if amounts is None else amounts[i])
                          for i, (s, f) in enumerate(zip(sources, flows)))


def _call(func, args):
    return func(_GRAPH, *args)


def _install_worker(graph: Topology) -> None:
    """Worker initializer: keep the graph, and leave Ctrl-C to the parent (which terminates the pool)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _install(graph)


def _call_packed(packed):
    return _call(*packed)


def map_chunks(graph: Topology, func, chunk_args: list, *, workers: int = 1, mpi: bool = False,
               progress=None, label: str = "chunks") -> list:
    """``[func(graph, *args) for args in chunk_args]``, in order, on local processes or MPI ranks.

    ``graph`` is shipped once per worker (pool initializer); ``func`` must be a
    module-level function.  Local workers are capped at the work
    (:func:`useful_workers`: no more than the chunks and the CPUs this process
    may use); one worker runs in-process.
    Local workers ignore SIGINT; on Ctrl-C (or any error) the parent
    terminates them before the exception propagates.
    """
    tick = tick_of(progress)

    def report(i):
        if progress:
            (progress if i + 1 == len(chunk_args) else tick)(f"{label}: {i + 1}/{len(chunk_args)} done")

    out = []
    workers = useful_workers(workers, len(chunk_args))
    if workers <= 1 and not mpi:
        for i, args in enumerate(chunk_args):
            out.append(func(graph, *args))
            report(i)
        return out
    if mpi:
        try:
            from mpi4py.futures import MPIPoolExecutor
        except ImportError as exc:  # pragma: no cover - mpi4py is a dependency
            raise A2AError(f"--mpi needs mpi4py: {exc}") from None
        with MPIPoolExecutor(initializer=_install, initargs=(graph,)) as ex:
            futures = [ex.submit(_call, func, args) for args in chunk_args]
            try:
                for i, fut in enumerate(futures):
                    out.append(_wait_in_slices(fut.result, concurrent.futures.TimeoutError))
                    report(i)
            except BaseException:
                ex.shutdown(wait=False, cancel_futures=True)
                raise
        return out
    # forkserver: workers fork from a fresh single-threaded server, never from a
    # process whose HiGHS threads may hold locks
    pool = multiprocessing.get_context("forkserver").Pool(workers, initializer=_install_worker, initargs=(graph,))
    try:
        results = pool.imap(_call_packed, [(func, args) for args in chunk_args])
        for i in range(len(chunk_args)):
            out.append(_wait_in_slices(results.next, multiprocessing.TimeoutError))
            report(i)
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()
    return out


def useful_workers(workers: int, n_chunks: int) -> int:
    """The local worker processes worth starting for ``n_chunks`` chunks of work: at most ``workers``, the
    chunks, and the CPUs this process may run on (``--workers 1000`` for 8 sources starts at most 8)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(workers, n_chunks, cpus))


def _wait_in_slices(get, timeout_error):
    """``get(timeout)`` retried every :data:`~.lp.WAKE_INTERVAL` until it answers.  Python runs signal
    handlers in the main thread only between bytecodes, and a SIGINT that the kernel hands to one of the
    pool's threads cannot wake a main thread blocked on a lock: waiting in slices lets Ctrl-C through."""
    while True:
        try:
            return get(WAKE_INTERVAL)
        except timeout_error:
            pass


def source_chunks(n_sources: int, workers: int, mpi: bool) -> list[np.ndarray]:
    """Contiguous blocks of source indices, ~8 per worker (64 under MPI) for load balance and progress."""
    return np.array_split(np.arange(n_sources), min(n_sources, 64 if mpi else 8 * max(workers, 2)))


def split_sources(graph: Topology, sources: np.ndarray, flows: np.ndarray, *, child: str = "paths",
                  solver: str = DEFAULT_SOLVER, workers: int = 1, mpi: bool = False, progress=None,
                  amounts: np.ndarray | None = None) -> Routing:
    """Run :func:`split_source` for ``sources`` (flow ``flows[i]`` of ``sources[i]``, delivering
    ``amounts[i, d]``, default 1), serially or in parallel."""
    chunks = source_chunks(len(sources), workers, mpi)
    args = [(sources[c], flows[c], child, solver) + (() if amounts is None else (amounts[c],)) for c in chunks]
    parts = map_chunks(graph, _split_chunk, args, workers=workers, mpi=mpi, progress=progress,
                       label="per-source split")
    return Routing.concat(parts)


def mcf_decomp(topology: Topology, fabric: Fabric | None = None, *, solver: str = DEFAULT_SOLVER,
               child: str = "paths", workers: int = 1, mpi: bool = False, symmetry: str | bool = "auto",
               pricing: str = "auto", progress=None, demand=None) -> FlowSolution:
    """Optimal all-to-all concurrent flow by the decomposed MCF (eqs. 6–9, then 10–14 or paths).

    Same optimum as :func:`~a2a_compiler.solve.mcf.mcf`; the per-commodity flows
    may differ.  With ``symmetry`` ``"on"`` (or ``"auto"``, the default, once the
    plain master LP has more than :data:`~a2a_compiler.solve.symmetry.AUTO_MIN_COLUMNS`
    columns) the master LP is the quotient by the solve graph's automorphisms
    (:func:`~a2a_compiler.solve.symmetry.find_symmetry`; ``info["symmetry"]``
    says which group); ``"off"`` solves the plain master LP.  ``F`` is
    certified on the split flows of every source, ``upper_bound`` comes from
    the master LP's capacity duals.  With a ``demand`` source ``s`` sinks ``D[s, d]`` at
    every ``d``, and the quotient keeps only the automorphisms that leave ``D``
    invariant (:meth:`~a2a_compiler.solve.symmetry.Symmetry.stabiliser`, checked
    entry by entry).  ``pricing="on"`` solves the plain master LP by arc pricing instead
    (:func:`~a2a_compiler.solve.pricing.priced_master_lp`; no symmetry search): same optimum, a
    fraction of the columns, but flows that may differ between SciPy releases; ``"auto"`` (the default) chooses
    (:func:`choose_master`: pricing for large fabrics without symmetry), ``"off"`` never prices.  A first-order
    master LP (PDLP, cuPDLPx) is certified by :func:`~.first_order.solve_certified`'s tolerance schedule.
    ``info["master"]`` and ``info["master_choice"]`` say which master LP was solved and why.
    """
    if child not in CHILD_MODES:
        raise A2AError(f"unknown child mode {child!r}; choose one of {', '.join(CHILD_MODES)}")
    if workers < 1:
        raise A2AError(f"--workers must be >= 1, got {workers}")
    if pricing not in PRICING_MODES:
        raise A2AError(f"unknown pricing mode {pricing!r}; choose one of {', '.join(PRICING_MODES)}")
    if pricing == "on" and symmetry in ("on", True):
        raise A2AError("--pricing on prices the plain master LP; it excludes --symmetry on")
    if pricing == "on" and solver not in ("auto", *ROUND_SOLVERS):
        raise A2AError(f"--pricing on solves its restricted master LPs by interior point (IPX or HiPO), PDLP or "
                       f"cuPDLPx; it excludes --solver {solver}")
    fabric, aug, _, _ = solve_graph(topology, fabric)
    g = aug.topology
    nh = g.n_hosts
    t0 = time.perf_counter()
    searched = pricing != "on" and wanted(symmetry, nh * g.n_links)
    sym = find_symmetry(topology, g, aug.node_origin) if searched else Symmetry.trivial(g)
    if demand is not None:
        sym = sym.stabiliser(demand)
    if progress and sym.order > 1:
        progress(f"symmetry: {sym.family}; master LP over {len(sym.reps)} of {nh} sources")
    master, why = choose_master(pricing, symmetry, searched, sym, solver, nh * g.n_links)
    if progress:
        progress(f"master LP: {master} ({why})")
    reps = sym.reps
    k, d = np.divmod(np.arange(len(reps) * nh), nh)
    amounts = None if demand is None else np.asarray(demand.volumes)[reps]
    amount = np.ones(len(k)) if amounts is None else amounts[k, d]
    off = (d != reps[k]) & (amount > 0)
    sinks = sp.coo_array((amount[off], (k[off], d[off])), shape=(len(reps), g.n_nodes))
    t_sym = time.perf_counter() - t0
    priced = master == "priced"

    def split(flows):        # the representatives' paths (§3.1.2 step 2), moved to every source
        return sym.expand_routing(split_sources(g, reps, flows, child=child, solver=solver, workers=workers,
                                                mpi=mpi, progress=progress, amounts=amounts), nh)

    def certify(flows, lengths):
        routing = split(flows)
        return certify_routing(routing, g, demand)[1], dual_upper_bound(g, lengths, demand), routing

    cert = None
    if priced:
        U, flows, lengths, res, build, pricing_info = priced_master_lp(g, sinks, volumes=amounts, demand=demand,
                                                                       solver=solver, progress=progress)
    else:
        U, flows, lengths, res, build, cert = solve_flow_lp(g, reps, sinks, solver=solver, progress=progress,
                                                            symmetry=sym, label="master LP", certify=certify)
        pricing_info = {}
    t0 = time.perf_counter()
    if cert is None:
        ub = dual_upper_bound(g, lengths, demand)
        t1 = time.perf_counter()
        routing = split(flows)
        certified = {}
    else:
        routing, ub, certified = cert
        certified = dict(certified)
        t1 = t0 - certified.pop("certify_seconds")
    timings = {"symmetry": t_sym, **({"seed": pricing_info.pop("seed_seconds")} if priced else {}),
               "build": build, "lp": res.seconds, **({"bound": t1 - t0} if cert is None else {}),
               "split": time.perf_counter() - t1}   # with the schedule: every solve's bound and split
    info = {"solver": res.solver, "lp_status": res.status, "child": child, "workers": workers, "mpi": mpi,
            "symmetry": sym.summary(), "lp_rows": int(len(res.row_value)), "lp_columns": int(len(res.x)),
            "lp_iterations": res.iterations, "lp_concurrent_flow": float(1 / U),
            "master": master, "master_choice": why, **pricing_info, **lp_info(res, certified)}
    return finish("mcf-decomp", topology, fabric, aug, routing, ub, timings, info, demand=demand)


def choose_master(pricing: str, symmetry, searched: bool, sym: Symmetry, solver: str,
                  plain_columns: int) -> tuple[str, str]:
    """Which master LP :func:`mcf_decomp` solves, and why: ``"priced"`` (arc pricing,
    :func:`~.pricing.priced_master_lp`), ``"quotient"`` (by the symmetry ``sym``) or ``"full"``.

    ``pricing="auto"`` (the default) prices when the symmetry search ran (``searched``: ``symmetry`` is not
    off and the plain master LP has more than :data:`~.symmetry.AUTO_MIN_COLUMNS` columns) and found no
    automorphism group, unless the solver cannot price or the full master LP (about 3 nonzeros per
    column) goes to cuPDLPx on a GPU, which needs no column generation (:func:`~.mcf.pick_solver`).
    Smaller LPs keep the full master LP: they take under a second, and pricing's seed is not bit-identical
    across SciPy releases (:mod:`.pricing`)."""
    if pricing == "on":
        return "priced", "--pricing on"
    if sym.order > 1:
        return "quotient", f"symmetry of order {sym.order}"
    if pricing == "off":
        return "full", "--pricing off"
    if not searched:
        return "full", ("--symmetry off" if symmetry in ("off", False) else
                        f"{plain_columns} columns, at most {AUTO_MIN_COLUMNS}: no symmetry search")
    if solver not in ("auto", *ROUND_SOLVERS):
        return "full", f"no symmetry found; --solver {solver} does not price"
    if pick_solver(solver, 3 * plain_columns) == "cupdlpx":
        return "full", "no symmetry found; the full master LP on the GPU"
    gpu = unavailable() if solver == "auto" and 3 * plain_columns > PDLP_ABOVE_NNZ else None
    return "priced", "no symmetry found: arc pricing" + (f" (not on a GPU: {gpu})" if gpu else "")
