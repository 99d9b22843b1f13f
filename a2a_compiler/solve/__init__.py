"""Stage 3: flow solvers (Basu et al. §3) behind one entry point, :func:`solve`.

========== ==============================================================
method     what it computes
========== ==============================================================
mcf        per-commodity link LP, eqs. 1–5 (exact reference)
mcf-decomp master LP over source-grouped flows, eqs. 6–9, + exact per-source
           decomposition (or child LPs, eqs. 10–14); parallel per source
pmcf       path LP, eqs. 21–24, over candidate path sets (disjoint/shortest/ksp)
mcf-extp   link MCF then widest-path extraction, §3.2.1
tsmcf      time-stepped MCF, eqs. 15–20 (:mod:`a2a_compiler.solve.tsmcf`)
========== ==============================================================

Every method returns a :class:`FlowSolution` with per-unit-demand flows on the
base topology, a certified ``F`` and a dual upper bound.
"""

from __future__ import annotations

import importlib
import inspect
import os

from ..errors import A2AError
from ..fabric import Fabric, apply_link_classes
from ..topology.model import Topology
from .result import FlowSolution, WeightedPath

#: Memory of a flow LP per nonzero, solver included: measured peak RSS above the imported package of
#: ``a2a solve jellyfish:N,4,seed=1`` (plain master LP, IPX): N=128 310 B, N=256 280 B; PDLP at
#: N=1000 (12·10⁶ nonzeros) 3.0 GB, 250 B.
LP_BYTES_PER_NONZERO = 300
#: The same on this machine when the LP goes to cuPDLPx on a GPU (no HiGHS model): the build's peak, 87 B per
#: nonzero measured on jellyfish:500,4,seed=1's master LP (3.0 million nonzeros, ``ru_maxrss``), rounded up;
#: the child's copies (the LP unpickled, in CSR with 32-bit indices) come after the build's temporaries are gone.
GPU_LP_BYTES_PER_NONZERO = 90
#: Largest flow LP :func:`solve` builds, in estimated bytes (:data:`LP_BYTES_PER_NONZERO`); refused up front above.
#: 16 GiB, or ``A2A_MAX_LP_GIB`` GiB from the environment on a machine with more memory (a GPU machine of 128 GB:
#: jellyfish:4000,4 on the GPU needs about 16.1 GiB by this estimate).
MAX_LP_BYTES = int(float(os.environ.get("A2A_MAX_LP_GIB", 16)) * 2**30)
#: method name -> (module, function); modules are imported on first use.
METHODS = {
    "mcf": ("mcf", "mcf"),
    "mcf-decomp": ("decomp", "mcf_decomp"),
    "pmcf": ("pmcf", "pmcf"),
    "mcf-extp": ("widest_paths", "mcf_extp"),
    "tsmcf": ("tsmcf", "tsmcf"),
}


def method_function(method: str):
    """The solver function of ``method`` (imported on first use)."""
    if method not in METHODS:
        raise A2AError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    module, name = METHODS[method]
    return getattr(importlib.import_module(f".{module}", __package__), name)


def method_options(method: str) -> list[str]:
    """The keyword options ``method`` accepts (mcf-extp: also those of its ``base`` solvers)."""
    params = inspect.signature(method_function(method)).parameters.values()
    names = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name != "demand"]
    if any(p.kind is p.VAR_KEYWORD for p in params):  # mcf-extp passes the rest to its base solver
        names += [o for base in ("mcf", "mcf-decomp") for o in method_options(base)]
    return list(dict.fromkeys(names))


#: Why ``solver="hipo"`` needs ``pricing="on"``: measured in docs/solver.md.
HIPO_UNPRICED = ("--solver hipo is for --pricing on's restricted master LPs, whose source blocks are near-trees; "
                 "on a full flow LP its factor grows about as N^3 (jellyfish:256: 23 million nonzeros, 113 s "
                 "against 40 s for ipm): add --pricing on, or use ipm")


