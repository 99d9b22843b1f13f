"""The demand matrix of an all-to-allv: reading, validation, generators, canonical form.

A mixture-of-experts layer's all-to-all is an all-to-allv: rank ``s`` sends rank
``d`` as many tokens as its router gave ``d``'s experts, and expert popularity
is skewed.  Its *demand matrix* ``D[s, d]`` (relative volumes, diagonal local and
ignored) generalises every flow LP of Basu et al. directly: the maximum
concurrent flow with demands is the largest ``F`` such that every pair can ship
``F·D[s, d]`` at once; the uniform all-to-all is ``D = 1``.

**Canonical form.**  :class:`Demand` keeps the matrix as read (``matrix``) and
its canonical *volumes*: scaled so that the mean off-diagonal entry is 1 (the
volume of a uniform all-to-all, so ``1/F`` compares with the uniform time at
equal total bytes) and snapped to the dyadic grid of
:func:`~a2a_compiler.numeric.snap`.  Every stage uses the volumes, so the same
matrix -- and any multiple of it -- gives byte-identical outputs, and equal
entries tie exactly.  A uniform matrix has volumes exactly 1 and is treated as
no demand at all (``D = 1`` outputs are those of the plain all-to-all).

**Files** (:func:`read_demand`): CSV (``N`` lines of ``N`` comma-separated
decimal numbers, :data:`NUMBER`; ``#`` comments and blank lines skipped) or NumPy ``.npy`` (a 2-D numeric
array).  Every problem is one :class:`~a2a_compiler.errors.A2AError` line: an
unreadable file, a non-numeric cell, a ragged or non-square matrix, the wrong
size for the topology, a negative, NaN or infinite entry off the diagonal (the diagonal, local, is
ignored whatever it holds), an all-zero matrix,
entries spanning more than :data:`DYNAMIC_RANGE` (the LPs would lose them).

**Generators** (what users have at hand):

* :func:`zipf_demand` -- seeded Zipf-skewed expert popularity: ``E = N·experts_per_rank``
  experts, expert popularity ``∝ (1 + r)^-alpha`` for its popularity rank ``r``
  (a seeded permutation), every rank routes ``tokens`` tokens to ``top_k``
  distinct experts each, sampled by popularity.  ``alpha = 0`` is no skew
  (sampling noise only); ``alpha >= 1`` is strong.
* :func:`router_demand` -- an MoE router's top-k assignments read from a tensor
  dump: a ``.npy`` integer array of shape ``(N, T, k)`` (or ``(N, T)`` for top-1),
  entry ``[s, t, j]`` the ``j``-th expert id chosen for token ``t`` of rank ``s``;
  ``E`` experts are placed contiguously, ``E/N`` per rank (expert ``e`` on rank
  ``e // (E/N)``); a token's top-k experts must be distinct.

Both return integer token counts (the diagonal holds the tokens a rank keeps).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .errors import A2AError
from .numeric import snap, splitmix64, unit_uniforms

#: Largest demand matrix accepted (ranks).
MAX_RANKS = 4096
#: Positive entries may span at most this ratio (smallest / largest); beyond it the flow LPs lose them.
DYNAMIC_RANGE = 1e9
#: Generator limits: tokens x top-k x ranks samples at most (bounded time and memory).
MAX_SAMPLES = 50_000_000


@dataclass(frozen=True, eq=False)
class Demand:
    """An ``N x N`` demand matrix: ``matrix`` as given (diagonal zeroed), ``volumes`` its canonical form
    (mean off-diagonal entry 1, snapped), ``source`` where it came from (a path or a generator call)."""

    matrix: np.ndarray
    volumes: np.ndarray
    source: str = "<array>"

    @classmethod
    def from_array(cls, array, source: str = "<array>", n: int | None = None) -> "Demand":
        """Validate ``array`` (one :class:`A2AError` line per problem, naming ``source``) and canonicalise it.

        ``n``, when given, is the number of hosts the matrix must match.
        """
        a = np.asarray(array)
        if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
            raise A2AError(f"{source}: the demand matrix must hold numbers, got {a.dtype} entries")
        if a.ndim != 2 or a.shape[0] != a.shape[1]:
            raise A2AError(f"{source}: the demand matrix must be square (N x N), got shape "
                           f"{' x '.join(map(str, a.shape)) or 'scalar'}")
        size = a.shape[0]
        if n is not None and size != n:
            raise A2AError(f"{source}: the demand matrix is {size} x {size}, but there are {n} hosts; "
                           f"it must be {n} x {n}")
        if size < 2 or size > MAX_RANKS:
            raise A2AError(f"{source}: a demand matrix needs 2 .. {MAX_RANKS} ranks, got {size}")
        a = a.astype(float)
        a[np.arange(size), np.arange(size)] = 0.0          # local: ignored, whatever it holds
        bad = np.argwhere(~np.isfinite(a))
        if len(bad):
            i, j = map(int, bad[0])
            raise A2AError(f"{source}: entry ({i}, {j}) is {a[i, j]}; demands must be finite numbers")
        neg = np.argwhere(a < 0)
        if len(neg):
            i, j = map(int, neg[0])
            raise A2AError(f"{source}: entry ({i}, {j}) is negative ({a[i, j]:g}); demands are volumes >= 0")
        try:
            total = math.fsum(a.ravel().tolist())
        except OverflowError:  # finite entries whose sum is not
            total = math.inf
        if total <= 0:
            raise A2AError(f"{source}: every off-diagonal entry is zero; there is nothing to send")
        if not math.isfinite(total):
            raise A2AError(f"{source}: the entries sum to {total}; scale the matrix down")
        pos = a[a > 0]
        if pos.min() < pos.max() / DYNAMIC_RANGE:
            i, j = map(int, np.argwhere(a == pos.min())[0])
            raise A2AError(f"{source}: entry ({i}, {j}) = {pos.min():g} is below 1e-9 of the largest "
                           f"({pos.max():g}); the flow LPs cannot resolve it (make it 0 or larger)")
        scaled = a
        if not math.isfinite(size * (size - 1) / total):   # subnormal entries: scale by the largest first
            scaled = a / pos.max()
            total = math.fsum(scaled.ravel().tolist())
        volumes = snap(scaled * (size * (size - 1) / total))
        volumes[np.arange(size), np.arange(size)] = 0.0
        a.setflags(write=False)
        volumes.setflags(write=False)
        return cls(a, volumes, source)

    @classmethod
    def from_volumes(cls, volumes, source: str = "<file>") -> "Demand":
        """The demand whose canonical volumes a file recorded (:meth:`to_json_dict`), taken as they are
        (canonicalising again could move an entry by one grid step); checked square, finite, >= 0, not all 0."""
        v = np.array(volumes, dtype=float)
        if v.ndim != 2 or v.shape[0] != v.shape[1] or v.shape[0] < 2 or not np.all(np.isfinite(v)) \
                or np.any(v < 0) or np.any(np.diag(v) != 0) or not np.any(v > 0):
            raise A2AError(f"{source}: the recorded demand volumes are not an N x N matrix of finite volumes >= 0 "
                           f"with a zero diagonal")
        v.setflags(write=False)
        return cls(v, v, source)

    # ------------------------------------------------------------ properties
    @property
    def n(self) -> int:
        """Number of ranks."""
        return len(self.volumes)

    @property
    def is_uniform(self) -> bool:
        """Every off-diagonal volume equal (then exactly 1): the plain all-to-all."""
        off = ~np.eye(self.n, dtype=bool)
        return bool(np.all(self.volumes[off] == 1.0))

    @property
    def sha256(self) -> str:
        """Hash of the canonical volumes: equal for the same matrix (or a multiple of it) on every machine."""
        h = hashlib.sha256(f"a2a-demand:{self.n}:".encode())
        h.update(np.ascontiguousarray(self.volumes, dtype="<f8").tobytes())
        return h.hexdigest()

    def of_pairs(self, src, dst) -> np.ndarray:
        """Volumes of the pairs ``(src[i], dst[i])``."""
        return self.volumes[np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)]

    def row_sums(self) -> np.ndarray:
        """Volume each rank sends (exactly rounded sums)."""
        return np.array([math.fsum(r) for r in self.volumes.tolist()])

    def col_sums(self) -> np.ndarray:
        """Volume each rank receives (exactly rounded sums)."""
        return np.array([math.fsum(c) for c in self.volumes.T.tolist()])

    def balanced(self) -> bool:
        """Every rank sends and receives the same total (what a fixed-size buffer all-to-allv expresses)."""
        sums = np.concatenate([self.row_sums(), self.col_sums()])
        return bool(np.all(np.abs(sums - sums[0]) <= 1e-9 * sums[0]))

    def invariant_under(self, perm: np.ndarray) -> bool:
        """Is ``D[p(s), p(d)] == D[s, d]`` for every pair (``perm`` maps the hosts, at least ``n`` entries)?"""
        p = np.asarray(perm, dtype=np.int64)[: self.n]
        return bool(np.array_equal(self.volumes[np.ix_(p, p)], self.volumes))

    def stats(self) -> dict:
        """Skew figures of the canonical volumes (mean off-diagonal entry 1)."""
        rows, cols = self.row_sums(), self.col_sums()
        off = self.volumes[~np.eye(self.n, dtype=bool)]
        return {"ranks": self.n, "max": float(off.max()), "min": float(off.min()), "zero_pairs": int((off == 0).sum()),
                "max_send": float(rows.max()), "max_receive": float(cols.max()),
                "receive_skew": float(cols.max() / (self.n - 1)), "send_skew": float(rows.max() / (self.n - 1)),
                "balanced": self.balanced(), "uniform": self.is_uniform}

    def pair_bytes(self, mean: int) -> np.ndarray:
        """Bytes of every pair for a mean block of ``mean`` bytes: ``D[s, d]·mean`` rounded half up (volumes have
        mean 1, so the total is that of a uniform all-to-all with shards of ``mean`` bytes)."""
        return np.floor(self.volumes * mean + 0.5).astype(np.int64)

    def to_json_dict(self, max_ranks: int = 16) -> dict:
        """What output files record: source, size, hash, and the canonical volumes when ``n <= max_ranks``."""
        d = {"source": Path(self.source).name if not self.source.startswith(("<", "zipf(")) else self.source,
             "ranks": self.n, "sha256": self.sha256}
        if self.n <= max_ranks:
            d["volumes"] = self.volumes.tolist()
        return d

    def to_csv(self) -> str:
        """The matrix as given (diagonal zeroed) in CSV: integers as integers, other values exactly (``repr``)."""
        def cell(v: float) -> str:
            return str(int(v)) if v == int(v) and abs(v) < 2**53 else repr(float(v))
        return "".join(",".join(cell(v) for v in row) + "\n" for row in self.matrix.tolist())

    def require_balanced(self, fmt: str = "MSCCL") -> None:
        """Refuse (one line naming the alternatives) a matrix the fixed-size buffers of ``fmt`` (MSCCL,
        MSCCL++) cannot hold."""
        for what, sums in (("sends", self.row_sums()), ("receives", self.col_sums())):
            if np.any(sums == 0):
                raise A2AError(f"{self.source}: rank {int(np.flatnonzero(sums == 0)[0])} {what} nothing, and {fmt}'s "
                               f"fixed-size buffers need every rank to send and receive the same total; use the "
                               f"MPI path format (--emit mpi) or oneCCL-style XML (--emit oneccl)")
        if not self.balanced():
            raise A2AError(f"{self.source}: {fmt}'s fixed-size buffers need every rank to send and receive the "
                           f"same total, and this matrix's rows and columns differ; use the MPI path format "
                           f"(--emit mpi) or oneCCL-style XML (--emit oneccl)")


# ------------------------------------------------------------------ files
def read_demand(path, n: int | None = None) -> Demand:
    """Read a CSV or ``.npy`` demand matrix (module docstring); ``n`` is the host count it must match."""
    from .files import read_bytes

    data = read_bytes(path)
    path = Path(path)
    source = str(path)
    if data.startswith(NPY_MAGIC):
        return Demand.from_array(_load_npy(data, source), source, n)
    return Demand.from_array(_parse_csv(data, source), source, n)


#: The first bytes of a .npy file.
NPY_MAGIC = b"\x93NUMPY"


def _load_npy(data: bytes, source: str) -> np.ndarray:
    """The array of a .npy file's bytes (never unpickled: object arrays are refused)."""
    import io

    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise A2AError(f"{source}: the .npy array holds Python objects; save numbers") from None
        raise A2AError(f"{source}: not a readable .npy array: {str(exc).splitlines()[0]}") from None
    except (OSError, EOFError) as exc:
        raise A2AError(f"{source}: not a readable .npy array: {str(exc).splitlines()[0]}") from None


