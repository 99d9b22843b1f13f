"""One call into HiGHS for an LP or MIP given as sparse arrays.

Every LP in the package (MCF, decomposed MCF, pMCF, tsMCF) and the routing
ILPs are assembled as a ``scipy.sparse`` matrix and handed to HiGHS in a single
``passModel`` call; the solution comes back once, as numpy arrays.

HiGHS runs in a worker thread while the calling thread waits in short slices,
so Ctrl-C is seen at once: it sets a flag that HiGHS's simplex, interior-point
and MIP interrupt callbacks turn into a clean stop (IPX calls its callback from
inside its linear-algebra loops, several times per second even on the N=1000
master LP), and :class:`KeyboardInterrupt` propagates.  With a progress
reporter, HiGHS's log lines arrive through its logging callback (never on the
console) and become iteration/objective ticks.

PDLP (cuPDLP-C) polls no interrupt callback and prints its log on the C
``stdout``, so it runs in a child interpreter instead (:func:`run_child`):
Ctrl-C kills the child, and the child's ``stdout`` — a pipe, never the
command's own — is read for restart and iteration lines, which become ticks.
cuPDLPx on a GPU (``solver="cupdlpx"``, :mod:`.gpu`) runs the same way: it also
ends the whole process on a CUDA error (``exit(EXIT_FAILURE)``), which in a child
becomes one error line.
"""

from __future__ import annotations

import ctypes
import functools
import os
import pickle
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path

import highspy
import numpy as np
import scipy.sparse as sp
from highspy import _core

from ..errors import A2AError
from ..numeric import generic_costs
from ..progress import tick_of

INF = highspy.kHighsInf
#: Seconds to wait, after Ctrl-C, for HiGHS to stop at its next interrupt callback (then the
#: command exits anyway, :func:`solver_running`): every solver stops within 2 s.
INTERRUPT_GRACE = 1.5
#: A waiting main thread wakes this often (seconds) so that Ctrl-C reaches it whichever thread took it.
WAKE_INTERVAL = 0.1
#: An iteration line of the IPX or simplex log: iteration count, then the (primal) objective.
_ITERATION_LINE = re.compile(r"^\s*\w*\s+(\d+)\*?\s+([-+]?\d\.\d+e[-+]\d+)")
#: cuPDLP-C's log lines: an iteration row (iteration, primal objective) or a restart note.
_PDLP_ITERATION = re.compile(r"^\s*(\d+)\s+([-+]?\d\.\d+e[-+]\d+)\s+([-+]?\d\.\d+e[-+]\d+)")
_PDLP_RESTART = re.compile(r"^Last restart was iter (\d+)")
_threads: set[threading.Thread] = set()  # HiGHS runs not yet finished
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>: the signal a process gets when its parent ends

#: HiGHS option sets behind each ``--solver`` name.
SOLVERS = {
    "auto": {"solver": "choose"},
    "simplex": {"solver": "simplex"},
    "ipm": {"solver": "ipm", "run_crossover": "off", "presolve": "off", "ipm_optimality_tolerance": 1e-7},
    "ipm-crossover": {"solver": "ipm", "run_crossover": "on"},
    "hipo": {"solver": "hipo", "run_crossover": "off", "presolve": "off", "ipm_optimality_tolerance": 1e-7},
    "pdlp": {"solver": "pdlp", "pdlp_optimality_tolerance": 1e-5, "primal_feasibility_tolerance": 1e-5,
             "dual_feasibility_tolerance": 1e-5},
    "cupdlpx": {"solver": "cupdlpx"},
}
#: First-order solvers: they stop at a relative ``tolerance`` (:func:`solve_lp`) and their answers are certified
#: by :mod:`.first_order`'s tolerance schedule.
FIRST_ORDER = ("pdlp", "cupdlpx")
#: Solvers whose answer is a vertex: :func:`solve_lp` replaces it by the canonical optimal vertex
#: (:func:`_canonical_vertex`), so that it does not depend on the HiGHS release.  Interior points
#: (``ipm``, ``pdlp``) are kept: IPX returned bit-identical points from highspy 1.8 to 1.16.
VERTEX_SOLVERS = ("simplex", "ipm-crossover", "auto")


