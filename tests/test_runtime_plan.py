"""The runtime's per-rank plans, without MPI: messages, tags, scratch, and the checks that prevent hangs."""

from __future__ import annotations

import dataclasses
import importlib.util
import re
from pathlib import Path

import pytest

from a2a_compiler.errors import A2AError, FormatError
from a2a_compiler.formats import load_program
from runtimes.mpi.direct import direct_msccl
from runtimes.mpi.plan import BUF_I, BUF_O, BUF_S, RECV, Forward, Message, build_plans, chunk_runs

DATA = Path(__file__).resolve().parent / "data"
_spec = importlib.util.spec_from_file_location("runtime_fixtures", DATA / "runtime_fixtures.py")
fixtures = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fixtures)


@pytest.mark.parametrize("name, make", sorted(fixtures.FIXTURES.items()))
def test_fixture_files_match_their_builders(name, make):
    assert load_program(DATA / name)[1] == make()


def test_chunk_runs_keep_file_order():
    assert chunk_runs((0, 1, 2, 4, 3, 5)) == [(0, 3), (4, 1), (3, 1), (5, 1)]


def test_path_relay_plan_hops_tags_and_scratch():
    plans = build_plans(fixtures.two_hop_paths(), 8, "relay")
    p0 = plans[0]
    # rank 0 relays the 2-chunk run of every pair whose route 1 is "s 0 d": s = 7 (d = 1..6) and (6, 7);
    # and the 1-chunk run of route 2 ("s 8 0 d") for d = 7 (s = 1..6) and (7, 6): 7*2 + 7*1 scratch chunks
    assert p0.scratch_chunks == 21
    assert p0.self_copy  # path schedules never list the self shard
    # rank 0's first send is chunk 0 of its shard for rank 1, straight from the input buffer (C = 5)
    assert p0.body.sends[0] == Message(1, 0, BUF_I, 5, 1)
    # route "0 8 3 2" skips switch 8: rank 0 sends to rank 3, which forwards to rank 2 from its scratch
    relayed = [f for f in plans[3].body.recvs if f.recv.peer == 0 and f.send is not None and f.send.peer == 2]
    assert len(relayed) == 1 and relayed[0].recv.buf == BUF_S and relayed[0].recv.cnt == 1
    # the final hop lands in rank 2's output at chunk 0*5 + 3, with the tag rank 3 forwards it with
    final = [f for f in plans[2].body.recvs if f.recv.peer == 3 and f.recv.off == 3 and f.send is None]
    assert final == [Forward(Message(3, relayed[0].send.tag, BUF_O, 3, 1), None)]


def test_path_direct_plan_uses_route_ids_as_tags():
    p = build_plans(fixtures.two_hop_paths(), 8, "direct")[0]
    assert p.scratch_chunks == 0
    assert [(m.peer, m.tag, m.off, m.cnt) for m in p.body.sends[:4]] == [(1, 0, 5, 1), (1, 0, 9, 1), (1, 1, 6, 2),
                                                                          (1, 2, 8, 1)]


def test_msccl_plan_marks_wake_and_self_copy():
    plans = build_plans(fixtures.relay_msccl(), 8)
    assert not plans[0].self_copy  # the program copies its own shard (cpy)
    tbs = plans[0].body.tbs
    # tb 8 receives from rank 1: its only receive has nothing after it and nobody depends on it -> no wake-up
    last = tbs[8].steps[-1]
    assert tbs[8].recv == 1 and last.op == RECV and not last.wake
    # tb 14 receives from rank 7 (= 0 - 1): step 1 lands in scratch for the forward that depends on it
    assert tbs[14].recv == 7 and [s.wake for s in tbs[14].steps] == [True, True]
    assert not any(s.hazard for tb in tbs for s in tb.steps)  # no reused slots, no hazards


def test_msccl_reused_scratch_slot_is_a_hazard():
    prog = fixtures.relay_msccl()
    g = prog.gpus[0]
    tb = g.tbs[-1]  # the channel-1 block: make its rcs reuse scratch slot 0, which the channel-0 relay also uses
    steps = list(tb.steps)
    steps[2] = dataclasses.replace(steps[2], srcoff=0, dstoff=0)
    gpus = (dataclasses.replace(g, tbs=g.tbs[:-1] + (dataclasses.replace(tb, steps=tuple(steps)),)),) + prog.gpus[1:]
    plan = build_plans(dataclasses.replace(prog, gpus=gpus), 8)[0]
    assert plan.body.tbs[-1].steps[2].hazard


def test_rank_count_mismatch_is_refused():
    with pytest.raises(A2AError, match="the schedule is for 8 ranks but the communicator has 27; "
                                       "run it with mpiexec -n 8"):
        build_plans(fixtures.ecube_oneccl(), 27)


def test_two_blocks_on_one_connection_are_refused():
    prog = direct_msccl(3)
    g = prog.gpus[0]
    dup = dataclasses.replace(g.tbs[1], id=len(g.tbs))
    bad = dataclasses.replace(prog, gpus=(dataclasses.replace(g, tbs=g.tbs + (dup,)),) + prog.gpus[1:])
    with pytest.raises(FormatError, match=re.escape(
            "MSCCL algo 'direct-3': gpu 0: thread blocks [1, 3] all recv from gpu 1 on channel 0; one connection "
            "per (peer, channel, direction) allows one tb (and 1 more; run 'a2a verify')")):
        build_plans(bad, 3)


def test_unmatched_oneccl_messages_are_refused():
    prog = fixtures.ecube_oneccl()
    r1 = prog.ranks[1]
    step0 = tuple(op for op in r1.steps[0] if not (op.kind == "recv" and op.peer == 0))[:]
    bad = dataclasses.replace(prog, ranks=(prog.ranks[0], dataclasses.replace(r1, steps=(step0,) + r1.steps[1:]))
                              + prog.ranks[2:])
    with pytest.raises(FormatError, match="oneCCL step 0: rank 0 sends 4 message\\(s\\) to rank 1 but rank 1 receives 0"):
        build_plans(bad, 8)


def test_reductions_are_refused():
    prog = direct_msccl(2)
    g = prog.gpus[1]
    tb = g.tbs[1]
    bad_tb = dataclasses.replace(tb, steps=(tb.steps[0], dataclasses.replace(tb.steps[1], type="rrc")))
    bad = dataclasses.replace(prog, gpus=(prog.gpus[0], dataclasses.replace(g, tbs=(g.tbs[0], bad_tb))))
    with pytest.raises(FormatError, match="gpu 1 tb 1 step 1: reduction step type 'rrc' has no place in an all-to-all"):
        build_plans(bad, 2)
