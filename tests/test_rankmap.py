"""Rank maps (runtimes/mpi/rankmap.py): parsing, host names, and placing ranks by processor name."""

from __future__ import annotations

import json

import pytest

from a2a_compiler.errors import FormatError
from runtimes.mpi.rankmap import RankMap, place_ranks

MAP = """\
# machine   host
node-a      3
node-b\t0          # a tab, then a comment
node-c      2
node-c      1
"""


def test_lines_place_ranks_by_processor_name_in_rank_order():
    rmap = RankMap.parse(MAP, "m.txt")
    assert [(p.host, p.node, p.line) for p in rmap.placements] == [
        ("node-a", 3, 2), ("node-b", 0, 3), ("node-c", 2, 4), ("node-c", 1, 5)]
    # node-c runs ranks 0 and 3: the lower plays line 4's host, the higher line 5's
    assert place_ranks(rmap, ["node-c", "node-b", "node-a", "node-c"], 4).tolist() == [2, 0, 3, 1]
    # a fully qualified processor name matches the map's short name
    assert place_ranks(rmap, ["node-a.cluster", "node-b", "node-c", "node-c"], 4).tolist() == [3, 0, 2, 1]


def test_no_map_is_the_identity():
    assert place_ranks(None, None, 5).tolist() == [0, 1, 2, 3, 4]


def test_node_names_may_contain_spaces(tmp_path):
    # an InfiniBand-style fabric whose hosts are named by node description
    topo = tmp_path / "ib.json"
    topo.write_text(json.dumps({"format": "a2a-topology", "version": 1, "hosts": 2, "switches": 0,
                                "names": ["r1n01 HCA-1", "r1n02 HCA-1"], "links": [[0, 1, 1.0], [1, 0, 1.0]]}))
    path = tmp_path / "ib.map"
    path.write_text("r1n02   r1n01 HCA-1   # the machine r1n02 is cabled where r1n01's HCA sits\nr1n01 r1n02 HCA-1\n")
    rmap = RankMap.load(path, f"file:{topo}")
    assert [(p.host, p.node) for p in rmap.placements] == [("r1n02", 0), ("r1n01", 1)]
    assert rmap.place(["r1n01", "r1n02"], 2).tolist() == [1, 0]


def test_topology_host_names():
    rmap = RankMap.parse("m0 h3\nm1 h0\nm2 2\nm3 h1\n", "fat.map", "fattree:2,2")
    assert [p.node for p in rmap.placements] == [3, 0, 2, 1] and rmap.n_hosts == 4
    with pytest.raises(FormatError, match=r"^fat.map:1: 's0:0' is neither a host id nor a host name of "
                                          r"fattree:2,2$"):
        RankMap.parse("m0 s0:0\n", "fat.map", "fattree:2,2")   # a switch plays no rank
    with pytest.raises(FormatError, match=r"^fat.map:2: host 4 is not a host of the topology \(0..3\)$"):
        RankMap.parse("m0 h0\nm1 4\n", "fat.map", "fattree:2,2")


@pytest.mark.parametrize("text, message", [
    ("node-a\n", "m:1: expected 'HOSTNAME NODE', got 'node-a'"),
    ("node-a 0 slots=2\n", "m:1: 'slots=' is not used in a rank map: list a machine once per process it runs, "
                           "each line with the topology host that process plays"),
    ("node-a 0\nnode-b 0\n", "m:2: host '0' is already played by 'node-a' (line 1)"),
    ("node-a h0\n", "m:1: 'h0' is not a host id; host names need the topology (--topology SPEC)"),
    ("# only a comment\n\n", "m: the rank map lists no process"),
])
def test_malformed_maps_are_refused_in_one_line(text, message):
    with pytest.raises(FormatError) as err:
        RankMap.parse(text, "m")
    assert str(err.value) == message


@pytest.mark.parametrize("names, message", [
    (["node-a", "node-b", "node-x", "node-c"],
     "m.txt: rank 2 runs on 'node-x', which the rank map does not list; the map expects a process on 'node-c' "
     "(line 5), where only 1 runs"),
    (["node-a", "node-b", "node-b", "node-c"],
     "m.txt: rank 2 runs on 'node-b', which the rank map lists for 1 process (line 3) but 2 run there; the map "
     "expects a process on 'node-c' (line 5), where only 1 runs"),
])
def test_a_map_that_does_not_match_the_machines_is_refused_naming_the_rank(names, message):
    with pytest.raises(FormatError) as err:
        place_ranks(RankMap.parse(MAP, "m.txt"), names, len(names))
    assert str(err.value) == message


def test_a_map_for_another_schedule_is_refused():
    with pytest.raises(FormatError, match=r"^m.txt: the map lists 4 processes but the schedule has 3 ranks$"):
        RankMap.parse(MAP, "m.txt").place(["node-a", "node-b", "node-c"], 3)
    with pytest.raises(FormatError, match=r"^m.txt:2: host 3 is not a host of the schedule \(0..2\)$"):
        RankMap.parse("a 0\nb 3\nc 1\n", "m.txt").place(["a", "b", "c"], 3)
    with pytest.raises(FormatError, match=r"^f.map: the map's topology has 4 hosts but the schedule has 8 ranks$"):
        RankMap.parse("m0 h0\n", "f.map", "fattree:2,2").place(["m0"] * 8, 8)
