"""Schedule IR: JSON round trip, invariant checks on hand-corrupted files, the cost model."""

import copy
import json

import pytest

from a2a_compiler.chunk import load_schedule, save_schedule
from a2a_compiler.chunk.ir import (LinkSchedule, PathSchedule, Route, Transfer, dumps, fidelity, from_json_dict,
                                   predicted_time, to_json_dict)
from a2a_compiler.errors import FormatError
from a2a_compiler.fabric import Fabric, parse_bandwidth
from a2a_compiler.topology import from_spec

RING4 = from_spec("ring:4")
LINKS = tuple((int(u), int(v), float(c)) for u, v, c in zip(RING4.src, RING4.dst, RING4.capacity))


def ring4_schedule(fabric=Fabric()) -> LinkSchedule:
    """ring:4, one chunk per shard: neighbours direct in step 0, opposite ranks relayed via o+1."""
    step0, step1 = {}, []
    for o in range(4):
        for d in range(4):
            if o == d:
                continue
            hop = d if (d - o) % 4 in (1, 3) else (o + 1) % 4
            step0.setdefault((o, hop), []).append((o, d, 0))
            if hop != d:
                step1.append(Transfer(hop, d, ((o, d, 0),)))
    steps = (tuple(Transfer(u, v, tuple(c)) for (u, v), c in sorted(step0.items())), tuple(sorted(step1, key=lambda t: (t.src, t.dst))))
    return LinkSchedule(n_ranks=4, chunks_per_shard=1, steps=steps, links=LINKS, spec="ring:4", fabric=fabric,
                        method="tsmcf", lp_time=2.0)


def ring4_paths() -> PathSchedule:
    routes = []
    for o in range(4):
        for d in range(4):
            if o != d:
                nodes = (o, d) if (d - o) % 4 in (1, 3) else (o, (o + 1) % 4, d)
                routes.append(Route(o, d, nodes, 0, (0, 1)))
    return PathSchedule(n_ranks=4, chunks_per_shard=2, routes=tuple(routes), links=LINKS, n_nodes=4,
                        spec="ring:4", fabric=Fabric(), method="mcf-extp", lp_time=2.0)


def find(d, t, src, dst):
    return next(tr for tr in d["steps"][t] if (tr["src"], tr["dst"]) == (src, dst))


def test_round_trip_is_byte_identical(tmp_path):
    for sch in (ring4_schedule(), ring4_paths()):
        path = save_schedule(sch, tmp_path / "s.json")
        back = load_schedule(path)
        assert dumps(back) == path.read_text()
        assert type(back) is type(sch)
        assert predicted_time(back) == predicted_time(sch)


def test_version_1_files_with_the_old_fabric_keys_still_load():
    bw = parse_bandwidth("25Gbps")
    d = to_json_dict(ring4_schedule(Fabric(bw, 4 * bw, "nic")))
    assert (d["version"], d["fabric"]) == (2, {"link_bw_Bps": 3.125e9, "host_bw_Bps": 12.5e9, "forwarding": "nic"})
    d.update(version=1, fabric={"link_bw": 3.125e9, "host_bw": 12.5e9, "forwarding": "nic"})
    assert from_json_dict(d).fabric == Fabric(bw, 4 * bw, "nic")
    with pytest.raises(FormatError, match=r"unsupported version 3 \(this reader knows 1 and 2\)"):
        from_json_dict({**d, "version": 3})


def test_predicted_time_link_schedule():
    # step 0: link 0->1 carries (0,1) and (0,2): 2 chunks; step 1: one relayed chunk per link
    assert predicted_time(ring4_schedule()) == 3.0
    assert fidelity(ring4_schedule()) == pytest.approx(2 / 3)
    # host-NIC capacity 1 link: host forwarding, rank 0 sends 3 chunks in step 0 -> 3 + 1
    bw = parse_bandwidth("25Gbps")
    assert predicted_time(ring4_schedule(Fabric(bw, bw, "host"))) == 4.0
    assert predicted_time(ring4_schedule(Fabric(bw, bw, "nic"))) == 4.0
    # host link twice as fast as a network link: the network links bind again
    assert predicted_time(ring4_schedule(Fabric(bw, 2 * bw, "host"))) == 3.0


def test_predicted_time_path_schedule():
    # link 0->1 carries shards 0->1, 0->2 (via 1) and 3->1 (via 0): 6 chunks of 1/2 => 3 link-times
    assert predicted_time(ring4_paths()) == 3.0


