"""What the two MPI entry points share, ``a2a run`` (:mod:`a2a_compiler.cli`) and ``python -m runtimes.mpi``:
the rank an MPI launcher gave this process, the ending of a rank interrupted before or after MPI_Init, and
the argument parser that prints a usage error once, on rank 0.  Both the command line and the runtimes
import it; it imports neither.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from . import interrupt


#: What MPI launchers (MPICH's Hydra, Open MPI, PMIx) tell each process of its rank.
LAUNCHER_RANK_VARS = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")


def launcher_rank() -> int:
    """This process's rank as an MPI launcher told it (before MPI starts), 0 if unknown."""
    for var in LAUNCHER_RANK_VARS:
        if os.environ.get(var, "").isdigit():
            return int(os.environ[var])
    return 0


def under_launcher() -> bool:
    """Whether an MPI launcher started this process (it set one of :data:`LAUNCHER_RANK_VARS`)."""
    return any(v in os.environ for v in LAUNCHER_RANK_VARS)


#: Seconds an interrupted MPI rank waits before it exits: every rank got the signal, and a launcher that
#: sees one rank leave first kills the others (hydra then reports status 9 and a banner).
MPI_EXIT_DELAY = 0.3


def join_mpi_init() -> None:
    """An ``a2a run`` rank interrupted before MPI_Init still takes part in it (then ends): the other ranks
    wait there for every rank (a signal cannot end them: Python runs its handler only once MPI_Init
    returns), so a rank that left first would hang the whole job.  Further signals are ignored until then."""
    import signal

    for s in interrupt.SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        import mpi4py.MPI  # noqa: F401


class Parser(argparse.ArgumentParser):
    """argparse with a usage error in one line (``--help`` shows the usage), on MPI rank 0 only (every
    rank exits 2); subcommands' parsers are of this class too."""

    def error(self, message):
        if launcher_rank() == 0:
            print(f"{self.prog}: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        sys.exit(2)
