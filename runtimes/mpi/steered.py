"""Steered routes: one TCP connection per route of an MPI path schedule, event-driven.

The paper steers each route of a path schedule onto its own fabric path by
giving it its own connection whose RoCE UDP source port the fabric hashes to
the route (Basu et al. §4).  Here each route ``(src, dst, route_id)`` gets its
own TCP connection from a source address to a destination address that the
fabric routes along exactly that route (the testbed installs them, see
:mod:`runtimes.testbed.routes`); MPI only sets the connections up.

Runs travel in plan order on their route's connection, so both ends know
every message's size and place and no header is sent.  All sockets are
nonblocking and one ``epoll`` loop moves bytes: a rank that waits sleeps in
the kernel instead of polling, which keeps oversubscribed cores free for the
fabric's forwarding.
"""

from __future__ import annotations

import errno
import selectors
import socket
import struct
import time
from collections import deque

from a2a_compiler.errors import A2AError

_HELLO = struct.Struct("!III")  # magic, source rank, route id
_MAGIC = 0xA2A57EE2


class SteeredRoutes:
    """Connections for this rank's routes; ``run(plan, bufs)`` executes a direct-mode path plan over them.

    ``addresses`` maps ``(src, dst, route_id)`` to ``(src_ip, dst_ip)`` for
    every route that starts or ends at this rank.  Construction is collective
    over ``comm`` (it exchanges listening ports) and raises :class:`A2AError`
    if a connection cannot be made within ``timeout`` seconds.
    """

    def __init__(self, comm, addresses: dict, timeout: float = 30.0):
        self.rank, self.timeout = comm.rank, timeout
        outgoing = sorted(k for k in addresses if k[0] == self.rank)
        incoming = sorted(k for k in addresses if k[1] == self.rank)
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("0.0.0.0", 0))
        listener.listen(max(len(incoming), 1))
        ports = comm.allgather(listener.getsockname()[1])
        self.send_conn: dict = {}   # (dst, route_id) -> socket
        self.recv_conn: dict = {}   # (src, route_id) -> socket
        try:
            self._connect(listener, outgoing, incoming, addresses, ports)
        except OSError as exc:
            self.close()
            raise A2AError(f"rank {self.rank}: steered route connections failed: {exc}") from None
        finally:
            listener.close()

    def _connect(self, listener, outgoing, incoming, addresses, ports) -> None:
        sel = selectors.DefaultSelector()
        listener.setblocking(False)
        sel.register(listener, selectors.EVENT_READ, ("accept", None))
        for key in outgoing:
            src_ip, dst_ip = addresses[key]
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.bind((src_ip, 0))
            s.setblocking(False)
            s.connect_ex((dst_ip, ports[key[1]]))
            sel.register(s, selectors.EVENT_WRITE, ("connect", key))
        pending_hello: dict = {}
        deadline = time.monotonic() + self.timeout
        while len(self.send_conn) < len(outgoing) or len(self.recv_conn) < len(incoming):
            events = sel.select(max(0.0, deadline - time.monotonic()))
            if not events:
                missing = [k for k in outgoing if (k[1], k[2]) not in self.send_conn]
                what = (f"route {missing[0][2]} to rank {missing[0][1]} ({addresses[missing[0]][1]})" if missing
                        else f"{len(incoming) - len(self.recv_conn)} incoming route(s)")
                raise OSError(f"{what} not connected within {self.timeout:g} s; is the route steered?")
            for sk, _ in events:
                kind, key = sk.data
                s = sk.fileobj
                if kind == "accept":
                    conn, _ = listener.accept()
                    conn.setblocking(False)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    pending_hello[conn] = b""
                    sel.register(conn, selectors.EVENT_READ, ("hello", None))
                elif kind == "connect":
                    err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        raise OSError(err, f"connect {addresses[key][0]} -> {addresses[key][1]}: "
                                           f"{errno.errorcode.get(err, err)}")
                    sel.unregister(s)
                    s.setblocking(True)
                    s.sendall(_HELLO.pack(_MAGIC, self.rank, key[2]))
                    s.setblocking(False)
                    self.send_conn[(key[1], key[2])] = s
                else:
                    data = s.recv(_HELLO.size - len(pending_hello[s]))
                    if not data:
                        raise OSError("a peer closed its route connection during setup")
                    pending_hello[s] += data
                    if len(pending_hello[s]) == _HELLO.size:
                        magic, src, route_id = _HELLO.unpack(pending_hello.pop(s))
                        if magic != _MAGIC:
                            raise OSError("a connection that is not a steered route arrived")
                        sel.unregister(s)
                        self.recv_conn[(src, route_id)] = s
        sel.close()

    def close(self) -> None:
        for s in (*self.send_conn.values(), *self.recv_conn.values()):
            s.close()
        self.send_conn.clear()
        self.recv_conn.clear()

    def run(self, plan, bufs) -> None:
        """Move every run of a direct-mode path plan (:class:`runtimes.mpi.plan.PathPlan`) over its route."""
        queues: dict = {}
        for conn, m in [(self.send_conn[(m.peer, m.tag)], m) for m in plan.sends] + \
                [(self.recv_conn[(f.recv.peer, f.recv.tag)], f.recv) for f in plan.recvs]:
            if m.cnt:  # an all-to-allv run may be empty; both ends skip it
                queues.setdefault(conn, deque()).append(_view(bufs, m))
        sending = set(self.send_conn.values())
        with selectors.DefaultSelector() as sel:
            for s in queues:
                sel.register(s, selectors.EVENT_WRITE if s in sending else selectors.EVENT_READ)
            while queues:
                events = sel.select(self.timeout)
                if not events:
                    raise A2AError(f"rank {self.rank}: no steered route moved a byte for {self.timeout:g} s")
                for sk, _ in events:
                    s, q = sk.fileobj, queues[sk.fileobj]
                    try:
                        n = s.send(q[0]) if s in sending else s.recv_into(q[0])
                    except BlockingIOError:
                        continue
                    if n == 0 and s not in sending:
                        raise A2AError(f"rank {self.rank}: a steered route's peer closed its connection")
                    q[0] = q[0][n:]
                    if not len(q[0]):
                        q.popleft()
                        if not q:
                            del queues[s]
                            sel.unregister(s)


def _view(bufs, m) -> memoryview:
    return memoryview(bufs[m.buf][m.off:m.off + m.cnt]).cast("B")
