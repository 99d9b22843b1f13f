"""PyTorch runtime: compiled schedules executed with ``torch.distributed`` point-to-point operations.

``AllToAll(schedule, group)`` runs ``all_to_all_single`` (equal splits or split sizes that change every
call, the MoE dispatch and combine) and the list form ``all_to_all`` through the schedule;
``install(schedule, group)`` makes unmodified ``dist.all_to_all_single`` / ``dist.all_to_all`` calls do so.
The plans and steps are the MPI runtime's (:mod:`runtimes.mpi.plan`, :mod:`runtimes.mpi.steps`).  See
docs/torch.md.  Importing this package imports torch; nothing else in a2a-compiler does.
"""

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - the message is the point
    raise ImportError("the PyTorch runtime needs torch: pip install 'a2a-compiler[torch]'") from exc

from .dropin import Installation, install
from .runtime import AllToAll, TorchTransport

__all__ = ["AllToAll", "Installation", "TorchTransport", "install"]
