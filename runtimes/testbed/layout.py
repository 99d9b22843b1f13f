"""Names and addresses of one testbed instance: a pure function of the topology and the instance name.

Everything the testbed creates carries :data:`PREFIX`: namespaces are
``a2tb-NAME-h<h>`` (host ``h``), ``a2tb-NAME-n<u>`` (node ``u``'s NIC; a switch
is a NIC-only node) and ``a2tb-NAME-m`` (management: ``mpiexec`` and a bridge
to every host, used by the launcher alone).  Interfaces live inside those
namespaces and are named from the namespace's point of view:

============== ====================== =========================================
namespace      interface              peer
============== ====================== =========================================
host ``h``     ``a2tb-nic``           NIC ``h``'s ``a2tb-host`` (host–NIC link)
host ``h``     ``a2tb-mgmt``          the management bridge port ``a2tb-h<h>``
NIC ``u``      ``a2tb-to<v>``         NIC ``v``'s ``a2tb-to<u>`` (cable u–v)
management     ``a2tb-br``            bridge over every ``a2tb-h<h>``
============== ====================== =========================================

Addresses are private and exist only inside these namespaces: host–NIC links
are ``/31`` s in 10.64/10 (the host's own data address is the host side),
cables ``/31`` s in 10.128/10, steered route endpoints ``/32`` s in 10.192/10
(on the hosts' loopback), the management bridge 10.16/12.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.topology.model import Topology

#: Prefix of every namespace and interface the testbed creates.
PREFIX = "a2tb-"
NAME_RE = re.compile(r"[a-z0-9]{1,16}")
HOST_IF, MGMT_IF, NIC_HOST_IF, BRIDGE_IF = "a2tb-nic", "a2tb-mgmt", "a2tb-host", "a2tb-br"
#: MTU of every emulated link: jumbo frames keep the packet rate (the CPU cost) low.
MTU = 9000
#: Headers counted in an interface's bytes per packet: Ethernet 14 + IPv4 20 + TCP with timestamps 32.
HEADER_BYTES = 66

_HOSTLINK_NET = int(ipaddress.IPv4Address("10.64.0.0"))
_CABLE_NET = int(ipaddress.IPv4Address("10.128.0.0"))
_ROUTE_NET = int(ipaddress.IPv4Address("10.192.0.0"))
_MGMT_NET = int(ipaddress.IPv4Address("10.16.0.0"))
MGMT_PREFIXLEN = 12
_SPAN = 1 << 22  # addresses in each /10


def check_name(name: str) -> str:
    """An instance name: 1-16 lower-case letters and digits (it becomes part of every namespace name)."""
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise A2AError(f"testbed name {name!r}: use 1-16 lower-case letters and digits")
    return name


def _ip(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def link_key(u: int, v: int) -> str:
    """The JSON key of directed link ``u -> v`` (``"u-v"``)."""
    return f"{u}-{v}"


@dataclass(frozen=True, eq=False)
class Layout:
    """Namespaces, interfaces and addresses of testbed ``name`` emulating ``topology`` under ``fabric``."""

    name: str
    topology: Topology
    fabric: Fabric

    def __post_init__(self):
        check_name(self.name)
        t = self.topology
        if self.fabric.link_bw is None:
            raise A2AError("the testbed needs a link bandwidth (--link-bw)")
        fwd = set(zip(t.src.tolist(), t.dst.tolist()))
        oneway = sorted((u, v) for u, v in fwd if (v, u) not in fwd)
        if oneway:
            u, v = oneway[0]
            raise A2AError(f"{t.spec} has one-way links (e.g. {u}->{v} without {v}->{u}); the testbed emulates "
                           f"bidirectional cables only")
        if t.n_hosts + 2 >= 1 << (32 - MGMT_PREFIXLEN) or 2 * len(self.cables) > _SPAN:
            raise A2AError(f"{t.spec} is too large for the testbed's address plan")

    # ------------------------------------------------------------ namespaces
    @property
    def mgmt_ns(self) -> str:
        return f"{PREFIX}{self.name}-m"

    def host_ns(self, h: int) -> str:
        return f"{PREFIX}{self.name}-h{h}"

    def nic_ns(self, u: int) -> str:
        return f"{PREFIX}{self.name}-n{u}"

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of the instance, in creation order."""
        t = self.topology
        return ([self.mgmt_ns] + [self.host_ns(h) for h in range(t.n_hosts)]
                + [self.nic_ns(u) for u in range(t.n_nodes)])

    # ------------------------------------------------------------ interfaces
    @staticmethod
    def link_if(v: int) -> str:
        """The interface of a NIC namespace on its cable to node ``v``."""
        return f"{PREFIX}to{v}"

    @staticmethod
    def bridge_port(h: int) -> str:
        return f"{PREFIX}h{h}"

    # ------------------------------------------------------------- addresses
    @cached_property
    def cables(self) -> list[tuple[int, int]]:
        """Undirected cables ``(u, v)`` with ``u < v``, in link order; cable ``c`` owns a ``/31``."""
        t = self.topology
        keep = t.src < t.dst
        return list(zip(t.src[keep].tolist(), t.dst[keep].tolist()))

    @cached_property
    def _cable_index(self) -> dict[tuple[int, int], int]:
        return {c: i for i, c in enumerate(self.cables)}

    def cable_addr(self, u: int, v: int) -> str:
        """Node ``u``'s address on its cable to ``v`` (``/31``)."""
        c = self._cable_index[(min(u, v), max(u, v))]
        return _ip(_CABLE_NET + 2 * c + (u > v))

    def host_addr(self, h: int) -> str:
        """Host ``h``'s data address: the host side of its host–NIC ``/31``."""
        return _ip(_HOSTLINK_NET + 2 * h + 1)

    def nic_addr(self, h: int) -> str:
        """NIC ``h``'s side of the host–NIC ``/31``."""
        return _ip(_HOSTLINK_NET + 2 * h)

    def mgmt_addr(self, h: int | None = None) -> str:
        """The bridge's address (``h=None``) or host ``h``'s management address."""
        return _ip(_MGMT_NET + 1 + (0 if h is None else 1 + h))

    @staticmethod
    def route_addrs(i: int) -> tuple[str, str]:
        """Source- and destination-side addresses of steered route ``i``."""
        if not 0 <= i < _SPAN // 2:
            raise A2AError(f"more than {_SPAN // 2} steered routes")
        return _ip(_ROUTE_NET + 2 * i), _ip(_ROUTE_NET + 2 * i + 1)

    # -------------------------------------------------------------- rates
    def link_rate(self, u: int, v: int) -> float:
        """Bytes per second of directed link ``u -> v``: ``link_bw`` times its capacity."""
        return self.fabric.link_bw * float(self.topology.capacity[self.topology.link_index(u, v)])

    @property
    def directed_links(self) -> list[tuple[int, int]]:
        return list(zip(self.topology.src.tolist(), self.topology.dst.tolist()))

    def aggregate_rate(self) -> float:
        """Bytes per second the kernel forwards when every cable runs at its rate and every host–NIC link
        at what its cables can carry (the host bandwidth, if lower), both ways."""
        t = self.topology
        rates = self.fabric.link_bw * t.capacity
        links = float(np.sum(rates))
        host_out = np.bincount(t.src, weights=rates, minlength=t.n_nodes)[:t.n_hosts]
        if self.fabric.host_bw is not None:
            host_out = np.minimum(host_out, self.fabric.host_bw)
        return links + 2 * float(np.sum(host_out))
