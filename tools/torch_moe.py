"""A worked mixture-of-experts example: an unmodified top-k MoE layer on gloo CPU ranks, natively or through a
compiled demand-aware schedule installed with one line (docs/torch.md).

    python tools/torch_moe.py --ranks 8 --dump-router routing.npy          # native; dumps step 0's routing
    a2a demand router routing.npy --experts 16 -o D.csv                    # the router's demand matrix
    a2a compile bipartite:4 --emit mpi --demand D.csv -o moe.mpi.xml       # a schedule for that demand
    python tools/torch_moe.py --ranks 8 --schedule moe.mpi.xml --compare   # native, then the schedule: same losses

Every rank holds ``--experts-per-rank`` experts; the router (a linear layer with a Zipf-skewed bias, so a
few experts get most tokens) sends each token to its top ``--top-k`` experts.  The layer exchanges the split
sizes and then the tokens with ``dist.all_to_all_single`` (dispatch and combine, and both again in the
backward pass), as expert-parallel code does; ``--schedule`` only calls ``a2a_compiler.torch.install``
before the model runs.  Rank 0 prints one JSON line per step: the loss (``float.hex``, so equal lines mean
bit-identical losses) and the step's time; then how many calls the schedule took.  ``--compare`` trains
natively and then through the schedule, from the same initial model and data, in one job.  ``--compile`` runs the
layer under ``torch.compile`` (the ``eager`` backend: the all-to-all is a graph break).  Without ``RANK`` in
the environment the script starts ``--ranks`` gloo ranks itself (as torchrun would).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

from _quick import apply_quick   # tools/_quick.py: the scripts' shared --quick

#: The schedule --quick runs (8 ranks).
QUICK_SCHEDULE = "bipartite-4-mcf-extp.mpi.xml"
QUICK_SCHEDULE_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schedules",
                                   QUICK_SCHEDULE)


def parser() -> argparse.ArgumentParser:
    """The options; read before torch is imported, so that --help and a bad option need no torch."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--ranks", type=int, default=8, help="ranks to start when not under torchrun (default 8)")
    p.add_argument("--schedule", metavar="FILE", help="install this compiled schedule (default: native)")
    p.add_argument("--compare", action="store_true", help="with --schedule: run natively first, then the schedule")
    p.add_argument("--steps", type=int, help="training steps (default 4)")
    p.add_argument("--tokens", type=int, help="tokens per rank per step (default 256)")
    p.add_argument("--dim", type=int, default=32, help="model width (default 32)")
    p.add_argument("--experts-per-rank", type=int, default=2, help="experts per rank (default 2)")
    p.add_argument("--top-k", type=int, default=2, help="experts per token (default 2)")
    p.add_argument("--skew", type=float, default=1.0, help="router skew: bias -skew*log(1+r) (default 1)")
    p.add_argument("--compile", action="store_true", help="run the layer under torch.compile (eager backend)")
    p.add_argument("--dump-router", metavar="NPY", help="save step 0's expert ids (ranks, tokens, top_k)")
    p.add_argument("--quick", action="store_true",
                   help=f"--compare on schedules/{QUICK_SCHEDULE}, 1 step of 16 tokens (tests/test_tools.py runs it)")
    return p


def options(argv=None) -> argparse.Namespace:
    """The parsed options, --quick's settings filled in (given beside it, they are refused: it sets them)."""
    p = parser()
    args = p.parse_args(argv)
    apply_quick(p, args, schedule=str(QUICK_SCHEDULE_PATH), compare=True, steps=1, tokens=16)
    args.steps, args.tokens = args.steps or 4, args.tokens or 256
    return args


try:
    import torch
    import torch.distributed as dist
except ImportError:   # exit 77: tests/test_tools.py's "skipped"
    if __name__ == "__main__":
        options()  # --help, or a bad option (exit 2), before the missing torch
    print("SKIP: tools/torch_moe.py needs torch: pip install '.[torch]'", file=sys.stderr)
    sys.exit(77)


class AllToAll(torch.autograd.Function):
    """``dist.all_to_all_single`` with splits, differentiable: the backward pass sends the gradients back."""

    @staticmethod
    def forward(ctx, x, in_splits, out_splits):
        ctx.splits = (in_splits, out_splits)
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits)
        return out

    @staticmethod
    def backward(ctx, grad):
        in_splits, out_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits)
        return back, None, None


