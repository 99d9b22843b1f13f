"""The ``a2a`` command: one subcommand per pipeline stage.

Each subcommand lives in :mod:`a2a_compiler.commands` as a module with
``register(subparsers)``; user errors (:class:`A2AError`) print one line and exit 2.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import importlib
import os
import re
import sys
import time

from . import interrupt
from .errors import A2AError
from .files import STDOUT, check_writable
from .launcher import MPI_EXIT_DELAY, Parser, join_mpi_init, launcher_rank, under_launcher

#: Subcommand modules in pipeline order.
COMMANDS = ["topo", "demand", "solve", "routes", "compare", "schedule", "compile", "verify", "run", "testbed", "demo"]

DESCRIPTION = """\
Compile bandwidth-optimal all-to-all schedules for direct-connect topologies.

pipeline: topology -> fabric -> solve (MCF LPs) -> chunk -> lower (MSCCL / oneCCL / MPI) -> verify -> run

  a2a demo                       compile torus:3x3x3, verify, run on local MPI ranks
  a2a topo torus:3x3x3           topology summary, distances and bounds
  a2a solve hypercube:3          optimal concurrent flow with a certified bound
  a2a schedule torus:3x3x3 -o s.json   time-stepped chunked schedule (IR)
  a2a compile torus:3x3x3 --emit msccl -o a2a.xml
  a2a verify a2a.xml --topology torus:3x3x3
  mpiexec -n 27 a2a run a2a.xml  execute, check byte-exact, measure vs MPI_Alltoall
  a2a demand zipf 8 -o D.csv     an MoE all-to-allv matrix; --demand D.csv on solve .. testbed bench