def quiet_highs() -> highspy.Highs:
    """A :class:`highspy.Highs` that prints nothing, not even its banner.

    highspy 1.16 logs "Running HiGHS ..." to stdout when its constructor installs
    the callback bridge, before any option can be set, which would corrupt
    ``--json`` output.  Build the core object, silence it, then install the bridge.
    """
    from highspy.highs import HighsCallback

    h = highspy.Highs.__new__(highspy.Highs)
    _core._Highs.__init__(h)
    h.setOptionValue("output_flag", False)
    kinds = range(int(_core.cb.HighsCallbackType.kCallbackMax) + 1)
    h.callbacks = [HighsCallback(_core.cb.HighsCallbackType(k), h) for k in kinds]
    h.enableCallbacks()
    return h


#: What highspy calls after a solve in a thread (it avoids a deadlock of HiGHS's task scheduler):
#: ``resetThreadScheduler`` since highspy 1.16, ``resetGlobalScheduler`` before.
_reset_scheduler = getattr(_core._Highs, "resetThreadScheduler", None) or _core._Highs.resetGlobalScheduler


def solver_running() -> bool:
    """Is a HiGHS run still going (one that ignored its interrupt callback past :data:`INTERRUPT_GRACE`)?"""
    return any(t.is_alive() for t in _threads)


@functools.cache
def hipo_available() -> bool:
    """Whether this highspy runs HiPO, HiGHS's interior point with a direct (supernodal Cholesky)
    factorisation of the normal equations: it needs the ``highspy-extras`` package of highspy's own release."""
    return quiet_highs().setOptionValue("solver", "hipo") == highspy.HighsStatus.kOk


def check_solver(solver: str) -> None:
    """Raise :class:`A2AError` unless ``solver`` is one of :data:`SOLVERS` that this install runs."""
    if solver not in SOLVERS:
        raise A2AError(f"unknown LP solver {solver!r}; choose one of {', '.join(SOLVERS)}")
    if solver == "cupdlpx":
        from .gpu import check_cupdlpx

        check_cupdlpx()
    if solver == "hipo" and not hipo_available():
        raise A2AError(f"the hipo solver needs highspy-extras of highspy's own release (highspy "
                       f"{metadata.version('highspy')} is installed): install the hipo extra, "
                       "pip install '.[hipo]' in the a2a-compiler checkout")


def run_highs(h: highspy.Highs, *, label: str = "LP", progress=None, hipo: bool = False) -> None:
    """``h.run()``, interruptible by Ctrl-C, with iteration ticks sent to ``progress``.

    Ticks come from the log HiGHS hands to its logging callback (console
    logging stays off); HiPO (``hipo``) logs its iterations on the console only, so its ticks come
    from the interior-point callback, which it calls with the iteration count.  Not for PDLP, which
    polls no interrupt callback and logs on stdout: :func:`solve_lp` runs it in a child process.

    Raises :class:`KeyboardInterrupt` once HiGHS has stopped (or after
    :data:`INTERRUPT_GRACE` seconds if it does not poll its callbacks).
    """
    stop = threading.Event()
    done = threading.Event()

    tick = tick_of(progress)
    ticked = [0]

    def interrupt(event):
        if stop.is_set():
            event.interrupt()
        elif hipo and tick is not None and event.data_out.ipm_iteration_count > ticked[0]:
            ticked[0] = event.data_out.ipm_iteration_count
            tick(f"{label}: iteration {ticked[0]}")

    h.cbSimplexInterrupt.subscribe(interrupt)
    h.cbIpmInterrupt.subscribe(interrupt)
    h.cbMipInterrupt.subscribe(interrupt)
    if tick is not None:
        def log(event):
            m = _ITERATION_LINE.match(event.message)
            if m:
                tick(f"{label}: iteration {int(m[1])}, objective {float(m[2]):.9g}")

        h.setOptionValue("output_flag", True)
        h.setOptionValue("log_to_console", False)
        h.cbLogging.subscribe(log)

    def target():
        try:
            h.run()
            _reset_scheduler(False)
        finally:
            done.set()   # whatever happened, the waiting thread must wake

    thread = threading.Thread(target=target, name="highs", daemon=True)
    _threads.add(thread)
    thread.start()
    try:
        while not done.wait(WAKE_INTERVAL):
            pass
    except KeyboardInterrupt:
        stop.set()
        done.wait(INTERRUPT_GRACE)
        raise
    finally:
        if done.is_set():
            thread.join()
            _threads.discard(thread)


@dataclass(frozen=True, eq=False)
class LPResult:
    """Primal ``x``, row activities, duals, objective, HiGHS status, wall time and solver name."""

    x: np.ndarray
    row_value: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray
    objective: float
    status: str
    seconds: float
    iterations: int
    solver: str = ""
    device_seconds: float | None = None   # cuPDLPx: the solver's own time on the GPU


