"""Stage 1: topologies — the model, the generators, spec strings, metrics and bounds."""

from .model import Topology
from .spec import FAMILIES, from_spec

__all__ = ["Topology", "FAMILIES", "from_spec"]