def solve(topology: Topology, fabric: Fabric | None = None, method: str = "mcf-decomp", *, demand=None,
          **options) -> FlowSolution:
    """Solve the all-to-all flow problem on ``topology`` under ``fabric`` with ``method`` (Basu et al. §3).

    ``demand`` makes it an all-to-allv: a :class:`~a2a_compiler.demand.Demand`, an
    ``N x N`` array or a CSV / ``.npy`` path (:func:`~a2a_compiler.demand.as_demand`);
    a uniform matrix is the plain all-to-all.  ``options`` go to the method's
    function (e.g. ``solver=``, ``workers=``, ``paths=``, ``progress=``;
    :func:`method_options` lists them); an option the method does not take raises
    :class:`A2AError` naming it.
    """
    from ..demand import as_demand
    from .lp import check_solver

    func = method_function(method)
    allowed = method_options(method)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise A2AError(f"{method} does not take option{'s' if len(unknown) > 1 else ''} "
                       f"{', '.join(map(repr, unknown))}; it takes {', '.join(allowed)}")
    if options.get("solver") == "hipo" and options.get("pricing") != "on":
        raise A2AError(HIPO_UNPRICED)
    if options.get("solver") == "cupdlpx" and method == "tsmcf":
        raise A2AError("--solver cupdlpx is for the flow LPs of mcf, mcf-decomp, mcf-extp and pmcf, whose "
                       "first-order answers are certified by weak duality; tsmcf needs simplex, ipm or pdlp")
    if "solver" in options:
        check_solver(options["solver"])
    fabric = fabric or Fabric()
    topology = apply_link_classes(topology, fabric)
    check_lp_size(topology, fabric, method, steps=options.get("steps") or 1, solver=options.get("solver", "auto"))
    demand = as_demand(demand, topology.n_hosts)
    return func(topology, fabric, **options) if demand is None else func(topology, fabric, demand=demand, **options)


def check_lp_size(topology: Topology, fabric: Fabric, method: str, steps: int = 1, solver: str = "auto") -> None:
    """Refuse, before building it, a flow LP whose estimated memory exceeds :data:`MAX_LP_BYTES`: about
    3 nonzeros per flow variable, one variable per (commodity group, link) — ``N(N-1)`` groups for
    ``mcf`` (eqs. 1–5), ``N`` for the source-grouped LPs (eqs. 6–9, tsMCF per step: ``steps`` given, or
    counted once) — at :data:`LP_BYTES_PER_NONZERO` each, or :data:`GPU_LP_BYTES_PER_NONZERO` when
    ``solver`` is cuPDLPx (given, or ``auto`` where it runs).  The message gives the estimate."""
    from .gpu import unavailable

    n = topology.n_hosts
    links = topology.n_links + (2 * n if fabric.host_bw is not None else 0)  # host–NIC links of Fig. 2
    groups = n * (n - 1) if method == "mcf" else n
    nnz = 3 * groups * links * steps
    on_gpu = solver == "cupdlpx" or (solver == "auto" and method != "tsmcf" and unavailable() is None)
    need = nnz * (GPU_LP_BYTES_PER_NONZERO if on_gpu else LP_BYTES_PER_NONZERO)
    if need > MAX_LP_BYTES:
        per_step = f" x {steps} steps" if steps > 1 else ""
        raise A2AError(f"{topology.spec}: the {method} LP would have about {nnz:.1e} nonzeros ({groups} commodity "
                       f"group(s) x {links} links{per_step}) and need about {need / 2**30:.0f} GiB, over the "
                       f"{MAX_LP_BYTES / 2**30:.0f} GiB limit (a2a_compiler.solve.MAX_LP_BYTES)"
                       + ("; mcf-decomp needs N times fewer" if method == "mcf" else ""))


__all__ = ["solve", "method_options", "METHODS", "FlowSolution", "WeightedPath"]
