"""A stand-in for the ``cupdlpx`` package on machines without a GPU (tests/test_solve_gpu.py).

It has cuPDLPx 0.3.0's Python API as a2a_compiler.solve.gpu uses it (python/cupdlpx/model.py: ``Model``,
``setParams``, ``setWarmStart``, ``optimize``, ``X``, ``Pi``, ``ObjVal``, ``IterCount``, ``StatusName``,
``Runtime``) and prints iteration rows in its log format (src/utils.cu, ``display_iteration_stats``),
but solves by HiGHS's PDLP on the CPU at the tolerance asked for.  With ``FAKE_CUPDLPX_LOG`` set, it
appends the parameters and the warm start's sizes to that file; with ``FAKE_CUPDLPX_EXIT`` it ends as
cuPDLPx does on a CUDA error; with ``FAKE_CUPDLPX_SLEEP`` it prints a row, then sleeps that many seconds
(a long solve that polls no interrupt).
"""

import json
import os
import sys

import numpy as np
import scipy.sparse as sp

from . import PDLP

__version__ = "0.3.0"


class Model:
    def __init__(self, c, A, row_lower, row_upper, col_lower, col_upper):
        self.c, self.A = np.asarray(c, dtype=float), sp.csr_matrix(A)
        self.bounds = (row_lower, row_upper, col_lower, col_upper)
        self.ModelSense = PDLP.MINIMIZE
        self.params, self.warm = {}, None

    def setParams(self, **params):
        self.params.update(params)

    def setWarmStart(self, primal=None, dual=None):
        self.warm = (len(primal), len(dual))

    def optimize(self):
        from a2a_compiler.solve.lp import solve_lp

        if os.environ.get("FAKE_CUPDLPX_EXIT"):
            print("CUDA Error at src/solver.cu:366: cudaErrorNoDevice", file=sys.stderr, flush=True)
            os._exit(1)
        if os.environ.get("FAKE_CUPDLPX_SLEEP"):
            import time

            for k in range(int(float(os.environ["FAKE_CUPDLPX_SLEEP"]) * 10)):
                print(f"{k:6d} 1.0e-01 | 1.0e+00  1.0e+00 | 1.0e-03 1.0e-03 1.0e-03 | 1.0e-03 1.0e-03 1.0e-03 ",
                      flush=True)
                time.sleep(0.1)
        if os.environ.get("FAKE_CUPDLPX_LOG"):
            with open(os.environ["FAKE_CUPDLPX_LOG"], "a") as log:
                log.write(json.dumps({"params": self.params, "warm": self.warm}) + "\n")
        tol = self.params["OptimalityTol"]
        res = solve_lp(self.c, self.A, *self.bounds, maximize=self.ModelSense == PDLP.MAXIMIZE, solver="pdlp",
                       tolerance=tol, inexact_ok=True)
        print(f"{res.iterations:6d} 1.0e-01 | {res.objective:8.1e}  {res.objective:8.1e} | 1.0e-09 1.0e-09 1.0e-09 "
              f"| 1.0e-09 1.0e-09 {tol:.1e} ", flush=True)
        self.X, self.Pi, self.ObjVal = res.x, res.row_dual, res.objective
        self.IterCount, self.StatusName, self.Runtime = res.iterations, "OPTIMAL", 0.25
