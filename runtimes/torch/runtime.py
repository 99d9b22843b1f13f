"""``AllToAll``: a compiled schedule run with ``torch.distributed`` point-to-point operations.

The plans are :mod:`runtimes.mpi.plan`'s and the steps the executor core's
(:mod:`runtimes.mpi.steps`, shared with the MPI runtime); :class:`TorchTransport`
moves their bytes with ``isend``/``irecv`` (``batch_isend_irecv`` for the
messages a step posts at once) on uint8 views of the caller's tensors, on any
backend and device.  Every call is an all-to-allv: the ranks first exchange
their split sizes (one small message to every peer, tag :data:`AGREE_TAG`),
check them on every rank alike (:func:`~runtimes.mpi.steps.check_counts`) and
then run the schedule; equal splits are the all-to-all.  Outputs are
byte-for-byte those of ``torch.distributed.all_to_all_single``.

Bad input is one :class:`~a2a_compiler.errors.A2AError` on every rank: the
construction checks on rank 0 and broadcasts the verdict; a call's argument
error travels with its split sizes.  No wait lasts longer than ``timeout``
seconds: a rank that does not arrive is named (gloo reports a dead peer at once).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from a2a_compiler.errors import A2AError
from runtimes.mpi.plan import TAG_LIMIT, build_plans, layout_counts, load_schedule, program_ranks
from runtimes.mpi.rankmap import place_ranks
from runtimes.mpi.steps import check_counts, run_alltoallv

#: Tag of the split-size exchange that opens every call (above every schedule tag).
AGREE_TAG = TAG_LIMIT


class _Request:
    """A posted message: its ``torch.distributed`` work, peer and size; ``done`` once a waiter saw it end."""

    __slots__ = ("work", "peer", "what", "nbytes", "done", "error", "waiter")

    def __init__(self, work, peer: int, what: str, nbytes: int):
        self.work, self.peer, self.what, self.nbytes = work, peer, what, nbytes
        self.done, self.error, self.waiter = False, None, None


class TorchTransport:
    """The executor core's transport over a ``torch.distributed`` group (:mod:`runtimes.mpi.steps`).

    Peers are schedule ranks (hosts), mapped to group ranks by ``ranks``.  ``Work.is_completed()`` of a
    gloo send or receive stays false until ``wait()`` returns (``ProcessGroupGloo``'s ``SendWork`` and
    ``RecvWork`` finish in ``wait``; measured on torch 2.13), so a request the core tests or waits for
    among others gets a waiter thread blocked in ``wait``, which releases the GIL.
    """

    def __init__(self, group, rank: int, host: int, ranks: list[int], timeout: float):
        self.group, self.rank, self.host, self.ranks, self.timeout = group, rank, host, ranks, timeout
        self._wait = timedelta(seconds=timeout)
        self._changed = threading.Condition()
        self._buffers: dict = {}
        self.device = torch.device("cpu")

    def isend(self, buf, peer: int, tag: int) -> _Request:
        work = dist.isend(buf, group=self.group, group_dst=self.ranks[peer], tag=tag)
        return _Request(work, peer, "send to", buf.nbytes)

    def irecv(self, buf, peer: int, tag: int) -> _Request:
        work = dist.irecv(buf, group=self.group, group_src=self.ranks[peer], tag=tag)
        return _Request(work, peer, "receive from", buf.nbytes)

    def start(self, sends: list, recvs: list) -> list[_Request]:
        """Post receives and sends as one ``batch_isend_irecv``; receives' requests first."""
        if not sends and not recvs:
            return []
        ops = [dist.P2POp(dist.irecv, b, group=self.group, tag=t, group_peer=self.ranks[p]) for b, p, t in recvs]
        ops += [dist.P2POp(dist.isend, b, group=self.group, tag=t, group_peer=self.ranks[p]) for b, p, t in sends]
        works = dist.batch_isend_irecv(ops)
        if len(works) != len(ops):   # a coalescing backend (NCCL): one work completes the whole batch
            works = works[-1:] * len(ops)
        msgs = [(p, "receive from", b) for b, p, _ in recvs] + [(p, "send to", b) for b, p, _ in sends]
        return [_Request(w, p, what, b.nbytes) for w, (p, what, b) in zip(works, msgs)]

    def _watch(self, req: _Request) -> None:
        if req.waiter is None and not req.done:
            req.waiter = threading.Thread(target=self._waiter, args=(req,), daemon=True)
            req.waiter.start()

    def _waiter(self, req: _Request) -> None:
        try:
            req.work.wait(self._wait)
        except Exception as exc:  # noqa: BLE001 - raised in the caller's thread as A2AError
            req.error = exc
        with self._changed:
            req.done = True
            self._changed.notify_all()

    def test(self, req: _Request) -> bool:
        self._watch(req)
        if req.done:
            self._raise(req)
        return req.done

    def waitsome(self, reqs: list[_Request]) -> list[int]:
        for r in reqs:
            self._watch(r)
        with self._changed:
            if not self._changed.wait_for(lambda: any(r.done for r in reqs), self.timeout + 5):
                self._raise(next(r for r in reqs if not r.done), timed_out=True)
        done = [i for i, r in enumerate(reqs) if r.done]
        for i in done:
            self._raise(reqs[i])
        return done

    def waitall(self, reqs: list[_Request]) -> None:
        for r in reqs:
            if r.waiter is None and not r.done:
                try:
                    r.work.wait(self._wait)
                except Exception as exc:  # noqa: BLE001
                    r.error = exc
                r.done = True
            elif not r.done:
                with self._changed:
                    if not self._changed.wait_for(lambda: r.done, self.timeout + 5):
                        self._raise(r, timed_out=True)
            self._raise(r)

    def _raise(self, req: _Request, timed_out: bool = False) -> None:
        exc = req.error
        if exc is None and not timed_out:
            return
        peer = self.ranks[req.peer]
        if timed_out or "timed out" in str(exc).lower() or "timeout" in str(exc).lower():
            raise A2AError(f"rank {self.rank}: rank {peer} did not arrive within {self.timeout:g} s "
                           f"({req.what} rank {peer}, {req.nbytes} bytes)")
        raise A2AError(f"rank {self.rank}: lost rank {peer} ({req.what} it failed: {_why(exc)})")

    def barrier(self) -> None:
        """Every rank reached this point: an empty message to and from every peer (named if one is missing)."""
        self.exchange(torch.zeros(0, dtype=torch.int64, device=self.device))

    def exchange(self, row):
        """Every rank's ``row`` (a 1-D tensor of one length everywhere), stacked in host order."""
        n = len(self.ranks)
        table = torch.empty((n, row.numel()), dtype=row.dtype, device=row.device)
        table[self.host] = row
        peers = [p for p in range(n) if p != self.host]
        self.waitall(self.start([(row, p, AGREE_TAG) for p in peers], [(table[p], p, AGREE_TAG) for p in peers]))
        return table

    def buffer(self, key: str, *shape: int):
        buf = self._buffers.get(key)
        if buf is None or tuple(buf.shape) != shape or buf.device != self.device:
            buf = self._buffers[key] = torch.empty(shape, dtype=torch.uint8, device=self.device)
        return buf


