"""``mpiexec -n N python -m runtimes.mpi FILE [options]`` (same as ``a2a run``)."""

import argparse
import sys

from a2a_compiler import interrupt
from a2a_compiler.cli import Parser, join_mpi_init

from .cli import DESCRIPTION, EPILOG, _interrupted, add_arguments, main

PROG = "python -m runtimes.mpi"

if __name__ == "__main__":
    interrupt.catch()  # SIGTERM and SIGHUP too, as under 'a2a run'
    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    try:
        args = parser.parse_args()
    except KeyboardInterrupt:  # main's own guard is not up yet
        join_mpi_init()
        _interrupted(PROG)
    sys.exit(main(args, PROG))
