"""Abort the whole MPI job when a rank makes no progress for too long, and name a rank that died.

A dead rank or a schedule that deadlocks across ranks would otherwise leave
the others blocked forever in MPI.  The watchdog is a daemon thread: the main
thread calls :meth:`Watchdog.kick` after every completed operation; if no kick
comes within ``timeout`` seconds it prints one line and calls
``MPI_Abort`` (and, should that not return control to the launcher, exits the
process hard a few seconds later).

It also watches the ranks on its own machine (same kernel and PID namespace)
through pidfds: when one of them dies (SIGKILL, the OOM killer), the lowest
surviving rank there prints one line naming it, and the local survivors end
(status :data:`Watchdog.DIED_EXIT_CODE`), the speaker last.  Launchers that end the job first
(Open MPI sends SIGTERM) get the same line from :meth:`Watchdog.end_if_peer_died`.
"""

from __future__ import annotations

import os
import select
import sys
import threading
import time

from a2a_compiler.launcher import release_shared_memory


def _machine() -> str:
    """Which kernel and PID namespace this process lives in (pids are comparable within one)."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
        return f"{boot}:{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return f"pid:{os.getpid()}"  # no /proc: watch nobody else


class Watchdog:
    """``with Watchdog(seconds, comm, prog): ...``; ``seconds <= 0`` disables the progress timeout;
    :meth:`watch_peers` adds the watch over the ranks on this machine."""

    EXIT_CODE = 124
    DIED_EXIT_CODE = 125
    GRACE = 5.0
    #: Seconds between the abort line and MPI_Abort, for the launcher to forward the line.
    FORWARD = 0.5
    POLL = 0.25
    #: The watchdog of the running job (at most one per process), for signal handlers.
    current: "Watchdog | None" = None

    def __init__(self, timeout: float, comm, prog: str):
        self.timeout, self.comm, self.prog = timeout, comm, prog
        self._deadline = time.monotonic() + timeout
        self._stop = threading.Event()
        self._ending = threading.Lock()
        self._thread = threading.Thread(target=self._watch, name="a2a-watchdog", daemon=True)
        self._peers: dict[int, tuple[int, str, int]] = {}   # rank -> (pid, processor name, pidfd)

    def __enter__(self):
        Watchdog.current = self
        self._thread.start()
        return self

    def watch_peers(self) -> None:
        """Start watching the other ranks on this machine (collective over ``comm``)."""
        from mpi4py import MPI

        me = (_machine(), os.getpid(), MPI.Get_processor_name())
        peers = {}
        for r, (machine, pid, name) in enumerate(self.comm.allgather(me)):
            if machine == me[0] and r != self.comm.rank:
                try:
                    peers[r] = (pid, name, os.pidfd_open(pid))
                except (OSError, AttributeError):  # already gone, or no pidfds here: not watched
                    pass
        self._peers = peers

    def __exit__(self, *exc):
        self._stop.set()
        Watchdog.current = None
        for _, _, fd in self._peers.values():
            os.close(fd)
        self._peers = {}
        return False

    def kick(self) -> None:
        self._deadline = time.monotonic() + self.timeout

    def dead_peer(self) -> tuple[int, int, str] | None:
        """``(rank, pid, processor name)`` of the lowest-numbered rank on this machine that has died."""
        peers = dict(self._peers)
        ready, _, _ = select.select([fd for _, _, fd in peers.values()], [], [], 0) if peers else ([], [], [])
        dead = sorted(r for r, (_, _, fd) in peers.items() if fd in ready)
        return (dead[0], *peers[dead[0]][:2]) if dead else None

    def end_if_peer_died(self, status: int | None = None) -> None:
        """If a rank on this machine died: say so (the lowest surviving rank here, once) and end this process
        with ``status`` (default :data:`DIED_EXIT_CODE`); otherwise return."""
        dead = self.dead_peer()
        if dead is None:
            return
        if not self._ending.acquire(blocking=False):
            threading.Event().wait()  # another thread of this process is ending it
        rank, pid, name = dead
        speaker = all(r > self.comm.rank for r in self._peers if self._alive(r))  # the lowest survivor here
        if speaker:
            print(f"{self.prog}: rank {rank} (pid {pid} on {name}) died; ending the job", file=sys.stderr,
                  flush=True)
        sys.stdout.flush()
        # The speaker outlives the others (bounded), so that none of them takes its exit for another death
        # and speaks too.
        if speaker:
            self._wait_all_ended(self.GRACE)
        else:
            time.sleep(2.0)
        os._exit(self.DIED_EXIT_CODE if status is None else status)

    def _wait_all_ended(self, timeout: float) -> None:
        """Wait until every watched rank on this machine has ended, at most ``timeout`` seconds."""
        end = time.monotonic() + timeout
        left = {fd for _, _, fd in self._peers.values()}
        while left and (rest := end - time.monotonic()) > 0:
            left -= set(select.select(list(left), [], [], rest)[0])

    def _alive(self, rank: int) -> bool:
        return not select.select([self._peers[rank][2]], [], [], 0)[0]

    def _watch(self) -> None:
        while not self._stop.wait(self.POLL):
            self.end_if_peer_died()
            if self.timeout > 0 and time.monotonic() >= self._deadline:
                print(f"{self.prog}: rank {self.comm.rank}: no progress for {self.timeout:g} s "
                      f"(a rank died or the schedule deadlocks); aborting the job", file=sys.stderr, flush=True)
                threading.Timer(self.GRACE, os._exit, (self.EXIT_CODE,)).start()
                time.sleep(self.FORWARD)  # the launcher forwards stderr asynchronously; Abort would cut it off
                release_shared_memory()   # every local rank attached in MPI_Init: no MPICH segment left behind
                self.comm.Abort(self.EXIT_CODE)
                return
