"""InfiniBand without the simulator: ibnet:PATH, cables and ports, OpenSM's LFT dump both ways, sssp --opensm."""

import json

import numpy as np
import pytest

from a2a_compiler.cli import main
from a2a_compiler.errors import A2AError, FormatError
from a2a_compiler.routes import route_tables
from a2a_compiler.routes.opensm import read_dump, write_dump
from a2a_compiler.topology import Topology, from_spec
from a2a_compiler.topology.ibnet import net_file, parse_ibnet

# ibnetdiscover's output for ibsim's net.2sw2path4hca example (two switches joined by two cables)
DISCOVERED = """\
#
# Topology file: generated on Thu Nov 26 16:02:49 2026
#
vendid=0x0
devid=0x0
sysimgguid=0x200001
switchguid=0x200001(200001)
Switch\t8 "S-0000000000200001"\t\t# "Switch2" base port 0 lid 3 lmc 0
[1]\t"H-0000000000100003"[1](100004) \t\t# "Hca2" lid 4 4xSDR
[2]\t"H-0000000000100009"[1](10000a) \t\t# "Hca4" lid 6 4xSDR
[3]\t"S-0000000000200000"[3]\t\t# "Switch1" lid 2 4xSDR
[5]\t"S-0000000000200000"[5]\t\t# "Switch1" lid 2 4xSDR

vendid=0x0
devid=0x0
sysimgguid=0x200000
switchguid=0x200000(200000)
Switch\t8 "S-0000000000200000"\t\t# "Switch1" base port 0 lid 2 lmc 0
[1]\t"H-0000000000100000"[1](100001) \t\t# "Hca1" lid 1 4xSDR
[2]\t"H-0000000000100006"[1](100007) \t\t# "Hca3" lid 5 4xSDR
[3]\t"S-0000000000200001"[3]\t\t# "Switch2" lid 3 4xSDR
[5]\t"S-0000000000200001"[5]\t\t# "Switch2" lid 3 4xSDR

caguid=0x100009
Ca\t2 "H-0000000000100009"\t\t# "Hca4"
[1](10000a) \t"S-0000000000200001"[2]\t\t# lid 6 lmc 0 "Switch2" lid 3 4xSDR

caguid=0x100003
Ca\t2 "H-0000000000100003"\t\t# "Hca2"
[1](100004) \t"S-0000000000200001"[1]\t\t# lid 4 lmc 0 "Switch2" lid 3 4xSDR

caguid=0x100006
Ca\t2 "H-0000000000100006"\t\t# "Hca3"
[1](100007) \t"S-0000000000200000"[2]\t\t# lid 5 lmc 0 "Switch1" lid 2 4xSDR

caguid=0x100000
Ca\t2 "H-0000000000100000"\t\t# "Hca1"
[1](100001) \t"S-0000000000200000"[1]\t\t# lid 1 lmc 0 "Switch1" lid 2 4xSDR
"""


def test_ibnet_keeps_names_guids_ports_and_parallel_cables():
    t = parse_ibnet(DISCOVERED, "fabric.txt")
    assert t.spec == "ibnet:fabric.txt" and (t.n_hosts, t.n_switches) == (4, 2)
    assert t.names == ("Hca1", "Hca2", "Hca3", "Hca4", "Switch1", "Switch2")           # by port GUID, switch GUID
    assert [hex(g) for g in t.guids] == ["0x100001", "0x100004", "0x100007", "0x10000a", "0x200000", "0x200001"]
    e = t.link_index(4, 5)
    assert t.cables[e] == 2 and t.capacity[e] == 2.0                                   # one link, two cables
    assert t.cable_port[t.cable_ptr[e]:t.cable_ptr[e + 1]].tolist() == [3, 5]
    assert t.port_count.tolist() == [2, 2, 2, 2, 8, 8]
    assert t.cable_port[t.cable_reverse[t.cable_ptr[e]]] == 3                          # switch2's port 3


def test_ibnet_spec_and_json_round_trip(tmp_path):
    path = tmp_path / "fabric.txt"
    path.write_text(DISCOVERED)
    t = from_spec(f"ibnet:{path}")
    back = Topology.load(t.save(tmp_path / "t.json"))
    assert back.guids == t.guids and np.array_equal(back.cable_port, t.cable_port)
    assert back.to_json_dict() == t.to_json_dict()


