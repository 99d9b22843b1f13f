"""The library API a2a_compiler.compile(): the CLI's bytes, one cost model, certified ratios <= 1."""

import json
import subprocess
import sys

import pytest

import a2a_compiler
from a2a_compiler.chunk import build_schedule, save_schedule
from a2a_compiler.cli import main
from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric, parse_bandwidth
from a2a_compiler.topology.spec import from_spec
from a2a_compiler.verify import verify_file

TORUS = {"link_bw": "25Gbps", "host_bw": "100Gbps"}


def test_compile_returns_the_cli_bytes_and_agrees_with_verify(tmp_path, capsys):
    r = a2a_compiler.compile("torus:3x3", emit="msccl", **TORUS)
    out = tmp_path / "t.xml"
    assert main(["compile", "torus:3x3", "--link-bw", "25Gbps", "--host-bw", "100Gbps", "--emit", "msccl",
                 "-o", str(out), "-q", "--json"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert out.read_bytes() == r.data and r.text == r.data.decode()
    assert r.write(tmp_path / "api.xml").read_bytes() == r.data
    report = verify_file(out, from_spec("torus:3x3"), Fabric(parse_bandwidth("25Gbps"), parse_bandwidth("100Gbps")))
    # one cost model: compile's predicted time is verify's, to the bit; so is the MCF ratio
    assert cli["predicted_time"] == r.predicted_time == report.perf.predicted_time
    assert cli["mcf_ratio"] == pytest.approx(report.mcf_ratio, rel=1e-7)
    assert (r.format, r.method, r.chunks_per_shard, r.schedule.chunks_per_shard) == ("msccl", "tsmcf", 1, 1)
    # torus:3x3 under the §5.2 fabric (degree 4, host 4x a link: no bottleneck): 1/F = 72 hops / 24 links = 3
    assert r.predicted_time == 3.0 and r.fidelity == cli["fidelity"] and r.report.valid
    # certified values; the MCF bound's float sums land 1.3e-15 above 3, which ratio() treats as noise
    assert r.lp_time == 3.0 and r.mcf_time == pytest.approx(3.0, rel=1e-12) and r.mcf_ratio == 1.0


@pytest.mark.parametrize("spec, emit, options", [
    ("hypercube:3", "msccl", {}),
    ("twisted-hypercube:3", "oneccl", {}),
    ("bipartite:4", "mpi", {"method": "pmcf", "paths": "shortest"}),
    ("genkautz:16,2", "msccl", {}),
])
def test_fidelity_never_exceeds_one(spec, emit, options):
    """lp_time and mcf_time are certified lower bounds (weak duality), so both ratios are <= 1 exactly."""
    r = a2a_compiler.compile(spec, emit, **options)
    assert 0 < r.fidelity <= 1 and 0 < r.mcf_ratio <= 1
    assert r.lp_time <= r.predicted_time and r.mcf_time <= r.predicted_time


def test_msccl_chunk_count_is_chosen_on_the_program():
    """The C search prices the MSCCL program (dataflow), not the stepped schedule: torus §5.2 at C = 3,
    where the steps alone would reach 0.95 (13.5 / 13.75 = 0.982) and the program does (13.5 / 14.1 = 0.9574)
    on one channel (without --channels the channel search reaches 0.95 at C = 2 on 8 channels, 13.5 / 14.1358:
    tests/test_msccl_targets.py tests the search where it matters most)."""
    r = a2a_compiler.compile("torus:3x3x3", "msccl", min_fidelity=0.95, channels=1, **TORUS)
    assert r.chunks_per_shard == 3 and r.predicted_time == pytest.approx(141 / 10, abs=1e-9)  # 14.1

    assert r.summary()["schedule_predicted_time"] == pytest.approx(13.75, abs=1e-9)  # the steps alone
    with pytest.raises(A2AError, match=r"no chunk count up to 4 reaches fidelity 0.99: the best is 0.9686 at C = 4 \(rounded down\); "
                                       r"raise --max-chunks or lower --min-fidelity"):
        a2a_compiler.compile("torus:3x3x3", "msccl", max_chunks=4, min_fidelity=0.99, channels=1, **TORUS)


def test_pmcf_paths_and_the_link_mcf_ratio():
    """fattree:4,2 (16 hosts): disjoint paths give one path per pair, 48 link-times, the optimum is 15."""
    disjoint = a2a_compiler.compile("fattree:4,2", "mpi", method="pmcf")
    shortest = a2a_compiler.compile("fattree:4,2", "mpi", method="pmcf", paths="shortest")
    assert disjoint.predicted_time == pytest.approx(48) and disjoint.fidelity == pytest.approx(1)
    assert disjoint.mcf_time == pytest.approx(15, rel=1e-6) and disjoint.mcf_ratio == pytest.approx(15 / 48, rel=1e-6)
    assert shortest.predicted_time == pytest.approx(15) and shortest.mcf_ratio == pytest.approx(1, rel=1e-6)


def test_nic_forwarding_is_refused_for_link_programs(tmp_path, capsys):
    with pytest.raises(A2AError, match=r"^--forwarding nic cannot be lowered to MSCCL or oneCCL: their programs relay "):
        a2a_compiler.compile("petersen", "oneccl", link_bw="100Gbps", host_bw="25Gbps", forwarding="nic")
    nic = build_schedule(from_spec("ring:4"), Fabric(1e9, 1e9, "nic"), "tsmcf")  # an IR that says nic
    ir = save_schedule(nic, tmp_path / "nic.json")
    out = tmp_path / "x.xml"
    assert main(["compile", "--from-ir", str(ir), "--emit", "msccl", "-o", str(out)]) == 2
    assert "cannot be lowered to MSCCL or oneCCL" in capsys.readouterr().err and not out.exists()
    # the same fabric routed by NICs is what --emit mpi is for
    assert a2a_compiler.compile("petersen", "mpi", link_bw="100Gbps", host_bw="25Gbps", forwarding="nic").report.valid


def test_api_errors_name_the_option():
    with pytest.raises(A2AError, match=r"^--channels, --proto do not apply to --emit oneccl \(--channels: --emit "
                                       r"msccl; --proto: --emit msccl\)$"):
        a2a_compiler.compile("ring:4", "oneccl", channels=2, proto="LL")
    with pytest.raises(A2AError, match=r"^--paths does not apply to --method tsmcf \(only to --method pmcf\)$"):
        a2a_compiler.compile("ring:4", "msccl", paths="shortest")
    with pytest.raises(A2AError, match=r"^--steps does not apply to --method mcf-extp \(only to --method tsmcf\)$"):
        a2a_compiler.compile("ring:4", "mpi", steps=3)
    schedule = a2a_compiler.compile("ring:4", "msccl").schedule
    with pytest.raises(A2AError, match=r"^--link-bw: the schedule is already solved and chunked"):
        a2a_compiler.compile(schedule, "msccl", link_bw="25Gbps")
    assert a2a_compiler.compile(schedule, "oneccl").report.valid  # an IR lowers to either link format


@pytest.mark.parametrize("keywords, message", [
    ({"link_bw": 25e9}, "--link-bw: give a bandwidth with its unit, e.g. '25Gbps' or '3.125GB/s', not the bare number "
                        "25000000000.0 (b is a bit, B a byte); fabric=Fabric(...) takes bytes/s"),
    ({"link_bw": "25Gbps", "host_bw": 100}, "--host-bw: give a bandwidth with its unit, e.g. '25Gbps' or '3.125GB/s', "
                                            "not the bare number 100 (b is a bit, B a byte); fabric=Fabric(...) takes "
                                            "bytes/s"),
    ({"max_chunks": "four"}, "--max-chunks: must be a number, got 'four'"),
    ({"max_chunks": True}, "--max-chunks: must be a number, got True"),
    ({"max_chunks": 0}, "--max-chunks: must be a positive integer, got '0'"),
    ({"max_chunks": 2.5}, "--max-chunks: must be a positive integer, got '2.5'"),
    ({"min_fidelity": 1.5}, "--min-fidelity: must be a number in (0, 1], got '1.5'"),
    ({"remove_links": -1}, "--remove-links: must be a non-negative integer, got '-1'"),
    ({"seed": 5}, "--seed applies only with --remove-links or --remove-nodes: it seeds the failures they draw"),
])
def test_api_keywords_are_checked_as_the_options_are(keywords, message):
    """issue 34, item 17: the keywords are the command's options, refused in the same one line."""
    with pytest.raises(A2AError) as exc:
        a2a_compiler.compile("ring:4", "msccl", **keywords)
    assert str(exc.value) == message


def test_package_lists_its_api():
    from a2a_compiler import A2AError as exported

    assert exported is A2AError
    assert {"compile", "CompileResult", "A2AError", "__version__"} <= set(dir(a2a_compiler))


def test_version_and_per_command_usage():
    p = subprocess.run([sys.executable, "-m", "a2a_compiler", "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout == f"a2a-compiler {a2a_compiler.__version__}\n"
    p = subprocess.run([sys.executable, "-m", "a2a_compiler", "solve", "ring:4", "--bogus"],
                       capture_output=True, text=True)
    assert p.returncode == 2
    assert p.stderr == "a2a solve: error: unrecognized arguments: --bogus (see 'a2a solve --help')\n"