def _parse_csv(data: bytes, source: str) -> np.ndarray:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise A2AError(f"{source}: not a text (CSV) or .npy file") from None
    rows, width = [], None
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) > MAX_RANKS:
            raise A2AError(f"{source}: line {lineno} has {len(cells)} entries, more than {MAX_RANKS} ranks")
        bad = next((c for c in cells if not _is_number(c)), None)
        if bad is not None:
            raise A2AError(f"{source}: line {lineno}: {bad!r} is not a number") from None
        row = [float(c) for c in cells]
        if width is not None and len(row) != width:
            raise A2AError(f"{source}: line {lineno} has {len(row)} entr{'y' if len(row) == 1 else 'ies'}, the "
                           f"first row {width}; the demand matrix must be N x N")
        width = len(row)
        rows.append(row)
        if len(rows) > MAX_RANKS:
            raise A2AError(f"{source}: more than {MAX_RANKS} rows")
    if not rows:
        raise A2AError(f"{source}: no numbers in the file; a demand matrix is N lines of N comma-separated numbers")
    return np.array(rows, dtype=float)


#: A CSV cell: a decimal number as CSV writers spell it (Python's float() also takes ``3_78``, read as 378).
NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf|infinity)", re.IGNORECASE)


def _is_number(text: str) -> bool:
    return NUMBER.fullmatch(text) is not None


