"""The cost model: predicted all-to-all time in link-times (Basu et al. §2.1, §3.1.3, §3.2.2).

One model prices every schedule and program the compiler makes or reads: the
chunking search (:mod:`.chunking`), the schedule IR (:func:`predicted_time`),
the verifier and ``compile`` (:mod:`a2a_compiler.verify.performance`).

**Resources.**  A chunk (``1/C`` of a shard) crossing link ``u -> v`` uses the
link (capacity ``cap_e``, in link units) and, when the fabric has a host
bandwidth (``hc = fabric.host_capacity``), host ingress of ``v`` and host egress
of ``u`` (the host–NIC links of Fig. 2): every hop through a host under host
forwarding; only the hop leaving the chunk's origin (egress) and the hop
reaching its destination (ingress) under NIC forwarding.  :class:`CostModel`
numbers the resources of one step: links ``0..E-1``, then host ingress, then
host egress.

**Timing.**  Two executions share those resources:

* *stepped* (:func:`stepped_time`): synchronous steps — tsMCF link schedules
  and oneCCL programs (one step per time step), path schedules and MPI path
  programs (one step: every route at once).  A step lasts as long as its most
  loaded resource, ``max_r load_r / (C·cap_r)``, the time an ideal per-step
  scheduler achieves (eq. 16 and the §3.2.2 host rows per step);
* *dataflow* (:func:`dataflow_time`): the MSCCL executor has no global steps,
  each message starts once the messages it follows are done; concurrent
  messages share each resource, none exceeding its capacity.

Either way no resource ever carries more than its capacity, so a predicted time
is never below the certified LP bound of the same fabric.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ..fabric import Fabric


@dataclass(frozen=True, eq=False)
class CostModel:
    """Resources of one step for ``links`` (``src``, ``dst``, ``cap`` arrays) under ``fabric``.

    Resource ``e < E`` is link ``e``; ``E + v`` host ingress and ``E + nh + v``
    host egress of host ``v`` (present only with a host bandwidth).
    """

    src: np.ndarray
    dst: np.ndarray
    cap: np.ndarray
    n_hosts: int
    fabric: Fabric

    @classmethod
    def from_links(cls, links, n_hosts: int, fabric: Fabric) -> "CostModel":
        """From ``(src, dst, capacity)`` triples (a schedule's ``links``)."""
        arr = np.array([(u, v) for u, v, _ in links], dtype=np.int64).reshape(-1, 2)
        cap = np.array([c for _, _, c in links], dtype=float)
        return cls(arr[:, 0], arr[:, 1], cap, n_hosts, fabric)

    @classmethod
    def from_topology(cls, topology, fabric: Fabric) -> "CostModel":
        """From a topology's links and capacities."""
        return cls(topology.src, topology.dst, np.asarray(topology.capacity, dtype=float), topology.n_hosts, fabric)

    @property
    def n_links(self) -> int:
        """Number of directed links."""
        return len(self.src)

    @property
    def hosts_limited(self) -> bool:
        """True when the fabric limits host ingress/egress (a host bandwidth is set, §3.2.2)."""
        return self.fabric.host_bw is not None

    @property
    def width(self) -> int:
        """Resources per step."""
        return self.n_links + (2 * self.n_hosts if self.hosts_limited else 0)

    @property
    def capacity(self) -> np.ndarray:
        """Capacity of each resource of one step."""
        if not self.hosts_limited:
            return self.cap
        return np.concatenate([self.cap, np.full(2 * self.n_hosts, self.fabric.host_capacity)])

    @cached_property
    def _link_keys(self) -> tuple[int, np.ndarray, np.ndarray]:
        n = int(max(self.src.max(initial=0), self.dst.max(initial=0))) + 1
        key = self.src * n + self.dst
        order = np.argsort(key, kind="stable")
        return n, key[order], order

    def link_index(self, u, v) -> np.ndarray:
        """Indices of links ``u -> v`` (arrays, O(log E) each); ``KeyError`` names the first non-link."""
        n, keys, order = self._link_keys
        u, v = np.atleast_1d(np.asarray(u, dtype=np.int64)), np.atleast_1d(np.asarray(v, dtype=np.int64))
        want = u * n + v
        pos = np.minimum(np.searchsorted(keys, want), max(len(keys) - 1, 0))
        ok = (u >= 0) & (v >= 0) & (u < n) & (v < n)
        if len(keys):
            ok &= keys[pos] == want
        if not ok.all():
            i = int(np.flatnonzero(~ok)[0])
            raise KeyError((int(u[i]), int(v[i])))
        return order[pos] if len(keys) else pos

    def hop_resources(self, e, u, v, origin, dest):
        """For chunk hops over links ``e = u -> v`` of chunks ``origin -> dest`` (equal-length
        arrays): ``(hop, resource)`` index pairs, each hop's link plus its host terms."""
        e = np.asarray(e, dtype=np.int64)
        hop = np.arange(len(e))
        hops, res = [hop], [e]
        if self.hosts_limited:
            u, v = np.asarray(u), np.asarray(v)
            nh, E = self.n_hosts, self.n_links
            if self.fabric.forwarding == "host":
                ingress, egress = v < nh, u < nh
            else:
                ingress, egress = v == np.asarray(dest), u == np.asarray(origin)
            hops += [hop[ingress], hop[egress]]
            res += [E + v[ingress], E + nh + u[egress]]
        return np.concatenate(hops), np.concatenate(res)

    def step_loads(self, step, e, u, v, origin, dest, n_steps: int, counts=None) -> np.ndarray:
        """``(n_steps, width)`` chunk counts per resource of chunk hops in ``step`` (arrays); ``counts``
        weights each hop (default 1 chunk)."""
        hop, res = self.hop_resources(e, u, v, origin, dest)
        w = np.ones(len(hop)) if counts is None else np.asarray(counts, dtype=float)[hop]
        flat = np.bincount(np.asarray(step, dtype=np.int64)[hop] * self.width + res, weights=w,
                           minlength=n_steps * self.width)
        return flat.reshape(n_steps, self.width)


#: Relative floating-point error of a bound or a predicted time (sums of up to ~1e4 terms).
ROUNDING = 1e-12


def fidelity_text(f: float) -> str:
    """A fidelity to 4 decimals, rounded down (0.99996 is not shown as reaching 1)."""
    return f"{math.floor(f * 1e4) / 1e4:.4f}"


def ratio(bound: float, time: float) -> float:
    """``bound / time`` for a certified lower ``bound`` on ``time``'s optimum: a fidelity.

    Mathematically <= 1; an excess within :data:`ROUNDING` is floating-point noise
    of the two computations and is reported as 1.  (A larger excess is reported as
    it is: e.g. an MSCCL dataflow beating the stepped LP it came from.)
    """
    if time <= 0:
        return 0.0
    r = bound / time
    return 1.0 if 1.0 < r <= 1.0 + ROUNDING else r


def stepped_time(loads: np.ndarray, capacity: np.ndarray, chunks_per_shard: int) -> tuple[float, np.ndarray]:
    """Synchronous steps: ``Σ_t max_r loads[t, r] / (C·cap_r)``; returns the total and each step's time."""
    if loads.size == 0:
        return 0.0, np.zeros(len(loads))
    per_step = (loads / (chunks_per_shard * capacity)).max(axis=1)
    return float(per_step.sum()), per_step


@dataclass(frozen=True)
class Message:
    """One message of a dataflow program: ``origins``/``dests`` of its chunks, over link ``src -> dst``
    (or, through switches, over the links of ``path``, ``src .. dst``); it starts once the messages
    ``after`` (indices) are done."""

    src: int
    dst: int
    origins: tuple[int, ...]
    dests: tuple[int, ...]
    after: tuple[int, ...] = ()
    path: tuple[int, ...] = ()


def dataflow_time(messages: list[Message], model: CostModel, chunks_per_shard: int, unit: float | None = None) -> float:
    """MSCCL execution: each message starts when those it follows are done and runs at its
    link's speed slowed by its most overloaded resource (a link, and with a host bandwidth
    the hosts' egress and ingress it uses, in proportion of its chunks that use them).
    Rates are fixed between events (a message finishing), so no resource exceeds its capacity.
    A chunk is ``1/chunks_per_shard`` of a shard, or ``unit`` (an all-to-allv layout's chunk volume).
    """
    m_count = len(messages)
    if not m_count:
        return 0.0
    cap = model.capacity
    k = np.array([len(m.origins) for m in messages], dtype=float)
    kk = k.astype(np.int64)
    # Every link of every message's path, then every chunk on each of them (a message through a
    # switch crosses two links at once), to find which resources each message uses and for what
    # share of its chunks.
    paths = [m.path or (m.src, m.dst) for m in messages]
    hops = np.array([len(p) - 1 for p in paths], dtype=np.int64)
    link_owner = np.repeat(np.arange(m_count), hops)
    lu = np.fromiter((x for p in paths for x in p[:-1]), np.int64, int(hops.sum()))
    lv = np.fromiter((x for p in paths for x in p[1:]), np.int64, int(hops.sum()))
    e = model.link_index(lu, lv)
    reps = kk[link_owner]
    owner = np.repeat(link_owner, reps)
    first = np.cumsum(kk) - kk                      # each message's first chunk among all chunks
    within = np.arange(len(owner)) - np.repeat(np.cumsum(reps) - reps, reps)
    chunk = first[owner] + within
    origins = np.fromiter((o for m in messages for o in m.origins), np.int64, int(k.sum()))
    dests = np.fromiter((d for m in messages for d in m.dests), np.int64, int(k.sum()))
    hop, res = model.hop_resources(np.repeat(e, reps), np.repeat(lu, reps), np.repeat(lv, reps),
                                   origins[chunk], dests[chunk])
    pairs, share = np.unique(np.stack([owner[hop], res]), axis=1, return_counts=True)
    use_msg, use_res = pairs
    use_w = share / k[use_msg]
    speed = np.minimum.reduceat(cap[e], np.cumsum(hops) - hops)  # shards per link-time when unshared
    volume = k / chunks_per_shard if unit is None else k * unit
    waiting = np.array([len(m.after) for m in messages])
    successors = defaultdict(list)
    for i, m in enumerate(messages):
        for a in m.after:
            successors[a].append(i)
    remaining = volume.copy()
    active = np.zeros(m_count, dtype=bool)
    active[waiting == 0] = True
    elapsed = []                                    # event intervals, summed exactly at the end
    while active.any():
        on = active[use_msg]
        load = np.bincount(use_res[on], weights=use_w[on] * speed[use_msg[on]], minlength=len(cap))
        over = np.maximum(load / cap, 1.0)
        slow = np.ones(m_count)
        np.maximum.at(slow, use_msg[on], over[use_res[on]])
        act = np.flatnonzero(active)
        rate = speed[act] / slow[act]
        dt = float(np.min(remaining[act] / rate))
        elapsed.append(dt)
        remaining[act] -= rate * dt
        finished = act[remaining[act] <= 1e-12 * np.maximum(volume[act], 1.0)]
        if not len(finished):
            finished = act[[int(np.argmin(remaining[act] / rate))]]
        remaining[finished] = 0.0
        active[finished] = False
        for i in finished.tolist():
            for j in successors[i]:
                waiting[j] -= 1
                if not waiting[j]:
                    active[j] = True
    return math.fsum(elapsed)


def flow_time(solution, topology, demand=None) -> float:
    """All-to-all(v) time in link-times of a solution's flows (a
    :class:`~a2a_compiler.solve.result.FlowSolution`) with their routes and steps unchanged, every pair
    shipping its volume under ``demand`` (a :class:`~a2a_compiler.demand.Demand`; ``None``: 1 per pair),
    host–NIC terms included.

    For the uniform solution and a demand matrix this is what reusing one schedule for
    every batch costs, to set beside the re-solved ``1/F(D)``.
    """
    import scipy.sparse as sp

    flows = sp.coo_array(solution.link_flows)
    t, e = np.divmod(flows.col.astype(np.int64), solution.n_links)
    s, d = np.divmod(flows.row.astype(np.int64), solution.n_hosts)
    amount = flows.data if demand is None else flows.data * np.asarray(demand.volumes)[s, d]
    model = CostModel.from_topology(topology, solution.fabric)
    loads = model.step_loads(t, e, topology.src[e], topology.dst[e], s, d, solution.n_steps, counts=amount)
    return stepped_time(loads, model.capacity, 1)[0]
