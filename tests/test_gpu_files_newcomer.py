"""GPU-format paths tried as a newcomer would (issue 33's follow-up pass): each defect found, its exact message
and exit status."""

import pytest

import a2a_compiler
from a2a_compiler.cli import main
from a2a_compiler.demand import Demand, read_demand
from a2a_compiler.errors import A2AError

BALANCED4 = [[0, 2, 1, 1], [1, 0, 2, 1], [1, 1, 0, 2], [2, 1, 1, 0]]


@pytest.fixture(scope="module")
def alltoallv_plan():
    """An MSCCL++ all-to-allv plan of hypercube:2 (C = 1), compiled for a balanced demand."""
    return a2a_compiler.compile("hypercube:2", "mscclpp", demand=Demand.from_array(BALANCED4))


def test_an_unbalanced_demand_on_an_mscclpp_plan_names_mscclpp(alltoallv_plan, tmp_path, capsys):
    """'a2a verify plan.json --demand U.csv' and 'a2a run' named MSCCL's buffers for an MSCCL++ plan."""
    from runtimes.mpi.alltoallv import layout_counts

    plan = tmp_path / "moe.json"
    alltoallv_plan.write(plan)
    u = tmp_path / "U.csv"
    u.write_text("0,1,2,3\n1,0,1,1\n1,1,0,1\n1,1,1,0\n")
    line = (f"{u}: MSCCL++'s fixed-size buffers need every rank to send and receive the same total, and this "
            f"matrix's rows and columns differ; use the MPI path format (--emit mpi) or oneCCL-style XML "
            f"(--emit oneccl)")
    assert main(["verify", str(plan), "--demand", str(u)]) == 2
    assert capsys.readouterr().err == f"a2a verify: error: {line}\n"
    with pytest.raises(A2AError) as exc:
        layout_counts(alltoallv_plan.program, 4, read_demand(u))
    assert str(exc.value) == line


@pytest.fixture(scope="module")
def nv_plan():
    """The MSCCL++ plan of nvswitch:2,4 (C = 2) as its decoded JSON text."""
    return a2a_compiler.compile("nvswitch:2,4", "mscclpp").text


@pytest.mark.parametrize("old, new, why", [
    ('"buffer_alignment": 16', '"buffer_alignment": NaN', "invalid JSON: NaN is not a JSON value"),
    ('"buffer_alignment": 16', '"buffer_alignment": 1' + "0" * 5000,
     "invalid JSON: the number 10000000000000000000... is out of range"),
    ('"buffer_alignment": 16', '"buffer_alignment": 1e999', "invalid JSON: the number 1e999 is out of range"),
    ('"buffer_alignment": 16', '"buffer_alignment": 0', ".buffer_alignment must lie in 1 .. 2**64-1, got 0"),
    ('"min_message_size": 0', '"min_message_size": -1', ".min_message_size must lie in 0 .. 2**64-1, got -1"),
    ('"min_message_size": 0', '"min_message_size": 2.5', ".min_message_size must be an int, got 2.5"),
    ('"reuse_resources": false', '"reuse_resources": 0', ".reuse_resources must be a bool, got 0"),
])
def test_plan_options_the_executor_cannot_read_are_refused(nv_plan, tmp_path, capsys, old, new, why):
    """NaN, a number beyond the doubles (nlohmann::json refuses both; a 5001-digit integer was a traceback),
    buffer_alignment 0 (checkMessageSize divides by it) and a negative size were read as the defaults: VALID."""
    assert old in nv_plan
    plan = tmp_path / "plan.json"
    plan.write_text(nv_plan.replace(old, new, 1))
    assert main(["verify", str(plan)]) == 2
    assert capsys.readouterr().err == f"a2a verify: error: {plan}: {why}\n"


