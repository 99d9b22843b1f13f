"""``mpiexec -n N python -m runtimes.mpi FILE [options]`` (same as ``a2a run``)."""

import argparse
import sys

from .cli import DESCRIPTION, EPILOG, add_arguments, main, quiet_errors

PROG = "python -m runtimes.mpi"

if __name__ == "__main__":
    parser = quiet_errors(argparse.ArgumentParser(
        prog=PROG, description=DESCRIPTION, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter))
    add_arguments(parser)
    sys.exit(main(parser.parse_args(), PROG))
