"""The MSCCL++ executor's ordering rules, as microsoft/mscclpp 1f5f065d runs a plan (verify/simulate.py's
simulate_mscclpp cites the source lines): a mutant of a compiled plan for each rule is rejected with its race
named, our plans before issue 33 are rejected, and today's are race-free on InfiniBand."""

import copy
import json
from pathlib import Path

import pytest

from a2a_compiler import compile as compile_schedule
from a2a_compiler.chunk.counts import msccl_counts
from a2a_compiler.errors import A2AError
from a2a_compiler.formats.mscclpp import mscclpp_from_json, mscclpp_to_json, parse_mscclpp
from a2a_compiler.verify import simulate, verify_bytes

DATA = Path(__file__).resolve().parent / "data" / "mscclpp"
FLUSH = ("a flush completes only the channels of its dst_buff entries: execution_plan.cc l.550-551, "
         "execution_kernel.hpp l.120-127")
CONNECTION = ("on InfiniBand a signal orders only the earlier puts of its own connection, one queue pair per channel: "
              "executor.cc l.287-313, port_channel.cc l.117-154, connection.cc l.399-449")
PROXY = ("a port put completes at a flush of its channel, or for its peer at a wait on a later signal of its "
         "connection; the kernel's end does not wait for the proxy: executor.cc l.548-563")


@pytest.fixture(scope="module")
def plan():
    """hypercube:3 as compile writes it with --any-chunks (3 chunks per peer, port channels only); it reads back to
    the same bytes."""
    data = compile_schedule("hypercube:3", "mscclpp", any_chunks=True).data
    assert mscclpp_to_json(parse_mscclpp(data)) == data
    return json.loads(data)


def _mutant(plan, fn):
    o = copy.deepcopy(plan)
    fn(o)
    return verify_bytes(json.dumps(o).encode(), "t", lp=False)


def _ops(o, gpu, tb):
    return o["gpus"][gpu]["threadblocks"][tb]["ops"]


def test_the_compiled_plan_is_race_free_on_both_transports(plan):
    p = mscclpp_from_json(plan)
    assert simulate.simulate_mscclpp(p, "ib").errors == []
    assert simulate.simulate_mscclpp(p, "cudaipc").errors == []
    ops = [op for g in plan["gpus"] for tb in g["threadblocks"] for op in tb["ops"]]
    flushes = [op for op in ops if op["name"] == "flush"]
    assert len(ops) == 392 and len(flushes) == 24   # one per sender: its channels' last puts
    assert all(len(op["dst_buff"]) == len(op["channel_ids"]) for op in flushes)


def test_a_dropped_final_wait_is_a_race_at_the_kernels_end(plan):
    def drop(o):   # gpu 0's sink no longer waits for its in-neighbours' last signals
        ops = _ops(o, 0, 0)
        del ops[max(k for k, x in enumerate(ops) if x["name"] == "wait")]
    r = _mutant(plan, drop)
    assert not r.valid and r.errors["data movement"][0] == (
        "gpu 0: the kernel ends and its caller reads o[3..5] written by the port put of gpu 1 tb 1 op 1, the put was "
        f"issued before it, and signalled on its connection, but no wait on that signal is ordered before it ({PROXY}) "
        "(race)")


def test_a_flush_without_dst_buff_flushes_nothing(plan):
    def strip(o):
        for x in _ops(o, 0, 1):
            if x["name"] == "flush":
                x.pop("dst_buff")
    r = _mutant(plan, strip)
    assert r.warnings == [
        "gpu 0 tb 1 op 14: flush of port channels [0, 1] has no dst_buff entry, so it flushes nothing: the executor "
        "flushes one channel per dst_buff entry (execution_plan.cc l.550-551, execution_kernel.hpp l.120-127)",
        "mscclpp runs it at per-peer sizes a multiple of 48 bytes: at no power-of-two size (the executor throws "
        "'Input or output size is not aligned with buffer alignment or chunks'); 'a2a compile SPEC' chooses a count "
        "it selects (not with --any-chunks or --from-ir)"]
    assert r.errors["data movement"][0] == (
        "gpu 0 tb 1 op 1: the port put of i[3..5] into gpu 1 is not flushed before the kernel ends, and the proxy may "
        f"still read its source after it: its flush has no dst_buff entry for the channel ({FLUSH}) (race)")


