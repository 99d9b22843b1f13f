"""MPI path lowering and path-schedule verification (hand-built routed schedule with a switch)."""

from a2a_compiler.formats.mpi_paths import mpi_paths_to_xml, parse_mpi_paths
from a2a_compiler.lower.mpi_paths import lower_mpi_paths
from a2a_compiler.topology.model import Topology
from a2a_compiler.verify import verify_bytes
from data.hand_schedules import star_path_schedule

STAR = Topology.from_links("file:star", 3, [(0, 3), (1, 3), (2, 3), (0, 1)], n_switches=1)


def test_lowering_exact_and_verifies():
    prog = lower_mpi_paths(star_path_schedule(3))
    assert (prog.nranks, prog.nnodes, prog.chunks_per_shard) == (3, 4, 3)
    assert [(s.src, s.dst, s.route_id, s.layer, s.nodes, s.chunks) for s in prog.sends[:3]] == [
        (0, 1, 0, 0, (0, 1), (0,)), (0, 1, 1, 1, (0, 3, 1), (1, 2)), (0, 2, 0, 0, (0, 3, 2), (0, 1, 2))]
    data = mpi_paths_to_xml(prog)
    assert parse_mpi_paths(data) == prog
    report = verify_bytes(data, "star.xml", STAR, lp=False)
    assert report.valid, report.messages()
    # links 1->3, 2->3, 3->0, 3->2 carry two whole shards (ties broken by link order); 3->1 only 1 + 2/3
    assert report.perf.busiest == (1, 3) and report.perf.predicted_time == 2.0


def _edit(old: bytes, new: bytes) -> list[str]:
    data = mpi_paths_to_xml(lower_mpi_paths(star_path_schedule(3)))
    assert old in data
    return verify_bytes(data.replace(old, new, 1), "t.xml", STAR, lp=False).messages()


def test_chunk_on_two_routes():
    errs = _edit(b'route="0 3 1" chunks="1 2"', b'route="0 3 1" chunks="0 1 2"')
    assert "data movement: rank 0 -> 1: chunk 0 is sent on more than one route (delivered twice)" in errs


def test_missing_chunk():
    errs = _edit(b'route="0 3 1" chunks="1 2"', b'route="0 3 1" chunks="1"')
    assert "data movement: rank 0 -> 1: chunk(s) 2 of the shard are never sent" in errs


def test_route_must_start_and_end_right():
    errs = _edit(b'route="0 3 2"', b'route="0 3 1"')
    assert "data movement: rank 0 send to 2 route_id 0: route 0 3 1 must start at 0 and end at 2" in errs


def test_route_off_the_topology():
    errs = _edit(b'route="0 3 2"', b'route="0 1 2"')
    assert ("topology: rank 0 send to 2 route_id 0: hop 1->2 of route 0 1 2 is not a link of file:star") in errs