def as_demand(value, n: int | None = None) -> Demand | None:
    """``None`` (uniform), a :class:`Demand`, an array or a file path -> a non-uniform :class:`Demand` or ``None``.

    A uniform matrix becomes ``None``: the plain all-to-all, whose outputs it must reproduce.
    """
    if value is None:
        return None
    if isinstance(value, Demand):
        d = value
        if n is not None and d.n != n:
            raise A2AError(f"{d.source}: the demand matrix is {d.n} x {d.n}, but there are {n} hosts; "
                           f"it must be {n} x {n}")
    elif isinstance(value, (str, os.PathLike)):
        d = read_demand(value, n)
    else:
        d = Demand.from_array(value, "<array>", n)
    return None if d.is_uniform else d


# ------------------------------------------------------------- generators
def zipf_demand(n: int, alpha: float = 1.0, *, experts_per_rank: int = 2, tokens: int = 4096, top_k: int = 2,
                seed: int = 0, batch: int = 0) -> Demand:
    """Token counts of a seeded MoE layer whose expert popularity is Zipf-skewed (module docstring).

    Expert ``e`` sits on rank ``e // experts_per_rank``; its popularity rank is a
    seeded permutation and its popularity ``(1 + rank)^-alpha`` (normalised, snapped).
    Each of the ``tokens`` tokens of every rank picks ``top_k`` distinct experts: candidates
    are drawn by popularity from a splitmix64 stream keyed by ``(seed, rank, token, draw)``
    and the first ``top_k`` distinct ones kept (after 16·top_k draws, the most popular
    experts not yet chosen fill in).  ``batch`` draws another batch of tokens for the same
    experts and popularity (the next step of the same layer).  Exact arithmetic throughout:
    the same counts on every machine.  Returns a :class:`Demand` of integer counts (diagonal:
    tokens kept local).
    """
    if n < 2 or n > MAX_RANKS:
        raise A2AError(f"zipf demand: ranks must be 2 .. {MAX_RANKS}, got {n}")
    if experts_per_rank < 1 or tokens < 1 or top_k < 1:
        raise A2AError("zipf demand: experts per rank, tokens and top-k must be >= 1")
    E = n * experts_per_rank
    if top_k > E:
        raise A2AError(f"zipf demand: top-k {top_k} exceeds the {E} experts")
    if not (math.isfinite(alpha) and 0 <= alpha <= 8):
        raise A2AError(f"zipf demand: alpha must be in 0 .. 8, got {alpha}")
    draws = 16 * top_k
    if n * tokens * draws > MAX_SAMPLES:
        raise A2AError(f"zipf demand: {n} ranks x {tokens} tokens x {draws} draws exceed {MAX_SAMPLES} samples; "
                       f"use fewer tokens")
    base = np.uint64(seed & 0xFFFFFFFF) << np.uint64(32)
    order = np.argsort(unit_uniforms(base + np.arange(E, dtype=np.uint64)), kind="stable")
    rank_of = np.empty(E, dtype=np.int64)
    rank_of[order] = np.arange(E)                   # popularity rank of each expert
    weight = snap(np.array([(1.0 + r) ** -float(alpha) for r in rank_of.tolist()]))
    cum = np.cumsum(weight)
    s, t, k = np.meshgrid(np.arange(n, dtype=np.uint64), np.arange(tokens, dtype=np.uint64),
                          np.arange(draws, dtype=np.uint64), indexing="ij")
    stream = splitmix64(np.uint64(((seed & 0xFFFFFFFF) << 32) | (batch & 0xFFFFFFFF)))   # the tokens' stream
    key = stream + (s * np.uint64(tokens) + t) * np.uint64(draws) + k
    cand = np.searchsorted(cum, unit_uniforms(key) * cum[-1], side="right")      # (n, tokens, draws)
    cand = np.minimum(cand, E - 1)
    token = np.arange(n * tokens, dtype=np.int64).reshape(n, tokens, 1)
    _, at = np.unique((token * E + cand).ravel(), return_index=True)       # each token's first draw of an expert
    first = np.zeros(cand.size, dtype=bool)
    first[at] = True
    first = first.reshape(cand.shape)
    keep = first & (np.cumsum(first, axis=-1) <= top_k)
    counts = np.zeros((n, E), dtype=np.int64)
    np.add.at(counts, (np.broadcast_to(np.arange(n)[:, None, None], cand.shape)[keep], cand[keep]), 1)
    short = top_k - keep.sum(axis=-1)               # tokens that found fewer than top_k distinct experts
    if short.any():
        by_popularity = np.argsort(rank_of, kind="stable")
        for si, ti in zip(*np.nonzero(short)):
            chosen = set(cand[si, ti][keep[si, ti]].tolist())
            for e in [e for e in by_popularity.tolist() if e not in chosen][: short[si, ti]]:
                counts[si, e] += 1
    matrix = counts.reshape(n, n, experts_per_rank).sum(axis=2)
    return Demand.from_array(matrix, f"zipf(n={n}, alpha={alpha:g}, experts_per_rank={experts_per_rank}, "
                                     f"tokens={tokens}, top_k={top_k}, seed={seed}"
                                     + (f", batch={batch})" if batch else ")"))


