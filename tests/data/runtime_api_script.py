"""User code for the runtime tests: ``mpiexec -n N python runtime_api_script.py [--rank-map MAP] FILE[@relay|@direct] ...``.

For each schedule it builds ``runtimes.mpi.Alltoall(FILE, comm)`` once, calls it
twice per size on float64 arrays whose values identify (source, destination,
element), compares the result with native ``comm.Alltoall`` on the same data,
and tries a wrongly sized buffer and an in-place call.  Rank 0 prints one JSON line per schedule, with
the topology host each rank played (``nodes``) and the MPI library.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

from a2a_compiler.errors import A2AError
from runtimes.mpi import Alltoall

comm = MPI.COMM_WORLD
rank, N = comm.rank, comm.size
args = sys.argv[1:]
rank_map = args[1] if args[:1] == ["--rank-map"] else None
for arg in args[2:] if rank_map else args:
    path, _, mode = arg.partition("@")
    a2a = Alltoall(path, comm, route_mode=mode or "relay", rank_map=rank_map)
    exact = []
    for count in (1, 3, 1000):  # float64 elements per peer: 8, 24, 8000 bytes
        send = rank * 1e6 + np.arange(N * count, dtype=np.float64)
        recv = np.full_like(send, -1.0)
        ref = np.empty_like(send)
        a2a(send, recv)
        a2a(send, recv)
        comm.Alltoall(send, ref)
        exact.append(bool(np.array_equal(recv, ref)))
    errors = []
    for bad in (recv[:-1], send):  # wrong size, in place
        try:
            a2a(send, bad)
            errors.append(None)
        except A2AError as exc:
            errors.append(str(exc))
    a2a.free()
    exact = comm.gather(all(exact))
    if rank == 0:
        print(json.dumps({"schedule": arg, "format": a2a.format, "exact": exact, "size_error": errors[0],
                          "inplace_error": errors[1], "nodes": a2a.nodes.tolist(),
                          "library": MPI.Get_library_version().splitlines()[0]}),
              flush=True)