class AllToAll:
    """A compiled schedule bound to a ``torch.distributed`` group, called like ``all_to_all_single``.

    ``schedule``: a schedule file any format ``a2a run`` executes (MPI path, oneCCL-style, MSCCL,
    MSCCL++ XML or JSON; rank 0 reads it) or a loaded program.  Construction is collective over
    ``group`` (default: the world): rank 0 builds every rank's plan once and broadcasts them.
    ``demand`` (a :class:`~a2a_compiler.demand.Demand`) gives an MSCCL all-to-allv file its layout, as
    for :class:`runtimes.mpi.Alltoallv`; ``route_mode`` as in ``a2a run`` (``relay``: relays are ranks,
    every message goes between neighbours); ``rank_map`` and ``topology`` as for
    :class:`runtimes.mpi.Alltoall` (hosts named by ``socket.gethostname()``); ``timeout``: the longest
    any wait lasts, in seconds.

    >>> a2a = AllToAll("bipartite-4.mpi.xml")                          # doctest: +SKIP
    >>> a2a.all_to_all_single(out, inp, out_splits, in_splits)         # doctest: +SKIP
    """

    def __init__(self, schedule, group=None, *, demand=None, route_mode: str = "relay", rank_map=None,
                 topology=None, timeout: float = 300.0):
        if not dist.is_initialized():
            raise A2AError("torch.distributed is not initialised; call dist.init_process_group first")
        self.group = dist.group.WORLD if group is None else group
        size, me = dist.get_world_size(self.group), dist.get_rank(self.group)
        names = [None] * size
        _collective(me, "gathering host names", lambda: dist.all_gather_object(
            names, socket.gethostname() if rank_map is not None else None, group=self.group))

        def setup():
            program = load_schedule(schedule)[1] if isinstance(schedule, (str, os.PathLike)) else schedule
            if program_ranks(program) != size:
                raise A2AError(f"the schedule is for {program_ranks(program)} ranks but the process group has "
                               f"{size}; launch {program_ranks(program)} ranks (torchrun --nproc-per-node)")
            layout = layout_counts(program, size, demand)
            plans = build_plans(program, size, route_mode)
            nodes = place_ranks(rank_map, names, size, topology)
            return plans, layout, [int(x) for x in nodes]

        box, bug = [None, None], None
        if me == 0:
            try:
                box = [setup(), None]
            except A2AError as exc:
                box = [None, str(exc)]
            except Exception as exc:  # noqa: BLE001 - a bug: re-raised on rank 0 once every rank knows
                box, bug = [None, f"rank 0: internal error: {type(exc).__name__}: {exc}"], exc
        _collective(me, "broadcasting the plans", lambda: dist.broadcast_object_list(
            box, src=dist.get_global_rank(self.group, 0), group=self.group))
        if bug is not None:
            raise bug
        if box[1] is not None:
            raise A2AError(box[1])
        plans, self.layout, self.nodes = box[0]
        self.node = self.nodes[me]
        self.plan = plans[self.node]
        ranks = [0] * size
        for r, h in enumerate(self.nodes):
            ranks[h] = r                               # schedule rank (host) h is played by group rank r
        self.transport = TorchTransport(self.group, me, self.node, ranks, timeout)

    @property
    def format(self) -> str:
        return self.plan.format

    def describe(self) -> str:
        """One line: the schedule, its format and rank count."""
        p = self.plan
        mode = f", route mode {p.route_mode}" if p.route_mode else ""
        return f"schedule {p.name!r} ({p.format}{mode}, {p.nranks} ranks)"

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None) -> None:
        """``torch.distributed.all_to_all_single(output, input, output_split_sizes, input_split_sizes)`` with
        this schedule: block ``d`` of ``input`` (rows along dim 0) goes to rank ``d``, block ``s`` of
        ``output`` comes from rank ``s``; ``None`` splits are equal."""
        n = self.plan.nranks
        try:
            send, recv, sc, rc = _single_arguments(output, input, output_split_sizes, input_split_sizes, n)
            err = None
        except A2AError as exc:
            send = recv = None
            err, sc, rc = str(exc), np.zeros(n, np.int64), np.zeros(n, np.int64)
        self._run(send, recv, sc, rc, err, _device(input))

    def all_to_all(self, output_tensor_list, input_tensor_list) -> None:
        """``torch.distributed.all_to_all(output_tensor_list, input_tensor_list)`` with this schedule: the
        inputs are packed into one buffer and the outputs unpacked from one (a copy each way)."""
        n = self.plan.nranks
        try:
            ins, outs = _list_arguments(output_tensor_list, input_tensor_list, n)
            sc = np.array([t.numel() for t in ins], np.int64)
            rc = np.array([t.numel() for t in outs], np.int64)
            send = torch.cat(ins) if ins else None
            recv = torch.empty(int(rc.sum()), dtype=torch.uint8, device=send.device)
            err = None
        except A2AError as exc:
            err, sc, rc, send = str(exc), np.zeros(n, np.int64), np.zeros(n, np.int64), None
        self._run(send, recv if err is None else None, sc, rc, err, _device(input_tensor_list[0])
                  if input_tensor_list else torch.device("cpu"))
        at = 0
        for t in outs:
            t.copy_(recv[at:at + t.numel()])
            at += t.numel()

    def _run(self, send, recv, sc: np.ndarray, rc: np.ndarray, err: str | None, device) -> None:
        """Agree on every rank's byte counts (and on any rank's argument error), then run the schedule."""
        tp, n = self.transport, self.plan.nranks
        tp.device = device
        nodes = np.asarray(self.nodes)
        sc_h, rc_h = np.empty_like(sc), np.empty_like(rc)
        sc_h[nodes], rc_h[nodes] = sc, rc                  # blocks by host, not by rank
        row = torch.from_numpy(np.concatenate([sc_h, rc_h, [err is not None]])).to(device)
        table = tp.exchange(row).cpu().numpy()
        if table[:, -1].any():                             # every rank learns the lowest failing rank's line
            errors = [None] * n
            _collective(tp.rank, "gathering the argument errors",
                        lambda: dist.all_gather_object(errors, err, group=self.group))
            first = next(r for r, e in enumerate(errors) if e is not None)
            raise A2AError(f"rank {first}: {errors[first]}")
        counts = table[:, :n]
        try:
            check_counts(counts, table[:, n:2 * n], self.layout)
        except A2AError as exc:
            raise A2AError(_ranks_named(str(exc), self.nodes)) from None
        sd, rd = np.empty_like(sc), np.empty_like(rc)
        sd[nodes], rd[nodes] = np.cumsum(sc) - sc, np.cumsum(rc) - rc   # blocks packed in group rank order
        run_alltoallv(self.plan, self.layout, counts, send, sd, recv, rd, tp)


