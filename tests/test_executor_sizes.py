"""Files the executors select (issue 33, parts 3-6): size rules, the recorded target, one-line refusals and
the fidelity target.  Every message and exit status is the whole line the CLI prints."""

import json

import numpy as np
import pytest

import a2a_compiler
from a2a_compiler.cli import main
from a2a_compiler.errors import A2AError
from a2a_compiler.formats.msccl_rules import msccl_size_rule, mscclpp_size_rule
from mpijobs import MPICH

MIB = 1 << 20
NVSWITCH = ["--link-bw", "400Gbps", "--nvlink-bw", "3.6Tbps", "--host-bw", "800Gbps"]


@pytest.fixture(scope="module")
def hc3():
    """hypercube:3 for MSCCL: unrestricted (C = 3) and for --target nccl (C = 32)."""
    return a2a_compiler.compile("hypercube:3", "msccl"), a2a_compiler.compile("hypercube:3", "msccl", target="nccl")


def test_msccl_size_rule_is_the_schedulers_divisibility_and_byte_range(hc3):
    """msccl_lifecycle.cc l.330-339: (count * ngpus) % nchunksperloop == 0, minBytes <= count*size*ngpus <= maxBytes."""
    any_c, ours = hc3
    rule = msccl_size_rule(any_c.program)
    assert (rule.quantum, rule.per_element, rule.typical(), rule.powers_of_two()) == (3, True, (), None)
    assert rule.admits(3 * 4 * 1000, 4) and not rule.admits(MIB, 4) and not rule.admits(6, 4)   # 1.5 floats
    assert rule.describe() == ("nccl runs it at per-peer sizes a multiple of 3 elements: at no power-of-two size "
                               "(NCCL's own all-to-all runs instead, silently)")
    rule = msccl_size_rule(ours.program, "rccl")
    assert (rule.quantum, rule.typical(), rule.powers_of_two()) == (32, (MIB, 64 * MIB), (256, 1 << 40))
    assert rule.admits(128, 4) and not rule.admits(128, 8)         # 32 floats, but 16 doubles
    narrow = msccl_size_rule(a2a_compiler.compile("hypercube:3", "msccl", target="nccl", min_bytes=8 * MIB,
                                                  max_bytes=8 * 4 * MIB).program)
    assert narrow.typical() == (MIB,) and narrow.describe() == (
        "nccl runs it at per-peer sizes a multiple of 32 elements, 8388608 to 33554432 bytes over the 8 ranks: "
        "every power of two from 1 MiB to 4 MiB per peer")


def test_mscclpp_size_rule_is_check_message_size():
    """execution_plan.cc l.299-311: inputSize % 16 == 0 and (inputSize / 16) % input_chunks == 0."""
    plan = a2a_compiler.compile("hypercube:3", "mscclpp", any_chunks=True).program
    rule = mscclpp_size_rule(plan)
    assert (plan.chunks_per_shard, rule.quantum, rule.per_element, rule.typical()) == (3, 48, False, ())
    assert rule.admits(48) and not rule.admits(MIB)
    plan = a2a_compiler.compile("hypercube:3", "mscclpp").program        # C among powers of two by default
    rule = mscclpp_size_rule(plan)
    assert (plan.chunks_per_shard, rule.quantum, rule.typical()) == (32, 512, (MIB, 64 * MIB))


