"""Fabric model: bandwidth parsing, validation, and the host-NIC augmentation of Fig. 2 (Basu et al. §3.2.2)."""

import math

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric, augment, parse_bandwidth
from a2a_compiler.topology import from_spec


@pytest.mark.parametrize("text,value", [
    ("25Gbps", 25e9 / 8), ("3.125GB/s", 3.125e9), ("100 Gbit/s", 100e9 / 8), ("10Gb/s", 10e9 / 8),
    ("1GiB/s", 2.0**30), ("400 Mbps", 400e6 / 8), ("2e3 B/s", 2000.0), ("1Tbps", 1e12 / 8),
    ("25GBps", 25e9), ("1GiBps", 2.0**30), ("8kbps", 1000.0), ("1KiB/s", 1024.0), ("8Pbps", 1e15), ("1PB/s", 1e15),
])
def test_parse_bandwidth_units(text, value):
    assert parse_bandwidth(text) == pytest.approx(value, rel=1e-15)


def test_upper_case_B_is_bytes_in_every_spelling():
    """issue #18: --link-bw 25GBps was read as 25 Gbit/s, an 8x error against the _GBps JSON keys."""
    bits, nbytes = parse_bandwidth("25Gbps"), parse_bandwidth("25GBps")
    assert nbytes == 8 * bits == 25e9
    assert parse_bandwidth("25GB/s") == nbytes and parse_bandwidth("25Gb/s") == parse_bandwidth("25Gbit/s") == bits


@pytest.mark.parametrize("text", ["25GBPS", "25gbit", "25Gbytes", "25 G", "25GiB", "25mbps", "25gBps", "25KBps",
                                  "25kiBps", "2PiBps"])
def test_parse_bandwidth_refuses_other_spellings(text):
    with pytest.raises(A2AError, match=r"^--link-bw: unknown unit '.*'; b is a bit, B a byte: 25Gbps = 25Gb/s = "
                                       r"25Gbit/s \(bits\), 25GBps = 25GB/s = 8 x 25Gbps \(bytes\); prefixes k M G T P "
                                       r"\(1000s\) or Ki Mi Gi Ti \(1024s\), in exactly these cases$"):
        parse_bandwidth(text, "--link-bw")


def test_sizes_are_bytes_and_ambiguous_sizes_are_refused():
    import argparse

    from runtimes.mpi.cli import parse_size

    assert [parse_size(t) for t in ("1K", "1k", "1KiB", "64M", "1GiB", "4096", "4096B")] == \
        [1024, 1024, 1024, 64 << 20, 1 << 30, 4096, 4096]
    for text, message in [("1KB", "size '1KB' is ambiguous: KB may mean 1000s or 1024s; sizes are bytes: write 1K "
                                  "or 1KiB (powers of 1024)"),
                          ("1Mb", "size '1Mb' is ambiguous: b is a bit; sizes are bytes: write 1M or 1MiB (powers "
                                  "of 1024)"),
                          ("8b", "size '8b' is ambiguous: b is a bit; sizes are bytes: write 8")]:
        with pytest.raises(argparse.ArgumentTypeError) as exc:
            parse_size(text)
        assert str(exc.value) == message


def test_readme_lists_the_prefixes_the_parser_takes():
    """issue 34, item 16: one rule: README's list is :data:`PREFIXES`, a value over the range names it."""
    import re
    from pathlib import Path

    from a2a_compiler.fabric import PREFIXES

    readme = " ".join(Path(__file__).resolve().parents[1].joinpath("README.md").read_text().split())
    m = re.search(r"prefixes `([^`]*)` are decimal, `([^`]*)` binary, in exactly these cases", readme)
    assert m and sorted(m.group(1).split() + m.group(2).split()) == sorted(k for k in PREFIXES if k)
    with pytest.raises(A2AError) as exc:
        parse_bandwidth("2PBps", "--link-bw")
    assert str(exc.value) == "--link-bw: bandwidth '2PBps' is outside 1 B/s .. 1e+15 B/s (1 PB/s)"


@pytest.mark.parametrize("text,message", [
    ("25", "--link-bw: cannot parse '25'; give a number and a unit"),
    ("25 furlongs", "--link-bw: unknown unit 'furlongs'"),
    ("25Gbpsx", "unknown unit 'Gbpsx'"),
    ("0Gbps", "--link-bw: bandwidth must be positive, got '0Gbps'"),
    ("-3GB/s", "--link-bw: bandwidth must be positive, got '-3GB/s'"),
])
def test_parse_bandwidth_errors(text, message):
    with pytest.raises(A2AError) as exc:
        parse_bandwidth(text, "--link-bw")
    assert message in str(exc.value)


