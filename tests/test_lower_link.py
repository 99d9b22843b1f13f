"""MSCCL and oneCCL lowering of hand-built link schedules: exact layout, limits, and every output verifies."""

import re

import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.formats.msccl import msccl_to_xml, parse_msccl
from a2a_compiler.formats.oneccl import oneccl_to_xml, parse_oneccl
from a2a_compiler.lower.msccl import lower_msccl
from a2a_compiler.lower.oneccl import lower_oneccl
from a2a_compiler.lower.placement import place
from a2a_compiler.topology.model import Topology
from a2a_compiler.topology.spec import from_spec
from a2a_compiler.verify import verify_bytes
from data.hand_schedules import one_link_many_steps, paths_to_steps, ring_links, ring_schedule


def _topo(n):
    return Topology.from_links(f"ring:{n}", n, [(u, (u + 1) % n) for u in range(n)])


@pytest.mark.parametrize("n, c, kw", [
    (4, 2, {}), (4, 2, {"channels": 2}), (5, 3, {"instances": 2}), (6, 1, {"channels": 3, "instances": 2}),
])
def test_msccl_lowering_verifies(n, c, kw):
    prog = lower_msccl(ring_schedule(n, c), **kw)
    data = msccl_to_xml(prog)
    report = verify_bytes(data, "ring.xml", _topo(n), lp=False)
    assert report.valid, report.messages()
    assert parse_msccl(data) == prog
    assert msccl_to_xml(lower_msccl(ring_schedule(n, c), **kw)) == data  # deterministic
    inst = kw.get("instances", 1)
    assert (prog.nchannels, prog.nchunksperloop) == (kw.get("channels", 1) * inst, n * c * inst)


def test_msccl_layout_ring4():
    """Relayed chunks go through scratch; the relay's send depends on the receive (hasdep)."""
    prog = lower_msccl(ring_schedule(4, 2))
    g0 = prog.gpus[0]
    assert [(t.id, t.send, t.recv, t.chan) for t in g0.tbs] == [(0, -1, -1, 0), (1, -1, 1, 0), (2, -1, 3, 0),
                                                                (3, 1, -1, 0), (4, 3, -1, 0)]
    assert g0.s_chunks == 2
    cpy = g0.tbs[0].steps[0]
    assert (cpy.type, cpy.srcbuf, cpy.srcoff, cpy.dstbuf, cpy.dstoff, cpy.cnt) == ("cpy", "i", 0, "o", 0, 2)
    # step 0 from gpu 1: its own shard for gpu 0 (o[2..3], merged cnt=2), then chunk (1, 3, 1) into scratch
    r = g0.tbs[1].steps
    assert [(s.type, s.dstbuf, s.dstoff, s.cnt, s.hasdep) for s in r[:2]] == [("r", "o", 2, 2, 0), ("r", "s", 0, 1, 1)]
    # gpu 0 forwards that chunk to gpu 3 in step 1, after tb 1 step 1
    fwd = g0.tbs[4].steps[-1]
    assert (fwd.type, fwd.srcbuf, fwd.srcoff, fwd.depid, fwd.deps) == ("s", "s", 0, 1, 1)


def test_nop_chain_for_several_dependencies():
    """Chunks (0, 3, 0) and (0, 3, 1) reach relay 1 from two different neighbours and leave in one run."""
    links = tuple(sorted({(u, v, 1.0) for a, b in ((0, 1), (0, 2), (1, 2), (1, 3), (2, 3), (0, 3))
                          for u, v in ((a, b), (b, a))}))
    paths = {(s, d, k): [s, d] for s in range(4) for d in range(4) if s != d for k in range(2)}
    paths[(0, 3, 0)] = [0, 1, 3]       # waits one step at 1
    paths[(0, 3, 1)] = [0, 2, 1, 3]
    sched = paths_to_steps(4, 2, paths, links, "x", wait={(0, 3, 0): 1})
    prog = lower_msccl(sched)
    g1 = prog.gpus[1]
    from_0 = next(t.id for t in g1.tbs if t.recv == 0)
    from_2 = next(t.id for t in g1.tbs if t.recv == 2)
    to_3 = next(t for t in g1.tbs if t.send == 3)
    last = [(s.type, s.srcbuf, s.cnt, s.depid) for s in to_3.steps[-2:]]
    assert last == [("nop", "i", 0, from_0), ("s", "s", 2, from_2)]
    for tb in (from_0, from_2):
        assert g1.tbs[tb].steps[-1].hasdep == 1
    assert verify_bytes(msccl_to_xml(prog), "x.xml").valid


