"""MSCCL++ execution plans: the DSL's own all-to-all plans and ours verify (executor rules, data movement,
deadlock freedom), the verifier catches broken ones, and compile --emit mscclpp fits the executor's limits."""

import json
from pathlib import Path

import pytest

from a2a_compiler import compile as compile_schedule
from a2a_compiler.errors import A2AError, FormatError
from a2a_compiler.formats import parse_program
from a2a_compiler.formats.mscclpp import mscclpp_to_json, parse_mscclpp
from a2a_compiler.topology.spec import from_spec
from a2a_compiler.verify import verify_bytes

DSL = Path(__file__).resolve().parent / "data" / "mscclpp"


@pytest.mark.parametrize("name, ranks, chunks, inplace, tbs, time", [
    ("alltoall-4", 4, 2, True, 24, 1.0), ("alltoall-8", 8, 2, True, 112, 1.0),
    ("alltoall_pipeline-4", 4, 2, True, 48, 1.0), ("alltoall_ring-4", 4, 16, True, 128, 3.0),
    ("alltoall_ring_oop-4", 4, 16, False, 128, 3.0), ("alltoall_ring_peers-4", 4, 16, True, 128, 3.0)])
def test_dsl_plans_verify_and_read_back_to_the_same_bytes(name, ranks, chunks, inplace, tbs, time):
    data = (DSL / f"{name}.json").read_bytes()
    assert parse_program(data)[0] == "mscclpp"
    plan = parse_mscclpp(data, name)
    assert mscclpp_to_json(plan) == data
    r = verify_bytes(data, name, from_spec(f"complete:{ranks}"), lp=False)
    assert r.valid and r.warnings == [], r.messages()
    assert (r.format, r.ranks, r.chunks_per_shard, plan.inplace) == ("mscclpp", ranks, chunks, inplace)
    assert sum(len(g.threadblocks) for g in plan.gpus) == tbs and r.perf.predicted_time == time


def _edit(name, fn):
    obj = json.loads((DSL / f"{name}.json").read_bytes())
    fn(obj)
    return json.dumps(obj).encode()


def test_broken_plans_are_reported():
    def drop_wait(o):  # gpu 0 tb 0 copies its scratch without waiting for the peer's signal
        o["gpus"][0]["threadblocks"][0]["ops"] = [x for x in o["gpus"][0]["threadblocks"][0]["ops"]
                                                  if x["name"] != "wait"]
    r = verify_bytes(_edit("alltoall-4", drop_wait), "t")
    assert r.messages() == ["data movement: gpu 0 tb 0 op 9: reads s[0] of gpu 0 written by gpu 1 tb 0 op 5, with no "
                            "signal/wait, semaphore or barrier ordering the two (race)",
                            "data movement: gpu 1: signals its memory connection 0 to gpu 0 more often than gpu 0 waits "
                            "on it (2 left after two launches): a later launch's wait would pass early"]

    def drop_signal(o):  # gpu 1 tb 0 never signals: gpu 0 waits, until the next launch
        ops = o["gpus"][1]["threadblocks"][0]["ops"]
        ops.remove(next(x for x in ops if x["name"] == "signal"))
    r = verify_bytes(_edit("alltoall-4", drop_signal), "t")   # the next launch's rlxsignal lets it pass
    assert r.messages() == [
        "data movement: gpu 0 tb 0 op 10: reads s[0] of gpu 0 written by gpu 1 tb 0 op 5, with no signal/wait, "
        "semaphore or barrier ordering the two (race)",
        "deadlock freedom: deadlock: 2 threadblock(s) cannot progress: gpu 0 tb 0 op 3 (launch 2) waits for a signal "
        "from gpu 1 on memory channel 0; gpu 1 tb 0 op 7 (launch 2) waits for a signal from gpu 0 on memory channel 0"]

    def too_many(o):
        o["gpus"][2]["threadblocks"][1]["ops"] *= 6
    r = verify_bytes(_edit("alltoall-4", too_many), "t")
    assert r.errors["executor rules"] == [
        "gpu 2 tb 1: 66 operations, over the executor's limit of 64 per threadblock"]

    def bad_id(o):
        o["gpus"][3]["id"] = 2
    assert verify_bytes(_edit("alltoall-4", bad_id), "t").errors["executor rules"] == [
        "gpus[3]: id=2; the executor reads gpus[rank] and requires id == rank"]
    with pytest.raises(FormatError, match=r"^t: \.gpus\[0\]\.threadblocks\[0\]\.ops\[1\] is missing 'name'$"):
        verify_bytes(_edit("alltoall-4", lambda o: o["gpus"][0]["threadblocks"][0]["ops"][1].pop("name")), "t")


