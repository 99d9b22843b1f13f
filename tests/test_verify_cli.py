"""``a2a verify`` and ``a2a compile`` end to end: exit codes, JSON, atomic byte-identical output."""

import json
from pathlib import Path

import pytest

from a2a_compiler.cli import main

DATA = Path(__file__).resolve().parent / "data"
ALLPAIRS = DATA / "msccl_tools_allpairs_3.xml"
ROOT = Path(__file__).resolve().parents[1]


def test_verify_valid_file_exit_0(capsys):
    assert main(["verify", str(ALLPAIRS), "--topology", "complete:3"]) == 0
    out = capsys.readouterr().out
    assert "  executor rules     ok" in out and "ratio 1.0000" in out and out.rstrip().endswith("VALID")


def test_verify_json(capsys):
    assert main(["verify", str(ALLPAIRS), "--topology", "complete:3", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert (d["valid"], d["format"], d["ranks"], d["errors"]) == (True, "msccl", 3, [])
    assert d["predicted_time"] == 1.0 and abs(d["mcf_time"] - 1.0) < 1e-6 and d["mcf_ratio"] == 1.0
    assert (d["spec"], d["method"], d["lp_time"], d["fidelity"]) == ("complete:3", None, None, None)  # no record


@pytest.mark.parametrize("spec, emit, fabric", [
    ("torus:3x3x3", "oneccl", ["--host-bw", "100Gbps"]),                  # the example
    ("torus:3x3 --remove-links 1 --seed 3", "msccl", ["--host-bw", "50Gbps"]),
    ("torus:3x3", "mpi", ["--host-bw", "50Gbps", "--forwarding", "nic"]),
])
def test_compile_and_verify_agree_on_every_shared_key_without_flags(tmp_path, capsys, spec, emit, fabric):
    """issue #18: 'a2a verify t3.xml' predicted 10.5 where compile said 13.875 (the fabric was not recorded)."""
    f = tmp_path / f"t.{emit}.xml"
    fabric = ["--link-bw", "25Gbps", *fabric]
    low = emit == "msccl"        # the punctured torus's MSCCL program is below the default fidelity target
    assert main(["compile", *spec.split(), *fabric, "--emit", emit, "-o", str(f), "-q", "--json"]) == (1 if low else 0)
    compiled = json.loads(capsys.readouterr().out)
    assert (compiled["fidelity"] < 0.97) == low
    assert main(["verify", str(f), "--json"]) == 0
    out = capsys.readouterr()
    verified = json.loads(out.out)
    shared = sorted(set(compiled) & set(verified))
    assert shared == ["chunks_per_shard", "fabric", "fidelity", "format", "json_version", "lp_time", "mcf_ratio",
                      "mcf_time", "method", "predicted_time", "program", "ranks", "sizes", "spec", "target", "valid"]
    assert {k: verified[k] for k in shared} == {k: compiled[k] for k in shared}
    assert out.err == "" and verified["overrides"] == [] and verified["checks"]["topology"] == "pass"
    host = 12.5e9 if emit == "oneccl" else 6.25e9
    assert verified["fabric"] == {"link_bw_Bps": 3.125e9, "host_bw_Bps": host,
                                  "forwarding": "nic" if emit == "mpi" else "host"}
    if emit == "oneccl":   # the example
        assert (verified["predicted_time"], verified["lp_time"]) == (13.875, 13.5)
    if emit == "msccl":    # the recorded spec is rebuilt with its puncturing
        assert verified["spec"] == "torus:3x3 -links 1 seed=3"


def test_verify_flags_override_the_record_with_a_warning(tmp_path, capsys):
    f = tmp_path / "t.xml"
    assert main(["compile", "torus:3x3", "--link-bw", "25Gbps", "--host-bw", "50Gbps", "--emit", "oneccl",
                 "-o", str(f), "-q"]) == 0
    capsys.readouterr()
    assert main(["verify", str(f), "--link-bw", "25Gbps"]) == 0          # the recorded value: no warning
    assert capsys.readouterr().err == ""
    assert main(["verify", str(f), "--host-bw", "25Gbps", "--json"]) == 0
    out = capsys.readouterr()
    d = json.loads(out.out)
    note = ("the fabric given (link 25 Gbit/s, host 25 Gbit/s, host forwarding) differs from the one the file was "
            "compiled for (link 25 Gbit/s, host 50 Gbit/s, host forwarding): times are predicted on the one given")
    assert d["overrides"][0] == note and out.err.splitlines()[0] == f"a2a verify: warning: {f}: {note}"
    assert d["fabric"]["host_bw_Bps"] == 25e9 / 8 and d["mcf_time"] > d["lp_time"] and d["fidelity"] is None
    assert main(["verify", str(f), "--topology", "torus:3x4"]) == 1
    out = capsys.readouterr()
    assert ("--topology torus:3x4 differs from the spec the file was compiled for (torus:3x3): its links are checked "
            "against --topology") in out.err
    assert "the program has 9 ranks but topology torus:3x4 has 12 hosts" in out.out


def test_verify_invalid_exit_1(tmp_path, capsys):
    bad = tmp_path / "bad.xml"
    bad.write_bytes(b'<?xml version="1.0"?>\n' + ALLPAIRS.read_bytes())
    assert main(["verify", str(bad), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["valid"] is False
    assert d["errors"] == ["executor rules: line 1: XML declaration <?xml ...?> is not allowed "
                           "(the executor's tokenizer fails on '?')"]


def test_verify_wrong_topology(capsys):
    assert main(["verify", str(ALLPAIRS), "--topology", "ring:4"]) == 1
    assert "the program has 3 ranks but topology ring:4 has 4 hosts" in capsys.readouterr().out


@pytest.mark.parametrize("content, message", [
    (b'<!DOCTYPE algo [<!ENTITY x SYSTEM "file:///etc/passwd">]><algo name="&x;"/>', "DOCTYPE/ENTITY"),
    (b"<algo", "malformed XML"),
    (b"<html/>", "unknown schedule format"),
])
def test_verify_unreadable_exit_2(tmp_path, capsys, content, message):
    f = tmp_path / "x.xml"
    f.write_bytes(content)
    assert main(["verify", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("a2a verify: error: ") and message in err and "Traceback" not in err


def test_compile_msccl_oneccl_byte_identical_and_verified(tmp_path, capsys):
    outs = {}
    for emit in ("msccl", "oneccl"):
        a, b = tmp_path / f"a-{emit}.xml", tmp_path / f"b-{emit}.xml"
        for f in (a, b):
            assert main(["compile", "ring:4", "--emit", emit, "-o", str(f), "-q"]) == 0
        assert a.read_bytes() == b.read_bytes()
        outs[emit] = capsys.readouterr().out
        assert main(["verify", str(a), "--topology", "ring:4", "--json"]) == 0
        d = json.loads(capsys.readouterr().out)
        assert d["valid"] and d["format"] == emit and d["ranks"] == 4
    assert "LP         2 link-times, tsmcf's own LP (certified): fidelity 1.0000" in outs["msccl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-msccl.xml", "a-oneccl.xml", "b-msccl.xml", "b-oneccl.xml"]


BALANCED = "0,2,1,1\n1,0,2,1\n1,1,0,2\n2,1,1,0\n"   # rows and columns sum to 4: MSCCL can hold it


@pytest.mark.parametrize("spec, emit, extra", [
    ("nvswitch:2,4", "mscclpp", ["--link-bw", "400Gbps", "--nvlink-bw", "3.6Tbps", "--max-chunks", "2"]),
    ("complete:4", "msccl", ["--demand", "D.csv"]),
])
def test_plans_nvlink_and_demands_are_recorded(tmp_path, capsys, monkeypatch, spec, emit, extra):
    """MSCCL++ plans record their spec and fabric (NVLink bandwidth included, the physical spec of a switched
    topology) in "a2a_record"; an MSCCL all-to-allv file its demand's volumes: verify needs no option."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "D.csv").write_text(BALANCED)
    assert main(["compile", spec, "--emit", emit, *extra, "-o", "f", "-q", "--json"]) == 0
    compiled = json.loads(capsys.readouterr().out)
    assert main(["verify", "f", "--json"]) == 0
    verified = json.loads(capsys.readouterr().out)
    keys = ("spec", "fabric", "predicted_time", "lp_time", "mcf_time", "fidelity", "mcf_ratio")
    assert {k: verified[k] for k in keys} == {k: compiled[k] for k in keys} and verified["overrides"] == []
    assert verified["checks"]["topology"] == "pass" and verified["spec"] == spec
    if emit == "mscclpp":
        assert verified["fabric"]["nvlink_bw_Bps"] == 4.5e11 and verified["predicted_time"] == 4
        assert main(["verify", "f", "--nvlink-bw", "400Gbps", "--json"]) == 0     # NVLink = NIC: slower
        other = json.loads(capsys.readouterr().out)
        assert other["predicted_time"] == 8 and other["fidelity"] is None and len(other["overrides"]) == 1
    else:
        assert compiled["demand"]["sha256"] == json.loads((tmp_path / "f").read_text().split("a2a-record ")[1]
                                                           .split(" -->")[0])["demand"]["sha256"]
        (tmp_path / "E.csv").write_text("0,1,2,1\n1,0,1,2\n2,1,0,1\n1,2,1,0\n")
        assert main(["verify", "f", "--demand", "E.csv", "--json"]) == 1            # another balanced matrix
        assert "compiled for another demand matrix" in " ".join(json.loads(capsys.readouterr().out)["errors"])


def test_an_mscclpp_all_to_allv_verifies_under_its_demand_and_target_is_a_warning(tmp_path, capsys, monkeypatch):
    """An MSCCL++ plan of a balanced all-to-allv verifies under --demand as compiled (its record holds the volumes),
    the plain plan is priced under it, reused; --target, which names an MSCCL executor, is a one-line warning (an
    error with --strict), not ignored."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "D.csv").write_text(BALANCED)
    assert main(["compile", "hypercube:2", "--emit", "mscclpp", "--demand", "D.csv", "-o", "f", "-q", "--json"]) == 0
    compiled = json.loads(capsys.readouterr().out)
    assert main(["verify", "f", "--demand", "D.csv", "--json"]) == 0
    verified = json.loads(capsys.readouterr().out)
    keys = ("spec", "predicted_time", "lp_time", "mcf_time", "fidelity", "mcf_ratio", "sizes")
    assert {k: verified[k] for k in keys} == {k: compiled[k] for k in keys} and verified["warnings"] == []
    (tmp_path / "E.csv").write_text("0,1,2,1\n1,0,1,2\n2,1,0,1\n1,2,1,0\n")
    assert main(["verify", "f", "--demand", "E.csv", "--json"]) == 1            # another balanced matrix
    assert "compiled for another demand matrix" in json.loads(capsys.readouterr().out)["errors"][0]
    assert main(["compile", "hypercube:2", "--emit", "mscclpp", "-o", "plain", "-q"]) == 0
    capsys.readouterr()
    assert main(["verify", "plain", "--demand", "D.csv", "--no-lp", "--json"]) == 0   # the plain plan, reused
    d = json.loads(capsys.readouterr().out)
    assert d["predicted_time"] == compiled["uniform_reused"]["predicted_time"] == 3 and d["warnings"] == [
        "the file is the plain all-to-all: priced for D.csv reused, with its routes and steps unchanged and "
        "fixed-size chunks padded to the largest pair's volume"]
    warning = ("--target rccl names an MSCCL executor and applies to MSCCL XML only; an MSCCL++ plan runs on the "
               "MSCCL++ executor, whose rules and size rule are checked")
    assert main(["verify", "f", "--target", "rccl", "--no-lp", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["warnings"] == [warning] and d["target"] is None
    assert main(["verify", "f", "--target", "rccl", "--no-lp", "--strict"]) == 1
    assert f"    error: (--strict) {warning}" in capsys.readouterr().out.splitlines()


def test_compile_from_ir(tmp_path, capsys):
    ir = tmp_path / "s.json"
    assert main(["schedule", "ring:4", "-o", str(ir), "-q"]) == 0
    direct, lowered = tmp_path / "direct.xml", tmp_path / "lowered.xml"
    assert main(["compile", "ring:4", "--emit", "msccl", "-o", str(direct), "-q"]) == 0
    assert main(["compile", "--from-ir", str(ir), "--emit", "msccl", "-o", str(lowered)]) == 0
    assert direct.read_bytes() == lowered.read_bytes()
    capsys.readouterr()
    assert main(["compile", "--from-ir", str(ir), "--emit", "mpi", "-o", str(tmp_path / "x.xml")]) == 2
    assert "--emit mpi needs a path schedule" in capsys.readouterr().err
    assert main(["compile", "--from-ir", str(ir), "--emit", "msccl", "--link-bw", "25Gbps", "-o", str(lowered)]) == 2
    assert "--link-bw: the schedule is already solved and chunked" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["ring:4", "--emit", "msccl", "--method", "mcf-extp"], "--emit msccl needs a link schedule: use --method tsmcf"),
    (["ring:4", "--emit", "mpi", "--method", "tsmcf"], "--emit mpi needs a path schedule"),
    (["ring:4", "--emit", "oneccl", "--channels", "2"], "--channels does not apply to --emit oneccl (only to --emit "
                                                         "msccl)"),
    (["--emit", "msccl"], "give either SPEC or --from-ir FILE.json"),
])
def test_compile_user_errors_write_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "x.xml"
    assert main(["compile", *argv, "-o", str(out), "-q"]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_junit_report_has_one_testcase_per_file(tmp_path, capsys):
    from lxml import etree

    good = ROOT / "schedules" / "hypercube-3-tsmcf.oneccl.xml"
    bad = tmp_path / "bad.xml"
    bad.write_bytes(b'<?xml version="1.0"?>\n' + ALLPAIRS.read_bytes())
    missing = tmp_path / "missing.xml"
    report = tmp_path / "verify.xml"
    files = [str(good), str(bad), str(missing)]
    assert main(["verify", *files, "--junit", str(report)]) == 2          # an unreadable file: 2 beats 1
    out, err = capsys.readouterr()
    assert [line for line in out.splitlines() if line in ("VALID", "INVALID")] == ["VALID", "INVALID"]
    assert err == f"a2a verify: error: cannot read {missing}: No such file or directory\n"
    root = etree.parse(str(report)).getroot()
    assert root.tag == "testsuites" and (root.get("tests"), root.get("failures"), root.get("errors")) == ("3", "1", "1")
    (suite,) = root
    cases = suite.findall("testcase")
    assert [(c.get("classname"), c.get("name")) for c in cases] == [("a2a.verify", f) for f in files]
    assert [child.tag for c in cases for child in c] == ["failure", "error"]
    first = ("executor rules: line 1: XML declaration <?xml ...?> is not allowed (the executor's tokenizer fails "
             "on '?')")
    failure, error = cases[1][0], cases[2][0]
    assert (failure.get("type"), failure.get("message"), failure.text) == ("invalid schedule",
                                                                           f"1 error(s); first: {first}", first)
    assert (error.get("type"), error.get("message")) == ("unreadable", f"cannot read {missing}: No such file or directory")
    assert main(["verify", str(good), "--junit", str(report)]) == 0
    capsys.readouterr()
    assert etree.parse(str(report)).getroot().get("failures") == "0"


def test_several_files_json(tmp_path, capsys):
    good = ROOT / "schedules" / "bipartite-4-tsmcf.oneccl.xml"
    assert main(["verify", str(good), str(ALLPAIRS), "--json", "--no-lp"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["json_version"] == 1 and d["valid"] is True
    assert [(f["file"], f["spec"], f["method"]) for f in d["files"]] == [(str(good), "bipartite:4", "tsmcf"),
                                                                          (str(ALLPAIRS), None, None)]


def test_demo_files_are_what_compile_writes(tmp_path, capsys):
    """issue #18: the demo's MSCCL file for torus:3x3x3 was C=2, fidelity 0.939 (C chosen on a shared schedule
    IR, lowered with --from-ir); the demo now runs 'a2a compile' per format, which chooses C on the program
    (torus:3x3x3: MSCCL C=8 with --target nccl (issue #33: a count NCCL's executor selects), 0.9791; oneCCL C=2,
    0.9730)."""
    fabric = ["--link-bw", "25Gbps", "--host-bw", "100Gbps"]
    assert main(["demo", "--spec", "torus:3x3", "--dir", str(tmp_path / "demo"), "--no-run"]) == 0
    for emit, target in (("msccl", ["--target", "nccl"]), ("oneccl", [])):
        assert main(["compile", "torus:3x3", *fabric, "--emit", emit, *target, "-o", str(tmp_path / f"{emit}.xml"),
                     "-q"]) == 0
        assert (tmp_path / "demo" / f"{emit}.xml").read_bytes() == (tmp_path / f"{emit}.xml").read_bytes()
    out = capsys.readouterr().out
    assert "== 2. verify against the topology and fabric the files record" in out and out.count("\nVALID\n") == 2


def _mpi_file(tmp_path, capsys, spec="complete:3", **replace) -> Path:
    """An MPI path file 'a2a compile SPEC' writes, with text replaced (``old=new`` pairs as a dict's items)."""
    f = tmp_path / "p.mpi.xml"
    assert main(["compile", spec, "--emit", "mpi", "-o", str(f), "-q"]) == 0
    capsys.readouterr()
    text = f.read_text()
    for old, new in replace.values():
        assert old in text
        text = text.replace(old, new)
    f.write_text(text)
    return f


def test_a_long_route_is_echoed_as_its_first_nodes_and_length(tmp_path, capsys):
    route = " ".join(["0", "1"] * 5000) + " 2"
    f = _mpi_file(tmp_path, capsys, r=('route="0 2"', f'route="{route}"'))
    assert main(["verify", str(f), "--json", "--no-lp"]) == 1
    assert json.loads(capsys.readouterr().out)["errors"] == [
        "data movement: rank 0 send to 2 route_id 0: route 0 1 0 1 0 1 0 1 ... (10001 nodes) visits a node twice"]
    f.write_text(f.read_text().replace(route, route.replace(" 1 ", " x ", 1)))
    assert main(["verify", str(f)]) == 2
    assert capsys.readouterr().err == (
        f"a2a verify: error: {f}: line 5: <send> attribute route='0 x 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 1 0 "
        f"1 0 1 '... (20001 characters) is not a list of integers (ASCII digits, no leading zero, an optional '-') separated by spaces\n")


def test_a_recorded_spec_of_another_size_is_not_built(tmp_path, capsys):
    """complete:4000 recorded in a 3-rank file took 34.6 s and 6.9 GB to build before failing."""
    f = _mpi_file(tmp_path, capsys, s=('"spec": "complete:3"', '"spec": "complete:4000"'))
    assert main(["verify", str(f), "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["errors"] == ["topology: the program has 3 ranks but topology complete:4000 has 4000 hosts"]
    f.write_text(f.read_text().replace("complete:4000", "complete:5 -nodes 2 seed=1"))  # 3 hosts: built
    assert main(["verify", str(f), "--json", "--no-lp"]) == 0
    assert json.loads(capsys.readouterr().out)["checks"]["topology"] == "pass"


def test_compile_from_ir_refuses_a_spec_of_another_size(tmp_path, capsys):
    ir, out = tmp_path / "s.json", tmp_path / "x.xml"
    assert main(["schedule", "ring:4", "-o", str(ir), "-q"]) == 0
    ir.write_text(ir.read_text().replace('"spec": "ring:4"', '"spec": "complete:4000"'))
    capsys.readouterr()
    assert main(["compile", "--from-ir", str(ir), "--emit", "msccl", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (f"a2a compile: error: {ir}: spec 'complete:4000' has 4000 hosts, but n_ranks "
                                       "is 4\n")
    assert not out.exists()


def test_a_recorded_spec_that_cannot_be_built_is_a_warning_not_a_certified_valid(tmp_path, capsys):
    f = _mpi_file(tmp_path, capsys, s=('"spec": "complete:3"', '"spec": "bogus:3"'), m=('"mcf_time": 1.0', '"mcf_time": 0.25'))
    warning = ("the topology check could not run: the recorded spec 'bogus:3' cannot be built here (unknown topology "
               "family 'bogus' in 'bogus:3'; known families: complete:N, ring:N, bipartite:n, hypercube:d, "
               "twisted-hypercube:d, torus:K1xK2x...[,p=P], petersen, genkautz:N,d, slimfly:q[,p=P], "
               "xpander:d,l[,seed=S], jellyfish:N,d[,seed=S], dragonfly:a,h,p, hyperx:S,L[,p=P], "
               "fattree:k,n[,merge=M][,hosts=H], vartree:K0,M0,M1,...[,w=W|W0xW1x...][,merge=M][,hosts=H], "
               "nvswitch:NODES,GPUS[,fabric=rail|ring|complete|hypercube|torusK1xK2...], file:PATH, ibnet:PATH); "
               "give --topology")
    assert main(["verify", str(f)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[5:] == ["  topology           skipped (the recorded spec cannot be built here (see the warning))",
                         f"  warning: {warning}",
                         "  predicted time     1 link-times; busiest link 0->1 carries 1 shards",
                         "  LP time            1 link-times, mcf-extp's own LP (recorded); fidelity 1.0000",
                         "  link MCF optimum   0.25 link-times (recorded, not solved here); MCF ratio 0.2500",
                         "VALID, with 1 warning (see above)"]
    assert main(["verify", str(f), "--strict", "--json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert (d["valid"], d["errors"], d["warnings"]) == (False, [f"executor rules: (--strict) {warning}"], [])


def test_remove_links_without_topology_punctures_the_recorded_one(tmp_path, capsys):
    """--remove-links / --remove-nodes without --topology were ignored: VALID on the full fabric."""
    f = _mpi_file(tmp_path, capsys)
    assert main(["verify", str(f), "--remove-links", "1", "--json", "--no-lp"]) == 1
    out = capsys.readouterr()
    d = json.loads(out.out)
    note = ("--remove-links/--remove-nodes puncture the topology the file was compiled for (complete:3): its links "
            "are checked against complete:3 -links 1 seed=0")
    assert out.err == f"a2a verify: warning: {f}: {note}\n" and d["overrides"] == [note]
    assert d["spec"] == "complete:3 -links 1 seed=0" and d["errors"] == [
        "topology: rank 1 send to 2 route_id 0: hop 1->2 of route 1 2 is not a link of complete:3 -links 1 seed=0",
        "topology: rank 2 send to 1 route_id 0: hop 2->1 of route 2 1 is not a link of complete:3 -links 1 seed=0"]
    assert main(["verify", str(ALLPAIRS), "--remove-nodes", "1"]) == 2   # no record, no --topology
    assert capsys.readouterr().err == ("a2a verify: error: --remove-links/--remove-nodes: the file records no topology "
                                       "to puncture; give --topology\n")


def test_demo_refuses_a_bad_spec_before_any_output(tmp_path, capsys):
    assert main(["demo", "--spec", "bogus:1", "--dir", str(tmp_path / "demo"), "--no-run"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and not (tmp_path / "demo").exists()
    (line,) = err.splitlines()
    assert line.startswith("a2a demo: error: unknown topology family 'bogus' in 'bogus:1'; known families: "
                           "complete:N, ring:N, ")


def test_demo_numbers_every_step(tmp_path, capsys, monkeypatch):
    """The two runs are steps 3a and 3b (mpiexec stubbed: the ranks' output is not the point here)."""
    from a2a_compiler.commands import demo

    monkeypatch.setattr(demo.subprocess, "call", lambda cmd, env: 0)
    assert main(["demo", "--spec", "ring:4", "--dir", str(tmp_path / "demo")]) == 0
    steps = [ln.split(" ", 2)[1] for ln in capsys.readouterr().out.splitlines() if ln.startswith("== ")]
    assert steps == ["1a.", "1b.", "2.", "3a.", "3b."]


def test_thread_blocks_are_counted_per_gpu_as_the_limits_are(capsys):
    """issue 34, item 19: the summary's thread blocks were a total over GPUs beside per-GPU limits."""
    from a2a_compiler.formats import load_program

    path = Path(__file__).resolve().parents[1] / "schedules" / "hypercube-3-tsmcf.msccl.xml"
    assert main(["verify", str(path), "--json", "--no-lp"]) == 0
    program = load_program(path)[1]
    assert [len(g.tbs) for g in program.gpus] == [7] * 8
    assert json.loads(capsys.readouterr().out)["program"] == (
        "8 gpus, 32 chunk(s) per peer, 1 channel(s), 7 thread blocks per gpu (max; 56 in all), 292 steps, 53 parser "
        "nodes per rank (max; nccl target), proto Simple")
