"""What the fabric carried and what it cost: interface counters per directed link, and CPU use.

A directed link ``u -> v`` is the ``a2tb-to<v>`` interface of NIC namespace
``u``; its transmit counters (read over netlink) are the bytes that crossed
the link.  Payload is estimated as ``bytes - 66 * packets`` (Ethernet, IPv4
and TCP-with-timestamps headers per packet, ACKs included), so a link that
carried only ACKs reads close to zero.  CPU use comes from ``/proc/stat``
(machine-wide, so other jobs on the machine count too: note the load).
"""

from __future__ import annotations

from a2a_compiler import interrupt

from .build import Handles
from .layout import BRIDGE_IF, HEADER_BYTES, NIC_HOST_IF, Layout, link_key

_STAT_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


def counter_map(layout: Layout) -> dict[str, dict[str, str]]:
    """namespace -> {interface -> counter name}: every directed link ``"u-v"``, host–NIC links
    (``"h>nic"`` injection, ``"nic>h"`` ejection) and the management bridge (``"mgmt"``)."""
    t = layout.topology
    out: dict[str, dict[str, str]] = {}
    for u, v in layout.directed_links:
        out.setdefault(layout.nic_ns(u), {})[layout.link_if(v)] = link_key(u, v)
    for h in range(t.n_hosts):
        out[layout.nic_ns(h)][NIC_HOST_IF] = f"nic>{h}"
        out.setdefault(layout.host_ns(h), {})["a2tb-nic"] = f"{h}>nic"
    out[layout.mgmt_ns] = {BRIDGE_IF: "mgmt"}
    return out


class Counters:
    """Transmit counters of the interfaces in ``mapping`` (see :func:`counter_map`), read in one dump per namespace."""

    def __init__(self, mapping: dict[str, dict[str, str]]):
        self.mapping = mapping
        self.handles = Handles()
        with interrupt.deferred():
            for name in mapping:
                self.handles[name]  # open every socket now (it forks a helper): not in a timed window

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """counter name -> (bytes, packets) transmitted so far (the bridge: received from the hosts)."""
        out = {}
        with interrupt.deferred():
            for name, ifs in self.mapping.items():
                for msg in self.handles[name].get_links():
                    key = ifs.get(msg.get_attr("IFLA_IFNAME"))
                    if key is not None:
                        st = msg.get_attr("IFLA_STATS64")
                        side = "rx" if key == "mgmt" else "tx"
                        out[key] = (int(st[f"{side}_bytes"]), int(st[f"{side}_packets"]))
        return out

    def close(self) -> None:
        with interrupt.deferred():
            self.handles.close()


def delta(before: dict, after: dict) -> dict[str, dict[str, int]]:
    """Per counter: bytes, packets and estimated payload between two snapshots."""
    out = {}
    for key, (b1, p1) in after.items():
        b0, p0 = before.get(key, (0, 0))
        b, p = b1 - b0, p1 - p0
        out[key] = {"bytes": b, "packets": p, "payload": max(b - HEADER_BYTES * p, 0)}
    return out


def cpu_times() -> dict[str, float]:
    """Machine-wide CPU seconds by state since boot, and the number of CPUs (``/proc/stat``)."""
    import os

    with open("/proc/stat") as fh:
        fields = fh.readline().split()[1:1 + len(_STAT_FIELDS)]
    hz = os.sysconf("SC_CLK_TCK")
    out = {k: int(v) / hz for k, v in zip(_STAT_FIELDS, fields)}
    out["cpus"] = os.cpu_count() or 1
    return out


def cpu_use(before: dict, after: dict) -> dict[str, float]:
    """Busy and softirq (kernel forwarding) fractions of all CPUs between two :func:`cpu_times`."""
    d = {k: after[k] - before[k] for k in _STAT_FIELDS}
    total = sum(d.values()) or 1e-9
    return {"busy_fraction": 1.0 - (d["idle"] + d["iowait"]) / total,
            "softirq_fraction": d["softirq"] / total,
            "cpus": after["cpus"]}


#: TCP counters of a host namespace that explain a slow or over-full link: (file, section, field) -> name.
_TCP_FIELDS = {("snmp", "Tcp", "OutSegs"): "segments", ("snmp", "Tcp", "RetransSegs"): "retransmitted",
               ("netstat", "TcpExt", "TCPTimeouts"): "timeouts", ("netstat", "TcpExt", "TCPLossProbes"): "loss_probes",
               ("netstat", "TcpExt", "TCPFastRetrans"): "fast_retransmits"}


def tcp_counters() -> dict[str, int]:
    """This process's network namespace's TCP segment, retransmission and timeout counts (``/proc/self/net``)."""
    tables = {}
    for name in {f for f, _, _ in _TCP_FIELDS}:
        with open(f"/proc/self/net/{name}") as fh:
            lines = fh.read().splitlines()
        for head, values in zip(lines[::2], lines[1::2]):
            section = head.split(":")[0]
            tables[(name, section)] = dict(zip(head.split()[1:], values.split()[1:]))
    return {out: int(tables[(f, sec)][field]) for (f, sec, field), out in _TCP_FIELDS.items()}
