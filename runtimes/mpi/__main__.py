"""``mpiexec -n N python -m runtimes.mpi FILE [options]`` (same as ``a2a run``)."""

import argparse
import sys

from a2a_compiler.cli import Parser

from .cli import DESCRIPTION, EPILOG, add_arguments, main

PROG = "python -m runtimes.mpi"

if __name__ == "__main__":
    parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    sys.exit(main(parser.parse_args(), PROG))
