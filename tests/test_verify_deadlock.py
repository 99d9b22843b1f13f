"""The MPI path format's ``vcs`` attribute and ``a2a verify --deadlock-free``."""

import json
import re

import pytest

from a2a_compiler.chunk.ir import PathSchedule, Route, dumps, from_json_dict
from a2a_compiler.cli import main
from a2a_compiler.errors import FormatError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats.mpi_paths import MpiPathProgram, PathSend, mpi_paths_to_xml, parse_mpi_paths


def clockwise_ring(dateline: bool) -> bytes:
    """ring:4 with every pair routed clockwise, one chunk per shard.

    All in layer 0 the routes close the cycle 0->1 -> 1->2 -> 2->3 -> 3->0.  With a
    dateline (vc 1 from the hop 3->0 on) no vc-1 route reaches 2->3 again: acyclic.
    """
    sends = []
    for s in range(4):
        for k in range(1, 4):
            nodes = tuple((s + i) % 4 for i in range(k + 1))
            vcs = None
            if dateline:
                crossed = [u == 3 for u in nodes[:-1]]
                vcs = tuple(int(any(crossed[:i + 1])) for i in range(k))
            sends.append(PathSend(s, nodes[-1], 0, 0, nodes, (0,), vcs))
    return mpi_paths_to_xml(MpiPathProgram("ring", 4, 4, 1, tuple(sends)))


def test_vcs_round_trip_and_attribute_order():
    data = clockwise_ring(dateline=True)
    assert b'<send dst="2" route_id="0" layer="0" route="3 0 1 2" vcs="1 1 1" chunks="0"/>' in data
    assert b'<send dst="0" route_id="0" layer="0" route="2 3 0" vcs="0 1" chunks="0"/>' in data
    prog = parse_mpi_paths(data)
    assert prog.sends[-1].vcs == (1, 1, 1) and prog.sends[-1].channels == (1, 1, 1)
    assert parse_mpi_paths(clockwise_ring(dateline=False)).sends[-1].channels == (0, 0, 0)
    assert mpi_paths_to_xml(prog) == data


@pytest.mark.parametrize("old, new", [(b'vcs="1 1 1"', b'vcs="1 1"'), (b'vcs="1 1 1"', b'vcs="1 -1 1"')])
def test_bad_vcs_refused(old, new):
    with pytest.raises(FormatError, match=r"must give one virtual channel >= 0 per hop of route='3 0 1 2' \(3 hops\)"):
        parse_mpi_paths(clockwise_ring(dateline=True).replace(old, new))


def test_schedule_ir_carries_vcs():
    links = tuple((u, v, 1.0) for u in range(2) for v in range(2) if u != v)
    sch = PathSchedule(2, 1, (Route(0, 1, (0, 1), 0, (0,), 0, (2,)), Route(1, 0, (1, 0), 0, (0,))), links, 2, "complete:2",
                       Fabric(), "x", 1.0)
    d = json.loads(dumps(sch))
    assert d["routes"][0]["vcs"] == [2] and "vcs" not in d["routes"][1]
    assert from_json_dict(d).routes == sch.routes
    d["routes"][0]["vcs"] = [0, 1]
    with pytest.raises(FormatError, match=r"vcs \[0, 1\] must give one virtual channel >= 0 per hop"):
        from_json_dict(d)


def verify(capsys, *argv):
    code = main(["verify", *argv])
    return code, capsys.readouterr().out


def test_dateline_ring_is_deadlock_free_and_plain_ring_is_not(tmp_path, capsys):
    plain, dateline = tmp_path / "plain.xml", tmp_path / "dateline.xml"
    plain.write_bytes(clockwise_ring(dateline=False))
    dateline.write_bytes(clockwise_ring(dateline=True))
    code, out = verify(capsys, str(plain), "--topology", "ring:4", "--deadlock-free")
    assert code == 1
    assert ("deadlock freedom   FAIL (1)\n    error: cyclic channel dependencies over (link, virtual channel): "
            "0->1 (vc 0) -> 1->2 (vc 0) -> 2->3 (vc 0) -> 3->0 (vc 0) -> back to 0->1") in out
    assert verify(capsys, str(plain), "--topology", "ring:4")[0] == 0        # not asked: skipped
    code, out = verify(capsys, str(dateline), "--topology", "ring:4", "--deadlock-free")
    assert code == 0 and "  deadlock freedom   ok" in out


def test_verify_rejects_merged_layers(tmp_path, capsys):
    layered = tmp_path / "layered.xml"
    assert main(["routes", "torus:3x3x3", "--algo", "ewsp", "--deadlock", "lash-seq", "-o", str(layered), "-q"]) == 0
    capsys.readouterr()
    data = layered.read_bytes()
    assert b'layer="1"' in data
    code, out = verify(capsys, str(layered), "--deadlock-free", "--json")
    assert code == 0 and json.loads(out)["checks"]["deadlock freedom"] == "pass"
    merged = tmp_path / "merged.xml"
    merged.write_bytes(re.sub(rb'layer="\d+"', b'layer="0"', data))
    code, out = verify(capsys, str(merged), "--deadlock-free", "--json")
    d = json.loads(out)
    assert code == 1 and d["checks"]["deadlock freedom"] == "fail"
    assert d["errors"][0].startswith("deadlock freedom: cyclic channel dependencies over (link, virtual channel): ")
