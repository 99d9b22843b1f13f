"""What the two MPI entry points share, ``a2a run`` (:mod:`a2a_compiler.cli`) and ``python -m runtimes.mpi``:
the rank an MPI launcher gave this process, the ending of a rank interrupted before or after MPI_Init, MPICH's
shared-memory files unlinked once every rank maps them, and the argument parser that prints a usage error
once, on rank 0.  Both the command line and the runtimes
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

        release_shared_memory()   # every local rank has opened MPICH's files once MPI_Init returns


#: The files MPICH keeps a machine's shared memory in: ``mpich_shm_<world>_<node>`` (and ``mpich_vci_...``),
#: opened by name by every rank of the machine (MPL_initshm_open, ch4/shm/posix/posix_init.c).
MPICH_SHM = ("/dev/shm/mpich_shm_", "/dev/shm/mpich_vci_")


def release_shared_memory(local=None) -> list[str]:
    """Unlink the MPICH shared-memory files this process maps, once every rank on this machine has opened
    them: the memory stays until the last rank unmaps it, but no name is left behind when the job is
    interrupted, aborted or killed (MPICH unlinks them only in MPI_Finalize; a leaked one held 8.4 MB).
    Every rank has opened them once MPI_Init returns (MPIDI_POSIX_comm_bootstrap, posix_init.c, waits for
    each local rank's eager_ready flag); ``local``, the machine's communicator, adds a barrier for builds
    that do not.  Only files this process maps are touched: no other job's.  Returns the paths unlinked
    here (another rank may have unlinked them first)."""
    if local is not None:
        local.Barrier()
    gone = []
    for path in sorted(_mapped(MPICH_SHM)):
        try:
            os.unlink(path)
            gone.append(path)
        except (FileNotFoundError, PermissionError):
            pass
    return gone


def _mapped(prefixes: tuple[str, ...]) -> set[str]:
    """The files under ``prefixes`` this process maps (``/proc/self/maps``; none where it cannot be read)."""
    try:
        with open("/proc/self/maps") as fh:
            fields = [line.split(None, 5) for line in fh]
    except OSError:
        return set()
    return {f[5].rstrip("\n") for f in fields if len(f) == 6 and f[5].startswith(prefixes)
            and not f[5].rstrip("\n").endswith(" (deleted)")}


class Parser(argparse.ArgumentParser):
    """argparse with a usage error in one line (``--help`` shows the usage), on MPI rank 0 only (every
    rank exits 2); subcommands' parsers are of this class too."""

    def error(self, message):
        if launcher_rank() == 0:
            print(f"{self.prog}: error: {message} (see '{self.prog} --help')", file=sys.stderr)
        sys.exit(2)