def _pass_model(h, c, A, row_lower, row_upper, col_lower, col_upper, maximize: bool,
                integrality: np.ndarray | None = None, what: str = "LP") -> tuple[int, int]:
    """Hand the model to HiGHS in one ``passModel`` call; returns ``(rows, columns)``."""
    A = sp.csc_array(A)
    A.sort_indices()
    n_row, n_col = A.shape
    c = np.ascontiguousarray(c, dtype=np.float64)
    col_lower = np.ascontiguousarray(np.broadcast_to(col_lower, (n_col,)), dtype=np.float64)
    col_upper = np.ascontiguousarray(np.broadcast_to(col_upper, (n_col,)), dtype=np.float64)
    row_lower = np.ascontiguousarray(np.broadcast_to(row_lower, (n_row,)), dtype=np.float64)
    row_upper = np.ascontiguousarray(np.broadcast_to(row_upper, (n_row,)), dtype=np.float64)
    # all continuous unless told otherwise (an empty integrality array is misread)
    kinds = np.zeros(n_col, dtype=np.int32) if integrality is None else np.asarray(integrality, dtype=np.int32)
    sense = highspy.ObjSense.kMaximize if maximize else highspy.ObjSense.kMinimize
    passed = h.passModel(
        n_col, n_row, A.nnz, int(highspy.MatrixFormat.kColwise), int(sense), 0.0,
        c, col_lower, col_upper, row_lower, row_upper,
        A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data.astype(np.float64), kinds,
    )
    if passed == highspy.HighsStatus.kError:
        raise A2AError(f"HiGHS rejected the {what} ({n_row} rows, {n_col} columns)")
    return n_row, n_col


def solve_lp(
    c: np.ndarray,
    A: sp.sparray | sp.spmatrix,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    col_lower: np.ndarray | float = 0.0,
    col_upper: np.ndarray | float = INF,
    *,
    maximize: bool = False,
    solver: str = "auto",
    options: dict | None = None,
    time_limit: float | None = None,
    inexact_ok: bool = False,
    tolerance: float | None = None,
    start: LPResult | None = None,
    label: str = "LP",
    progress=None,
) -> LPResult:
    """Solve ``min/max c·x  s.t.  row_lower <= A x <= row_upper, col_lower <= x <= col_upper``.

    ``solver`` is one of :data:`SOLVERS`: ``"simplex"`` (dual simplex, a vertex),
    ``"ipm"`` (interior point *without* crossover or presolve, whose postsolve spoils
    interior duals; optimality tolerance 1e-7: fast, callers certify and
    repair), ``"hipo"`` (the same by HiPO, HiGHS's interior point with a direct factorisation, where
    :func:`hipo_available`), ``"ipm-crossover"``, ``"pdlp"``
    (first-order, low memory; with ``options={"presolve": "on"}`` on the LP as HiGHS presolves it for
    its other solvers, then postsolved), ``"cupdlpx"`` (first-order on a GPU, :mod:`.gpu`) or ``"auto"``
    (HiGHS chooses).  Extra HiGHS options go in ``options`` (cuPDLPx: ``{"presolve": True}``).  A first-order
    solver (:data:`FIRST_ORDER`) stops at the relative ``tolerance`` when given, and cuPDLPx warm-starts from
    ``start``'s primal and duals (the same LP, or one with the same rows).  Raises :class:`A2AError` unless
    HiGHS reports an optimal model
    — or, with ``inexact_ok``, an "Unknown" status (IPM/PDLP stopped outside HiGHS's
    own tolerances) that still carries a primal and dual point, for callers that
    repair the primal and certify the bound themselves.  ``progress`` receives
    ``"{label}: iteration k, objective z"`` ticks; Ctrl-C stops HiGHS and raises
    :class:`KeyboardInterrupt` (:func:`run_highs`).
    """
    check_solver(solver)
    settings = {**SOLVERS[solver], **({"time_limit": float(time_limit)} if time_limit is not None else {}),
                **(_tolerance_options(solver, tolerance) if tolerance is not None else {}), **(options or {})}
    A = sp.csc_array(A)
    model = (c, A, row_lower, row_upper, col_lower, col_upper, maximize)
    n_row, n_col = A.shape
    t0 = time.perf_counter()
    if solver == "cupdlpx":
        from .gpu import run_cupdlpx

        out = run_cupdlpx(settings, model, start, label, progress)
    elif settings.get("solver") == "pdlp":
        out = run_child(f"{__name__}:_pdlp_main", (settings, model), label, progress, _pdlp_tick, "PDLP")
    else:
        h = quiet_highs()
        for key, value in settings.items():
            h.setOptionValue(key, value)
        _pass_model(h, *model)
        run_highs(h, label=label, progress=progress, hipo=settings.get("solver") == "hipo")
        out = _Outcome.of(h)
    seconds = time.perf_counter() - t0
    optimal = out.model_status == int(highspy.HighsModelStatus.kOptimal)
    inexact = (inexact_ok and out.model_status == int(highspy.HighsModelStatus.kUnknown)
               and out.primal_valid and out.dual_valid)
    if not optimal and not inexact:
        raise A2AError(f"LP solver finished with status {out.status!r} ({n_row} rows, {n_col} columns)")
    x, row_value, iterations = out.x, out.row_value, out.iterations
    if solver in VERTEX_SOLVERS and not inexact:
        x, row_value, more = _canonical_vertex(c, A, row_lower, row_upper, col_lower, col_upper, maximize,
                                               out.objective, label, progress)
        iterations += more
        seconds = time.perf_counter() - t0
    return LPResult(x=x, row_value=row_value, row_dual=out.row_dual, col_dual=out.col_dual,
                    objective=out.objective, status=out.status, seconds=seconds, iterations=iterations,
                    solver=solver, device_seconds=out.device_seconds)


