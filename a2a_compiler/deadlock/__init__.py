"""Deadlock freedom for routed schedules: channel dependency graphs and virtual layers.

With wormhole / credit-based flow control (Basu et al. §5.5, Cerio fabrics)
routes must not form cyclic channel dependencies (Dally & Seitz 1987).  Routes
are given *virtual layers*: each layer's dependencies must be acyclic.

============ =================================================== ===================
scheme       what                                                module
============ =================================================== ===================
lash         Skeie et al. 2002: pairs first-fit into layers      :mod:`.lash`
lash-seq     Basu et al. §5.5 LASH-sequential: LASH + per-route  :mod:`.lash`
             sequential compaction (our precise definition)
dfsssp       Domke et al. 2011: break cycles at their weakest    :mod:`.dfsssp`
             dependency by moving routes up a layer
============ =================================================== ===================

:func:`assign_layers` runs a scheme; :func:`find_deadlock` checks any routes
with their layers or per-hop virtual channels (:mod:`.cdg`).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..errors import A2AError
from .cdg import ChannelDependencyGraph, channel_dependency_graph, describe_cycle
from .dfsssp import dfsssp
from .lash import lash, lash_sequential

#: scheme name -> layer assignment ``f(paths, pairs, max_layers) -> layers``.
SCHEMES = {"lash": lash, "lash-seq": lash_sequential, "dfsssp": dfsssp}


def assign_layers(paths: Sequence[Sequence[int]], scheme: str, *, pairs: Sequence | None = None,
                  max_layers: int | None = None) -> np.ndarray:
    """A virtual layer for every route (node sequence) so that each layer is deadlock-free.

    ``pairs[i]`` identifies route ``i``'s source–destination pair (LASH keeps a
    pair in one layer).  Raises :class:`A2AError` for an unknown scheme or when
    the scheme needs more than ``max_layers`` layers.
    """
    if scheme not in SCHEMES:
        raise A2AError(f"unknown deadlock scheme {scheme!r}; choose one of {', '.join(SCHEMES)}")
    if max_layers is not None and max_layers < 1:
        raise A2AError(f"--max-layers must be >= 1, got {max_layers}")
    return SCHEMES[scheme](paths, pairs, max_layers)


def find_deadlock(paths: Sequence[Sequence[int]], classes: Sequence[Sequence[int]]) -> str | None:
    """``None`` if the routes' channel dependencies over (link, vc) are acyclic, else the cycle, described.

    ``classes[i]`` holds route ``i``'s virtual channel for each hop (its layer
    repeated, or its ``vcs``).
    """
    cycle = channel_dependency_graph(paths, classes).find_cycle()
    return None if cycle is None else describe_cycle(cycle)


__all__ = ["SCHEMES", "assign_layers", "find_deadlock", "channel_dependency_graph", "ChannelDependencyGraph",
           "lash", "lash_sequential", "dfsssp"]