def test_fabric_validation():
    with pytest.raises(A2AError, match="--forwarding must be one of host, nic, got 'gpu'"):
        Fabric(forwarding="gpu")
    with pytest.raises(A2AError, match="--host-bw needs --link-bw"):
        Fabric(host_bw=1e9)
    with pytest.raises(A2AError, match=r"^--link-bw: bandwidth inf is outside 1 B/s .. 1e\+15 B/s \(1 PB/s\)$"):
        Fabric(link_bw=math.inf)
    f = Fabric(parse_bandwidth("25Gbps"), parse_bandwidth("100Gbps"), "nic")
    assert f.host_capacity == pytest.approx(4.0)
    assert Fabric().host_capacity == math.inf
    assert Fabric.from_json_dict(f.to_json_dict()) == f
    assert f.describe() == "link 25 Gbit/s, host 100 Gbit/s, nic forwarding"


def _check_link_origins(base, aug):
    t = aug.topology
    assert len(aug.link_origin) == t.n_links
    network = aug.link_origin >= 0
    # every base link appears exactly once, between nodes standing for its endpoints
    assert sorted(aug.link_origin[network].tolist()) == list(range(base.n_links))
    e = aug.link_origin[network]
    assert np.array_equal(aug.node_origin[t.src[network]], base.src[e])
    assert np.array_equal(aug.node_origin[t.dst[network]], base.dst[e])
    assert np.all(t.capacity[network] == base.capacity[e])
    assert np.array_equal(aug.project_links(aug.link_origin.astype(float) * network), np.arange(base.n_links))


def test_augment_unlimited_is_identity():
    base = from_spec("torus:3x3x3")
    aug = augment(base, Fabric(link_bw=3.125e9))
    assert aug.topology is base and np.array_equal(aug.link_origin, np.arange(base.n_links))


def test_augment_nic_mode():
    base = from_spec("torus:3x3x3")
    aug = augment(base, Fabric(25e9 / 8, 100e9 / 8, "nic"))
    t = aug.topology
    assert (t.n_hosts, t.n_switches, t.n_links) == (27, 27, 162 + 54)
    _check_link_origins(base, aug)
    for h in range(27):  # the host talks only to its NIC, at host_bw / link_bw
        nic = 27 + h
        assert aug.node_origin[nic] == h
        out = np.flatnonzero(t.src == h)
        assert t.dst[out].tolist() == [nic] and t.capacity[out].tolist() == [4.0]
        assert t.capacity[t.link_index(nic, h)] == 4.0 and aug.link_origin[t.link_index(nic, h)] == -1
        assert t.out_degree()[nic] == 6 + 1


def test_augment_host_mode():
    base = from_spec("torus:3x3x3")
    aug = augment(base, Fabric(25e9 / 8, 100e9 / 8, "host"))
    t = aug.topology
    assert (t.n_hosts, t.n_switches, t.n_links) == (27, 54, 162 + 54)
    _check_link_origins(base, aug)
    ing, egr = 27 + np.arange(27), 54 + np.arange(27)
    assert np.array_equal(aug.node_origin[ing], np.arange(27)) and np.array_equal(aug.node_origin[egr], np.arange(27))
    # ingress NIC: network links in, one link out to the host; egress: one link in from the host, network out
    assert np.all(t.out_degree()[ing] == 1) and np.all(t.in_degree()[ing] == 6)
    assert np.all(t.in_degree()[egr] == 1) and np.all(t.out_degree()[egr] == 6)
    assert all(t.capacity[t.link_index(27 + h, h)] == 4.0 and t.capacity[t.link_index(h, 54 + h)] == 4.0
               for h in range(27))
    # relayed traffic must cross the host: no path ingress -> egress avoiding it
    assert not np.any((np.isin(t.src, ing)) & (np.isin(t.dst, egr)))


def test_augment_keeps_switches():
    base = from_spec("fattree:2,2")
    aug = augment(base, Fabric(1e9, 2e9, "nic"))
    assert aug.topology.n_nodes == base.n_nodes + base.n_hosts
    _check_link_origins(base, aug)
