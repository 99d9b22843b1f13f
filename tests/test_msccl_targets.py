"""MSCCL executor targets (nccl | rccl): their limits, RCCL's shipped files, the parser's nodes per
rank, and compile refusing what no target loads (docs/msccl.md cites each limit's source)."""

from pathlib import Path

import pytest

from a2a_compiler import compile as compile_schedule
from a2a_compiler.errors import A2AError
from a2a_compiler.formats import MscclGpu, MscclProgram, MscclStep, MscclThreadBlock, msccl_to_xml
from a2a_compiler.formats.msccl_rules import check_rules, parser_nodes
from a2a_compiler.verify import verify_bytes

RCCL = Path(__file__).resolve().parent / "data" / "rccl"


@pytest.mark.parametrize("name, chunks, nodes", [
    ("alltoall-8n-0-9kb", 1, 39), ("alltoall-8n-9kb-190kb", 2, 69), ("alltoall-8n-190kb-512kb", 4, 129),
    ("alltoall-8n-512kb-7mb", 4, 129), ("alltoall-8n-7mb-43mb", 8, 193)])
def test_rccl_shipped_files_verify_for_both_targets(name, chunks, nodes):
    data = (RCCL / f"{name}.xml").read_bytes()
    for target in ("rccl", "nccl"):
        r = verify_bytes(data, name, strict=True, target=target)
        assert r.valid and r.warnings == [], r.messages()
        assert (r.ranks, r.chunks_per_shard, r.parser_nodes, r.target) == (8, chunks, nodes, target)
        assert r.perf.predicted_time == 1.0  # all pairs at once: one shard per link


def _program(nranks, tbs_of, nchannels=1, chunks=1, scratch=0):
    gpus = tuple(MscclGpu(g, nranks * chunks, nranks * chunks, scratch, tuple(tbs_of(g))) for g in range(nranks))
    return MscclProgram("t", "Simple", nchannels, nranks * chunks, nranks, "alltoall", 0, 1, 0, 0, gpus)


def _step(s, type_, srcoff, dstoff, cnt=1):
    return MscclStep(s, type_, "i", srcoff, "o", dstoff, cnt, -1, -1, 0)


