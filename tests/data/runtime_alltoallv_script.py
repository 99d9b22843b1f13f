"""User code for the all-to-allv runtime tests: ``mpiexec -n N python runtime_alltoallv_script.py FILE[@mode][#D.csv] ...``.

For each schedule it builds ``runtimes.mpi.Alltoallv(FILE, comm)`` once (``#D.csv``: the demand that
gives an MSCCL file its layout) and calls it on float64 blocks whose values identify (source,
destination, element) for several count matrices -- seeded random counts with some empty pairs,
all-zero but one pair, the same counts with gaps between the blocks -- comparing with native
``comm.Alltoallv`` on the same buffers.  Then mismatched counts.  Rank 0 prints one JSON line per schedule.
"""

import json
import sys

import numpy as np
from mpi4py import MPI

from a2a_compiler.demand import read_demand
from a2a_compiler.errors import A2AError
from runtimes.mpi import Alltoallv

comm = MPI.COMM_WORLD
rank, N = comm.rank, comm.size
rng = np.random.default_rng(7)  # the same counts on every rank
matrices = [rng.integers(0, 3000, (N, N)), np.zeros((N, N), np.int64), rng.integers(0, 40, (N, N))]
matrices[0][0, 1] = matrices[0][2, 0] = 0
matrices[1][N - 1, 0] = 5


def run(a2av, counts, gap):
    sc, rc = counts[rank], counts[:, rank]
    sd = np.concatenate([[0], np.cumsum(sc + gap)[:-1]])
    rd = np.concatenate([[0], np.cumsum(rc + gap)[:-1]])
    send = np.concatenate([rank * 1e9 + d * 1e6 + np.arange(c + gap, dtype=np.float64) for d, c in enumerate(sc)])
    recv, ref = np.full(int(rd[-1] + rc[-1] + gap), -1.0), np.full(int(rd[-1] + rc[-1] + gap), -1.0)
    a2av(send, sc, None if not gap else sd, recv, rc, None if not gap else rd)
    comm.Alltoallv([send, (sc, sd), MPI.DOUBLE], [ref, (rc, rd), MPI.DOUBLE])
    return bool(np.array_equal(recv, ref))


for arg in sys.argv[1:]:
    arg_path, _, csv = arg.partition("#")
    path, _, mode = arg_path.partition("@")
    demand = read_demand(csv) if csv else None
    a2av = Alltoallv(path, comm, route_mode=mode or "relay", demand=demand)
    exact = [run(a2av, m, gap) for m in matrices for gap in (0, 3)]
    errors = []
    try:  # rank 1 expects one element more from rank 0 than rank 0 sends
        counts = matrices[2].copy()
        rc = counts[:, rank] + (rank == 1) * np.eye(N, dtype=np.int64)[0]
        a2av(np.zeros(counts[rank].sum()), counts[rank], None, np.zeros(rc.sum()), rc, None)
    except A2AError as exc:
        errors.append(str(exc))
    try:  # rank 2 gives a negative count for rank 3: every rank says so
        sc, rc = matrices[2][rank], matrices[2][:, rank]
        bad = sc - (rank == 2) * (matrices[2][2, 3] + 1) * np.eye(N, dtype=np.int64)[3]
        a2av(np.zeros(sc.sum()), bad, None, np.zeros(rc.sum()), rc, None)
        negative = None
    except A2AError as exc:
        negative = str(exc)
    a2av.free()
    exact, negative = comm.gather(all(exact)), comm.gather(negative)
    if rank == 0:
        print(json.dumps({"schedule": arg, "format": a2av.format, "exact": exact, "mismatch": errors,
                          "negative": negative}), flush=True)
