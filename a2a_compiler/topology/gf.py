"""Finite fields GF(q), q = p^n, for the Slim Fly / MMS construction.

Besta & Hoefler 2014 §II-B build MMS graphs over GF(q); for a non-prime q that
is polynomial arithmetic over Z_p modulo an irreducible polynomial, not integers
mod q.  Elements are the integers ``0 .. q-1``: element ``a`` stands for the
polynomial whose coefficients are the base-p digits of ``a`` (lowest digit =
constant term).  For a prime q this is plain arithmetic mod q.

Arithmetic is tabulated (``q x q`` tables), which suits the small fields that
network constructions use.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np


def prime_power(q: int) -> tuple[int, int] | None:
    """``(p, n)`` with ``q == p**n`` and p prime, or ``None`` if q is not a prime power."""
    if q < 2:
        return None
    p = next(f for f in range(2, q + 1) if q % f == 0)  # smallest factor: prime
    n = 0
    while q % p == 0:
        q //= p
        n += 1
    return (p, n) if q == 1 else None


def _digits(q: int, p: int, n: int) -> np.ndarray:
    """``(q, n)`` base-p digits of 0..q-1, lowest first."""
    return (np.arange(q)[:, None] // p ** np.arange(n)[None, :]) % p


def _mul_table(p: int, n: int, modulus: np.ndarray) -> np.ndarray:
    """Multiplication table of Z_p[x] / (x^n + modulus[n-1] x^(n-1) + ... + modulus[0])."""
    q = p**n
    dig = _digits(q, p, n)
    # times_x[i] = vectors of a * x^i (mod the polynomial), for every element a.
    times_x = [dig]
    for _ in range(1, n):
        prev = times_x[-1]
        top = prev[:, -1:]                                  # coefficient pushed to x^n
        shifted = np.concatenate([np.zeros((q, 1), np.int64), prev[:, :-1]], axis=1)
        times_x.append((shifted - top * modulus[None, :]) % p)  # x^n = -sum modulus_j x^j
    # a * b = sum_i b_i (a x^i)
    prod = np.einsum("bi,ian->abn", dig, np.stack(times_x)) % p
    return prod @ (p ** np.arange(n))


@dataclass(frozen=True, eq=False)
class GF:
    """The finite field GF(q) with tabulated arithmetic.

    ``add``, ``sub``, ``mul`` are ``q x q`` tables; ``modulus`` lists the low
    coefficients ``(c_0, .., c_{n-1})`` of the monic irreducible polynomial
    (``(0,)``, i.e. ``x``, for a prime field); ``primitive`` is the smallest
    element generating the multiplicative group, and ``powers[k] = primitive**k``
    for ``k = 0 .. q-2``.
    """

    q: int
    p: int
    n: int
    modulus: tuple[int, ...]
    add: np.ndarray
    sub: np.ndarray
    mul: np.ndarray
    primitive: int
    powers: np.ndarray

    def power(self, k: int) -> int:
        """``primitive ** k`` (k taken mod q-1, as exponents of a primitive element are)."""
        return int(self.powers[k % (self.q - 1)])


@lru_cache(maxsize=32)
def field(q: int) -> GF:
    """Build GF(q).  Raises ``ValueError`` if q is not a prime power.

    The modulus is the first monic irreducible polynomial of degree n in the
    order of its low coefficients read as a base-p number (x for prime q); a
    candidate is irreducible iff the quotient ring has no zero divisors.
    """
    pn = prime_power(q)
    if pn is None:
        raise ValueError(f"{q} is not a prime power")
    p, n = pn
    dig = _digits(q, p, n)
    for cand in dig:
        mul = _mul_table(p, n, cand)
        if np.all(mul[1:, 1:] != 0):
            break
    add = (dig[:, None, :] + dig[None, :, :]) % p @ (p ** np.arange(n))
    sub = (dig[:, None, :] - dig[None, :, :]) % p @ (p ** np.arange(n))
    for g in range(1, q):
        seq = [1]
        for _ in range(q - 2):
            seq.append(int(mul[seq[-1], g]))
        if len(set(seq)) == q - 1:
            break
    tables = [add, sub, mul]
    powers = np.array(seq, dtype=np.int64)
    for t in tables + [powers]:
        t.setflags(write=False)
    return GF(q, p, n, tuple(int(c) for c in cand), *tables, g, powers)
