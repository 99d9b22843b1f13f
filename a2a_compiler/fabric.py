"""Fabric model: link bandwidth, host injection bandwidth, who forwards.

Basu et al. 2024 §2.1 (Table 1) and §3.2.2 (Fig. 2).  Solvers work in units of
the link bandwidth ``b`` (a link has capacity 1); the host–NIC link then has
capacity ``host_bw / link_bw``.

* ``forwarding="host"`` — the host/GPU forwards (store-and-forward, ML fabrics):
  every byte a node relays crosses its host–NIC link twice (in and out).
* ``forwarding="nic"`` — the NIC routes (cut-through, HPC fabrics): only the
  bytes a host sources or sinks cross its host–NIC link.

:func:`augment` turns that into a plain graph transformation (Fig. 2) so every
flow solver handles the bottleneck without special cases.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import numpy as np

from .errors import A2AError
from .options import flag
from .topology.model import Topology

FORWARDING_MODES = ("host", "nic")

#: Decimal (SI) and binary (IEC) prefixes of :func:`parse_bandwidth`, spelled exactly so: ``m`` is milli and
#: ``K`` no prefix at all.
PREFIXES = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
            "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
#: Bandwidth units: a lower-case ``b`` is a bit, an upper-case ``B`` a byte (bytes per unit).
BANDWIDTH_UNITS = {"bps": 1 / 8, "b/s": 1 / 8, "bit/s": 1 / 8, "Bps": 1.0, "B/s": 1.0}
BANDWIDTH_HELP = ("b is a bit, B a byte: 25Gbps = 25Gb/s = 25Gbit/s (bits), 25GBps = 25GB/s = 8 x 25Gbps "
                  "(bytes); prefixes k M G T P (1000s) or Ki Mi Gi Ti (1024s), in exactly these cases")


def parse_bandwidth(text: str, option: str = "bandwidth") -> float:
    """Parse ``'25Gbps'``, ``'3.125GB/s'``, ``'100 Gbit/s'``, ``'1GiBps'`` into bytes per second.

    A lower-case ``b`` is a bit and an upper-case ``B`` a byte, in every spelling
    (``bps``, ``b/s``, ``bit/s`` vs ``Bps``, ``B/s``), so ``25GBps`` is 8 x ``25Gbps``
    (the convention of the ``_GBps`` JSON keys, docs/json.md).  Prefixes ``k M G T P``
    are decimal, ``Ki Mi Gi Ti`` binary, in exactly these cases (:data:`PREFIXES`).  Anything
    else -- a bare number, ``MBPS``, ``Gbytes``, ``25mbps``, ``25gBps`` -- is refused naming the spellings.
    """
    m = re.fullmatch(r"\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]+)\s*", str(text))
    if not m:
        raise A2AError(f"{option}: cannot parse {text!r}; give a number and a unit, e.g. 25Gbps or 3.125GB/s "
                       f"({BANDWIDTH_HELP})")
    value, unit = float(m.group(1)), m.group(2)
    u = re.fullmatch(r"(k|[MGTP]|[KMGT]i)?(bps|b/s|bit/s|Bps|B/s)", unit)
    if not u:
        raise A2AError(f"{option}: unknown unit {unit!r}; {BANDWIDTH_HELP}")
    if not value > 0:
        raise A2AError(f"{option}: bandwidth must be positive, got {text!r}")
    return check_bandwidth(value * PREFIXES[u.group(1) or ""] * BANDWIDTH_UNITS[u.group(2)], option, text)


#: Bandwidths outside this range (bytes/s) are refused: 1 B/s to 1 PB/s.
BANDWIDTH_RANGE = (1.0, 1e15)
#: Largest ratio between the host and the link bandwidth (either way) the LPs stay well conditioned for.
MAX_BANDWIDTH_RATIO = 1e6


def check_bandwidth(value: float, option: str = "bandwidth", text=None) -> float:
    """``value`` (bytes/s) if it is finite and within :data:`BANDWIDTH_RANGE`, else :class:`A2AError`."""
    lo, hi = BANDWIDTH_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise A2AError(f"{option}: bandwidth {value!r} is not a number of bytes/s")
    if not (lo <= value <= hi):  # also catches nan and inf
        raise A2AError(f"{option}: bandwidth {text if text is not None else value!r} is outside "
                       f"{lo:g} B/s .. {hi:g} B/s (1 PB/s)")
    return value


@dataclass(frozen=True)
class Fabric:
    """Bandwidths in bytes/s (``None`` = not given / unlimited) and the forwarding mode."""

    link_bw: float | None = None
    host_bw: float | None = None
    forwarding: str = "host"
    nvlink_bw: float | None = None   # links of class "nvlink" (GPU to NVSwitch); the others have link_bw

    def __post_init__(self):
        if self.forwarding not in FORWARDING_MODES:
            raise A2AError(f"--forwarding must be one of {', '.join(FORWARDING_MODES)}, got {self.forwarding!r}")
        for name in ("link_bw", "host_bw", "nvlink_bw"):
            v = getattr(self, name)
            if v is not None:
                check_bandwidth(v, f"--{name.replace('_', '-')}")
        if self.nvlink_bw is not None and self.link_bw is None:
            raise A2AError("--nvlink-bw needs --link-bw: NVLink capacities are relative to the link (NIC) bandwidth")
        if self.nvlink_bw is not None and not 1 / MAX_BANDWIDTH_RATIO <= self.nvlink_bw / self.link_bw <= MAX_BANDWIDTH_RATIO:
            raise A2AError(f"--nvlink-bw / --link-bw = {self.nvlink_bw / self.link_bw:.3g} is outside 1e-6 .. 1e6")
        if self.host_bw is not None and self.link_bw is None:
            raise A2AError("--host-bw needs --link-bw: the host-NIC bottleneck is relative to the link bandwidth")
        if self.host_bw is not None and not 1 / MAX_BANDWIDTH_RATIO <= self.host_bw / self.link_bw <= MAX_BANDWIDTH_RATIO:
            raise A2AError(f"--host-bw / --link-bw = {self.host_bw / self.link_bw:.3g} is outside "
                           f"1e-6 .. 1e6, where the flow LPs lose precision")

    @property
    def host_capacity(self) -> float:
        """Host–NIC capacity per direction in link units (``inf`` when unlimited)."""
        return math.inf if self.host_bw is None else self.host_bw / self.link_bw

    def to_json_dict(self) -> dict:
        """``{link_bw_Bps, host_bw_Bps, forwarding[, nvlink_bw_Bps]}`` (bytes/s or ``None``; docs/json.md);
        ``nvlink_bw_Bps`` only when given."""
        extra = {} if self.nvlink_bw is None else {"nvlink_bw_Bps": self.nvlink_bw}
        return {"link_bw_Bps": self.link_bw, "host_bw_Bps": self.host_bw, "forwarding": self.forwarding, **extra}

    @classmethod
    def from_json_dict(cls, d: dict) -> "Fabric":
        """The inverse of :meth:`to_json_dict`; files written before the JSON vocabulary (docs/json.md)
        spell the same bytes/s ``link_bw`` and ``host_bw``."""
        def bw(key):
            return d.get(f"{key}_Bps", d.get(key))
        return cls(bw("link_bw"), bw("host_bw"), d.get("forwarding", "host"), bw("nvlink_bw"))

    def describe(self) -> str:
        """One line for humans, e.g. ``link 25 Gbit/s, host 100 Gbit/s, host forwarding``."""
        def fmt(v):
            return "unlimited" if v is None else f"{v * 8 / 1e9:g} Gbit/s"
        nv = "" if self.nvlink_bw is None else f", NVLink {fmt(self.nvlink_bw)}"
        return f"link {fmt(self.link_bw)}, host {fmt(self.host_bw)}{nv}, {self.forwarding} forwarding"


#: Link class -> the :class:`Fabric` field giving its bandwidth.
CLASS_BANDWIDTHS = {"nvlink": "nvlink_bw"}


def check_link_classes(topology: Topology, fabric: Fabric) -> None:
    """Refuse a class bandwidth given for the user's topology when it has no link of that class (it would be
    ignored, and recorded in the file)."""
    for kind, name in CLASS_BANDWIDTHS.items():
        if getattr(fabric, name) is not None and kind not in (topology.classes or ()):
            raise A2AError(f"{flag(name)}: {topology.spec} has no {kind} links "
                           f"(only nvswitch:... topologies have them)")


def apply_link_classes(topology: Topology, fabric: Fabric) -> Topology:
    """``topology`` with each classed link's capacity set to its class bandwidth / the link bandwidth
    (per-link-class capacities, e.g. NVLinks of ``nvswitch:...`` under ``--nvlink-bw``).  Unchanged when
    the fabric has no class bandwidth."""
    if not topology.classes:
        return topology
    cap = np.array(topology.capacity, dtype=float)
    changed = False
    for kind, name in CLASS_BANDWIDTHS.items():
        bw = getattr(fabric, name)
        mask = np.array([c == kind for c in topology.classes], dtype=bool)
        if bw is not None and mask.any():
            cap[mask] = bw / fabric.link_bw
            changed = True
    if not changed:
        return topology
    cap.setflags(write=False)
    return dataclasses.replace(topology, capacity=cap)


@dataclass(frozen=True, eq=False)
class Augmented:
    """Result of :func:`augment`.

    ``topology`` has the same hosts (same ids) plus NIC nodes as switches.
    ``node_origin[i]`` is the base node an augmented node stands for;
    ``link_origin[e]`` is the base link an augmented link carries, or -1 for a
    host–NIC link.
    """

    topology: Topology
    node_origin: np.ndarray
    link_origin: np.ndarray

    def project_links(self, values: np.ndarray) -> np.ndarray:
        """Map per-augmented-link values (last axis) back onto the base links."""
        keep = self.link_origin >= 0
        base_links = int(self.link_origin.max()) + 1 if keep.any() else 0
        out = np.zeros(values.shape[:-1] + (base_links,))
        out[..., self.link_origin[keep]] = values[..., keep]
        return out


def augment(topology: Topology, fabric: Fabric) -> Augmented:
    """Host–NIC bottleneck augmentation (Basu et al. §3.2.2, Fig. 2).

    With an unlimited host bandwidth the graph is returned unchanged.  Otherwise
    each host ``h`` keeps its id (it sources and sinks traffic) and gains NIC
    nodes that own its network links:

    * ``nic`` forwarding: one NIC node ``n_h``; links ``h->n_h`` and ``n_h->h`` of
      capacity ``host_bw/link_bw``; relayed traffic passes ``n_h`` only.
    * ``host`` forwarding: an ingress NIC node ``i_h`` (network links end there)
      and an egress NIC node ``o_h`` (network links start there), linked only
      through the host: ``i_h->h`` and ``h->o_h``, each ``host_bw/link_bw``.  A
      relayed byte therefore crosses the host–NIC link in both directions.
    """
    n, nh = topology.n_nodes, topology.n_hosts
    if fabric.host_bw is None:
        ident = np.arange(n)
        return Augmented(topology, ident, np.arange(topology.n_links))
    hc = fabric.host_capacity
    hosts = np.arange(nh)
    src, dst = topology.src.copy(), topology.dst.copy()
    if fabric.forwarding == "nic":
        nic = n + hosts                                # n_h
        src = np.where(src < nh, nic[np.minimum(src, nh - 1)], src)
        dst = np.where(dst < nh, nic[np.minimum(dst, nh - 1)], dst)
        extra = [np.stack([hosts, nic], 1), np.stack([nic, hosts], 1)]
        origin = np.concatenate([np.arange(n), hosts])
        names = list(topology.names) + [f"nic:{topology.names[h]}" for h in hosts]
    else:
        ing, egr = n + hosts, n + nh + hosts           # i_h, o_h
        src = np.where(src < nh, egr[np.minimum(src, nh - 1)], src)
        dst = np.where(dst < nh, ing[np.minimum(dst, nh - 1)], dst)
        extra = [np.stack([ing, hosts], 1), np.stack([hosts, egr], 1)]
        origin = np.concatenate([np.arange(n), hosts, hosts])
        names = (list(topology.names) + [f"nic-in:{topology.names[h]}" for h in hosts]
                 + [f"nic-out:{topology.names[h]}" for h in hosts])
    extra = np.concatenate(extra)
    pairs = np.concatenate([np.stack([src, dst], 1), extra])
    caps = np.concatenate([topology.capacity, np.full(len(extra), hc)])
    tags = np.concatenate([np.arange(topology.n_links), np.full(len(extra), -1)])
    aug = Topology.from_links(
        f"{topology.spec} [{fabric.forwarding}-forwarding host-NIC augmentation]",
        nh, pairs, n_switches=len(origin) - nh, capacity=caps, names=names, undirected=False,
    )
    # from_links sorts links by (src, dst); recover each augmented link's origin.
    key = pairs[:, 0] * aug.n_nodes + pairs[:, 1]
    order = np.argsort(key, kind="stable")
    return Augmented(aug, origin, tags[order])