@pytest.mark.parametrize("spec", ["fattree:4,3,merge=2", "vartree:6,2,w=3", "slimfly:3", "fattree:4,2"])
def test_net_file_round_trips_through_the_ibnet_reader(spec):
    """The ibsim net file we write reads back as the same cables, ports and names (GUIDs from the plan)."""
    t = from_spec(spec)
    back = parse_ibnet(net_file(t))
    assert back.names == t.names and np.array_equal(back.src, t.src) and np.array_equal(back.dst, t.dst)
    assert np.array_equal(back.link_cables, t.link_cables) and np.array_equal(back.cable_port, t.cable_port)


@pytest.mark.parametrize("edit,message", [
    (lambda s: s.replace('[5]\t"S-0000000000200000"[5]', '[5]\t"S-0000000000200000"[6]'),
     r"line 12: cable 'Switch2'\[5\] -> 'Switch1'\[6\] is not listed back at its other end"),
    (lambda s: s.replace('[2]\t"H-0000000000100009"', '[1]\t"H-0000000000100009"'), "line 10: port 1 of 'Switch2' "
                                                                                     "listed twice"),
    (lambda s: s.replace('Switch\t8 "S-0000000000200000"', 'Switch\t300 "S-0000000000200000"'),
     "has 300 ports; InfiniBand allows 1..255"),
    (lambda s: s.replace('"H-0000000000100003"[1](100004)', '"H-0000000000999999"[1]'), "leads to unknown node"),
    (lambda s: s + "Rt\t2 \"R-1\"\n", "routers .IB-to-IB. are not supported"),
    (lambda s: s + "garbage here\n", "not an ibnetdiscover line: 'garbage here'"),
    (lambda s: "", "no Switch or Ca records"),
])
def test_ibnet_refuses_malformed_files_in_one_line(edit, message):
    with pytest.raises(FormatError, match=message) as err:
        parse_ibnet(edit(DISCOVERED), "f.txt")
    assert "\n" not in str(err.value)


def test_cables_and_ports_are_checked():
    with pytest.raises(FormatError, match="uses port 1 for two cables"):
        Topology.from_links("x", 2, [(0, 2), (1, 2)], n_switches=1, ports=[((1,), (1,)), ((1,), (1,))])
    with pytest.raises(FormatError, match="one port number per cable"):
        Topology.from_links("x", 2, [(0, 2), (1, 2)], n_switches=1, cables=[1, 2], ports=[((1,), (1,)), ((1,), (2,))])


# ------------------------------------------------------------------ the dump
@pytest.mark.parametrize("spec,algo", [("fattree:4,3,merge=2", "ftree"), ("vartree:6,2,w=3", "minhop"),
                                       ("slimfly:3", "sf-min"), ("fattree:4,2", "sssp")])
def test_dump_reads_back_as_the_same_tables(spec, algo):
    tab = route_tables(from_spec(spec), algo)
    text, lmc = write_dump(tab)
    assert lmc == 0 and text.startswith("Unicast lids [0-")
    back = read_dump(text, tab.topology)
    assert np.array_equal(back.cable, tab.cable)
    assert back.measure().alltoall_time == tab.measure().alltoall_time


def test_layers_become_lid_offsets():
    tab = route_tables(from_spec("slimfly:3"), "sf-layers", layers=3)
    text, lmc = write_dump(tab)
    assert lmc == 2                                          # 3 layers: 4 LIDs per port, offset 3 repeats layer 0
    back = read_dump(text, tab.topology)
    assert back.layers == 4 and np.array_equal(back.cable[3], back.cable[0])
    full = np.where(tab.cable >= 0, tab.cable, tab.cable[:1])
    assert np.array_equal(back.cable[:3], full)


def _corrupt(text, switch_line, new_port):
    lines = text.splitlines()
    head = [i for i, line in enumerate(lines) if line.startswith("Unicast")][switch_line]
    row = lines[head + 2].split(" ", 2)
    lines[head + 2] = f"{row[0]} {new_port:03d} {row[2]}"
    return "\n".join(lines) + "\n", lines[head]