@pytest.mark.parametrize("spec, options, chunks, predicted, lp", [
    ("hypercube:3", {"any_chunks": True}, 3, 4.0, 4.0),   # by default C = 32, a power of two
    ("torus:3x3x3", {"max_chunks": 2}, 2, 9.5, 9.0),   # the default reaches 9.25 at C = 8 (docs/results.md)
])
def test_compiled_plans_meet_the_executor_limits(spec, options, chunks, predicted, lp):
    r = compile_schedule(spec, "mscclpp", **options)
    plan = r.program
    assert r.report.valid and r.format == "mscclpp" and not plan.inplace
    assert (r.chunks_per_shard, r.lp_time) == (chunks, lp) and r.predicted_time == pytest.approx(predicted)
    ops = [sum(1 + len(o.ops or ()) for o in tb.ops) for g in plan.gpus for tb in g.threadblocks]
    assert max(ops) <= 64
    kinds = {c.channel_type for g in plan.gpus for c in g.channels}
    assert kinds == {"port"}  # every rank is its own node: port channels across nodes
    assert verify_bytes(r.data, "p", from_spec(spec), lp=False).valid


NV = {"link_bw": "400Gbps", "nvlink_bw": "3.6Tbps"}


def test_nvswitch_plans_use_memory_channels_inside_a_server_and_port_channels_across():
    r = compile_schedule("nvswitch:2,4", "mscclpp", **NV)
    assert r.report.valid and r.predicted_time == pytest.approx(4.0) and r.mcf_time == pytest.approx(4.0, rel=1e-6)
    for g in r.program.gpus:
        kinds = {c.channel_type: set(c.connected_to) for c in g.channels}
        server = set(range(g.id // 4 * 4, g.id // 4 * 4 + 4)) - {g.id}
        assert kinds["memory"] == server and kinds["port"] == {(g.id + 4) % 8}  # the same rail in the other server


def test_nvswitch_family_and_server_fabrics():
    rail = from_spec("nvswitch:2,4")
    assert (rail.n_hosts, rail.n_switches, rail.n_links) == (8, 6, 32)
    assert rail.names[8:] == ("nvsw0", "nvsw1", "rail0", "rail1", "rail2", "rail3")
    assert sorted(set(rail.classes)) == ["nic", "nvlink"]
    ring = from_spec("nvswitch:4,2,fabric=ring")   # GPU g of each server cabled to GPU g of both ring neighbours
    assert (ring.n_hosts, ring.n_switches) == (8, 4) and ring.link_index(0, 2) >= 0 and ring.link_index(0, 6) >= 0
    r = compile_schedule("nvswitch:4,2,fabric=ring", "msccl", link_bw="100Gbps", nvlink_bw="400Gbps")
    assert r.report.valid and r.predicted_time == pytest.approx(4.0) and r.mcf_time == pytest.approx(4.0, rel=1e-6)
    one = compile_schedule("nvswitch:2,4", "oneccl", **NV)   # every link program: switches forward
    assert one.report.valid and one.predicted_time == pytest.approx(4.0)
    with pytest.raises(A2AError, match="fabric=hypercube"):
        from_spec("nvswitch:3,2,fabric=hypercube")


def test_hostile_json_is_one_line():
    with pytest.raises(FormatError, match=r"^t: JSON nested 100000 deep, more than an execution plan needs$"):
        verify_bytes(b"[" * 100000, "t")
    with pytest.raises(FormatError, match=r"^t: an execution plan is a JSON object$"):
        verify_bytes(b"[1]", "t")
    with pytest.raises(FormatError) as exc:
        verify_bytes(b'{"format": "a2a-topology"}', "t")
    assert str(exc.value) == ("t: not a schedule: a2a-topology JSON without 2 of an execution plan's keys (gpus, "
                              "collective, protocol, inplace, a2a_record)")
    with pytest.raises(FormatError, match=r"^t: plan is missing 'gpus'$"):
        verify_bytes(b'{"collective": "alltoall", "inplace": false}', "t")
