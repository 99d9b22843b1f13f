"""One rank of a torch.distributed (gloo) test job: ``python torch_ranks.py CASE ARGS`` under tests/torchjobs.py.

Every rank prints one JSON line on stdout; an :class:`A2AError` is one line on stderr and exit 2.

* ``exact FILE[@MAP]...``: each schedule (under rank map MAP) against ``dist.all_to_all_single`` (equal and
  random splits, zero-size blocks included, float32, bfloat16 and int64) and ``dist.all_to_all``: which cases
  were byte-exact.
* ``checks FILE4 FILE8``: bad inputs, the drop-in and a rank map on 4 ranks (:func:`checks`).
* ``bad late|dead FILE``: a late or a dead rank; the error each rank got.
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist

from a2a_compiler.errors import A2AError

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "int64": torch.int64}


def _payload(rows: int, dtype, rank: int, call: int):
    g = torch.Generator().manual_seed(1000 * call + rank)
    return (torch.randn(rows, 3, generator=g) * 1000).to(dtype)


def _splits(n: int, call: int) -> torch.Tensor:
    """Rows rank s sends rank d: random 0..6 with rank 0 sending nothing to rank 1 and rank 2 nothing at all."""
    s = torch.randint(0, 7, (n, n), generator=torch.Generator().manual_seed(call))
    s[0, 1] = 0
    s[2, :] = 0
    return s


def _same(a, b) -> bool:
    return a.shape == b.shape and torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


def exact(files: list[str]) -> dict:
    from runtimes.torch import AllToAll

    n, me = dist.get_world_size(), dist.get_rank()
    out = {}
    for f in files:
        path, _, rank_map = f.partition("@")
        a2a = AllToAll(path, rank_map=rank_map or None)
        res = {}
        for call, (name, dtype) in enumerate(DTYPES.items()):
            x = _payload(n * 4, dtype, me, call)
            ref, ours = torch.empty_like(x), torch.full_like(x, 7)
            dist.all_to_all_single(ref, x)
            a2a.all_to_all_single(ours, x)
            res[f"uniform/{name}"] = _same(ref, ours)
            for k in range(2):                          # the splits change from call to call
                sp = _splits(n, 10 * call + k)
                ins, outs = sp[me].tolist(), sp[:, me].tolist()
                x = _payload(sum(ins), dtype, me, call)
                ref = torch.empty(sum(outs), 3, dtype=dtype)
                ours = torch.full_like(ref, 7)
                dist.all_to_all_single(ref, x, outs, ins)
                a2a.all_to_all_single(ours, x, outs, ins)
                res[f"random{k}/{name}"] = _same(ref, ours)
            ins = list(_payload(2 * n, dtype, me, call).chunk(n))   # gloo's list form takes equal sizes only
            ref = [torch.empty(2, 3, dtype=dtype) for _ in range(n)]
            ours = [torch.full_like(t, 7) for t in ref]
            dist.all_to_all(ref, ins)
            a2a.all_to_all(ours, ins)
            res[f"list/{name}"] = all(_same(a, b) for a, b in zip(ref, ours))
        out[f] = {"format": a2a.format, "exact": res}
    return out


def checks(file4: str, file8: str) -> dict:
    """On 4 ranks, one after another (each error leaves the group usable): the line each bad input raised,
    then a good call, the drop-in (a world call, an async one, one on another group, one under
    torch.compile) and a permuted rank map, each against gloo's own result."""
    from runtimes.torch import AllToAll, install

    n, me = dist.get_world_size(), dist.get_rank()
    out = {}

    def error(name, fn):
        try:
            fn()
        except A2AError as exc:
            out[name] = str(exc)

    error("size", lambda: AllToAll(file8))
    error("rank_map", lambda: AllToAll(file4, rank_map=file4 + ".bad.map"))
    a2a = AllToAll(file4, timeout=60.0)
    x = torch.arange(4.0 * n) + 100 * me
    outs = [5 if (me == 1 and s == 0) else 4 for s in range(n)]   # rank 1 expects 1 element more from rank 0
    error("splits", lambda: a2a.all_to_all_single(torch.empty(sum(outs)), x, outs, [4] * n))
    noncontiguous = torch.arange(8.0 * n).reshape(-1, 2)[:, 0] if me == 2 else x
    error("noncontiguous", lambda: a2a.all_to_all_single(torch.empty_like(x), noncontiguous))
    error("dtype", lambda: a2a.all_to_all_single(torch.empty(4 * n, dtype=torch.float64 if me == 3 else None), x))
    ref, y = torch.empty_like(x), torch.empty_like(x)
    dist.all_to_all_single(ref, x)
    a2a.all_to_all_single(y, x)
    out["after_errors_exact"] = _same(ref, y)
    pair = dist.new_group([0, 1])
    original = dist.all_to_all_single
    want = layer(x)                                                   # natively
    with install(file4) as inst:
        y = torch.empty_like(x)
        dist.all_to_all_single(y, x, async_op=True).wait()
        out["async_exact"] = _same(ref, y)
        if me < 2:
            z = torch.empty(2)
            dist.all_to_all_single(z, torch.tensor([10.0 * me, 10.0 * me + 1]), group=pair)
            out["other_group"] = z.tolist()
        out["compiled_exact"] = _same(torch.compile(layer, backend="eager")(x), want)   # a graph break
        out["calls"] = [inst.taken, inst.passed]
    out["restored"] = dist.all_to_all_single is original and dist.distributed_c10d.all_to_all_single is original
    perm = AllToAll(file4, rank_map=file4 + ".perm.map")
    y = torch.empty_like(x)
    perm.all_to_all_single(y, x)
    out["permuted_map_exact"] = _same(ref, y)
    return out


def layer(t):
    """A model fragment calling ``dist.all_to_all_single`` (what ``torch.compile`` compiles in :func:`checks`)."""
    u = torch.empty_like(t)
    dist.all_to_all_single(u, (t * 2).contiguous())
    return u + 1


def bad(what: str, file: str) -> dict:
    """Rank ``n-1`` is late (sleeps past the 3 s timeout) or dies (``os._exit(9)``) before a call."""
    from runtimes.torch import AllToAll

    n, me = dist.get_world_size(), dist.get_rank()
    a2a = AllToAll(file, timeout=3.0)
    dist.barrier()                         # every rank has its plan
    if me == n - 1:
        if what == "dead":
            os._exit(9)
        time.sleep(8)
        return {"ok": True}
    x = torch.arange(4.0 * n)
    a2a.all_to_all_single(torch.empty_like(x), x)
    return {"ok": True}


def main() -> int:
    case, args = sys.argv[1], sys.argv[2:]
    dist.init_process_group("gloo")
    try:
        print(json.dumps({"exact": exact, "bad": bad, "checks": checks}[case](*([args] if case == "exact" else args))),
              flush=True)
    except A2AError as exc:
        print(f"torch_ranks: error: {exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