def test_a_corrupted_dump_is_refused_naming_the_switch():
    tab = route_tables(from_spec("fattree:4,3"), "ftree")
    text, _ = write_dump(tab)
    bad, head = _corrupt(text, 0, 17)                         # leaf s0:0 has 8 ports
    with pytest.raises(FormatError, match=r"line \d+: switch s0:0 \(guid 0x00a2a10000000000\) has no port 17 "
                                          r"\(it has 8\); OpenSM would abandon the file"):
        read_dump(bad, tab.topology)
    # a loop: leaf s0:1 sends host h1 back up to the spine that sends it down to s0:1
    t = tab.topology
    lines = text.splitlines()
    spine = int(t.dst[t.cable_link[tab.cable[0, 65, 1]]])     # s0:1's next hop towards h1
    down = tab.cable[0, spine, 1]
    assert t.dst[t.cable_link[down]] != 65
    # make the spine point at s0:1 and s0:1 point back at the spine
    to_leaf = int(t.cable_ptr[t.link_index(spine, 65)])
    for sw, cab in ((spine, to_leaf), (65, int(tab.cable[0, 65, 1]))):
        head = [i for i, line in enumerate(lines) if line.startswith("Unicast") and t.names[sw] in line][0]
        row = lines[head + 2].split(" ", 2)
        lines[head + 2] = f"{row[0]} {int(t.cable_port[cab]):03d} {row[2]}"
    with pytest.raises(A2AError, match=r"file: forwarding loop for host h1 through switch s"):
        read_dump("\n".join(lines) + "\n", t)
    # a missing destination
    missing = "\n".join(line for line in text.splitlines() if not line.startswith("0x0002 ")) + "\n"
    with pytest.raises(A2AError, match=r"file: switch s0:0 has no entry for host h1$"):
        read_dump(missing, t)


def test_a_misdelivery_is_named_as_one():
    """issue 34, item 19: leaf s0:0 sends host h1's traffic out of h0's port; it was called a forwarding loop."""
    tab = route_tables(from_spec("fattree:4,3"), "ftree")
    bad, _ = _corrupt(write_dump(tab)[0], 0, 1)                # s0:0's row for h1 (LID 2): port 1, h0's
    with pytest.raises(A2AError) as exc:
        read_dump(bad, tab.topology)
    assert str(exc.value) == ("file: switch s0:0 delivers traffic for host h1 to host h0, a host port that is not "
                              "its destination (a misdelivery)")


