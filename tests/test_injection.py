"""Injection rate control of routed schedules: granular chunking and time steps (a2a_compiler.chunk.injection),
the MPI path format version 2, and the runtime's step barriers."""

import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from a2a_compiler.chunk import build_schedule, predicted_time
from a2a_compiler.chunk.injection import flow_per_chunk, time_steps
from a2a_compiler.chunk.ir import PathSchedule, Route, dumps, from_json_dict, path_steps
from a2a_compiler.cli import main
from a2a_compiler.errors import FormatError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats.mpi_paths import mpi_paths_to_xml, parse_mpi_paths
from a2a_compiler.lower.mpi_paths import lower_mpi_paths
from a2a_compiler.topology.spec import from_spec
from a2a_compiler.verify.performance import routed_performance
from runtimes.mpi.plan import plan_paths

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_runtime_mpi import MPIEXEC, run_json  # noqa: E402


def ring_schedule() -> PathSchedule:
    """ring:4, one chunk per shard, every pair on its clockwise route."""
    t = from_spec("ring:4")
    routes = tuple(Route(s, d, tuple((s + i) % 4 for i in range((d - s) % 4 + 1)), 0, (0,))
                   for s in range(4) for d in range(4) if s != d)
    links = tuple((int(u), int(v), 1.0) for u, v in zip(t.src, t.dst))
    return PathSchedule(4, 1, routes, links, 4, "ring:4", Fabric(), "hand", 6.0)


def test_clockwise_ring_by_hand():
    # every clockwise link carries the 1-, 2- and 3-hop routes crossing it: 1 + 2 + 3 = 6 shards
    s = ring_schedule()
    assert predicted_time(s) == 6.0
    # Q = 1: each host sends one route and receives one route per step, three routes each: 3 steps.
    # A step holds the 4 routes of one length (the shifts by 1, 2, 3), each link then carries 1, 2, 3 of them
    x = time_steps(s, 1)
    assert x.info["steps"] == 3 and path_steps(x) == 3
    per_step = Counter((r.step, r.src) for r in x.routes)
    assert max(per_step.values()) == 1
    assert max(Counter((r.step, r.dst) for r in x.routes).values()) == 1
    assert predicted_time(x) == 6.0            # 1 + 2 + 3: stepping costs nothing on the shifts
    assert x.info["unstepped_time"] == 6.0


def test_slot_limits_hold_and_time_is_the_sum_of_steps():
    t = from_spec("torus:3x3")
    s = build_schedule(t, Fabric(forwarding="nic"), "mcf-extp", max_chunks=4)
    for q in (1, 3, 8):
        x = time_steps(s, q)
        assert max(Counter((r.step, r.src) for r in x.routes).values()) <= q
        assert max(Counter((r.step, r.dst) for r in x.routes).values()) <= q
        assert sorted((r.src, r.dst, r.route_id, r.chunks) for r in x.routes) == \
            sorted((r.src, r.dst, r.route_id, r.chunks) for r in s.routes)
        assert predicted_time(x) >= predicted_time(s) - 1e-12
        program = lower_mpi_paths(x)
        assert program.nsteps == x.info["steps"]
        perf = routed_performance(parse_mpi_paths(mpi_paths_to_xml(program)), x.fabric)
        assert perf.predicted_time == pytest.approx(predicted_time(x))
        assert len(perf.step_loads) == program.nsteps
        assert sum(perf.step_loads) == pytest.approx(perf.predicted_time)


def test_flow_per_chunk_keeps_paths_and_loads():
    s = build_schedule(from_spec("hypercube:3"), Fabric(forwarding="nic"), "mcf-extp", max_chunks=4)
    g = flow_per_chunk(s)
    assert all(len(r.chunks) == 1 for r in g.routes)
    assert len(g.routes) == sum(len(r.chunks) for r in s.routes)
    assert predicted_time(g) == predicted_time(s)
    assert from_json_dict(json.loads(dumps(g))).routes == g.routes


