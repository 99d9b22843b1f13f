"""``mpiexec -n N python -m runtimes.mpi FILE [options]`` (same as ``a2a run``)."""

from a2a_compiler import interrupt

PROG = "python -m runtimes.mpi"

if __name__ == "__main__":
    import sys

    interrupt.catch()  # before the imports, where a signal would kill the rank: SIGTERM and SIGHUP too
    try:
        with interrupt.deferred():  # an import cut short would leave its module half-built
            import argparse

            from a2a_compiler.launcher import Parser, join_mpi_init

            from .cli import DESCRIPTION, EPILOG, _interrupted, add_arguments, main
        parser = Parser(prog=PROG, description=DESCRIPTION, epilog=EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
        add_arguments(parser)
        sys.exit(main(parser.parse_args(), PROG))
    except KeyboardInterrupt:  # before main's own guard is up
        join_mpi_init()
        _interrupted(PROG)