def _why(exc: BaseException) -> str:
    """A backend error's gist: gloo's ``[file:line] Connection closed by peer [addr]:port. This is ...`` is
    ``Connection closed by peer [addr]:port``."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if text.startswith("[") and "] " in text:
        text = text.split("] ", 1)[1]
    return text.split(". ", 1)[0]


def _collective(rank: int, what: str, fn):
    """``fn()``, a collective of the group's backend; its failure (a rank died) as one line."""
    try:
        return fn()
    except RuntimeError as exc:
        raise A2AError(f"rank {rank}: {what} failed: {_why(exc)}") from None


def _ranks_named(msg: str, nodes: list[int]) -> str:
    """``check_counts`` names hosts; say group ranks when a rank map makes them differ."""
    if nodes == sorted(nodes):
        return msg
    return f"{msg} (schedule ranks; group ranks {nodes})"


def _device(t):
    return t.device if isinstance(t, torch.Tensor) else torch.device("cpu")


def _byte_view(t, name: str):
    """The tensor's bytes as a 1-D uint8 view (no copy); refused unless contiguous."""
    if not isinstance(t, torch.Tensor):
        raise A2AError(f"{name} must be a tensor, got {type(t).__name__}")
    if not t.is_contiguous():
        raise A2AError(f"{name} is not contiguous; pass {name}.contiguous()")
    flat = t.reshape(-1)
    return flat.view(torch.uint8) if t.dtype != torch.uint8 else flat


