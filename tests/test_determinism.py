"""The same input gives the same bytes on any machine: no discrete choice hinges on floating-point noise."""

import os
import platform
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from a2a_compiler.fabric import Fabric
from a2a_compiler.numeric import TIE, better, dot, generic_costs, snap
from a2a_compiler.solve import solve
from a2a_compiler.topology import from_spec

ROOT = Path(__file__).resolve().parents[1]


def test_dot_is_exactly_rounded():
    a = np.array([1e16, 1.0, -1e16, 3.0])
    assert dot(a, np.ones(4)) == 4.0
    assert float(np.sum(a)) != 4.0          # what a left-to-right or pairwise float sum gives instead


def test_snap_makes_noisy_equal_values_equal_and_sums_exact():
    third = 1 / 3
    x = snap([third, third + 3e-16, third - 5e-17])
    assert x[0] == x[1] == x[2] and abs(x[0] - third) <= 2.0 ** -37
    assert (x[0] + x[1]) - x[1] == x[0]


def test_better_ties_within_tie_to_the_earlier_candidate():
    assert better((-1.0, 0.0), None)
    assert not better((-1.0 + TIE / 2, -5.0 + TIE / 2), (-1.0, -5.0))   # a tie: keep the earlier one
    assert better((-1.0 + TIE / 2, -6.0), (-1.0, -5.0))                  # equal first key, smaller second
    assert not better((-0.5, -100.0), (-1.0, 0.0))


def test_generic_costs_are_distinct_and_without_the_linear_ties_of_a_multiplicative_hash():
    c = generic_costs(100_000)
    assert c.min() >= 1.0 and c.max() < 2.0 and len(np.unique(c)) == len(c)
    # j*K mod 2^32 would make c[a] + c[b] == c[a+1] + c[b-1] for most a, b
    a, b = np.arange(0, 1000), np.arange(5000, 6000)
    assert not np.any(c[a] + c[b] == c[a + 1] + c[b - 1])


def test_simplex_and_crossover_reach_the_same_canonical_vertex():
    """The tsMCF LP of the 3-cube is degenerate (many optimal vertices); both solvers return the canonical one."""
    t = from_spec("hypercube:3")
    a = solve(t, Fabric(), "tsmcf", steps=3, solver="simplex", symmetry="off")
    b = solve(t, Fabric(), "tsmcf", steps=3, solver="ipm-crossover", symmetry="off")
    assert a.a2a_time == b.a2a_time == 4.0
    fa, fb = a.link_flows.toarray(), b.link_flows.toarray()
    assert np.abs(fa - fb).max() < 1e-9 and (fa > 1e-9).sum() == (fb > 1e-9).sum()


def _openblas_core() -> str | None:
    import ctypes
    import glob

    libs = glob.glob(os.path.join(os.path.dirname(np.__file__), os.pardir, "numpy.libs", "libscipy_openblas*"))
    if not libs:
        return None
    lib = ctypes.CDLL(libs[0])
    for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename"):
        if hasattr(lib, name):
            getattr(lib, name).restype = ctypes.c_char_p
            return getattr(lib, name)().decode()
    return None


@pytest.mark.skipif(platform.machine() != "x86_64", reason="selects x86-64 OpenBLAS kernels")
@pytest.mark.skipif(_openblas_core() is None, reason="numpy does not bundle OpenBLAS with a core-name query")
def test_shipped_torus_schedule_is_reproduced_under_other_blas_kernels():
    """Before the fix the §5.2 torus MSCCL file differed between the Haswell and SkylakeX kernels (a
    local-search tie decided by the last bit of a BLAS dot product)."""
    script = ("import sys, tests.test_determinism as t, a2a_compiler\n"
              "r = a2a_compiler.compile('torus:3x3x3', 'msccl', link_bw='25Gbps', host_bw='100Gbps', target='nccl')\n"
              "sys.stdout.write(t._openblas_core() + '\\n'); sys.stdout.flush()\n"
              "sys.stdout.buffer.write(r.data)\n")
    shipped = (ROOT / "schedules" / "torus-3x3x3-tsmcf.msccl.xml").read_bytes()
    cores = set()
    for kernel in ("Haswell", "Prescott"):
        out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, check=True, timeout=600,
                             env={**os.environ, "OPENBLAS_CORETYPE": kernel}).stdout
        core, data = out.split(b"\n", 1)
        cores.add(core.decode())
        assert data == shipped, f"the torus schedule differs under the {core.decode()} kernel"
    assert len(cores) == 2, cores
