"""Certified optima from first-order LP solvers: a tolerance schedule around the solver-independent certificate.

PDLP (HiGHS's, on the CPU) and cuPDLPx (:mod:`.gpu`, on a GPU) stop at a relative tolerance, with a
primal that overloads links and breaks conservation by about that much, and duals that are near-optimal
link lengths.  Neither is trusted; the certificate of every flow method (:mod:`.certificate`) is applied:

* **bound**: weak duality on the capacity duals, ``F <= Σ_e c_e w_e / Σ_{s≠d} dist_w(s, d)`` for any
  ``w >= 0``, in float64 by one vectorised Dijkstra over the hosts
  (:func:`~.certificate.dual_upper_bound`);
* **primal**: the exact path split of each source's flow (:func:`~.certificate.decompose_flow` drops
  surplus and solver noise), normalised so that each pair ships its demand, and ``F = 1 / max load``
  recomputed from the paths (:func:`~.certificate.certified_flow`).

:func:`solve_certified` solves at the first of :data:`TOLERANCES` and tightens only while the certified
gap is above :data:`GAP`, warm-starting each solve from the last where the solver can (cuPDLPx; HiGHS's
PDLP gained nothing from a start, docs/solver.md).  The same code runs for both solvers, so the CPU's
PDLP tests it in CI (tests/test_solve_gpu.py).
"""

from __future__ import annotations

import time
from dataclasses import replace

#: Relative tolerances tried in turn.  On an H200, cuPDLPx took 9.5 s at 1e-6 and 19.5 s at 1e-7 on the
#: punctured GenKautz(1000,4) master LP; at 1e-6 its bound was 4e-6 above its primal (docs/solver.md).
TOLERANCES = (1e-6, 1e-7, 1e-8)
#: The certified gap ``(bound - F) / bound`` every solver meets (issue #22).
GAP = 1e-6


def solve_certified(solve_at, certify, *, progress=None, label: str = "LP"):
    """Solve by a first-order solver at :data:`TOLERANCES` in turn until the certified gap is at most :data:`GAP`.

    ``solve_at(tolerance, start)`` solves the LP (``start``: the previous ``LPResult``, ``None`` first) and
    returns ``(U, flows, lengths, LPResult, build seconds)``; ``certify(flows, lengths)`` returns
    ``(F, bound, routing)``.  Returns ``(U, flows, lengths, LPResult, build, (routing, bound, info))`` of the
    last solve, with the LP seconds and iterations of every solve summed; ``info`` holds the tolerance
    reached, the number of solves and the certification seconds.  The last tolerance's answer is returned
    whatever its gap (the caller reports the gap).
    """
    seconds = iterations = device = certifying = 0.0
    res = None
    for attempt, tolerance in enumerate(TOLERANCES, 1):
        U, flows, lengths, res, build = solve_at(tolerance, res)
        seconds += res.seconds
        iterations += res.iterations
        device += res.device_seconds or 0.0
        t0 = time.perf_counter()
        F, bound, routing = certify(flows, lengths)
        certifying += time.perf_counter() - t0
        gap = max(0.0, (bound - F) / bound)
        last = gap <= GAP or attempt == len(TOLERANCES)
        if progress:
            more = "" if last else f"; tightening to {TOLERANCES[attempt]:g}"
            progress(f"{label}: tolerance {tolerance:g}: certified F = {F:.9g}, bound {bound:.9g}, "
                     f"gap {gap:.1e}{more}")
        if last:
            break
    res = replace(res, seconds=seconds, iterations=int(iterations),
                  device_seconds=device if res.device_seconds is not None else None)
    info = {"lp_tolerance": tolerance, "lp_solves": attempt, "certify_seconds": certifying}
    return U, flows, lengths, res, build, (routing, bound, info)
