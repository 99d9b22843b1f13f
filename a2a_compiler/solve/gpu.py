"""Flow LPs on a GPU by cuPDLPx (Lu & Peng 2025: restarted Halpern PDHG on cuSPARSE; PyPI ``cupdlpx``).

``solve_lp(..., solver="cupdlpx")`` hands the LP, still the sparse arrays every solver gets, to
cuPDLPx's ``Model`` in one call, in a child interpreter (:func:`~.lp.run_child`):

* cuPDLPx polls no interrupt and ends the whole process on any CUDA error (``CUDA_CHECK`` in its
  ``internal/utils.h``: ``fprintf(stderr, ...)``, then ``exit(EXIT_FAILURE)``), so Ctrl-C kills the child
  and a CUDA error becomes one line (the child's last ``stderr`` line);
* its iteration rows (``src/utils.cu``, ``display_iteration_stats``: iteration, seconds, primal and dual
  objectives, absolute then relative residuals and gap) become progress ticks with the relative gap.

Before the LP is sent, :func:`check_cupdlpx` says what is missing (the package, or a CUDA device, asked
through the CUDA driver API) and :func:`check_gpu_memory` refuses an LP whose estimated GPU memory
(:func:`gpu_bytes`) exceeds the device's.  The answer is a first-order point, certified by
:mod:`.first_order` like PDLP's.  Requirements and the offline build: docs/solver.md, "On a GPU".
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import pickle
import re
import sys

import numpy as np
import scipy.sparse as sp

from ..errors import A2AError

#: The CUDA driver library asked whether a device answers (no context is created).
CUDA_DRIVER = "libcuda.so.1"
#: How to install the package, named in the error line when it is missing.
INSTALL = ("pip install 'a2a-compiler[gpu]' (builds from source: nvcc >= 12.4 and CMake; docs/solver.md, "
           "\"On a GPU\")")
#: GPU bytes per nonzero, column and row of the LP, and for the CUDA context and cuSPARSE/cuBLAS handles:
#: counted from cuPDLPx 0.3.0's allocations (``src/solver.cu``, ``initialize_solver_state``: the matrix and
#: its transpose in CSR with row indices and the transpose map, 36 B a nonzero; 16 vectors of doubles per
#: column and per row), not measured.
GPU_BYTES_PER_NONZERO, GPU_BYTES_PER_COLUMN, GPU_BYTES_PER_ROW, GPU_BYTES_FIXED = 36, 128, 128, 2**30
#: cuPDLPx's default relative tolerance here, and whether its presolve (PSLP) runs: off, since warm starts
#: are ignored while it is on and the plain master LP is faster without it (jellyfish:2000,4,seed=1: 35 s
#: against 54 s on an H200; docs/solver.md).
TOLERANCE, PRESOLVE = 1e-6, False
#: A row of cuPDLPx's log: iteration, seconds | primal, dual objective | 3 absolute | relative primal and dual
#: residual, relative gap.
_ITERATION = re.compile(r"^\s*(\d+)\s+(\S+)\s+\|\s+(\S+)\s+(\S+)\s+\|\s+\S+\s+\S+\s+\S+\s+\|\s+(\S+)\s+(\S+)\s+(\S+)")
#: cuPDLPx's status names (``python_bindings/_core_bindings.cpp``, ``status_to_str``) that leave a usable point.
_USABLE = {"OPTIMAL": "Optimal", "FEAS_POLISH_SUCCESS": "Optimal", "TIME_LIMIT": "Unknown",
           "ITERATION_LIMIT": "Unknown"}


def cuda_device() -> tuple[str, int]:
    """``(name, total bytes)`` of CUDA device 0 (as ``CUDA_VISIBLE_DEVICES`` shows them), asked through the
    driver :data:`CUDA_DRIVER` (``cuInit``, ``cuDeviceGetCount``, ``cuDeviceGetName``, ``cuDeviceTotalMem_v2``:
    no context is created).  Raises :class:`A2AError` saying why no device answers."""
    return _probe(CUDA_DRIVER)


@functools.cache
def _probe(driver: str) -> tuple[str, int]:
    try:
        lib = ctypes.CDLL(driver)
    except OSError:
        raise A2AError(f"no CUDA device answers: the CUDA driver ({driver}) is not installed") from None
    rc = lib.cuInit(0)
    count = ctypes.c_int(0)
    if rc == 0:
        rc = lib.cuDeviceGetCount(ctypes.byref(count))
    if rc != 0 or count.value < 1:
        text = ctypes.c_char_p()
        lib.cuGetErrorName(rc, ctypes.byref(text))
        why = (text.value or b"?").decode() if rc else "no devices"
        raise A2AError(f"no CUDA device answers: the CUDA driver reports {why}")
    dev, name, total = ctypes.c_int(), ctypes.create_string_buffer(256), ctypes.c_size_t()
    lib.cuDeviceGet(ctypes.byref(dev), 0)
    lib.cuDeviceGetName(name, 256, dev)
    lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev)
    return name.value.decode(errors="replace"), int(total.value)


def unavailable() -> str | None:
    """Why cuPDLPx cannot run here (the package missing or not importing, or no CUDA device), or ``None``."""
    try:
        importlib.import_module("cupdlpx")
    except ModuleNotFoundError as exc:
        if exc.name == "cupdlpx":
            return "the cupdlpx package is not installed"
        return f"the cupdlpx package does not import ({exc})"
    except ImportError as exc:
        return f"the cupdlpx package does not import ({exc})"
    try:
        cuda_device()
    except A2AError as exc:
        return str(exc)
    return None


def check_cupdlpx() -> None:
    """Raise :class:`A2AError`, in one line naming what is missing, unless cuPDLPx can run here."""
    why = unavailable()
    if why is not None:
        fix = f": {INSTALL}" if why.startswith("the cupdlpx package") else ""
        raise A2AError(f"--solver cupdlpx needs the cupdlpx package and a CUDA device: {why}{fix}")


def gpu_bytes(rows: int, columns: int, nonzeros: int) -> int:
    """Estimated GPU memory of cuPDLPx on an LP of this size (:data:`GPU_BYTES_PER_NONZERO` and the rest)."""
    return (nonzeros * GPU_BYTES_PER_NONZERO + columns * GPU_BYTES_PER_COLUMN + rows * GPU_BYTES_PER_ROW
            + GPU_BYTES_FIXED)


def check_gpu_memory(rows: int, columns: int, nonzeros: int, label: str = "LP") -> None:
    """Refuse, before it is sent, an LP whose estimated GPU memory (:func:`gpu_bytes`) exceeds device 0's."""
    name, total = cuda_device()
    need = gpu_bytes(rows, columns, nonzeros)
    if need > total:
        raise A2AError(f"{label}: {rows} rows, {columns} columns, {nonzeros} nonzeros need about "
                       f"{need / 2**30:.1f} GiB of GPU memory, more than the {total / 2**30:.1f} GiB of {name} "
                       "(a2a_compiler.solve.gpu.gpu_bytes); use --solver pdlp or --pricing on")