def router_demand(path, experts: int | None = None, n: int | None = None) -> Demand:
    """Token counts from a router dump: ``.npy`` expert ids of shape ``(N, T, k)`` or ``(N, T)`` (module docstring).

    ``experts`` is ``E`` (default: the smallest multiple of ``N`` above the largest id);
    it must be a multiple of ``N``.  Ids must lie in ``0 .. E-1``.
    """
    from .files import read_bytes

    source = str(path)
    data = read_bytes(path)
    if not data.startswith(NPY_MAGIC):
        raise A2AError(f"{source}: not a .npy file; a router dump is an integer array saved by numpy.save")
    ids = _load_npy(data, source)
    if not np.issubdtype(ids.dtype, np.integer):
        raise A2AError(f"{source}: expert ids must be integers, got {ids.dtype}")
    if ids.ndim == 2:
        ids = ids[:, :, None]
    if ids.ndim != 3 or ids.shape[0] < 2 or ids.shape[1] < 1 or ids.shape[2] < 1:
        raise A2AError(f"{source}: a router dump is an array of shape (ranks, tokens, top_k) or (ranks, tokens), "
                       f"got shape {ids.shape}")
    ranks = ids.shape[0]
    if n is not None and ranks != n:
        raise A2AError(f"{source}: a dump of {ranks} ranks for {n} hosts")
    if ranks > MAX_RANKS:
        raise A2AError(f"{source}: {ranks} ranks, more than {MAX_RANKS}")
    top = int(ids.max())
    if ids.min() < 0:
        raise A2AError(f"{source}: expert id {int(ids.min())} is negative")
    E = experts if experts is not None else ranks * (top // ranks + 1)
    if E < 1 or E % ranks:
        raise A2AError(f"{source}: {E} experts cannot be spread evenly over {ranks} ranks (need a multiple)")
    if top >= E:
        raise A2AError(f"{source}: expert id {top} is outside 0 .. {E - 1} ({E} experts)")
    ordered = np.sort(ids, axis=2)
    twice = np.argwhere(ordered[:, :, 1:] == ordered[:, :, :-1])
    if len(twice):
        s, t, j = map(int, twice[0])
        raise A2AError(f"{source}: token {t} of rank {s} chose expert {int(ordered[s, t, j])} twice; a router's "
                       f"top-k experts of a token are distinct")
    owner = ids.astype(np.int64) // (E // ranks)
    matrix = np.zeros((ranks, ranks), dtype=np.int64)
    np.add.at(matrix, (np.broadcast_to(np.arange(ranks)[:, None, None], owner.shape).ravel(), owner.ravel()), 1)
    return Demand.from_array(matrix, source)


__all__ = ["Demand", "read_demand", "as_demand", "zipf_demand", "router_demand"]
