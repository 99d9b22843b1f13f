"""How an ``a2a run`` rank ends when the job goes wrong, without MPI: an abort that returns, and the
MPICH shared-memory files it unlinks (issue 34, items 2 and 4; the jobs themselves: test_runtime_mpi.py)."""

import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_an_abort_that_returns_still_ends_the_rank():
    """MPICH's MPI_Abort returns while the launcher is already ending the job; the code after it raised
    UnboundLocalError (one run in 7 with a rank killed).  The rank ends with the abort's status."""
    code = ("from runtimes.mpi.cli import _abort\n"
            "class Comm:\n"
            "    def Abort(self, status):\n"
            "        print('abort', status)\n"
            "_abort(Comm(), 1)\n"
            "print('after the abort')\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout, p.stderr) == (1, "abort 1\n", "")


@pytest.mark.skipif(not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK), reason="no /dev/shm")
def test_only_the_segments_this_rank_maps_are_unlinked():
    from a2a_compiler.launcher import MPICH_SHM, release_shared_memory

    class Local:
        barriers = 0

        def Barrier(self):
            Local.barriers += 1

    ours, other = (Path(f"{MPICH_SHM[0]}a2atest{os.getpid()}_{k}") for k in (0, 1))
    try:
        for path in (ours, other):
            path.write_bytes(b"\0" * 4096)
        with open(ours, "r+b") as fh, mmap.mmap(fh.fileno(), 4096) as mapped:
            released = release_shared_memory(Local())   # an earlier test's in-process MPI may map one of its own
            assert str(ours) in released and str(other) not in released
            mapped[0] = 1                                 # the memory outlives its name
        assert Local.barriers == 1 and not ours.exists() and other.exists()   # another job's file is kept
    finally:
        for path in (ours, other):
            path.unlink(missing_ok=True)
