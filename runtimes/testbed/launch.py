"""Launch MPI across a testbed: hydra's ``mpiexec`` in the management namespace, one rank per host namespace.

``mpiexec`` runs in the management namespace and starts one
``hydra_pmi_proxy`` per host through a launcher that enters that host's
namespace (hydra's ``ssh`` launcher protocol with ``-launcher-exec``); the
proxies dial back over the management bridge, which carries nothing else.
Ranks use MPICH's ``ofi`` netmod with the ``tcp`` provider on the host's
``a2tb-nic`` interface, so every MPI byte crosses the emulated fabric (UCX
and shared memory would bypass it).

Waiting must not spin: 2 cores carry every rank *and* the kernel's
forwarding.  MPICH polls in its waits; with ``MPIR_CVAR_ENABLE_HEAVY_YIELD=1``
a poll that finds nothing sleeps instead of calling ``sched_yield``, and the
launcher raises the ranks' timer slack to :data:`TIMER_SLACK_NS`, so an idle
rank wakes about once per millisecond (measured: 7 ranks waiting 6 s used
0.4 CPU-s instead of 6.4).  The runtime's own waits block in MPI for the same
reason (:mod:`runtimes.mpi.executor`), and steered routes are event-driven
(:mod:`runtimes.mpi.steered`).

``python -m runtimes.testbed.launch NETNS -- CMD...`` runs ``CMD`` in a
testbed namespace; hydra calls it as ``... -x NETNS 'WORDS...'`` (ssh style).
"""

from __future__ import annotations

import ctypes
import os
import resource
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .layout import BRIDGE_IF, HOST_IF, PREFIX, Layout

#: Timer slack of every rank (ns): MPICH's idle polls sleep about this long.
TIMER_SLACK_NS = 1_000_000
#: The environment that puts MPICH on the fabric and makes its waits sleep.
MPI_ENV = {
    "MPIR_CVAR_CH4_NETMOD": "ofi",
    "FI_PROVIDER": "tcp",
    "FI_TCP_IFACE": HOST_IF,
    "MPIR_CVAR_NOLOCAL": "1",
    "MPIR_CVAR_ENABLE_HEAVY_YIELD": "1",
    "PYTHONUNBUFFERED": "1",
}
_CLONE_NEWNET = 0x40000000
_PR_SET_TIMERSLACK = 29


def mpiexec_path() -> str:
    """The ``mpiexec`` next to this Python (the ``mpich`` wheel's), else the one on ``PATH``."""
    beside = Path(sys.executable).with_name("mpiexec")
    if beside.exists():
        return str(beside)
    from shutil import which

    found = which("mpiexec")
    if found is None:
        from a2a_compiler.errors import A2AError

        raise A2AError("no mpiexec next to this Python or on PATH; install the mpich wheel (pip install mpich)")
    return found


def launcher_script(state_dir: Path) -> Path:
    """The executable hydra calls to start a proxy in a host namespace (written once per instance)."""
    path = state_dir / "launch"
    path.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m runtimes.testbed.launch \"$@\"\n")
    path.chmod(0o755)
    return path


def mpiexec_argv(layout: Layout, state_dir: Path, argv: list[str]) -> list[str]:
    """``mpiexec`` running ``argv`` as one rank per host, rank ``h`` in host namespace ``h``."""
    hosts = ",".join(layout.host_ns(h) for h in range(layout.topology.n_hosts))
    return [mpiexec_path(), "-launcher", "ssh", "-launcher-exec", str(launcher_script(state_dir)),
            "-iface", BRIDGE_IF, "-hosts", hosts, "-n", str(layout.topology.n_hosts), "-ppn", "1", *argv]


@dataclass
class Finished:
    returncode: int
    wall_s: float
    cpu_user_s: float     # every process of the job (ranks, proxies, mpiexec)
    cpu_system_s: float
    timed_out: bool = False  # killed because ``timeout`` passed (not because a process died)

    def timeout_message(self) -> str:
        """The one line for a job the timer killed."""
        return f"the MPI job did not finish within {self.wall_s:.0f} s and was killed"


def run(layout: Layout, state_dir: Path, argv: list[str], timeout: float, env: dict | None = None,
        stdout=None, stderr=None) -> Finished:
    """Run ``argv`` under ``mpiexec`` across the testbed and wait at most ``timeout`` seconds.

    The job gets its own process group: on timeout, error or interrupt the
    whole group is killed before this returns or raises.
    """
    cmd = [sys.executable, "-m", "runtimes.testbed.launch", layout.mgmt_ns, "--",
           *mpiexec_argv(layout, state_dir, argv)]
    full_env = dict(os.environ, **MPI_ENV, **(env or {}))
    t0 = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, env=full_env, stdout=stdout, stderr=stderr, start_new_session=True)
    try:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.wait()
            return Finished(-signal.SIGKILL, time.monotonic() - t0, *_cpu(before), timed_out=True)
    except BaseException:
        _kill_group(proc)
        proc.wait()
        raise
    _kill_group(proc)  # stray processes of a job that ended badly
    return Finished(proc.returncode, time.monotonic() - t0, *_cpu(before))


def _cpu(before) -> tuple[float, float]:
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def enter(name: str) -> None:
    """Move this process into testbed namespace ``name`` and raise its timer slack (see module docstring)."""
    if not name.startswith(PREFIX) or "/" in name:
        raise SystemExit(f"runtimes.testbed.launch: {name!r} is not a testbed namespace ({PREFIX}...)")
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{name}", os.O_RDONLY)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        raise SystemExit(f"runtimes.testbed.launch: cannot enter {name}: {os.strerror(ctypes.get_errno())}")
    os.close(fd)
    libc.prctl(_PR_SET_TIMERSLACK, TIMER_SLACK_NS, 0, 0, 0)


def main(args: list[str]) -> None:
    if args[:1] == ["-x"]:  # hydra's ssh protocol: -x HOST 'command words'
        enter(args[1])
        os.execvp("sh", ["sh", "-c", " ".join(args[2:])])
    if len(args) < 3 or args[1] != "--":
        raise SystemExit("usage: python -m runtimes.testbed.launch NETNS -- CMD [ARG...]")
    enter(args[0])
    os.execvp(args[2], args[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