def test_a_relayed_put_on_another_connection_than_its_signal_races_on_infiniband_only(plan):
    def move(o):   # gpu 0's first relayed chunk put on the sink's connection (tb channel 0)
        for x in _ops(o, 0, 1):
            if x["name"] == "put" and any(x["channel_ids"]):
                x["channel_ids"][next(i for i, c in enumerate(x["channel_ids"]) if c)] = 0
                return
    r = _mutant(plan, move)
    assert r.errors["data movement"] == [
        "the port put of gpu 1 tb 2 op 6: reads s[0..2] of gpu 1 written by the port put of gpu 0 tb 1 op 1, the put "
        f"was issued before it, but only signalled on another connection ({CONNECTION}) (race)"]
    o = copy.deepcopy(plan)
    move(o)
    p = mscclpp_from_json(o)
    assert simulate.simulate_mscclpp(p, "cudaipc").errors == []   # NVIDIA's CUDA IPC: one stream per rank
    assert simulate.simulate_mscclpp(p, nodes=[0] * 8).errors == []   # one node: CUDA IPC, as the executor picks
    assert simulate.simulate_mscclpp(p, nodes=[0, 0, 0, 0, 1, 1, 1, 1]).errors == []   # gpus 0 and 1: one node
    assert len(simulate.simulate_mscclpp(p, nodes=[0, 1, 0, 1, 0, 1, 0, 1]).errors) == 1   # 0 and 1 apart: IB


def test_a_port_put_unflushed_at_the_kernels_end(plan):
    r = _mutant(plan, lambda o: _ops(o, 0, 1).pop())   # gpu 0 tb 1's final flush
    assert r.errors["data movement"][0] == (
        "gpu 0 tb 1 op 1: the port put of i[3..5] into gpu 1 is not flushed before the kernel ends, and the proxy may "
        f"still read its source after it: {PROXY} (race)")


def test_a_second_launch_that_overwrites_a_buffer_the_first_still_reads(plan):
    def drop(o):   # no sink tells its in-neighbours that its previous launch is over
        for g in o["gpus"]:
            for t in g["threadblocks"]:
                t["ops"] = [x for x in t["ops"] if x["name"] not in ("rlxsignal", "rlxwait")]
    r = _mutant(plan, drop)
    assert r.errors["data movement"][0] == (
        "the port put of gpu 0 tb 1 op 0 (launch 2): writes o[0..2] of gpu 1 read by the caller of gpu 1, with no "
        "signal/wait, semaphore or barrier ordering the two (race)")


def test_our_plans_before_issue_33_are_rejected_with_the_race_named():
    r = verify_bytes((DATA / "a2a-hypercube-2-before-33.json").read_bytes(), "old", lp=False)
    e = r.errors["data movement"]
    assert len(e) == 32 and e[0] == (
        "the port put of gpu 0 tb 1 op 7: reads s[1] of gpu 0 written by the port put of gpu 2 tb 1 op 1, the put was "
        f"issued before it, but its flush has no dst_buff entry for the channel ({FLUSH}) (race)")
    assert r.warnings[0] == (
        "gpu 0 tb 1 op 3: flush of port channels [0] has no dst_buff entry, so it flushes nothing: the executor "
        "flushes one channel per dst_buff entry (execution_plan.cc l.550-551, execution_kernel.hpp l.120-127)")


def test_flush_rules(plan):
    def extra(o):
        f = _ops(o, 0, 1)[-1]
        f["dst_buff"].append(f["dst_buff"][0])
    assert _mutant(plan, extra).errors["executor rules"] == [
        "gpu 0 tb 1 op 14: flush has 3 dst_buff entries for 2 channel_ids; the executor flushes channel_ids[i] for "
        "each entry i (execution_kernel.hpp l.120-127)"]
    r = _mutant(plan, lambda o: _ops(o, 0, 1)[-1].update(channel_type="memory"))
    assert r.errors["executor rules"] == [
        "gpu 0 tb 1 op 14: channel_ids [0, 1] outside the threadblock's 0 memory channels",
        "gpu 0 tb 1 op 14: flush on memory channels; the executor flushes port channels only"]


#: A balanced, non-uniform 8 x 8 matrix: all ones off the diagonal, plus 2 on s -> s+1 and 1 on a derangement;
#: every row and column sums to 10.
BALANCED8 = ("0,3,1,2,1,1,1,1\n2,0,3,1,1,1,1,1\n1,2,0,3,1,1,1,1\n1,1,2,0,3,1,1,1\n1,1,1,1,0,3,1,2\n"
             "1,1,1,1,2,0,3,1\n1,1,1,1,1,2,0,3\n3,1,1,1,1,1,2,0\n")