def test_format_version_2_round_trip_and_errors():
    x = time_steps(ring_schedule(), 1)
    xml = mpi_paths_to_xml(lower_mpi_paths(x))
    assert b'version="2"' in xml and b'nsteps="3"' in xml and b'step="2"' in xml
    back = parse_mpi_paths(xml)
    assert back.nsteps == 3 and {s.step for s in back.sends} == {0, 1, 2}
    # a schedule of one step stays a version 1 file, byte for byte
    one = mpi_paths_to_xml(lower_mpi_paths(ring_schedule()))
    assert b'version="' not in one and b'step="' not in one
    with pytest.raises(FormatError, match="step needs version"):
        parse_mpi_paths(one.replace(b'route_id="0"', b'route_id="0" step="0"', 1))
    with pytest.raises(FormatError, match="version=3"):
        parse_mpi_paths(xml.replace(b'version="2"', b'version="3"'))
    with pytest.raises(FormatError, match=r"step=3 outside 0\.\.2"):
        parse_mpi_paths(xml.replace(b'step="2"', b'step="3"', 1))
    # the IR JSON carries steps too
    assert from_json_dict(json.loads(dumps(x))).routes == x.routes


def test_plan_splits_messages_by_step():
    x = time_steps(ring_schedule(), 1)
    program = parse_mpi_paths(mpi_paths_to_xml(lower_mpi_paths(x)))
    for mode in ("relay", "direct"):
        plans = plan_paths(program, 4, mode)
        for p in plans:
            steps = p.body.steps()
            assert len(steps) == 3
            assert sum(len(s.sends) for s in steps) == len(p.body.sends)
            assert sum(len(s.recvs) for s in steps) == len(p.body.recvs)
            if mode == "direct":
                assert [len(s.sends) for s in steps] == [1, 1, 1]


def test_cli_compile_and_routes(tmp_path, capsys):
    out = tmp_path / "t.xml"
    assert main(["compile", "torus:3x3", "--forwarding", "nic", "--emit", "mpi", "--max-flows", "2", "-o", str(out),
                 "-q", "--json"]) == 1          # written below the default fidelity target (stepped routes)
    s = json.loads(capsys.readouterr().out)
    assert s["fidelity_warning"] == ("fidelity 0.5999 is below the default target 0.97: the best chunk count tried "
                                     "is C = 2; the file is written; --min-fidelity F sets a target it meets")
    assert s["program"].endswith("routes") and b'version="2"' in out.read_bytes()
    assert main(["verify", str(out), "--topology", "torus:3x3", "--forwarding", "nic", "--json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["valid"] and v["predicted_time"] == pytest.approx(s["predicted_time"])
    assert main(["routes", "torus:3x3", "--algo", "dor", "--max-flows", "1", "--json", "-q"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["steps"] >= 8 and r["max_flows"] == 1          # 8 routes per host, one per step
    assert main(["compile", "hypercube:3", "--emit", "msccl", "--max-flows", "2", "-o", str(out)]) == 2
    assert "--max-flows does not apply to --emit msccl (only to --emit mpi)" in capsys.readouterr().err


@pytest.mark.mpi
@pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec next to the Python interpreter or on PATH")
def test_stepped_schedule_runs_byte_exact(tmp_path, mode="relay"):
    # relay mode: every hop of a step's routes relayed by the ranks inside the step (direct mode's split is
    # checked in test_plan_splits_messages_by_step, and on the testbed in test_testbed.py)
    out = tmp_path / "h3.xml"
    assert main(["compile", "hypercube:3", "--forwarding", "nic", "--emit", "mpi", "--max-flows", "2",
                 "--max-chunks", "4", "-o", str(out), "-q"]) == 1    # written, below the fidelity target
    res = run_json(8, out, "-b", "1", "-e", "4096", "-f", "64", "--check", "all", "--route-mode", mode)
    assert [r["verified"] for r in res["results"]] == [True, True, True]
