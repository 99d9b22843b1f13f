import sys

from .cli import main

if __name__ == "__main__":  # not when mpi4py.futures / multiprocessing workers re-import the main module
    sys.exit(main())