def _tolerance_options(solver: str, tolerance: float) -> dict:
    """The settings that make first-order ``solver`` stop at relative ``tolerance``."""
    if solver == "pdlp":
        return {"pdlp_optimality_tolerance": tolerance, "primal_feasibility_tolerance": tolerance,
                "dual_feasibility_tolerance": tolerance}
    if solver == "cupdlpx":
        return {"tolerance": tolerance}
    raise ValueError(f"{solver} is not a first-order solver")


@dataclass(frozen=True, eq=False)
class _Outcome:
    """What a HiGHS run left: model status (as an int, so it pickles), its name, objective, iterations,
    whether the primal / dual points are valid, and the points."""

    model_status: int
    status: str
    objective: float
    iterations: int
    primal_valid: bool
    dual_valid: bool
    x: np.ndarray
    row_value: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray
    device_seconds: float | None = None

    @classmethod
    def of(cls, h: highspy.Highs) -> "_Outcome":
        info, sol, model = h.getInfo(), h.getSolution(), h.getModelStatus()
        return cls(int(model), h.modelStatusToString(model), float(info.objective_function_value),
                   int(info.simplex_iteration_count + info.ipm_iteration_count + info.pdlp_iteration_count),
                   info.primal_solution_status > 0, info.dual_solution_status > 0,
                   *(np.asarray(v, dtype=float) for v in (sol.col_value, sol.row_value, sol.row_dual,
                                                          sol.col_dual)))


def child_prologue(parent: int):
    """The start of a solver child of :func:`run_child` (``parent``: its PID): Ctrl-C is left to the parent,
    which terminates the child; the child ends with its parent however that ends (on Linux:
    ``PR_SET_PDEATHSIG``; SIGKILL leaves the parent no ``finally`` to stop it in); the C ``stdout`` is
    line-buffered, so every log line reaches the parent as it is printed.  Returns the C library."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    libc = ctypes.CDLL(None)
    if sys.platform == "linux":
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        if os.getppid() != parent:                      # it died before the line above
            os._exit(1)
    libc.setvbuf(ctypes.c_void_p.in_dll(libc, "stdout"), None, 1, 0)   # _IOLBF
    return libc


def _pdlp_main(result_fd: int, parent: int) -> None:
    """The PDLP child process of :func:`run_child`: settings and model (pickled) on stdin; cuPDLP-C's log
    on stdout, line by line; the :class:`_Outcome` (pickled) on ``result_fd``."""
    child_prologue(parent)
    settings, model = pickle.load(sys.stdin.buffer)

    def highs(options):
        h = quiet_highs()
        for key, value in options.items():
            h.setOptionValue(key, value)
        for key, value in (("output_flag", True), ("log_to_console", False), ("log_dev_level", 1)):
            h.setOptionValue(key, value)               # log_dev_level 1: cuPDLP-C reports its restarts
        return h

    presolve = settings.get("presolve") == "on"
    # HiGHS presolves less for PDLP than for its other solvers (the first restricted master of
    # jellyfish:256,4,seed=1 keeps 7 617 rows against 1 827, and PDLP takes 8.0 s against 1.1 s):
    # with presolve on, presolve as for "choose", solve the presolved LP by PDLP, then postsolve.
    h = highs({**settings, "solver": "choose"} if presolve else settings)
    _pass_model(h, *model)
    if presolve and h.presolve() != highspy.HighsStatus.kError \
            and h.getModelPresolveStatus() == highspy.HighsPresolveStatus.kReduced:
        inner = highs({**settings, "presolve": "off"})
        inner.passModel(h.getPresolvedLp())
        inner.run()
        h.postsolve(inner.getSolution())
        outcome = replace(_Outcome.of(h), iterations=int(inner.getInfo().pdlp_iteration_count))
    else:
        h.setOptionValue("solver", settings["solver"])
        h.run()
        outcome = _Outcome.of(h)
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(outcome, out, protocol=pickle.HIGHEST_PROTOCOL)


def _pdlp_tick(label: str, line: str) -> str | None:
    """A progress tick from a line of cuPDLP-C's log: an iteration row or a restart note."""
    m, r = _PDLP_ITERATION.match(line), _PDLP_RESTART.match(line)
    if m:
        return f"{label}: iteration {int(m[1])}, objective {float(m[2]):.9g}"
    if r:
        return f"{label}: iteration {int(r[1])} (restart)"
    return None