def _splits(splits, n: int, rows: int, name: str) -> np.ndarray:
    """Rows per peer: ``splits`` checked (``n`` integers >= 0 summing to ``rows``), or ``rows / n`` each."""
    if splits is None or len(splits) == 0:
        if rows % n:
            raise A2AError(f"{name} has {rows} rows, not divisible by the {n} ranks; give {name}_split_sizes")
        return np.full(n, rows // n, np.int64)
    s = np.asarray([int(x) for x in splits], np.int64)
    if len(s) != n or (s < 0).any() or s.sum() != rows:
        raise A2AError(f"{name}_split_sizes must be {n} integers >= 0 summing to {name}.size(0) = {rows}, "
                       f"got {list(map(int, s))}")
    return s


def _single_arguments(output, input, output_split_sizes, input_split_sizes, n: int):
    """Byte views of ``input`` and ``output`` and bytes per peer each way, as ``all_to_all_single`` takes them."""
    send, recv = _byte_view(input, "input"), _byte_view(output, "output")
    if input.dtype != output.dtype:
        raise A2AError(f"input holds {input.dtype} and output {output.dtype}; use one dtype")
    if input.device != output.device:
        raise A2AError(f"input is on {input.device} and output on {output.device}; use one device")
    if send.numel() and recv.numel() and send.data_ptr() < recv.data_ptr() + recv.numel() \
            and recv.data_ptr() < send.data_ptr() + send.numel():
        raise A2AError("input and output overlap; in-place all-to-all is not supported")
    row_in = send.numel() // max(1, input.size(0)) if input.dim() else send.numel()
    row_out = recv.numel() // max(1, output.size(0)) if output.dim() else recv.numel()
    sc = _splits(input_split_sizes, n, input.size(0) if input.dim() else 1, "input") * row_in
    rc = _splits(output_split_sizes, n, output.size(0) if output.dim() else 1, "output") * row_out
    return send, recv, sc, rc


def _list_arguments(output_tensor_list, input_tensor_list, n: int):
    """Byte views of the list form's tensors, checked: ``n`` of each, contiguous, one dtype and device."""
    if len(input_tensor_list) != n or len(output_tensor_list) != n:
        raise A2AError(f"all_to_all takes {n} input and {n} output tensors, got {len(input_tensor_list)} and "
                       f"{len(output_tensor_list)}")
    tensors = list(input_tensor_list) + list(output_tensor_list)
    if len({t.dtype for t in tensors}) > 1 or len({t.device for t in tensors}) > 1:
        raise A2AError("all_to_all's tensors mix dtypes or devices; use one dtype and device")
    ins = [_byte_view(t, f"input_tensor_list[{i}]") for i, t in enumerate(input_tensor_list)]
    outs = [_byte_view(t, f"output_tensor_list[{i}]") for i, t in enumerate(output_tensor_list)]
    return ins, outs


def say_once(group, line: str) -> None:
    """Print ``line`` on the group's rank 0 (stderr)."""
    if dist.get_rank(group) == 0:
        print(f"a2a: {line}", file=sys.stderr, flush=True)