@pytest.mark.parametrize("corrupt, message", [
    ("delivered twice", r"step 2: chunk \(0,2,0\) was already delivered to rank 2 in step 1"),
    ("missing", r"chunk \(0,2,0\) is never delivered \(it ends at rank 1, not 2\)"),
    ("not held", r"step 0: rank 1 sends chunk \(0,2,0\) but does not hold it \(rank 0 does\)"),
    ("non-link", r"step 0: transfer 0->2 is not a link of ring:4"),
    ("twice in a step", r"step 0: chunk \(0,1,0\) is sent twice in the same step"),
    ("bad chunk", r"step 1: chunk \(1,1,0\) is not a chunk of 4 ranks x 1 chunks per shard"),
])
def test_link_invariants_reject_corruption(tmp_path, corrupt, message):
    d = to_json_dict(ring4_schedule())
    if corrupt == "delivered twice":
        d["steps"].append([{"src": 1, "dst": 2, "chunks": [[0, 2, 0]]}])
    elif corrupt == "missing":
        find(d, 1, 1, 2)["chunks"].remove([0, 2, 0])
    elif corrupt == "not held":
        find(d, 0, 0, 1)["chunks"].remove([0, 2, 0])
        find(d, 0, 1, 2)["chunks"].append([0, 2, 0])
    elif corrupt == "non-link":
        find(d, 0, 0, 1)["chunks"].remove([0, 2, 0])
        d["steps"][0].append({"src": 0, "dst": 2, "chunks": [[0, 2, 0]]})
    elif corrupt == "twice in a step":
        find(d, 0, 0, 1)["chunks"].append([0, 1, 0])
    elif corrupt == "bad chunk":
        find(d, 1, 1, 2)["chunks"].append([1, 1, 0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(d))
    with pytest.raises(FormatError, match=f"^{path}: {message}"):
        load_schedule(path)


@pytest.mark.parametrize("corrupt, message", [
    ("duplicate chunk", r"chunk \(0,1,1\) is delivered twice \(routes 0 and 1\)"),
    ("missing chunk", r"chunk \(0,1,1\) is on no route \(shard 0->1 not fully covered\)"),
    ("non-link hop", r"route 0 of shard 0->2: hop 0->2 is not a link of ring:4"),
    ("wrong end", r"route 0 of shard 0->2: nodes \[0, 1, 3\] must run from 0 to 2"),
])
def test_path_invariants_reject_corruption(corrupt, message):
    d = to_json_dict(ring4_paths())
    r01 = next(r for r in d["routes"] if (r["src"], r["dst"]) == (0, 1))
    r02 = next(r for r in d["routes"] if (r["src"], r["dst"]) == (0, 2))
    if corrupt == "duplicate chunk":
        d["routes"].append({**copy.deepcopy(r01), "route_id": 1, "chunks": [1]})
    elif corrupt == "missing chunk":
        r01["chunks"] = [0]
    elif corrupt == "non-link hop":
        r02["nodes"] = [0, 2]
    elif corrupt == "wrong end":
        r02["nodes"] = [0, 1, 3]
    with pytest.raises(FormatError, match=f"^x.json: {message}"):
        from_json_dict(d, "x.json")


@pytest.mark.parametrize("text, message", [
    ("{", r"invalid JSON at line 1"),
    ('{"format": "other"}', r'not an a2a-schedule file'),
])
def test_malformed_files(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(FormatError, match=message):
        load_schedule(path)


def test_wrong_field_types_are_named():
    d = to_json_dict(ring4_schedule())
    d["chunks_per_shard"] = "2"
    with pytest.raises(FormatError, match="chunks_per_shard must be an integer"):
        from_json_dict(d)
    d = to_json_dict(ring4_schedule())
    del d["steps"]
    with pytest.raises(FormatError, match="missing field 'steps'"):
        from_json_dict(d)


def test_hostile_sizes_fail_fast(tmp_path):
    """A file claiming a huge all-to-all is refused by what it lists, not by scanning n_ranks² · C chunks."""
    d = to_json_dict(ring4_schedule())
    d["n_ranks"] = d["n_nodes"] = 10**6
    d["chunks_per_shard"] = 10**6
    with pytest.raises(FormatError, match=r"^<json>: spec 'ring:4' has 4 hosts, but n_ranks is 1000000$"):
        from_json_dict(d)
    d["spec"] = "file:t.json"   # a spec whose host count only building tells
    with pytest.raises(FormatError, match=r"chunk \(0,1,1\) is never delivered \(it ends at rank 0, not 1\)"):
        from_json_dict(d)
    path = tmp_path / "deep.json"
    path.write_text("[" * 100000 + "]" * 100000)
    with pytest.raises(FormatError, match="nested too deeply"):
        load_schedule(path)
