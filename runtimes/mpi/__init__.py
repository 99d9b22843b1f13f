"""mpi4py runtime: execute MSCCL, oneCCL-style and MPI path schedules on an MPI communicator.

``Alltoall(schedule, comm)`` is a reusable, callable all-to-all (like
``comm.Alltoall``), ``Alltoallv(schedule, comm)`` the all-to-allv (like
``comm.Alltoallv``: one compiled schedule serves every batch's counts);
``python -m runtimes.mpi FILE`` (or ``a2a run FILE``) runs, checks and measures
a schedule under ``mpiexec``.  See docs/runtime.md.

Importing this package does not initialise MPI; ``Alltoall`` does, on first use.
"""

__all__ = ["Alltoall", "Alltoallv"]


def __getattr__(name):
    if name == "Alltoall":
        from .executor import Alltoall

        return Alltoall
    if name == "Alltoallv":
        from .alltoallv import Alltoallv

        return Alltoallv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
