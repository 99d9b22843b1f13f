"""Chunking fractional flows into whole chunks (Basu et al. §4): rounding, rebalancing, fidelity."""

import numpy as np
import pytest

from a2a_compiler.chunk import build_schedule
from a2a_compiler.chunk.chunking import chunk_candidates, chunk_path_schedule, largest_remainder, time_paths
from a2a_compiler.chunk.ir import LinkSchedule, dumps, fidelity, predicted_time, validate
from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.solve.result import FlowSolution, WeightedPath
from a2a_compiler.solve.tsmcf import tsmcf
from a2a_compiler.topology import from_spec


def test_largest_remainder_keeps_shards_whole():
    assert largest_remainder(np.array([0.5, 0.3, 0.2]), 4).tolist() == [2, 1, 1]
    assert largest_remainder(np.array([2 / 3, 1 / 3]), 3).tolist() == [2, 1]      # exact when C·w is integral
    assert largest_remainder(np.array([1 / 3, 1 / 3, 1 / 3]), 2).tolist() == [1, 1, 0]  # ties: earlier path
    assert largest_remainder(np.array([0.25, 0.75]), 1).tolist() == [0, 1]


def test_chunk_candidates():
    assert chunk_candidates(16) == [1, 2, 3, 4, 6, 8, 12, 16]
    assert chunk_candidates(5) == [1, 2, 3, 4, 5]
    with pytest.raises(A2AError, match="--max-chunks must be >= 1"):
        chunk_candidates(0)


@pytest.mark.parametrize("spec, chunks, steps", [("bipartite:4", 4, 2), ("hypercube:3", 3, 3), ("twisted-hypercube:3", 2, 2)])
def test_tsmcf_link_schedules_are_exact(spec, chunks, steps):
    """Smallest C reaching fidelity 0.97: the LP's flows are multiples of 1/C, so chunking loses nothing."""
    sch = build_schedule(from_spec(spec), Fabric(), "tsmcf")
    assert isinstance(sch, LinkSchedule)
    validate(sch)
    assert (sch.chunks_per_shard, len(sch.steps)) == (chunks, steps)
    assert sch.lp_time == pytest.approx({"bipartite:4": 2.5}.get(spec, 4.0), abs=1e-9)
    assert predicted_time(sch) == pytest.approx(sch.lp_time, abs=1e-9)
    assert fidelity(sch) == pytest.approx(1.0, abs=1e-9)


def test_max_chunks_one_keeps_best_found():
    sch = build_schedule(from_spec("hypercube:3"), Fabric(), "tsmcf", max_chunks=1)
    assert sch.chunks_per_shard == 1
    assert predicted_time(sch) == 6.0          # whole shards: the busiest link carries 3, 2, 1 shards per step
    assert [max(len(t.chunks) for t in step) for step in sch.steps] == [3, 2, 1]
    assert fidelity(sch) == pytest.approx(4 / 6)


def test_time_paths_cover_each_shard_once():
    topo = from_spec("hypercube:3")
    paths = time_paths(topo, tsmcf(topo, Fabric()))
    assert len(paths) == 56
    for (s, d), plist in paths.items():
        assert sum(w for w, _ in plist) == pytest.approx(1.0, abs=1e-7)
        for _, nodes in plist:
            assert nodes[0] == s and nodes[-1] == d and len(nodes) == 4
            assert nodes.index(d) == len(nodes) - nodes.count(d)     # stays once delivered


def test_link_schedules_are_deterministic():
    a = dumps(build_schedule(from_spec("twisted-hypercube:3"), Fabric(), "tsmcf"))
    b = dumps(build_schedule(from_spec("twisted-hypercube:3"), Fabric(), "tsmcf"))
    assert a == b


def ring4_solution():
    """ring:4 optimum (F = 1/2): neighbours direct, opposite ranks split 1/2 - 1/2 over both ways."""
    paths = []
    for o in range(4):
        for d in range(4):
            if (d - o) % 4 in (1, 3):
                paths.append(WeightedPath(o, d, (o, d), 1.0))
            elif o != d:
                paths += [WeightedPath(o, d, (o, (o + 1) % 4, d), 0.5), WeightedPath(o, d, (o, (o - 1) % 4, d), 0.5)]
    return FlowSolution("mcf-extp", "ring:4", Fabric(), 4, 8, 0.5, 0.5, paths=tuple(paths))


def test_path_chunking_rebalances_whole_shards():
    """With C = 1 each opposite shard takes one way; rebalancing picks the ways so every link carries 2 shards."""
    topo = from_spec("ring:4")
    sch = chunk_path_schedule(topo, ring4_solution())
    validate(sch)
    assert sch.chunks_per_shard == 1
    assert predicted_time(sch) == 2.0 and fidelity(sch) == 1.0
    relayed = sorted(r.nodes for r in sch.routes if len(r.nodes) == 3)
    hops = [(u, v) for nodes in relayed for u, v in zip(nodes, nodes[1:])]
    assert len(hops) == len(set(hops)) == 8


