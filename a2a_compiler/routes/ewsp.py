"""EwSP: equal-weight shortest paths (Basu et al. §5.2, §5.3).

The naive multipath baseline of the design source: each shard is split in
equal parts over *all* minimum-hop paths of its host pair, with no regard for
the load they create.  On arc-transitive graphs (tori, hypercubes, K_{n,n}) the
split is perfectly balanced and optimal; on expanders, which have few shortest
paths per pair, it does about as well as SSSP (Fig. 8).
"""

from __future__ import annotations

import time

from ..fabric import Fabric
from ..solve.certificate import check_connected
from ..solve.paths import DEFAULT_MAX_PATHS, all_shortest_paths
from ..topology.model import Topology
from .result import RoutedPath, RouteSet


def ewsp(topology: Topology, fabric: Fabric | None = None, *, max_paths: int = DEFAULT_MAX_PATHS,
         progress=None) -> RouteSet:
    """Every minimum-hop path of each host pair, each with weight ``1/count``.

    Refused with a clear error when a pair has more than ``max_paths`` shortest
    paths (large tori), as :func:`a2a_compiler.solve.paths.all_shortest_paths` does.
    """
    fabric = fabric or Fabric()
    check_connected(topology)
    t0 = time.perf_counter()
    sets = all_shortest_paths(topology, max_paths)
    paths = tuple(RoutedPath(s, d, nodes, 1.0 / len(plist))
                  for (s, d), plist in sorted(sets.items()) for nodes in plist)
    return RouteSet("ewsp", topology, fabric, paths, timings={"paths": time.perf_counter() - t0},
                    info={"max_paths": max_paths})