def test_compile_target_chooses_counts_the_executor_selects(tmp_path, capsys):
    out = tmp_path / "hc3.xml"
    assert main(["compile", "hypercube:3", "--emit", "msccl", "--target", "nccl", "-q", "-o", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("compiled   hypercube:3 tsmcf -> msccl (8 gpus, 32 chunk(s) per peer,")
    assert lines[2] == "LP         4 link-times, tsmcf's own LP (certified): fidelity 0.9922"
    assert lines[4] == ("sizes      nccl runs it at per-peer sizes a multiple of 32 elements: every power of two "
                        "from 256 B up per peer")
    r = a2a_compiler.compile("torus:3x3x3", "msccl", target="nccl")
    assert (r.chunks_per_shard, round(r.fidelity, 4), r.size_rule.typical()) == (8, 0.973, (MIB, 64 * MIB))


def test_the_trade_off_is_one_line_and_any_chunks_lifts_it(tmp_path, capsys):
    out = tmp_path / "hc3.xml"
    argv = ["compile", "hypercube:3", "--emit", "msccl", "--target", "nccl", "--max-chunks", "16", "-q", "-o", str(out)]
    assert main(argv) == 1
    got = capsys.readouterr()
    assert ("trade-off  C = 8, a count nccl selects at power-of-two sizes, gives fidelity 0.9696; --any-chunks "
            "gives 1.0000 at C = 3, which it never selects at them") in got.out.splitlines()
    assert got.err == ("a2a compile: warning: fidelity 0.9696 is below the default target 0.97: the best chunk count "
                       "tried is C = 8; --any-chunks gives 1.0000 at C = 3, which nccl never selects at power-of-two "
                       "sizes; the file is written; --min-fidelity F sets a target it meets\n")
    assert out.exists()
    assert main([*argv, "--any-chunks", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["chunks_per_shard"], d["fidelity"], d["target"], d["sizes"]["typical_peer_bytes"]) == (3, 1.0, "nccl", [])
    assert main([*argv[:-2], "--min-fidelity", "0.99", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        "a2a compile: error: no chunk count up to 16 reaches fidelity 0.99: the best is 0.9696 at C = 8 (rounded "
        "down); --any-chunks gives 1.0000 at C = 3, a count the executor does not select at power-of-two sizes; "
        "raise --max-chunks or lower --min-fidelity\n")
    assert main(["compile", "hypercube:3", "--emit", "msccl", "--any-chunks", "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == ("a2a compile: error: --any-chunks applies with --target (without it the chunk "
                                       "count is not restricted to the counts the executor selects)\n")
    assert main(["compile", "hypercube:3", "--emit", "oneccl", "--any-chunks", "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == ("a2a compile: error: --any-chunks does not apply to --emit oneccl (only to "
                                       "--emit msccl / mscclpp)\n")


def test_verify_prints_the_rule_and_warns_when_no_power_of_two_qualifies(hc3, tmp_path, capsys):
    any_c, ours = hc3
    for name, r in (("any.xml", any_c), ("ours.xml", ours)):
        r.write(tmp_path / name)
    assert main(["verify", str(tmp_path / "any.xml"), "--no-lp"]) == 0
    out = capsys.readouterr().out.splitlines()
    rule = ("nccl runs it at per-peer sizes a multiple of 3 elements: at no power-of-two size (NCCL's own all-to-all "
            "runs instead, silently)")
    assert f"  sizes              {rule}" in out
    assert f"  warning: {rule}; 'a2a compile SPEC --target T' chooses a count it selects (not with --any-chunks or " \
           f"--from-ir)" in out
    assert out[-1] == "VALID, with 1 warning (see above)"
    assert main(["verify", str(tmp_path / "any.xml"), "--no-lp", "--strict"]) == 1
    capsys.readouterr()
    assert main(["verify", str(tmp_path / "ours.xml"), "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["target"], d["warnings"], d["sizes"]) == ("nccl", [], {
        "executor": "nccl", "quantum": 32, "unit": "elements", "min_total_bytes": 0, "max_total_bytes": 0,
        "typical_peer_bytes": [MIB, 64 * MIB], "powers_of_two": [256, 1 << 40],
        "rule": "per-peer sizes a multiple of 32 elements"})


def test_the_target_travels_with_the_file(tmp_path, capsys):
    f = tmp_path / "f.xml"
    assert main(["compile", "torus:4x4", "--emit", "msccl", "--target", "rccl", "-q", "-o", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] == "rccl"
    assert b'"target": "rccl"' in f.read_bytes()
    assert main(["verify", str(f), "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["target"] == "rccl" and d["program"].endswith("(max; rccl target), proto Simple")
    assert main(["verify", str(f), "--no-lp", "--target", "nccl", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["warnings"] == [
        "--target nccl: the file was compiled for rccl (its record); nccl's limits and size rule are checked"]
    f.write_bytes(f.read_bytes().replace(b'"target": "rccl"', b'"target": "xccl"'))
    assert main(["verify", str(f), "--no-lp"]) == 2
    assert capsys.readouterr().err == "a2a verify: error: a2a-record target 'xccl' is not one of nccl, rccl\n"


@pytest.fixture(scope="module")
def c33():
    """complete:33 at C = 1 for --target nccl: 65 thread blocks per GPU, fine for NCCL, over RCCL's 64."""
    return a2a_compiler.compile("complete:33", "msccl", target="nccl", max_chunks=1)


def test_a_file_recording_rccl_over_its_64_thread_blocks_fails_verify(c33, tmp_path, capsys):
    f = tmp_path / "c33.xml"
    f.write_bytes(c33.data.replace(b'"target": "nccl"', b'"target": "rccl"'))
    assert main(["verify", str(f), "--no-lp"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert "    error: gpu 0: 65 thread blocks, over RCCL (ROCm)'s limit of 64 per GPU" in out
    with pytest.raises(A2AError, match=r"^complete:33 at 1 chunk\(s\) per shard: gpu 0 needs 65 thread blocks, over "
                                       r"RCCL \(ROCm\)'s 64 per GPU"):
        a2a_compiler.compile("complete:33", "msccl", target="rccl", max_chunks=1)


def test_run_checks_the_limits_of_the_recorded_target(c33):
    """'a2a run' applies the rules of the executor the file records, as verify does (nccl when it records none)."""
    from a2a_compiler.errors import FormatError
    from a2a_compiler.formats import parse_program
    from runtimes.mpi.plan import plan_msccl

    assert len(plan_msccl(c33.program, 33)) == 33
    untargeted = parse_program(c33.data.replace(b'"target": "nccl", ', b""))[1]
    assert untargeted.record.target is None and len(plan_msccl(untargeted, 33)) == 33
    rccl = parse_program(c33.data.replace(b'"target": "nccl"', b'"target": "rccl"'))[1]
    with pytest.raises(FormatError) as exc:
        plan_msccl(rccl, 33)
    assert str(exc.value) == ("MSCCL algo 'complete:33-tsmcf': gpu 0: 65 thread blocks, over RCCL (ROCm)'s limit of "
                              "64 per GPU (and 32 more; run 'a2a verify')")


def test_mscclpp_refuses_an_unbalanced_demand_before_solving(tmp_path, capsys):
    u = tmp_path / "U.csv"
    rows = np.ones((8, 8)) - np.eye(8)
    rows[0, 1:4] = (1, 2, 3)
    u.write_text("\n".join(",".join(f"{v:g}" for v in r) for r in rows) + "\n")
    line = (f"{u}: MSCCL++'s fixed-size buffers need every rank to send and receive the same total, and this "
            f"matrix's rows and columns differ; use the MPI path format (--emit mpi) or oneCCL-style XML "
            f"(--emit oneccl)")
    out = tmp_path / "u.json"
    assert main(["compile", "hypercube:3", "--emit", "mscclpp", "--demand", str(u), "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"a2a compile: error: {line}\n" and not out.exists()
    with pytest.raises(A2AError) as exc:
        a2a_compiler.compile("hypercube:3", "mscclpp", demand=str(u))
    assert str(exc.value) == line
    ir = tmp_path / "s.json"
    assert main(["schedule", "hypercube:3", "--demand", str(u), "-q", "-o", str(ir)]) == 0
    capsys.readouterr()
    assert main(["compile", "--from-ir", str(ir), "--emit", "mscclpp", "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == f"a2a compile: error: {line.replace(str(u), u.name)}\n" and not out.exists()


def test_run_takes_an_mscclpp_plan_with_a_demand_in_the_plain_layout():
    from runtimes.mpi.plan import layout_counts
    from dataclasses import replace

    plan = a2a_compiler.compile("hypercube:3", "mscclpp", max_chunks=2).program
    assert (layout_counts(plan, 8) == np.full((8, 8), 2)).all()
    with pytest.raises(A2AError) as exc:
        layout_counts(replace(plan, inplace=True), 8)
    assert str(exc.value) == (f"MSCCL++ plan {plan.name!r} is in place; an all-to-allv (--demand) needs separate send "
                              f"and receive buffers: run it without --demand")


def test_run_lays_an_mscclpp_all_to_allv_out_by_its_recorded_demand(tmp_path):
    """The plan records the volumes; 'a2a run' recomputes T = msccl_counts(D, C) from them, as for MSCCL files, and
    refuses in one line a demand the plan does not move data for."""
    from a2a_compiler.demand import Demand, read_demand
    from runtimes.mpi.plan import layout_counts

    balanced = [[0, 2, 1, 1], [1, 0, 2, 1], [1, 1, 0, 2], [2, 1, 1, 0]]
    plan = a2a_compiler.compile("hypercube:2", "mscclpp", demand=Demand.from_array(balanced)).program
    assert plan.chunks_per_shard == 1 and layout_counts(plan, 4).tolist() == balanced
    (tmp_path / "E.csv").write_text("0,1,2,1\n1,0,1,2\n2,1,0,1\n1,2,1,0\n")
    with pytest.raises(A2AError) as exc:
        layout_counts(plan, 4, read_demand(tmp_path / "E.csv"))
    assert str(exc.value) == (f"MSCCL++ plan {plan.name!r} moves data neither as an all-to-all nor as the all-to-allv "
                              f"of {tmp_path / 'E.csv'}: gpu 0: output chunk o[2] holds chunk (3, 0, 0) (origin, dest, "
                              f"index), expected (2, 0, 1)")


@pytest.mark.mpi
@pytest.mark.skipif(MPICH is None, reason="no mpiexec next to the Python interpreter or on PATH")
def test_mscclpp_plan_runs_an_all_to_allv_byte_exact(tmp_path, capsys):
    """'a2a run plan.json --demand D.csv' on every rank (it raised AttributeError: no 'counts')."""
    plan = tmp_path / "plan.json"
    a2a_compiler.compile("hypercube:3", "mscclpp", max_chunks=2).write(plan)
    d = tmp_path / "Z.csv"
    assert main(["demand", "zipf", "8", "-o", str(d)]) == 0
    p = MPICH.run(8, "-m", "a2a_compiler", "run", str(plan), "--demand", str(d), "--json", "-n", "2", "-w", "1",
                  "-b", "1K", "-e", "4K", "--check", "all", timeout=120)
    assert p.returncode == 0, p.stderr
    assert [r["verified"] for r in json.loads(p.stdout)["results"]] == [True, True, True]


def test_below_the_default_fidelity_target_the_file_is_written_with_a_warning(tmp_path, capsys):
    nv = tmp_path / "nv.xml"
    assert main(["compile", "nvswitch:2,4", *NVSWITCH, "--emit", "msccl", "-q", "-o", str(nv)]) == 1
    assert capsys.readouterr().err == (
        "a2a compile: warning: fidelity 0.6860 is below the default target 0.97: the best chunk count tried is C = 1; "
        "MSCCL runs the schedule as a dataflow, without its steps; run in its steps, --emit oneccl reaches 1.0000 at "
        "C = 2; the file is written; --min-fidelity F sets a target it meets\n")
    assert nv.exists()
    assert main(["compile", "nvswitch:2,4", *NVSWITCH, "--emit", "oneccl", "-q", "-o", str(nv), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["fidelity"] == 1.0
    assert main(["compile", "nvswitch:2,4", *NVSWITCH, "--emit", "msccl", "--min-fidelity", "0.6", "-q",
                 "-o", str(nv)]) == 0
    assert capsys.readouterr().err == ""
    t = tmp_path / "t44.xml"
    assert main(["compile", "torus:4x4", "--emit", "msccl", "--target", "rccl", "--channels", "8", "-q", "-o",
                 str(t)]) == 1
    assert capsys.readouterr().err == (
        "a2a compile: warning: fidelity 0.7565 is below the default target 0.97: the best chunk count tried is C = 1; "
        "C = 2 does not fit: torus:4x4 at 2 chunk(s) per shard: gpu 0 needs 65 thread blocks, over RCCL (ROCm)'s 64 "
        "per GPU; the most this layout fits is 64 (1 copy + one per neighbour, channel and direction): use fewer "
        "--channels or --instances, or --emit mpi (MPI path schedules have no per-rank size limit); the file is "
        "written; --min-fidelity F sets a target it meets\n")
    assert main(["compile", "torus:4x4", "--emit", "msccl", "--target", "rccl", "--channels", "8", "--min-fidelity",
                 "0.97", "-q", "-o", str(tmp_path / "no.xml")]) == 2
    assert capsys.readouterr().err == (
        "a2a compile: error: no chunk count up to 64 reaches fidelity 0.97: the best is 0.7565 at C = 1 (rounded "
        "down) (C = 2 does not fit: torus:4x4 at 2 chunk(s) per shard: gpu 0 needs 65 thread blocks, over RCCL "
        "(ROCm)'s 64 per GPU; the most this layout fits is 64 (1 copy + one per neighbour, channel and direction): "
        "use fewer --channels or --instances, or --emit mpi (MPI path schedules have no per-rank size limit)); "
        "raise --max-chunks or lower --min-fidelity\n")
    assert not (tmp_path / "no.xml").exists()