class MoE(torch.nn.Module):
    """Top-k MoE layer, experts sharded over the ranks (expert ``e`` on rank ``e // experts_per_rank``)."""

    def __init__(self, dim: int, ranks: int, experts_per_rank: int, top_k: int, skew: float):
        super().__init__()
        self.n, self.epr, self.k = ranks, experts_per_rank, top_k
        experts = ranks * experts_per_rank
        self.router = torch.nn.Linear(dim, experts)
        with torch.no_grad():   # a skewed router: expert popularity ~ Zipf in a seeded order
            order = torch.randperm(experts, generator=torch.Generator().manual_seed(1))
            self.router.bias.copy_(-skew * torch.log1p(order.float()))
        self.experts = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(experts_per_rank))
        self.last_ids = None

    def forward(self, x):
        gates = torch.softmax(self.router(x), dim=-1)
        weight, ids = gates.topk(self.k, dim=-1)                     # (T, k)
        self.last_ids = ids.detach()
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        tokens = x.repeat_interleave(self.k, dim=0)[order]
        dest = flat[order] // self.epr
        in_splits = torch.bincount(dest, minlength=self.n)
        out_splits = torch.empty_like(in_splits)
        dist.all_to_all_single(out_splits, in_splits)                 # tell every rank how many tokens come
        got = AllToAll.apply(tokens, in_splits.tolist(), out_splits.tolist())
        expert_ids = AllToAll.apply(flat[order].unsqueeze(1).float(), in_splits.tolist(), out_splits.tolist())
        local = expert_ids.squeeze(1).long() % self.epr
        y = torch.zeros_like(got)
        for e, expert in enumerate(self.experts):
            mask = local == e
            y = y + mask.unsqueeze(1) * expert(got)
        back = AllToAll.apply(y, out_splits.tolist(), in_splits.tolist())
        out = torch.zeros_like(tokens)
        out[order] = back
        return (out.view(-1, self.k, x.shape[1]) * weight.unsqueeze(-1)).sum(1)


def train(args) -> int:
    """Natively, through the schedule, or (``--compare``) both in turn from the same initial model."""
    dist.init_process_group("gloo")
    runs = ["native"] * (not args.schedule or args.compare) + ["schedule"] * bool(args.schedule)
    for run in runs:
        if run == "native":
            steps(args, run, None)
            continue
        import a2a_compiler.torch

        with a2a_compiler.torch.install(args.schedule) as inst:   # the one line; the model below is unchanged
            steps(args, run, inst)
    dist.destroy_process_group()
    return 0


def steps(args, run: str, inst) -> None:
    """``--steps`` training steps of a fresh layer (seeded: every run starts from the same model and data)."""
    n, me = dist.get_world_size(), dist.get_rank()
    torch.manual_seed(0)
    layer = MoE(args.dim, n, args.experts_per_rank, args.top_k, args.skew)
    forward = torch.compile(layer, backend="eager") if args.compile else layer
    opt = torch.optim.SGD(layer.parameters(), lr=0.05)
    for step in range(args.steps):
        g = torch.Generator().manual_seed(1000 * step + me)
        x = torch.randn(args.tokens, args.dim, generator=g)
        target = torch.randn(args.tokens, args.dim, generator=g)
        dist.barrier()
        t0 = time.perf_counter()
        loss = torch.nn.functional.mse_loss(forward(x), target)
        opt.zero_grad()
        loss.backward()
        for p in layer.parameters():          # data-parallel gradients: all_reduce, untouched by the schedule
            dist.all_reduce(p.grad)
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        elapsed = torch.tensor([time.perf_counter() - t0])
        dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
        if step == 0 and args.dump_router and run == "native":
            ids = [torch.empty_like(layer.last_ids) for _ in range(n)]
            dist.all_gather(ids, layer.last_ids)
            if me == 0:
                import numpy as np

                np.save(args.dump_router, torch.stack(ids).numpy())
        if me == 0:
            print(json.dumps({"run": run, "step": step, "loss": float(total).hex(),
                              "time_s": round(float(elapsed), 4)}), flush=True)
    if me == 0:
        print(json.dumps({"run": run, "schedule_calls": inst.taken if inst else 0}), flush=True)


def launch(args) -> int:
    """Start ``--ranks`` copies of this script as gloo ranks on this machine; their exit status."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "WORLD_SIZE": str(args.ranks),
           "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, *sys.argv], env={**env, "RANK": str(r)}) for r in range(args.ranks)]
    return max(p.wait() for p in procs)


def main(argv=None) -> int:
    args = options(argv)
    return train(args) if "RANK" in os.environ else launch(args)


if __name__ == "__main__":
    sys.exit(main())