def test_a_balanced_all_to_allv_plan_is_race_free_in_its_layout(tmp_path):
    """hypercube:3 for a balanced all-to-allv: buffers laid out by T = msccl_counts(D, C), as MSCCL lays them; the
    plan records the demand's volumes, from which verify recomputes T; race-free on both transports."""
    from a2a_compiler.demand import read_demand

    (tmp_path / "D.csv").write_text(BALANCED8)
    d = read_demand(tmp_path / "D.csv")
    r = compile_schedule("hypercube:3", "mscclpp", demand=d)
    p = r.program
    assert (p.chunks_per_shard, round(r.fidelity, 4), round(r.predicted_time, 6), round(r.lp_time, 6)) == (
        16, 0.9722, 5.04, 4.9)
    assert p.record.demand == {"ranks": 8, "sha256": d.sha256, "volumes": d.volumes.tolist()}
    T = msccl_counts(d, 16)
    assert T[0].tolist() == [0, 38, 13, 25, 13, 13, 13, 13] and (T.sum(axis=0) == 128).all()
    assert simulate.simulate_mscclpp(p, "ib", counts=T).errors == []
    assert simulate.simulate_mscclpp(p, "cudaipc", counts=T).errors == []
    assert simulate.simulate_mscclpp(p).errors[0] == (   # not a plain all-to-all
        "gpu 0: output chunk o[0] holds chunk (1, 0, 0) (origin, dest, index), expected (0, 0, 0)")
    ops = [op for g in json.loads(r.data)["gpus"] for tb in g["threadblocks"] for op in tb["ops"]]
    flushes = [op for op in ops if op["name"] == "flush"]
    assert (len(ops), len(flushes), sum(op["name"] == "copy" for op in ops)) == (317, 24, 0)   # no self block
    assert all(len(op["dst_buff"]) == len(op["channel_ids"]) for op in flushes)
    rep = verify_bytes(r.data, "p.json", lp=False)   # the recorded demand: no option needed
    assert rep.valid and rep.warnings == [] and rep.perf.predicted_time == r.predicted_time


def test_a_schedule_outside_the_demands_layout_is_refused_in_one_line():
    """Chunk counts that are not msccl_counts(D, C) (a hand-edited IR) give buffers the plan cannot lay out."""
    from dataclasses import replace

    from a2a_compiler.demand import Demand
    from a2a_compiler.lower import lower_mscclpp

    s = compile_schedule("hypercube:2", "mscclpp", demand=Demand.from_array(
        [[0, 2, 1, 1], [1, 0, 2, 1], [1, 1, 0, 2], [2, 1, 1, 0]])).schedule
    T = s.counts().copy()
    T[0, 1:] = (1, 2, 1)
    with pytest.raises(A2AError) as e:
        lower_mscclpp(replace(s, chunk_counts=T))
    assert str(e.value) == ("this all-to-allv schedule's chunk counts do not give every rank the same buffer size; "
                            "MSCCL++ needs a matrix whose rows and columns all sum to the same total: use the MPI "
                            "path format (--emit mpi) or oneCCL-style XML (--emit oneccl)")


def test_an_unbalanced_demand_is_refused_in_one_line(tmp_path):
    d = tmp_path / "d.csv"
    d.write_text("0,1,2,1\n1,0,1,1\n1,1,0,1\n1,1,1,0\n")
    with pytest.raises(A2AError) as e:
        compile_schedule("hypercube:2", "mscclpp", demand=str(d))
    assert str(e.value) == (f"{d}: MSCCL++'s fixed-size buffers need every rank to send and receive the same total, "
                            "and this matrix's rows and columns differ; use the MPI path format (--emit mpi) or "
                            "oneCCL-style XML (--emit oneccl)")


def test_a_host_bottleneck_below_the_target_is_explained_in_one_line(tmp_path, capsys):
    from a2a_compiler.cli import main

    assert main(["compile", "nvswitch:2,4", "--link-bw", "400Gbps", "--nvlink-bw", "3.6Tbps", "--host-bw", "800Gbps",
                 "--emit", "mscclpp", "-q", "-o", str(tmp_path / "p.json")]) == 1
    out, err = capsys.readouterr()
    assert "LP         5 link-times, tsmcf's own LP (certified): fidelity 0.5958" in out.splitlines()
    assert err.splitlines() == [
        "a2a compile: warning: fidelity 0.5958 is below the default target 0.97: the best chunk count tried is C = 2; "
        "--any-chunks gives 0.6093 at C = 3, which mscclpp never selects at power-of-two sizes; MSCCL++ runs the "
        "schedule as a dataflow, without its steps; run in its steps, --emit oneccl reaches 1.0000 at C = 2; the file "
        "is written; --min-fidelity F sets a target it meets"]