def test_cli_lft_and_file_engine(tmp_path, capsys):
    dump = tmp_path / "ft.dump"
    assert main(["routes", "fattree:4,3,merge=2", "--algo", "ftree", "--lft", str(dump), "--json", "-q"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["opensm"] == {"lft": str(dump), "lmc": 0, "options": f"-R file -U {dump}", "sl_file": None}
    assert main(["routes", "fattree:4,3,merge=2", "--algo", "file", "--lft-in", str(dump), "--json", "-q"]) == 0
    back = json.loads(capsys.readouterr().out)
    for key in ("predicted_time", "congestion_worst", "congestion_avg", "deadlock_free"):
        assert back[key] == s[key]
    bad, _ = _corrupt(dump.read_text(), 3, 99)
    dump.write_text(bad)
    assert main(["routes", "fattree:4,3,merge=2", "--algo", "file", "--lft-in", str(dump), "-q"]) == 2
    err = capsys.readouterr().err
    assert "has no port 99" in err and len(err.strip().splitlines()) == 1


def test_lft_needs_an_infiniband_fabric(tmp_path, capsys):
    assert main(["routes", "torus:3x3x3", "--algo", "dor", "--lft", str(tmp_path / "x"), "-q"]) == 2
    assert "torus:3x3x3 is not an InfiniBand fabric (it has no switches)" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_sl_file_where_the_routes_need_lanes(tmp_path, capsys):
    dump = tmp_path / "sf.dump"
    assert main(["routes", "slimfly:3", "--algo", "dfsssp", "--lft", str(dump), "--json", "-q"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["opensm"]["sl_file"] == f"{dump}.sl" and s["deadlock_free"] and s["layers"] >= 2
    rows = [line.split() for line in (tmp_path / "sf.dump.sl").read_text().splitlines() if not line.startswith("#")]
    assert len(rows) == 54 * 53 and {r[2] for r in rows} == {"0"} and max(int(r[3]) for r in rows) == s["layers"] - 1


# --------------------------------------------------------------- OpenSM SSSP
def test_sssp_opensm_reproduces_the_subnet_managers_numbers():
    """Issue #23's measurements of OpenSM's sssp on fattree:4,3: all-to-all load 92, shift 3 / 2.24; ours 63, 1/1."""
    t = from_spec("fattree:4,3")
    theirs = route_tables(t, "sssp", opensm=True).measure()
    ours = route_tables(t, "sssp").measure()
    assert theirs.alltoall_time == 92 and theirs.shift.worst == 3
    assert theirs.shift.per_stage.sum() == 141                # 2.238 average over 63 stages
    assert (ours.alltoall_time, ours.shift.worst, ours.shift.average) == (63, 1, 1)


def test_table_engine_with_a_deadlock_scheme_and_a_file(tmp_path, capsys):
    """MinHop on the Slim Fly is not deadlock-free on one lane; --deadlock dfsssp lanes its routes, the MPI
    path file carries them, and the verifier proves it deadlock-free."""
    assert main(["routes", "slimfly:3", "--algo", "minhop", "--json", "-q"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert not plain["deadlock_free"] and plain["layers"] == 1
    out = tmp_path / "mh.xml"
    assert main(["routes", "slimfly:3", "--algo", "minhop", "--deadlock", "dfsssp", "-o", str(out), "--json",
                 "-q"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["deadlock_free"] and s["layers"] == 2 and s["deadlock"] == "dfsssp"
    assert s["file_time"] == s["predicted_time"] == plain["predicted_time"] and s["chunks_per_shard"] == 1
    assert main(["verify", str(out), "--topology", "slimfly:3", "--deadlock-free"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("VALID")


def test_tables_too_large_are_refused_up_front(capsys):
    assert main(["routes", "fattree:46,3", "--algo", "ftree", "-q"]) == 2
    err = capsys.readouterr().err
    assert "the forwarding tables would need 75.2 GiB (103684 x 97336), over the 4 GiB limit" in err


def test_the_route_file_needs_a_size_that_fits(capsys, monkeypatch):
    from a2a_compiler.routes import tables

    monkeypatch.setattr(tables, "MAX_ROUTES", 1000)
    assert main(["routes", "fattree:4,3", "--algo", "ftree", "--deadlock", "lash", "-q"]) == 2
    assert "has 4,032 routes, more than the 1,000 per-route objects a2a builds" in capsys.readouterr().err


@pytest.mark.parametrize("spec", ["torus:4x4,p=2", "torus:3x3x3,p=1", "torus:5x4,p=1", "torus:2x3,p=2"])
def test_dor_by_port_order_is_dimension_order_on_a_torus_cabled_in_order(spec):
    """On a switch torus OpenSM's dor reads dimensions from port order; our tori number each switch's ports
    per dimension (+, -), so its tables are coordinate DOR's: dimension 0 first, the shorter way, + on a tie."""
    from a2a_compiler.routes.dor import dor_tables, grid_dims
    from a2a_compiler.routes.routers import host_tables, router_view
    from a2a_compiler.routes.tables import pin_cables

    t = from_spec(spec)
    view = router_view(t)
    routers, dims = view.routers, grid_dims(t)
    strides = np.array([int(np.prod(dims[m + 1:])) for m in range(len(dims))])
    coords = (np.arange(len(routers))[:, None] // strides) % np.array(dims)
    local = dor_tables(coords, dims, strides)
    nxt = np.full((t.n_nodes, t.n_nodes), -1)
    nxt[np.ix_(routers, routers)] = np.where(local >= 0, routers[np.maximum(local, 0)], -1)
    assert np.array_equal(pin_cables(t, host_tables(view, nxt)), route_tables(t, "dor").cable[0])


def test_topo_writes_the_net_file_ibsim_reads(tmp_path, capsys):
    net = tmp_path / "ft.net"
    assert main(["topo", "fattree:4,3,merge=2", "--ibnet", str(net)]) == 0
    assert "ibnet      " in capsys.readouterr().out
    back = from_spec(f"ibnet:{net}")
    t = from_spec("fattree:4,3,merge=2")
    assert back.names == t.names and np.array_equal(back.cable_port, t.cable_port)
    assert main(["topo", "torus:3x3x3", "--ibnet", str(tmp_path / "x.net")]) == 2
    assert "an InfiniBand fabric needs switches" in capsys.readouterr().err and not (tmp_path / "x.net").exists()
