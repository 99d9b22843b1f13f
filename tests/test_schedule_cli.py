"""``a2a schedule``: summary, IR file, the §5.2 torus bar, errors without partial output."""

import json

import pytest

from a2a_compiler.chunk import load_schedule
from a2a_compiler.chunk.ir import predicted_time
from a2a_compiler.cli import main


def run(capsys, *argv):
    code = main(["schedule", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_summary_and_file(tmp_path, capsys):
    out_file = tmp_path / "q3.json"
    code, out, err = run(capsys, "hypercube:3", "--method", "tsmcf", "-o", str(out_file), "--json")
    assert code == 0
    s = json.loads(out)
    assert (s["method"], s["kind"], s["steps"], s["chunks_per_shard"]) == ("tsmcf", "link", 3, 3)
    assert s["predicted_time"] == pytest.approx(4.0) and s["lp_time"] == pytest.approx(4.0)
    assert s["fidelity"] == pytest.approx(1.0)
    assert "tsmcf: 3 steps -> sum U_t = 4" in err            # progress on stderr
    sch = load_schedule(out_file)
    assert predicted_time(sch) == pytest.approx(4.0)


def test_torus_bottleneck_fabric_fidelity(tmp_path, capsys):
    """§5.2 fabric (25 Gbit/s links, 100 Gbit/s host, host forwarding): F = 2/27, lp_time 13.5."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    fab = ["--link-bw", "25Gbps", "--host-bw", "100Gbps", "--forwarding", "host"]
    code, out, _ = run(capsys, "torus:3x3x3", *fab, "-o", str(a), "--json", "-q")
    assert code == 0
    s = json.loads(out)
    assert s["lp_time"] == pytest.approx(13.5, rel=1e-7)
    assert (s["steps"], s["chunks_per_shard"]) == (3, 2)
    assert s["predicted_time"] == 13.875      # = 111/8: host-NIC terms come in units of 1/(C·hc) = 1/8
    assert s["fidelity"] == pytest.approx(13.5 / 13.875, rel=1e-7)
    assert s["fidelity"] >= 0.97
    # determinism: a second build writes the same bytes
    assert run(capsys, "torus:3x3x3", *fab, "-o", str(b), "-q")[0] == 0
    assert a.read_bytes() == b.read_bytes()


def test_human_summary(tmp_path, capsys):
    code, out, _ = run(capsys, "bipartite:4", "-o", str(tmp_path / "k44.json"), "-q")
    assert code == 0
    assert "2 steps, 64 transfers, 4 chunks per shard" in out    # all 32 links busy in both steps
    assert "fidelity   1.0000" in out


@pytest.mark.parametrize("argv, message", [
    (["hypercube:3", "--steps", "2"], "--steps 2: a hypercube:3 schedule needs at least diameter = 3 steps"),
    (["hypercube:3", "--host-bw", "100Gbps"], "--host-bw needs --link-bw"),
    (["file:/nonexistent/topo.json"], "cannot read /nonexistent/topo.json: No such file or directory"),
])
def test_errors_leave_no_file(tmp_path, capsys, argv, message):
    out_file = tmp_path / "x.json"
    code, out, err = run(capsys, *argv, "-o", str(out_file), "-q")
    assert code == 2
    assert err.startswith("a2a schedule: error: ") and message in err
    assert "Traceback" not in err
    assert not out_file.exists()


def test_bad_max_chunks_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        run(capsys, "hypercube:3", "--max-chunks", "0", "-o", str(tmp_path / "x.json"))
    assert exc.value.code == 2
    assert "--max-chunks: must be a positive integer, got '0'" in capsys.readouterr().err


@pytest.mark.parametrize("method, edit, message", [
    ("tsmcf", {"lp_time": 10}, "the IR records the LP time 10, but solving it again on its links and fabric gives 4"),
    ("tsmcf", {"spec": "complete:8"}, "the IR records the link MCF time 4, but solving it again on its spec "
                                      "complete:8 and fabric gives 1"),
    ("mcf-extp", {"info": {"mcf_time": 3.5}}, "the IR records the link MCF time 3.5, but solving it again on its "
                                              "spec hypercube:3 and fabric gives 4"),
    # IRs that do not record what their LP needs (pmcf's candidate paths were not recorded before)
    ("pmcf", {"info": {"mcf_time": 4.0}}, "candidate paths"),
    ("tsmcf", {"info": {"mcf_time": 4.0}}, "steps"),
])
def test_compile_from_ir_solves_its_lp_times_again(tmp_path, capsys, method, edit, message):
    """issue 34, item 6: compile --from-ir printed an edited lp_time as certified (fidelity 2.5), and the MCF of
    a spec the IR no longer matches."""
    ir, out = tmp_path / "s.json", tmp_path / "o.xml"
    assert main(["schedule", "hypercube:3", "--method", method, "-o", str(ir), "-q"]) == 0
    capsys.readouterr()
    emit = "msccl" if method == "tsmcf" else "mpi"
    assert main(["compile", "--from-ir", str(ir), "--emit", emit, "-q", "--json", "-o", str(out)]) == 0
    assert json.loads(capsys.readouterr().out)["fidelity"] == 1.0
    out.unlink()
    ir.write_text(json.dumps({**json.loads(ir.read_text()), **edit}))
    assert main(["compile", "--from-ir", str(ir), "--emit", emit, "-q", "-o", str(out)]) == 2
    want = (f"{message}: the IR was edited or its spec, fabric or demand changed; make it again with 'a2a schedule'"
            if message.startswith("the IR") else f"the IR records no {message} for its {method} LP, so its LP time "
                                                 f"cannot be certified; make it again with 'a2a schedule'")
    assert capsys.readouterr().err == f"a2a compile: error: {want}\n" and not out.exists()


def test_compile_from_ir_checks_the_recorded_lp_options(tmp_path, capsys):
    ir = tmp_path / "s.json"
    assert main(["schedule", "hypercube:3", "--method", "pmcf", "-o", str(ir), "-q"]) == 0
    capsys.readouterr()
    s = json.loads(ir.read_text())
    ir.write_text(json.dumps({**s, "info": {**s["info"], "solve_options": ["x"]}}))
    assert main(["compile", "--from-ir", str(ir), "--emit", "mpi", "-q", "-o", str(tmp_path / "o.xml")]) == 2
    assert capsys.readouterr().err == ("a2a compile: error: the IR's solve_options \"['x']\" is not what 'a2a "
                                       "schedule' records; make it again\n")