def test_64_step_limit_spreads_over_channels_or_fails_clearly():
    sched = one_link_many_steps(70)
    with pytest.raises(A2AError, match=r"gpu 0 tb 1 needs 70 steps with 1 channel\(s\) x 1 instance\(s\), "
                                       r"over the executor's limit of 64; use more --channels"):
        lower_msccl(sched, channels=1)
    prog = lower_msccl(sched)  # auto: the fewest channels that fit
    assert prog.nchannels == 2
    assert max(len(t.steps) for g in prog.gpus for t in g.tbs) == 35
    assert verify_bytes(msccl_to_xml(prog), "x.xml").valid


def test_invalid_schedule_refused():
    sched = ring_schedule(4, 1)
    bad = sched.__class__(**{**sched.__dict__, "steps": sched.steps[1:]})
    with pytest.raises(A2AError, match=re.escape("step 0: rank 0 sends chunk (3,1,0) but does not hold it (rank 3 does)")):
        lower_msccl(bad)
    with pytest.raises(A2AError, match=re.escape("chunk (0,2,0) is never delivered (it ends at rank 1, not 2)")):
        lower_msccl(sched.__class__(**{**sched.__dict__, "steps": sched.steps[:1]}))


def test_placement_runs_are_contiguous_and_scratch_fresh():
    pl = place(ring_schedule(5, 3), max_cnt=2)
    assert max(r.cnt for r in pl.runs) == 2
    scratch_writes = [(r.dst, r.dstoff + i) for r in pl.runs if r.dstbuf == "s" for i in range(r.cnt)]
    assert len(scratch_writes) == len(set(scratch_writes)) == sum(pl.scratch)
    assert sum(r.cnt for r in pl.runs if r.dstbuf == "o") == 5 * 4 * 3  # every chunk delivered once


@pytest.mark.parametrize("n, c", [(4, 2), (5, 3), (6, 1)])
def test_oneccl_lowering_verifies(n, c):
    prog = lower_oneccl(ring_schedule(n, c))
    data = oneccl_to_xml(prog)
    report = verify_bytes(data, "ring.xml", _topo(n), lp=False)
    assert report.valid, report.messages()
    assert parse_oneccl(data) == prog
    assert prog.nsteps == len(ring_schedule(n, c).steps)
    assert report.perf.step_loads == tuple(
        max(sum(len(tr.chunks) for tr in step if (tr.src, tr.dst) == e) for e in {(tr.src, tr.dst) for tr in step}) / c
        for step in ring_schedule(n, c).steps)


def test_oneccl_broken_files_fail():
    data = oneccl_to_xml(lower_oneccl(ring_schedule(4, 1)))
    # drop rank 1's first receive in step 0
    text = data.decode()
    r1 = text.index('<rank id="1"')
    first_recv = text.index("<recv", r1)
    line_end = text.index("\n", first_recv)
    line_start = text.rindex("\n", 0, first_recv)
    broken = (text[:line_start] + text[line_end:]).encode()
    errs = verify_bytes(broken, "t.xml").errors["data movement"]
    assert "rank 0 step 0: 1 send(s) to rank 1 with no matching recv" in errs
    # move rank 0's first relay send (from scratch, step 1) into step 0, before the chunk has arrived
    lines = data.decode().split("\n")
    k = next(i for i, l in enumerate(lines) if '<send peer=' in l and 'buf="s"' in l)
    relay = lines.pop(k)
    lines.insert(lines.index('    <step id="0">') + 1, relay)
    errs = verify_bytes("\n".join(lines).encode(), "t.xml").errors["data movement"]
    assert "rank 0 step 0: send #0 reads s[0], which holds no data at the start of the step" in errs


def test_ring_links_helper_consistent():
    """The hand-built schedules' ring is exactly the ring:N topology's link set."""
    assert ring_links(4) == ((0, 1, 1.0), (0, 3, 1.0), (1, 0, 1.0), (1, 2, 1.0),
                             (2, 1, 1.0), (2, 3, 1.0), (3, 0, 1.0), (3, 2, 1.0))
    for n in (3, 4, 7):
        ring = from_spec(f"ring:{n}")
        assert ring_links(n) == tuple(zip(ring.src.tolist(), ring.dst.tolist(), ring.capacity.tolist()))


def test_dropped_dependency_is_caught():
    """Without its dependency a relay's send may run before the receive that fills its scratch slot."""
    data = msccl_to_xml(lower_msccl(ring_schedule(4, 2))).decode()
    # gpu 0 forwards from scratch s[0] into o[3] of its neighbour (both ends name the transfer alike)
    relay = '<step s="2" type="s" srcbuf="s" srcoff="0" dstbuf="o" dstoff="3" cnt="1" depid="1" deps="1" hasdep="0"/>'
    assert data.count(relay) >= 1
    broken = data.replace(relay, relay.replace('depid="1" deps="1"', 'depid="-1" deps="-1"'), 1)
    errs = verify_bytes(broken.encode(), "t.xml").errors["data movement"]
    assert errs[0] == "gpu 0 tb 4 step 2: reads unwritten scratch chunk s[0]"
