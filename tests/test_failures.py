"""Failures users have: switch-to-switch cables only, one cable of a port group, named cables (puncture's
--among and --remove-cable), recorded in the spec and rebuilt from it."""

import numpy as np
import pytest

from a2a_compiler.cli import main
from a2a_compiler.errors import DisconnectedError, SpecError
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.ibnet import net_file, parse_ibnet
from a2a_compiler.topology.metrics import hosts_connected
from a2a_compiler.topology.puncture import from_recorded_spec, puncture


@pytest.mark.parametrize("seed", range(0, 61, 6))
def test_slimfly_switch_link_failures_stay_host_connected(seed, capsys):
    """Random draws over every link cut a host off for every seed 0..60; switch-to-switch draws never do."""
    assert main(["topo", "slimfly:5", "--remove-links", "10", "--seed", str(seed)]) == 2
    assert capsys.readouterr().err == (
        f"a2a topo: error: slimfly:5 is disconnected after removing 10 random cables (seed {seed}); try another "
        "seed or a smaller K, or --among switch-links (host cables are drawn too)\n")
    assert main(["topo", "slimfly:5", "--remove-links", "10", "--seed", str(seed), "--among", "switch-links"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[:3] == [f"topology   slimfly:5 -links 10 among=switch-links seed={seed}",
                       "nodes      200 hosts, 50 switches", "links      730 links (365 cables)"]


def test_switch_links_keep_every_host_cable():
    t = from_spec("fattree:4,3")
    p = puncture(t, remove_links=6, seed=3, among="switch-links")
    host_cables = lambda x: int(((x.src < x.n_hosts) | (x.dst < x.n_hosts)).sum())   # noqa: E731
    assert hosts_connected(p) and p.n_links == t.n_links - 12 and host_cables(p) == host_cables(t) == 128


def test_one_cable_of_a_port_group():
    """fattree:4,3,merge=2 has 32 root groups of 2 cables; switch-cables removes single cables: seed 0 takes 4
    physical cables (8 directed), 3 of them one of a pair, so 2 links (one cable) go and capacity drops by 8."""
    t = from_spec("fattree:4,3,merge=2")
    p = puncture(t, remove_links=4, seed=0, among="switch-cables")
    assert (t.n_links, int(t.link_cables.sum()), t.capacity.sum()) == (320, 384, 384.0)
    assert (p.n_links, int(p.link_cables.sum()), p.capacity.sum()) == (318, 376, 376.0)
    assert np.all(p.capacity == p.link_cables) and p.is_symmetric()
    assert p.spec == "fattree:4,3,merge=2 -links 4 among=switch-cables seed=0"
    back = from_recorded_spec(p.spec)
    assert np.array_equal(back.src, p.src) and np.array_equal(back.cables, p.cables)


def test_named_cables_by_endpoints_and_by_guid_and_port(tmp_path, capsys):
    t = parse_ibnet(net_file(from_spec("vartree:6,2,w=3")))       # s0:0 ports 7-9 to s1:0, 10-12 to s1:1
    guid = f"0x{t.guids[t.n_hosts]:016x}"
    p = puncture(t, cables=(f"{guid}/7",))
    assert (int(p.link_cables.sum()), p.n_links) == (46, 32)              # one cable of a group of 3, both ends
    assert p.ports[p.src[p.cable_link] == t.n_hosts].tolist() == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12]
    assert p.spec == f"ibnet:<ibnetdiscover> -cable {guid}/7 seed=0"
    whole = puncture(t, cables=("s0:0,s1:0",))
    assert (int(whole.link_cables.sum()), whole.n_links) == (42, 30)       # the group of 3, both directions
    with pytest.raises(DisconnectedError, match=r"^ibnet:<ibnetdiscover> is disconnected after removing 1 named "
                                                r"cable$"):
        puncture(t, cables=(f"{guid}/4",))                                  # port 4: host h3's only cable
    fabric = tmp_path / "fabric.txt"
    fabric.write_text(net_file(from_spec("vartree:6,2,w=3")))
    assert main(["topo", f"ibnet:{fabric}", "--remove-cable", f"{guid}/7", "--remove-cable", "s0:1,s1:1"]) == 0
    assert capsys.readouterr().out.splitlines()[2] == "links      30 links (15 port groups of 20 cables)"


@pytest.mark.parametrize("args,err", [
    (["--remove-cable", "zz/3"], "--remove-cable: fattree:4,3 has no node 'zz' (give a node name or GUID 0x...)"),
    (["--remove-cable", "s0:0/9"], "--remove-cable s0:0/9: s0:0 has no cable on port 9"),
    (["--remove-cable", "h0,h1"], "--remove-cable h0,h1: no cable between h0 and h1"),
    (["--remove-cable", "s0:0"], "--remove-cable s0:0: give NODE,NODE (the cables between two nodes) or NODE/PORT "
                                 "(one cable)"),
    (["--among", "switch-links"], "--among applies only with --remove-links"),
    (["--remove-links", "129", "--among", "switch-links"], "--remove-links: K=129 exceeds the 128 switch-to-switch "
                                                            "links of fattree:4,3"),
])
def test_bad_failures_are_one_line(args, err, capsys):
    assert main(["topo", "fattree:4,3"] + args) == 2
    cap = capsys.readouterr()
    assert cap.err == f"a2a topo: error: {err}\n" and cap.out == ""


def test_torus_has_no_switch_cables():
    with pytest.raises(SpecError, match=r"^--remove-links: K=1 exceeds the 0 switch-to-switch cables of torus:3x3$"):
        puncture(from_spec("torus:3x3"), remove_links=1, among="switch-cables")


def test_verify_rebuilds_a_recorded_switch_failure(tmp_path, capsys):
    out = tmp_path / "r.xml"
    assert main(["routes", "fattree:4,2", "--remove-links", "2", "--among", "switch-links", "--seed", "1",
                 "--algo", "minhop", "-o", str(out), "-q"]) == 0
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().out.rstrip().endswith("VALID")


def test_compile_takes_the_same_failures(tmp_path, capsys):
    out = tmp_path / "c.xml"
    assert main(["compile", "fattree:4,2", "--emit", "mpi", "--remove-links", "2", "--among", "switch-links",
                 "--seed", "1", "-o", str(out), "--json", "-q"]) == 0
    assert '"spec": "fattree:4,2 -links 2 among=switch-links seed=1"' in capsys.readouterr().out
    assert main(["compile", "fattree:4,2", "--emit", "mpi", "--among", "switch-links", "-o", str(tmp_path / "d.xml"),
                 "-q"]) == 2
    assert capsys.readouterr().err == "a2a compile: error: --among applies only with --remove-links\n"
    assert not (tmp_path / "d.xml").exists()