def _two_ranks_over(channels, per_tb):
    """Two ranks exchanging ``channels * per_tb`` chunks, one per step, a send and a receive tb per channel."""
    C = channels * per_tb

    def tbs(g):
        peer = 1 - g
        out = [MscclThreadBlock(0, -1, -1, 0, tuple(_step(j, "cpy", g * C + 71 * j, g * C + 71 * j, min(71, C - 71 * j))
                                                    for j in range(-(-C // 71))))]
        for ch in range(channels):
            lo = ch * per_tb
            out.append(MscclThreadBlock(len(out), peer, -1, ch, tuple(
                _step(j, "s", peer * C + lo + j, g * C + lo + j) for j in range(per_tb))))
            out.append(MscclThreadBlock(len(out), -1, peer, ch, tuple(
                _step(j, "r", g * C + lo + j, peer * C + lo + j) for j in range(per_tb))))
        return out
    return _program(2, tbs, channels, C)


def test_parser_nodes_per_rank_over_4095_is_refused_by_both_targets():
    p = _two_ranks_over(32, 64)        # 65 tbs, 64 * 64 + 29 steps
    assert parser_nodes(p, p.gpus[0]) == 1 + 2 + 65 + 4096 + 29
    for target in ("nccl", "rccl"):
        errors = check_rules(p, target).errors
        assert ("gpu 0: the parser stores 4193 nodes for this rank (<algo>, 2 <gpu>, 65 <tb>, 4125 <step>), over its "
                "limit of 4095 (2 ranks over it)") in errors
    assert check_rules(_two_ranks_over(32, 62), "nccl").errors == []      # 4065 nodes load in NCCL ...
    assert check_rules(_two_ranks_over(32, 62), "rccl").errors == [      # ... but 65 tbs not in RCCL
        "gpu 0: 65 thread blocks, over RCCL (ROCm)'s limit of 64 per GPU",
        "gpu 1: 65 thread blocks, over RCCL (ROCm)'s limit of 64 per GPU"]
    assert verify_bytes(msccl_to_xml(_two_ranks_over(32, 62)), "t", target="nccl").valid


def test_channels_and_parser_text_limits():
    p = compile_schedule("hypercube:3", "msccl", channels=40, max_chunks=1, target="rccl").program
    assert check_rules(p, "rccl").errors == []
    assert check_rules(p, "nccl").errors == [
        "algo: nchannels=40, over the 32 channels msccl-executor-nccl (NCCL 2.23) can build (MAXCHANNELS); it "
        "refuses the algorithm"]
    with pytest.raises(A2AError, match="^--name has 256 characters; the MSCCL parser holds at most 255$"):
        compile_schedule("hypercube:3", "msccl", max_chunks=1, name="x" * 256)
    data = msccl_to_xml(compile_schedule("hypercube:3", "msccl", max_chunks=1, name="x" * 255).program)
    r = verify_bytes(data.replace(b'name="', b'name="y', 1), "t")
    assert r.errors["executor rules"] == [
        "line 1: <algo> attribute 'name' is 256 characters long; the parser's value buffer holds 255 (and is not "
        "bounds-checked)"]
    assert verify_bytes(data, "t").valid
    extra = data.replace(b'<algo name="', b'<algo ' + b"".join(b'x%d="0" ' % i for i in range(16)) + b'name="', 1)
    assert verify_bytes(extra, "t").errors["executor rules"][0].startswith(
        "line 1: <algo> has 26 attributes; the parser reads the first 16 and never sees 'name', 'proto'")


def test_compile_fits_the_target_or_refuses_in_one_line():
    rccl = compile_schedule("hypercube:3", "msccl", target="rccl")
    assert rccl.report.target == "rccl" and rccl.report.valid and rccl.program.record.target == "rccl"
    assert (rccl.chunks_per_shard, rccl.size_rule.typical()) == (32, (1 << 20, 64 << 20))   # a power of two
    anyc = compile_schedule("hypercube:3", "msccl", target="rccl", any_chunks=True)
    assert anyc.chunks_per_shard == 3    # fits both: the same file but for the recorded target
    assert anyc.data.replace(b'"target": "rccl", ', b"") == compile_schedule("hypercube:3", "msccl").data
    with pytest.raises(A2AError) as exc:
        compile_schedule("hypercube:3", "msccl", instances=11, max_chunks=1, target="rccl", any_chunks=True)
    assert str(exc.value) == (
        "hypercube:3 at 1 chunk(s) per shard: gpu 0 needs 67 thread blocks, over RCCL (ROCm)'s 64 per GPU; the most "
        "this layout fits is 64 (1 copy + one per neighbour, channel and direction): use fewer --channels or "
        "--instances, or --emit mpi (MPI path schedules have no per-rank size limit)")
    with pytest.raises(A2AError) as exc:
        compile_schedule("hypercube:3", "msccl", instances=11, max_chunks=1, target="rccl")
    assert str(exc.value) == ("--instances 11 with --target: the chunks per peer (C x 11) are never a power of two, "
                              "so rccl would select the file at no power-of-two size; use a power-of-two --instances, "
                              "or --any-chunks")
    with pytest.raises(A2AError, match=r"^2000 ranks: MSCCL XML holds at most 1024 <gpu> elements"):
        compile_schedule("genkautz:2000,4", "msccl")            # before any solving


def test_channel_search_meets_the_fidelity_target_under_the_host_bottleneck():
    """hypercube:3, 25 Gbit/s links, 50 Gbit/s hosts: LP 6 link-times.  One channel serialises each link's
    messages on one connection (7.5, fidelity 0.8); the search tries 2, 4, 8 channels and 8 reach 6."""
    fabric = {"link_bw": "25Gbps", "host_bw": "50Gbps"}
    one = compile_schedule("hypercube:3", "msccl", channels=1, **fabric)
    assert (one.chunks_per_shard, one.predicted_time, one.lp_time) == (2, 7.5, 6.0)
    r = compile_schedule("hypercube:3", "msccl", **fabric)
    assert (r.chunks_per_shard, r.program.nchannels, r.fidelity) == (2, 8, 1.0)
    assert r.predicted_time == pytest.approx(6.0, abs=1e-9)
    assert max(len(g.tbs) for g in r.program.gpus) <= 64 and r.report.valid  # loads in RCCL too
    assert verify_bytes(r.data, "hc3", target="rccl").valid


def test_nvswitch_programs_beside_msccl_tools_two_and_three_step():
    """nvswitch:2,4 (2 servers x 4 GPUs, NVLink 3.6 Tbit/s, NICs 400 Gbit/s on rail switches): our program
    reaches the link MCF optimum, 4 link-times; msccl-tools' two-step takes 4.333, its three-step 18.667
    (tests/data/msccl_tools/README.md), all priced on the physical links by the same cost model."""
    nv = {"link_bw": "400Gbps", "nvlink_bw": "3.6Tbps"}
    ours = compile_schedule("nvswitch:2,4", "msccl", **nv)
    assert ours.predicted_time == pytest.approx(4.0) and ours.mcf_time == pytest.approx(4.0, rel=1e-6)
    assert ours.program.name == "nvswitch:2,4-tsmcf"   # the physical spec (it was '..._hosts_through_switches_..')
    from a2a_compiler.fabric import Fabric, apply_link_classes
    from a2a_compiler.topology.spec import from_spec

    fabric = Fabric(400e9 / 8, nvlink_bw=3.6e12 / 8)
    topo = apply_link_classes(from_spec("nvswitch:2,4"), fabric)
    tools = Path(__file__).resolve().parent / "data" / "msccl_tools"
    times = {}
    for name in ("two_step_2x4_Simple", "three_step_2x4_i1"):
        data = (tools / f"{name}.xml").read_bytes().replace(
            b' inplace="0">', b' inplace="0" outofplace="1" minBytes="0" maxBytes="0">', 1)
        r = verify_bytes(data, name, topo, fabric, lp=False)
        assert r.valid, r.messages()
        times[name] = r.perf.predicted_time
    assert times == pytest.approx({"two_step_2x4_Simple": 13 / 3, "three_step_2x4_i1": 56 / 3})
    assert verify_bytes(ours.data, "ours", topo, fabric, lp=False).perf.predicted_time == pytest.approx(4.0)