def test_path_chunking_needs_every_shard():
    sol = ring4_solution()
    sol = FlowSolution("mcf-extp", "ring:4", Fabric(), 4, 8, 0.5, 0.5,
                       paths=tuple(p for p in sol.paths if (p.src, p.dst) != (2, 0)))
    with pytest.raises(A2AError, match="carries no flow for shard 2->0"):
        chunk_path_schedule(from_spec("ring:4"), sol)


def test_mcf_extp_path_schedule_on_bipartite():
    """K_{4,4}: MCF-extP's widest paths chunk exactly with C = 4 (time (3n-2)/n = 2.5)."""
    sch = build_schedule(from_spec("bipartite:4"), Fabric(), "mcf-extp")
    validate(sch)
    assert sch.chunks_per_shard == 4
    assert predicted_time(sch) == pytest.approx(2.5, abs=1e-12)
    assert fidelity(sch) == pytest.approx(1.0, abs=1e-7)
    with pytest.raises(A2AError, match="--steps applies to tsmcf only, not pmcf"):
        build_schedule(from_spec("bipartite:4"), Fabric(), "pmcf", steps=3)


def _brute_time_and_squares(asg):
    """Predicted time and Σ load² recomputed from the chunk counts alone (no incremental state)."""
    load = np.zeros(asg.res.n_groups * asg.res.width)
    for paths, counts, w in zip(asg.paths, asg.counts, asg.weight):
        for p, k in zip(paths, counts):
            load[p] += k * w / (asg.C * asg.res.cap[p])
    return load.reshape(asg.res.n_groups, -1).max(axis=1).sum(), float((load ** 2).sum())


@pytest.mark.parametrize("fabric, moves", [(Fabric(), (56, 2)), (Fabric(25e9, 100e9, "host"), (56, 14))],
                         ids=["links", "host-bottleneck"])
def test_rebalance_prices_every_move_exactly(fabric, moves):
    """The vectorised pricing of a shard's moves equals recomputing from scratch after the move, for every
    move of every shard on an asymmetric graph, with one resource per step (links only) and with three (a
    hop's link, host egress and host ingress, host forwarding): Δ time exactly; Δ Σ load² exactly up to
    the paths' shared resources, which it prices as distinct (+2·inc² each, so a move between overlapping
    paths looks slightly worse than it is, as before the vectorisation)."""
    from a2a_compiler.chunk.chunking import _Assignment, _link_paths

    topo = from_spec("jellyfish:12,3,seed=5")
    sol = tsmcf(topo, fabric)
    cands = time_paths(topo, sol)
    res, paths = _link_paths(topo, sol, cands)
    weights = [np.array([w for w, _ in p]) for p in cands.values()]
    asg = _Assignment(res, 3, paths, [largest_remainder(w, 3) for w in weights])
    t0, sq0 = _brute_time_and_squares(asg)
    assert asg.time() == pytest.approx(t0, abs=1e-12)
    checked = overlapping = 0
    for k, plist in enumerate(asg.paths):
        for p in range(len(plist)):
            if asg.counts[k][p] == 0 or len(plist) < 2:
                continue
            dts, d2s = asg.try_moves(k, p)
            for q in range(len(plist)):
                if q == p:
                    continue
                asg.counts[k][p] -= 1
                asg.counts[k][q] += 1
                t1, sq1 = _brute_time_and_squares(asg)
                asg.counts[k][p] += 1
                asg.counts[k][q] -= 1
                shared = np.intersect1d(plist[p], plist[q])
                inc = 1.0 / (asg.C * asg.res.cap[shared])
                assert dts[q] == pytest.approx(t1 - t0, abs=1e-9)
                assert d2s[q] == pytest.approx(sq1 - sq0 + 2 * float((inc * inc).sum()), abs=1e-9)
                checked += 1
                overlapping += len(shared) > 0
    assert (checked, overlapping) == moves      # every move of every shard; some between overlapping paths


def test_tsmcf_schedule_of_an_asymmetric_graph():
    """jellyfish:16,4,seed=1 (no automorphism): the 3-step LP meets the link-MCF optimum 129/16, and the
    chunk search keeps C = 12, whose schedule takes 33/4 link-times: fidelity 129/132."""
    sch = build_schedule(from_spec("jellyfish:16,4,seed=1"), Fabric(), "tsmcf")
    validate(sch)
    assert (sch.chunks_per_shard, len(sch.steps)) == (12, 3)
    assert sch.lp_time == pytest.approx(129 / 16, abs=1e-7)
    assert sch.info["mcf_time"] == pytest.approx(129 / 16, abs=1e-6)
    assert predicted_time(sch) == pytest.approx(33 / 4, abs=1e-12)
    assert fidelity(sch) == pytest.approx(129 / 132, abs=1e-7)