@pytest.mark.parametrize("name, text, status, err", [
    ("null.json", "null\n", 0, "a2a verify: {p}: skipped, not a schedule (--skip-other)\n"),
    ("text.json", '"hello"\n', 0, "a2a verify: {p}: skipped, not a schedule (--skip-other)\n"),
    ("empty.json", "", 2, "a2a verify: error: {p}: empty file, not a schedule\n"),
    ("blank.xml", "\n", 2, "a2a verify: error: {p}: empty file, not a schedule\n"),
])
def test_the_hook_reads_json_scalars_as_json_and_names_an_empty_file(tmp_path, capsys, name, text, status, err):
    """The pre-commit hook's 'a2a verify --skip-other': well-formed JSON whose top level is not an object or array
    was 'malformed XML at line 1' (exit 2), and so was an empty file."""
    p = tmp_path / name
    p.write_text(text)
    assert main(["verify", "--skip-other", str(p)]) == status
    assert capsys.readouterr().err == err.format(p=p)


def test_a_program_over_rccls_thread_blocks_at_one_channel_is_not_told_to_use_fewer(tmp_path, capsys):
    """complete:33 for RCCL: 1 copy + 32 neighbours x 2 directions at the one channel and instance it already has;
    the refusal said 'use fewer --channels or --instances', which cannot help."""
    out = tmp_path / "c33.xml"
    assert main(["compile", "complete:33", "--emit", "msccl", "--target", "rccl", "-q", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        "a2a compile: error: complete:33 at 1 chunk(s) per shard: gpu 0 needs 65 thread blocks, over RCCL (ROCm)'s "
        "64 per GPU; the most this layout fits is 64 (1 copy + one per neighbour, channel and direction) and it has "
        "one channel already: use --emit mpi (MPI path schedules have no per-rank size limit)\n")
    assert not out.exists()


def test_one_fidelity_is_printed_one_way(tmp_path, capsys):
    """nvswitch:2,4's host-bottlenecked MSCCL++ plan: the LP line said 0.5959 and the trade-off line and warning
    0.5958, the same number (0.595848...) rounded and rounded down; every summary now rounds down, as the warning
    must (0.96996 is below 0.97).  verify prints what compile printed."""
    out = tmp_path / "nvb.json"
    assert main(["compile", "nvswitch:2,4", "--link-bw", "400Gbps", "--nvlink-bw", "3.6Tbps", "--host-bw", "800Gbps",
                 "--emit", "mscclpp", "-q", "-o", str(out)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[2:4] == ["LP         5 link-times, tsmcf's own LP (certified): fidelity 0.5958",
                          "MCF        5 link-times, the link MCF optimum (certified): ratio 0.5958"]
    assert lines[5].startswith("trade-off  C = 2, a count mscclpp selects at power-of-two sizes, gives fidelity "
                               "0.5958;")
    assert main(["verify", str(out)]) == 0
    assert "  LP time            5 link-times, tsmcf's own LP (recorded); fidelity 0.5958" in capsys.readouterr().out


def test_a_plan_lowered_from_an_ir_is_not_told_to_drop_any_chunks(tmp_path, capsys):
    """'a2a schedule hypercube:3' keeps C = 3; the plan 'a2a compile --from-ir' lowers from it runs at no power-of-two
    size, and verify's advice named --any-chunks, which was never given."""
    ir, plan = tmp_path / "s.json", tmp_path / "p.json"
    assert main(["schedule", "hypercube:3", "-q", "-o", str(ir)]) == 0
    assert main(["compile", "--from-ir", str(ir), "--emit", "mscclpp", "-q", "-o", str(plan)]) == 0
    assert ("sizes      mscclpp runs it at per-peer sizes a multiple of 48 bytes: at no power-of-two size (the "
            "executor throws 'Input or output size is not aligned with buffer alignment or chunks')"
            in capsys.readouterr().out.splitlines())
    assert main(["verify", str(plan), "--no-lp"]) == 0
    assert ("  warning: mscclpp runs it at per-peer sizes a multiple of 48 bytes: at no power-of-two size (the "
            "executor throws 'Input or output size is not aligned with buffer alignment or chunks'); 'a2a compile "
            "SPEC' chooses a count it selects (not with --any-chunks or --from-ir)"
            in capsys.readouterr().out.splitlines())


def test_a_switched_topologys_program_is_named_by_its_spec():
    """The default name is SPEC-METHOD (--name's help); on nvswitch:2,4 it was the hosts-through-switches graph's
    'nvswitch:2,4__hosts_through_switches_-tsmcf'."""
    for emit in ("msccl", "mscclpp"):
        assert a2a_compiler.compile("nvswitch:2,4", emit).program.name == "nvswitch:2,4-tsmcf"


def test_the_hook_skips_json_with_one_key_a_plan_has_and_checks_a_plan_missing_one(tmp_path, capsys):
    """A server's config ('protocol') or a cluster's ('gpus': 8) was read as a broken plan: exit 2 on commit."""
    for name, text in (("server.json", '{"protocol": "http", "port": 80}'), ("cluster.json", '{"gpus": 8}')):
        (tmp_path / name).write_text(text)
        assert main(["verify", "--skip-other", str(tmp_path / name)]) == 0
        assert capsys.readouterr().err == f"a2a verify: {tmp_path / name}: skipped, not a schedule (--skip-other)\n"
    plan = tmp_path / "plan.json"
    plan.write_text('{"collective": "alltoall", "protocol": "Simple", "inplace": false}')
    assert main(["verify", "--skip-other", str(plan)]) == 2
    assert capsys.readouterr().err == f"a2a verify: error: {plan}: plan is missing 'gpus'\n"


def test_verify_refuses_a_uniform_demand_of_another_size(tmp_path, capsys):
    """A uniform matrix was dropped (the plain all-to-all) before its size was checked: a 2 x 2 one on an 8-rank plan
    was VALID; 'a2a run' refused it."""
    plan = tmp_path / "hc3.json"
    a2a_compiler.compile("hypercube:3", "mscclpp", max_chunks=1).write(plan)
    (tmp_path / "D2.csv").write_text("0,1\n1,0\n")
    assert main(["verify", str(plan), "--demand", str(tmp_path / "D2.csv")]) == 2
    assert capsys.readouterr().err == (f"a2a verify: error: {tmp_path / 'D2.csv'}: the demand matrix is 2 x 2, but "
                                       f"the file has 8 ranks\n")
    (tmp_path / "U8.csv").write_text("\n".join(",".join("0" if i == j else "1" for j in range(8)) for i in range(8)))
    assert main(["verify", str(plan), "--demand", str(tmp_path / "U8.csv"), "--no-lp"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "VALID"


def test_verify_names_what_a_json_file_that_is_no_plan_is(tmp_path, capsys):
    """'a2a verify s.json' on the IR of 'a2a schedule' said "plan is missing 'gpus'"."""
    ir = tmp_path / "s.json"
    assert main(["schedule", "hypercube:2", "-q", "-o", str(ir)]) == 0
    capsys.readouterr()
    assert main(["verify", str(ir)]) == 2
    assert capsys.readouterr().err == (f"a2a verify: error: {ir}: the schedule IR of 'a2a schedule', not a lowered "
                                       f"schedule: lower it with 'a2a compile --from-ir {ir} --emit FORMAT'\n")
    (tmp_path / "cfg.json").write_text('{"protocol": "http"}')
    assert main(["verify", str(tmp_path / "cfg.json")]) == 2
    assert capsys.readouterr().err == (f"a2a verify: error: {tmp_path / 'cfg.json'}: not a schedule: a JSON object "
                                       f"without 2 of an execution plan's keys (gpus, collective, protocol, inplace, "
                                       f"a2a_record)\n")


def test_a_uniform_demand_on_an_all_to_allv_plan_is_another_demand(alltoallv_plan, tmp_path, capsys):
    """--demand of a uniform matrix was dropped before the recorded demand was read, so an all-to-allv plan was
    checked against its own demand and called VALID."""
    plan = tmp_path / "moe.json"
    alltoallv_plan.write(plan)
    u = tmp_path / "U4.csv"
    u.write_text("0,1,1,1\n1,0,1,1\n1,1,0,1\n1,1,1,0\n")
    assert main(["verify", str(plan), "--demand", str(u), "--no-lp"]) == 1
    out = capsys.readouterr().out
    assert (f"    error: the file was compiled for another demand matrix (volumes sha256 "
            f"{Demand.from_array(BALANCED4).sha256[:12]}), not {u} ({read_demand(u).sha256[:12]})") in out.splitlines()