def run_child(entry: str, payload, label: str, progress, tick_line, name: str) -> _Outcome:
    """Run solver ``name`` in a child interpreter, ``entry`` (``"module:function"``, called with the result
    pipe and this PID; it begins with :func:`child_prologue`), sending it ``payload`` (pickled, on stdin).
    Ctrl-C terminates it at once (cuPDLP-C and cuPDLPx poll no interrupt callback); its log on the C
    ``stdout`` (the child's, a pipe) becomes ``progress`` ticks through ``tick_line(label, line)``; its
    answer, an :class:`_Outcome`, comes back pickled.  Without one, :class:`A2AError` names the exit status
    and the child's last ``stderr`` line (cuPDLPx prints its CUDA error there, then exits).  The child
    is a fresh interpreter (not a fork of this process, whose HiGHS threads may hold locks), importing
    this package from where it is."""
    module, func = entry.split(":")
    read_fd, write_fd = os.pipe()
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-c", f"from {module} import {func}; {func}({write_fd}, {os.getpid()})"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            pass_fds=(write_fd,), env=env)
    os.close(write_fd)
    lines: queue.SimpleQueue = queue.SimpleQueue()
    answer: list[bytes] = []
    errors: list[str] = []

    def read_result():
        with os.fdopen(read_fd, "rb") as f:
            answer.append(f.read())

    def read_log():
        for line in proc.stdout:
            lines.put(line.decode(errors="replace"))

    def read_errors():
        for line in proc.stderr:
            if line.strip():
                errors[:] = [line.decode(errors="replace").strip()]

    readers = [threading.Thread(target=t, daemon=True) for t in (read_result, read_log, read_errors)]
    for t in readers:
        t.start()
    tick = tick_of(progress)
    try:
        try:
            with proc.stdin:
                pickle.dump(payload, proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
        except BrokenPipeError:
            pass                       # the child ended early: its exit status and stderr say why
        while proc.poll() is None or not lines.empty():
            try:
                line = lines.get(timeout=WAKE_INTERVAL)
            except queue.Empty:
                continue
            message = tick_line(label, line) if tick is not None else None
            if message:
                tick(message)
        for t in readers:
            t.join()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if proc.returncode != 0 or not answer or not answer[0]:
        why = f": {errors[-1]}" if errors else ""
        raise A2AError(f"{label}: the {name} process ended without an answer (exit status {proc.returncode}){why}")
    return pickle.loads(answer[0])


def _canonical_vertex(c, A, row_lower, row_upper, col_lower, col_upper, maximize: bool, objective: float,
                      label: str, progress) -> tuple[np.ndarray, np.ndarray, int]:
    """The optimal vertex that minimises :func:`~a2a_compiler.numeric.generic_costs`: ``(x, A x, iterations)``.

    An LP's optimal face often has many vertices, and which one a simplex run
    returns depends on its pivoting rules, which change between HiGHS releases.
    Fixing ``c·x`` at the optimum and minimising costs with no exact ties among
    vertices selects one vertex of that face: the same whatever solver, release
    or starting point (checked: dual simplex and interior point with crossover
    reach the same vertex).
    """
    A = sp.csc_array(A)
    idx = np.flatnonzero(c)
    row = sp.csc_array((np.asarray(c, dtype=float)[idx], (np.zeros(len(idx), dtype=np.int64), idx)),
                       shape=(1, A.shape[1]))
    h = quiet_highs()
    h.setOptionValue("solver", "simplex")
    lo, hi = (objective, INF) if maximize else (-INF, objective)
    _pass_model(h, generic_costs(A.shape[1]), sp.vstack([A, row], format="csc"),
                np.append(np.broadcast_to(row_lower, A.shape[0]), lo),
                np.append(np.broadcast_to(row_upper, A.shape[0]), hi), col_lower, col_upper, False)
    run_highs(h, label=f"{label}, canonical vertex", progress=progress)
    if h.getModelStatus() == highspy.HighsModelStatus.kInfeasible:
        # Feasible by construction (the optimum just found lies in it): HiGHS's presolve misjudged a
        # barely feasible LP (jellyfish:64's child LPs of eqs. 10-14, under --solver simplex or ipm-crossover).
        h.clearSolver()
        h.setOptionValue("presolve", "off")
        run_highs(h, label=f"{label}, canonical vertex", progress=progress)
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise A2AError(f"{label}: the canonical-vertex LP finished with status "
                       f"{h.modelStatusToString(h.getModelStatus())!r}")
    sol = h.getSolution()
    return (np.asarray(sol.col_value, dtype=float), np.asarray(sol.row_value, dtype=float)[:A.shape[0]],
            int(h.getInfo().simplex_iteration_count))


@dataclass(frozen=True, eq=False)
class MIPResult:
    """Best integer point ``x`` found, its objective, HiGHS's dual bound and relative gap.

    ``optimal`` means HiGHS proved the point optimal within its relative gap
    tolerance; otherwise (time limit) ``x`` is the incumbent and ``bound`` still
    bounds every integer solution.
    """

    x: np.ndarray
    objective: float
    bound: float
    gap: float
    status: str
    optimal: bool
    seconds: float
    nodes: int


def solve_mip(
    c: np.ndarray,
    A: sp.sparray | sp.spmatrix,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    integrality: np.ndarray,
    col_lower: np.ndarray | float = 0.0,
    col_upper: np.ndarray | float = INF,
    *,
    time_limit: float | None = None,
    rel_gap: float | None = None,
    start: np.ndarray | None = None,
    options: dict | None = None,
    progress=None,
) -> MIPResult:
    """Minimise ``c·x`` over the rows and bounds with ``x_j`` integer where ``integrality[j] == 1``.

    One ``passModel`` call, like :func:`solve_lp`.  ``rel_gap`` is HiGHS's
    ``mip_rel_gap`` (stop once the incumbent is within it of the bound),
    ``start`` a feasible point to begin from; extra HiGHS options go in
    ``options``.  Returns the incumbent at a time
    limit; raises :class:`A2AError` if there is none or the model is infeasible.
    Ctrl-C and ``progress`` as in :func:`solve_lp`.
    """
    h = quiet_highs()
    if time_limit is not None:
        h.setOptionValue("time_limit", float(time_limit))
    if rel_gap is not None:
        h.setOptionValue("mip_rel_gap", float(rel_gap))
    for key, value in (options or {}).items():
        h.setOptionValue(key, value)
    n_row, n_col = _pass_model(h, c, A, row_lower, row_upper, col_lower, col_upper, False, integrality, "MIP")
    if start is not None:
        sol = highspy.HighsSolution()
        sol.col_value = np.asarray(start, dtype=np.float64).tolist()
        sol.value_valid = True
        h.setSolution(sol)
    t0 = time.perf_counter()
    run_highs(h, label="MIP", progress=progress)
    seconds = time.perf_counter() - t0
    model = h.getModelStatus()
    status = h.modelStatusToString(model)
    info = h.getInfo()
    if info.primal_solution_status != 2:   # 2 = feasible
        raise A2AError(f"MIP solver finished with status {status!r} and no integer solution "
                       f"({n_row} rows, {n_col} columns)")
    return MIPResult(
        x=np.asarray(h.getSolution().col_value, dtype=float),
        objective=float(info.objective_function_value),
        bound=float(info.mip_dual_bound),
        gap=float(info.mip_gap),
        status=status,
        optimal=model == highspy.HighsModelStatus.kOptimal,
        seconds=seconds,
        nodes=int(info.mip_node_count),
    )
