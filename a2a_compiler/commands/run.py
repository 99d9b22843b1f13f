"""``a2a run FILE``: execute a schedule on MPI ranks (inside ``mpiexec``), check it, measure it.

Thin wrapper over :mod:`runtimes.mpi.cli`, which ``python -m runtimes.mpi`` uses too.
"""

from __future__ import annotations

from runtimes.mpi.cli import DESCRIPTION, EPILOG, RUN_EXIT_CODES, add_arguments, main

from ..cli import command_parser


def register(subparsers) -> None:
    """Add ``a2a run`` (:mod:`runtimes.mpi.cli`) to the subcommands."""
    p = command_parser(subparsers, "run", "execute a schedule under mpiexec: byte-exact check, timing vs MPI_Alltoall",
                       DESCRIPTION, EPILOG, RUN_EXIT_CODES)
    add_arguments(p)
    p.set_defaults(func=lambda args: main(args, "a2a run"))
