"""``a2a_compiler.torch``: the PyTorch runtime's front door (:mod:`runtimes.torch`; needs the torch extra).

>>> import a2a_compiler.torch                                              # doctest: +SKIP
>>> a2a_compiler.torch.install("schedules/bipartite-4-mcf-extp.mpi.xml")   # doctest: +SKIP
"""

from runtimes.torch import AllToAll, Installation, install

__all__ = ["AllToAll", "Installation", "install"]
