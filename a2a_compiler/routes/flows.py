"""The design source's own routed schemes as routing engines (Basu et al. §3.1.4, §3.2.1).

Thin adapters over :func:`a2a_compiler.solve.solve`, so ``a2a routes`` reports
them exactly like the baselines:

* ``mcf-extp``: link MCF (decomposed, §3.1.2) then widest-path extraction;
* ``pmcf-disjoint``: path MCF (eqs. 21–24) over maximal link-disjoint paths;
* ``pmcf-shortest``: path MCF over all shortest paths.

``lp_time`` is the certified lower bound on the LP all-to-all time of the extracted /
optimised weighted paths (before chunking; ``FlowSolution.lp_time``, as ``a2a compile``
records it) and ``bound`` the solver's certified lower bound on the link-MCF time (weak
duality).
"""

from __future__ import annotations

from ..fabric import Fabric
from ..solve import solve
from ..solve.paths import DEFAULT_MAX_PATHS
from ..topology.model import Topology
from .result import RouteSet


def mcf_extp(topology: Topology, fabric: Fabric | None = None, *, progress=None, **options) -> RouteSet:
    """MCF-extP (§3.2.1); ``options`` go to :func:`a2a_compiler.solve.widest_paths.mcf_extp`."""
    sol = solve(topology, fabric, "mcf-extp", progress=progress, **options)
    return RouteSet.from_solution("mcf-extp", topology, sol)


def pmcf_disjoint(topology: Topology, fabric: Fabric | None = None, *, progress=None, **options) -> RouteSet:
    """pMCF over maximal link-disjoint paths (§3.1.4: "empirically achieves the optimal MCF")."""
    sol = solve(topology, fabric, "pmcf", paths="disjoint", progress=progress, **options)
    return RouteSet.from_solution("pmcf-disjoint", topology, sol)


def pmcf_shortest(topology: Topology, fabric: Fabric | None = None, *, max_paths: int = DEFAULT_MAX_PATHS,
                  progress=None, **options) -> RouteSet:
    """pMCF over all shortest paths (suboptimal on expanders, Fig. 8; explodes on large tori)."""
    sol = solve(topology, fabric, "pmcf", paths="shortest", max_paths=max_paths, progress=progress, **options)
    return RouteSet.from_solution("pmcf-shortest", topology, sol)