def cupdlpx_tick(label: str, line: str) -> str | None:
    """A progress tick from a row of cuPDLPx's log: the iteration, primal objective and relative gap."""
    m = _ITERATION.match(line)
    if not m:
        return None
    try:
        objective, gap = float(m[3]), float(m[7])
    except ValueError:
        return None
    return f"{label}: iteration {int(m[1])}, objective {objective:.9g}, gap {gap:.1e} (GPU)"


def run_cupdlpx(settings: dict, model: tuple, start, label: str, progress):
    """Solve ``model`` (:func:`~.lp.solve_lp`'s tuple) by cuPDLPx in a child process; returns its ``_Outcome``.
    ``settings["tolerance"]`` (default :data:`TOLERANCE`) is cuPDLPx's relative optimality and feasibility
    tolerance; ``start`` (an ``LPResult`` of an LP with the same rows) its warm start."""
    from .lp import run_child

    check_cupdlpx()
    A = model[1]
    check_gpu_memory(A.shape[0], A.shape[1], A.nnz, label)
    warm = None if start is None else (np.asarray(start.x), np.asarray(start.row_dual))
    if warm is not None and (len(warm[0]), len(warm[1])) != (A.shape[1], A.shape[0]):
        warm = None
    return run_child(f"{__name__}:_cupdlpx_main", (settings, model, warm), label, progress, cupdlpx_tick, "cuPDLPx")


def _cupdlpx_main(result_fd: int, parent: int) -> None:
    """The cuPDLPx child of :func:`run_cupdlpx`: ``(settings, model, warm start)`` pickled on stdin, the
    ``_Outcome`` pickled on ``result_fd``.  Row activities are ``A x``; column duals the reduced costs
    ``c - Aᵀy``: cuPDLPx's duals have HiGHS's sign (its dual residual is ``c - Aᵀy - dual_slack``,
``src/utils.cu`` l. 660 of 0.3.0), which pricing's reduced costs rely on."""
    import os

    import highspy

    from .lp import _Outcome, child_prologue

    child_prologue(parent)
    settings, (c, A, row_lower, row_upper, col_lower, col_upper, maximize), warm = pickle.load(sys.stdin.buffer)
    import cupdlpx
    from cupdlpx import PDLP

    A = sp.csr_matrix(A)
    n_row, n_col = A.shape
    bounds = [np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy()
              for v, n in ((row_lower, n_row), (row_upper, n_row), (col_lower, n_col), (col_upper, n_col))]
    m = cupdlpx.Model(np.asarray(c, dtype=float), A, *bounds)
    m.ModelSense = PDLP.MAXIMIZE if maximize else PDLP.MINIMIZE
    tol = float(settings.get("tolerance", TOLERANCE))
    params = {"OptimalityTol": tol, "FeasibilityTol": tol, "Presolve": bool(settings.get("presolve", PRESOLVE)),
              "OutputFlag": True}
    if settings.get("time_limit") is not None:
        params["TimeLimit"] = float(settings["time_limit"])
    m.setParams(**params)
    if warm is not None:
        m.setWarmStart(primal=warm[0], dual=warm[1])
    m.optimize()
    name = str(m.StatusName)
    x = np.asarray(m.X, dtype=float) if m.X is not None else np.zeros(n_col)
    y = np.asarray(m.Pi, dtype=float) if m.Pi is not None else np.zeros(n_row)
    kind = _USABLE.get(name)
    status = {"Optimal": highspy.HighsModelStatus.kOptimal, "Unknown": highspy.HighsModelStatus.kUnknown,
              None: highspy.HighsModelStatus.kSolveError}[kind]
    outcome = _Outcome(int(status), kind or f"cuPDLPx {name}",
                       float(m.ObjVal if m.ObjVal is not None else np.nan), int(m.IterCount or 0),
                       kind is not None, kind is not None, x, A @ x, y, np.asarray(c, dtype=float) - A.T @ y,
                       float(m.Runtime) if m.Runtime is not None else None)
    with os.fdopen(result_fd, "wb") as out:
        pickle.dump(outcome, out, protocol=pickle.HIGHEST_PROTOCOL)