Run 'a2a COMMAND --help' for each command's options.
"""


#: Exit status of every ``a2a`` command (README "Exit status"); commands add what 1 (and 124) mean for them.
EXIT_STATUS = {
    0: "success",
    2: "user error: a bad option, spec, fabric or input file, or an output path that cannot be written "
       "(one line on stderr, no traceback, nothing written)",
    130: "interrupted (Ctrl-C / SIGINT, SIGTERM or SIGHUP: one line on stderr, nothing written)",
    141: "standard output closed early (e.g. piped into head): the rest is dropped quietly",
}


def exit_status_text(codes: dict[int, str] | None = None) -> str:
    """The ``exit status:`` section of a command's ``--help``: :data:`EXIT_STATUS` and the command's own
    ``codes``; any other status is a bug, reported with its traceback."""
    merged = sorted({**EXIT_STATUS, **(codes or {})}.items())
    lines = [f"  {code:<4} {text}" for code, text in merged]
    return "exit status:\n" + "\n".join(lines) + "\n  (any other status is a bug: please report its traceback)\n"


def command_parser(sub, name: str, help: str, description: str, epilog: str | None = None,
                   exit_codes: dict[int, str] | None = None) -> argparse.ArgumentParser:
    """The parser of subcommand ``name`` (for a command module's ``register``): one-line ``help``,
    ``description`` and an ``epilog`` of examples kept as written, then the exit status
    (:func:`exit_status_text` with the command's own ``exit_codes``)."""
    epilog = (epilog.rstrip("\n") + "\n\n" if epilog else "") + exit_status_text(exit_codes)
    return sub.add_parser(name, help=help, description=description, epilog=epilog,
                          formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``a2a`` parser; with ``only``, register just that subcommand.

    Registering imports a command's stage, so ``a2a run`` on every MPI rank does
    not pay for the solver and topology imports it never uses.
    """
    from . import __version__

    parser = Parser(
        prog="a2a", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"a2a-compiler {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS if only is None else [only]:
        try:
            module = importlib.import_module(f".commands.{name}", __package__)
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.commands.{name}":
                continue  # stage not built yet
            raise
        module.register(sub)
    return parser


def _attach_negative_values(argv: list[str]) -> list[str]:
    """``--link-bw -25Gbps`` -> ``--link-bw=-25Gbps``: argparse takes a token that starts with
    ``-`` and a digit for an option unless it is a plain number, so the value would be lost
    and the error would not name it; no option of ours starts with a digit."""
    out: list[str] = []
    for tok in argv:
        if out and re.match(r"-\d", tok) and out[-1].startswith("--") and "=" not in out[-1]:
            out[-1] = f"{out[-1]}={tok}"
        else:
            out.append(tok)
    return out


def main(argv: list[str] | None = None) -> int:
    """Run ``a2a`` with ``argv``; returns the exit status.

    User errors print one line and return 2; Ctrl-C at any moment (imports
    included), SIGTERM or SIGHUP (:mod:`.interrupt`) prints one line (on MPI rank 0 only) and returns 130 —
    or, once MPI is up (the other ranks may be blocked) or while a HiGHS run that
    ignored the interrupt is still going, ends the process at once.
    """
    argv = _attach_negative_values(sys.argv[1:] if argv is None else list(argv))
    command = argv[0] if argv and argv[0] in COMMANDS else None
    old = interrupt.catch()
    try:
        status = _main(argv, command)
        interrupt.check()
        return status
    except KeyboardInterrupt:
        if launcher_rank() == 0:
            print(f"a2a{' ' + command if command else ''}: interrupted", file=sys.stderr, flush=True)
        if command == "run" and under_launcher() and "mpi4py.MPI" not in sys.modules:
            join_mpi_init()
        mpi = "mpi4py.MPI" in sys.modules
        lp = sys.modules.get(f"{__package__}.solve.lp")
        if mpi or (lp is not None and lp.solver_running()):
            sys.stdout.flush()   # other ranks may be blocked, or a solver ignored the interrupt: do not wait
            if mpi:
                time.sleep(MPI_EXIT_DELAY)
            os._exit(130)
        return 130
    finally:
        interrupt.restore(old)


#: Options naming an output file; ``-`` is standard output (:func:`a2a_compiler.files.atomic_write`).
OUTPUT_OPTIONS = {"output": "-o", "save": "--save", "plot": "--plot", "junit": "--junit", "lft": "--lft",
                  "ibnet": "--ibnet"}
#: Options (and arguments) naming input files, which no output may overwrite.
INPUT_OPTIONS = ("files", "file", "from_ir", "demand", "jobs", "schedule", "lft_in", "rank_map", "spec", "specs")


def _input_paths(args) -> list[str]:
    """The existing files ``args`` reads (a spec's ``file:`` or ``ibnet:`` path included)."""
    paths = []
    for key in INPUT_OPTIONS:
        values = getattr(args, key, None)
        for value in values if isinstance(values, list) else [values]:
            if isinstance(value, str) and value:
                family, _, rest = value.partition(":")
                paths.append(rest if key.startswith("spec") and family in ("file", "ibnet") else value)
    return [p for p in paths if os.path.exists(p)]


def check_outputs(args) -> None:
    """Before any work: no input option's path is empty, every output path given can be written, is not empty
    (an unset shell variable), is not one of the command's own input files nor another output's file, and a
    plot's name says PNG."""
    for key in set(INPUT_OPTIONS) - {"files", "file", "spec", "specs"}:  # positionals: the reader says it
        values = getattr(args, key, None)
        if "" in (values if isinstance(values, list) else [values]):
            raise A2AError(f"--{key.replace('_', '-')}: the path is empty")
    inputs = _input_paths(args)
    written: dict[str, str] = {}
    for key, flag in OUTPUT_OPTIONS.items():
        path = getattr(args, key, None)
        if path is None or path == STDOUT:
            continue
        if path == "":
            raise A2AError(f"{flag}: the path is empty")
        if key == "plot" and os.path.splitext(path)[1] not in ("", ".png"):
            raise A2AError(f"--plot {path}: plots are PNG; give a .png path")
        check_writable(path)
        same = next((i for i in inputs if os.path.exists(path) and os.path.samefile(i, path)), None)
        if same is not None:
            raise A2AError(f"{flag} {path}: that is an input of this command ({same}); write the output elsewhere")
        real = os.path.realpath(path)
        if real in written:
            raise A2AError(f"{written[real]} and {flag} name the same file ({path}); give each its own")
        written[real] = flag


def stdout_outputs(args) -> list[str]:
    """The output options of ``args`` given as ``-`` (standard output).  The command's summary then
    goes to stderr, so stdout carries the file alone; ``--json`` (stdout too) or two of them are refused."""
    flags = [flag for key, flag in OUTPUT_OPTIONS.items() if getattr(args, key, None) == "-"]
    if len(flags) > 1:
        raise A2AError(f"{' and '.join(flags)} cannot both be - (standard output)")
    if flags and getattr(args, "json", False):
        raise A2AError(f"--json and {flags[0]} - both write standard output; give {flags[0]} a file, or drop --json "
                       f"(the summary then goes to stderr)")
    return flags


def _main(argv: list[str], command: str | None) -> int:
    with interrupt.deferred():  # the command's imports: one cut short would leave its module half-built
        parser = build_parser(command)
    args, extra = parser.parse_known_args(argv)
    if extra:  # argparse leaves these to the top-level parser; the command's own usage is the helpful one
        command = getattr(args, "command", None)
        subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        (subparsers.choices[command] if command else parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        from .commands.common import check_applicable

        check_applicable(args)
        check_outputs(args)
        to_stdout = stdout_outputs(args)
        with contextlib.redirect_stdout(sys.stderr) if to_stdout else contextlib.nullcontext():
            status = int(args.func(args) or 0)
        sys.stdout.flush()  # here, not at exit, where a failure could only print a traceback
        return status
    except A2AError as exc:
        print(f"a2a {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EIO, errno.EDQUOT):  # what a full or failed stdout raises
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        print(f"a2a {args.command}: error: cannot write standard output: {exc.strerror}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
