"""Self-identifying test data: every byte of shard ``src -> dst`` is a hash of ``(src, dst, offset)``.

A chunk delivered to the wrong rank, the wrong shard or the wrong offset
therefore shows up as wrong bytes; :func:`first_error` names the first one.
"""

from __future__ import annotations

import numpy as np

_MUL = np.uint32(0x9E3779B1)
_MIX1 = np.uint32(0x85EBCA6B)
_MIX2 = np.uint32(0xC2B2AE35)


def pattern(src: int, dst: int, nbytes: int) -> np.ndarray:
    """The ``nbytes`` bytes rank ``src`` sends rank ``dst`` (vectorised murmur-style mix)."""
    key = np.uint32((src * 0x27D4EB2F + dst * 0x165667B1 + 0x3C6EF372) & 0xFFFFFFFF)
    h = np.arange((nbytes + 3) // 4, dtype=np.uint32)
    h *= _MUL
    h += key
    h ^= h >> np.uint32(16)
    h *= _MIX1
    h ^= h >> np.uint32(13)
    h *= _MIX2
    h ^= h >> np.uint32(16)
    return h.view(np.uint8)[:nbytes]


def _blocks(buf: np.ndarray, nranks: int, counts) -> list[np.ndarray]:
    """``buf`` cut into ``nranks`` equal shards, or packed blocks of ``counts`` bytes (an all-to-allv)."""
    if counts is None:
        return list(buf.reshape(nranks, -1))
    ends = np.cumsum(counts)
    return [buf[e - c:e] for e, c in zip(ends.tolist(), np.asarray(counts).tolist())]


def fill(sendbuf: np.ndarray, rank: int, nranks: int, counts=None) -> None:
    """Fill ``sendbuf`` (``nranks*m`` bytes, or packed blocks of ``counts[d]`` bytes) with rank ``rank``'s shards."""
    for d, block in enumerate(_blocks(sendbuf, nranks, counts)):
        block[:] = pattern(rank, d, len(block))


def first_error(recvbuf: np.ndarray, rank: int, nranks: int, counts=None) -> str | None:
    """``None`` if ``recvbuf`` (equal shards, or packed blocks of ``counts[s]`` bytes) holds exactly what
    every rank sent ``rank``, else the first wrong byte."""
    for s, block in enumerate(_blocks(recvbuf, nranks, counts)):
        want = pattern(s, rank, len(block))
        if not np.array_equal(block, want):
            off = int(np.flatnonzero(block != want)[0])
            return (f"rank {rank}: byte {off} of the shard from rank {s} is 0x{int(block[off]):02x}, "
                    f"expected 0x{int(want[off]):02x}")
    return None
