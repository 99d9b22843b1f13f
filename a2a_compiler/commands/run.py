"""``a2a run FILE``: execute a schedule on MPI ranks (inside ``mpiexec``), check it, measure it.

Thin wrapper over :mod:`runtimes.mpi.cli`, which ``python -m runtimes.mpi`` uses too.
"""

from __future__ import annotations

import argparse

from runtimes.mpi.cli import DESCRIPTION, EPILOG, add_arguments, main, quiet_errors


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="execute a schedule under mpiexec: byte-exact check, timing vs MPI_Alltoall",
        description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(quiet_errors(p))
    p.set_defaults(func=lambda args: main(args, "a2a run"))
