"""A slab-decomposed distributed 3-D FFT (numpy.fft), the workload of Basu et al. §5.2, Fig. 6.

Rank ``r`` of ``P`` owns the x-planes ``[r·n/P, (r+1)·n/P)`` of an ``n³``
complex grid.  One transform is three phases, each timed:

1. 2-D FFTs over (y, z) of the local planes, packed into ``P`` blocks by y;
2. an all-to-all (block ``j`` to rank ``j``): shards of ``(n/P)²·n`` complex values;
3. unpacking into ``n`` x-planes of the local y-block and 1-D FFTs along x.

The input is a sum of plane waves with known amplitudes, so each rank can
check its part of the output exactly: the transform of ``a·exp(2πi k·x/n)``
is ``n³·a`` at frequency ``k`` and zero elsewhere.
"""

from __future__ import annotations

import numpy as np

#: (kx, ky, kz, amplitude) of the test input's plane waves.
WAVES = ((1, 2, 3, 1.0 + 0.5j), (5, 0, 7, -0.25j), (0, 9, 1, 2.0))


def shard_bytes(n: int, P: int) -> int:
    """Bytes each rank sends each rank in phase 2."""
    return (n // P) ** 2 * n * 16


def check_grid(n: int, P: int) -> str | None:
    """Why an ``n³`` grid cannot be split over ``P`` ranks (``None`` if it can)."""
    if n < 1 or n % P:
        return f"the FFT grid size {n} must be a positive multiple of the rank count {P}"
    return None


def local_input(n: int, P: int, rank: int) -> np.ndarray:
    """This rank's x-planes of the test input, shape ``(n/P, n, n)``."""
    s = n // P
    x = np.arange(rank * s, (rank + 1) * s)[:, None, None]
    y = np.arange(n)[None, :, None]
    z = np.arange(n)[None, None, :]
    out = np.zeros((s, n, n), np.complex128)
    for kx, ky, kz, a in WAVES:
        out += a * np.exp(2j * np.pi * ((kx * x + ky * y + kz * z) % n) / n)
    return out


def fft3d(planes: np.ndarray, alltoall, P: int, clock) -> tuple[np.ndarray, tuple[float, float, float]]:
    """Transform; returns this rank's output ``(n, n/P, n)`` (all kx, its ky block, all kz) and the phase times."""
    s, n, _ = planes.shape
    t0 = clock()
    send = np.ascontiguousarray(np.fft.fft2(planes, axes=(1, 2)).reshape(s, P, s, n).transpose(1, 0, 2, 3))
    t1 = clock()
    recv = np.empty_like(send)
    alltoall(send, recv)
    t2 = clock()
    out = np.fft.fft(recv.reshape(n, s, n), axis=0)  # block i = x-planes of rank i: rows i*s..(i+1)*s
    t3 = clock()
    return out, (t1 - t0, t2 - t1, t3 - t2)


def first_error(out: np.ndarray, n: int, P: int, rank: int) -> str | None:
    """``None`` if this rank's output is the exact transform of the test input (to rounding), else where not."""
    s = n // P
    want = np.zeros_like(out)
    for kx, ky, kz, a in WAVES:
        kx, ky, kz = kx % n, ky % n, kz % n
        if rank * s <= ky < (rank + 1) * s:
            want[kx, ky - rank * s, kz] += n ** 3 * a
    err = np.abs(out - want)
    bad = np.unravel_index(int(np.argmax(err)), err.shape)
    if err[bad] > 1e-6 * n ** 3:
        kx, y, kz = (int(i) for i in bad)
        return (f"rank {rank}: FFT output at (kx, ky, kz) = ({kx}, {y + rank * s}, {kz}) is off by "
                f"{err[bad]:.3g}")
    return None
