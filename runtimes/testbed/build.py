"""Build a testbed instance with netlink (pyroute2): namespaces, veth links, addresses, sysctls, tbf shaping.

The fabric model of Basu et al. §2.1 and Fig. 2, one namespace per element:
every host has a *host* namespace (where its rank runs) joined to a *NIC*
namespace by a veth pair shaped to ``host_bw`` in each direction (the host–NIC
bottleneck; unshaped when the host bandwidth is unlimited); every cable is a
veth pair between two NIC namespaces shaped to ``link_bw`` times its capacity
in each direction; switches are NIC namespaces without a host.  Routes are
installed by :mod:`.routes`.

Shaping is ``tbf`` on each sending end: the rate is exact over any window
longer than a few milliseconds because the burst is kept at
:func:`burst_bytes` (about 5 ms of the rate, at least two jumbo frames).
"""

from __future__ import annotations

import contextlib
import os

from pyroute2 import NetNS, netns
from pyroute2.netlink.exceptions import NetlinkError

from a2a_compiler.errors import A2AError

from .layout import BRIDGE_IF, HOST_IF, MGMT_IF, MGMT_PREFIXLEN, MTU, NIC_HOST_IF, Layout

#: Burst of every shaper, in seconds of its rate (at least two frames).
BURST_SECONDS = 0.005
#: Queue of every shaper, in seconds of its rate: enough for TCP to keep a link busy.
QUEUE_SECONDS = 1.0

_SYSCTL_ALL = {
    "net/ipv6/conf/all/disable_ipv6": "1",      # no IPv6 neighbour discovery on the links
    "net/ipv6/conf/default/disable_ipv6": "1",
    "net/ipv4/conf/all/rp_filter": "0",          # steered and host-relayed paths are asymmetric
    "net/ipv4/conf/default/rp_filter": "0",
    "net/ipv4/conf/all/send_redirects": "0",
    "net/ipv4/conf/default/send_redirects": "0",
}
_SYSCTL_HOST = {
    "net/ipv4/tcp_slow_start_after_idle": "0",  # a schedule's steps must not restart from a small window
    "net/ipv4/tcp_early_retrans": "0",          # no tail loss probes: the fabric is lossless (routes.WINDOW)
}


def burst_bytes(rate: float) -> int:
    return int(max(2 * (MTU + 14), rate * BURST_SECONDS))


def shape(ns: NetNS, ifname: str, rate: float) -> None:
    """Shape ``ifname``'s egress to ``rate`` bytes/s with a token bucket."""
    burst = burst_bytes(rate)
    idx = _index(ns, ifname)
    try:
        ns.tc("add", "tbf", index=idx, handle=0x10000, rate=int(rate), burst=burst,
              limit=int(rate * QUEUE_SECONDS) + burst)
    except NetlinkError as exc:
        raise A2AError(f"cannot add a tbf qdisc on {ifname} ({exc.args[-1]}); the kernel needs "
                       f"CONFIG_NET_SCH_TBF") from None


@contextlib.contextmanager
def inside(name: str):
    """Run the body with this thread in network namespace ``name`` (never creates one)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        netns.setns(name, flags=0)
        try:
            yield
        finally:
            netns.setns(home)
    finally:
        os.close(home)


def _sysctls(name: str, values: dict) -> None:
    with inside(name):
        for key, value in values.items():
            with open(f"/proc/sys/{key}", "w") as fh:
                fh.write(value)


def _index(ns: NetNS, ifname: str) -> int:
    found = ns.link_lookup(ifname=ifname)
    if not found:
        raise A2AError(f"interface {ifname} is missing")
    return found[0]


def _up(ns: NetNS, ifname: str, address: str | None = None, prefixlen: int = 31, mtu: int | None = MTU) -> None:
    idx = _index(ns, ifname)
    if address is not None:
        ns.addr("add", index=idx, address=address, prefixlen=prefixlen)
    ns.link("set", index=idx, state="up", **({"mtu": mtu} if mtu else {}))


class Handles:
    """One open netlink socket per namespace of an instance (opening one forks a helper)."""

    def __init__(self):
        self._open: dict[str, NetNS] = {}

    def __getitem__(self, name: str) -> NetNS:
        ns = self._open.get(name)
        if ns is None:
            ns = self._open[name] = NetNS(name, flags=0)
        return ns

    def close(self) -> None:
        for ns in self._open.values():
            ns.close()
        self._open.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def create(layout: Layout, ns: Handles, progress=None) -> None:
    """Create every namespace, link, address and shaper of ``layout`` (routes: :mod:`.routes`)."""
    t, fab = layout.topology, layout.fabric
    host_forwarding = fab.forwarding == "host"
    for name in layout.namespaces:
        netns.create(name)
    hosts = dict(_SYSCTL_ALL, **_SYSCTL_HOST, **({"net/ipv4/ip_forward": "1"} if host_forwarding else {}))
    roles = ([(layout.mgmt_ns, _SYSCTL_ALL)] + [(layout.host_ns(h), hosts) for h in range(t.n_hosts)]
             + [(layout.nic_ns(u), dict(_SYSCTL_ALL, **{"net/ipv4/ip_forward": "1"})) for u in range(t.n_nodes)])
    for name, sysctls in roles:
        _sysctls(name, sysctls)
        _up(ns[name], "lo", mtu=None)
    if progress:
        progress(f"{len(layout.namespaces)} namespaces")
    m = ns[layout.mgmt_ns]
    m.link("add", ifname=BRIDGE_IF, kind="bridge")
    _up(m, BRIDGE_IF, layout.mgmt_addr(), MGMT_PREFIXLEN, mtu=None)
    bridge = _index(m, BRIDGE_IF)
    for h in range(t.n_hosts):
        host, nic = layout.host_ns(h), layout.nic_ns(h)
        ns[host].link("add", ifname=HOST_IF, kind="veth", peer={"ifname": NIC_HOST_IF, "net_ns_fd": nic})
        _up(ns[host], HOST_IF, layout.host_addr(h))
        _up(ns[nic], NIC_HOST_IF, layout.nic_addr(h))
        if fab.host_bw is not None:
            shape(ns[host], HOST_IF, fab.host_bw)
            shape(ns[nic], NIC_HOST_IF, fab.host_bw)
        port = layout.bridge_port(h)
        m.link("add", ifname=port, kind="veth", peer={"ifname": MGMT_IF, "net_ns_fd": host})
        m.link("set", index=_index(m, port), master=bridge, state="up")
        _up(ns[host], MGMT_IF, layout.mgmt_addr(h), MGMT_PREFIXLEN, mtu=None)
    for u, v in layout.cables:
        a, b = layout.nic_ns(u), layout.nic_ns(v)
        ns[a].link("add", ifname=layout.link_if(v), kind="veth",
                   peer={"ifname": layout.link_if(u), "net_ns_fd": b})
        _up(ns[a], layout.link_if(v), layout.cable_addr(u, v))
        _up(ns[b], layout.link_if(u), layout.cable_addr(v, u))
        shape(ns[a], layout.link_if(v), layout.link_rate(u, v))
        shape(ns[b], layout.link_if(u), layout.link_rate(v, u))
    if progress:
        rates = sorted({layout.link_rate(u, v) * 8 / 1e6 for u, v in layout.cables})
        progress(f"{t.n_hosts} host-NIC links, {len(layout.cables)} cables shaped to "
                 f"{' or '.join(f'{r:g}' for r in rates)} Mbit/s")
