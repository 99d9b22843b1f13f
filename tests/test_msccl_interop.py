"""MSCCL interop: msccl-tools' own XML verifies, our XML follows msccl-tools' conventions, and the
verifier's former false rejects and exit codes (tests/data/msccl_tools/README.md names the generators)."""

import json
import re
from pathlib import Path

import pytest

from a2a_compiler import compile as compile_schedule
from a2a_compiler.cli import main
from a2a_compiler.formats.msccl_rules import check_rules, message_fields
from a2a_compiler.verify import CHECKS, verify_bytes

DATA = Path(__file__).resolve().parent / "data"
TOOLS = sorted((DATA / "msccl_tools").glob("*.xml"))
ALLPAIRS = (DATA / "msccl_tools_allpairs_3.xml").read_bytes()
FIX = b' outofplace="1" minBytes="0" maxBytes="0">'


def _fixed(data: bytes) -> bytes:
    """msccl-tools 2.3 output with the three <algo> attributes the executor needs."""
    return data.replace(b' inplace="0">', b' inplace="0"' + FIX, 1)


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: p.stem)
def test_msccl_tools_output_names_its_one_problem_and_verifies_fixed(path):
    data = path.read_bytes()
    report = verify_bytes(data, path.name)
    assert report.messages() == [
        "executor rules: algo: <algo> is missing required attributes 'outofplace', 'minBytes', 'maxBytes', "
        "without which the executor rejects the file (msccl-tools 2.3 omits them): add outofplace=\"1\" "
        "minBytes=\"0\" maxBytes=\"0\" to <algo>"]
    assert report.skipped == {"topology": "no --topology given"}  # data movement and deadlock were proved
    fixed = verify_bytes(_fixed(data), path.name, strict=True)
    assert fixed.valid and fixed.warnings == [], fixed.messages()
    proto = re.search(rb'proto="(\w+)"', data).group(1).decode()
    assert fixed.summary.endswith(f"proto {proto}")


def test_msccl_tools_instances_and_their_times():
    """instances=2 doubles the chunks per peer; the all-pairs file moves one shard per link at once."""
    allpairs = verify_bytes(_fixed((DATA / "msccl_tools" / "allpairs_4_i2_LL.xml").read_bytes()))
    three = verify_bytes(_fixed((DATA / "msccl_tools" / "three_step_2x2_i2.xml").read_bytes()))
    assert (allpairs.ranks, allpairs.chunks_per_shard, allpairs.perf.predicted_time) == (4, 2, 1.0)
    assert (three.ranks, three.chunks_per_shard, three.perf.predicted_time) == (4, 2, 5.0)


def test_compiled_receives_follow_the_msccl_tools_convention():
    """Every receive repeats its send's srcbuf/srcoff/dstbuf/dstoff: the public simulator's
    'Message mismatch' check holds on every transfer."""
    prog = compile_schedule("torus:3x3", "msccl", link_bw="25Gbps", host_bw="100Gbps").program
    assert check_rules(prog).warnings == []
    g1 = prog.gpus[1]
    recv = next(st for tb in g1.tbs if tb.recv == 0 for st in tb.steps if st.type == "r")
    send = next(st for tb in prog.gpus[0].tbs if tb.send == 1 for st in tb.steps if st.type == "s")
    assert message_fields(send) == (recv.srcbuf, recv.srcoff, recv.dstbuf, recv.dstoff)
    assert (send.srcbuf, recv.dstbuf) == ("i", "o") and recv.srcoff == send.srcoff and recv.dstoff == send.dstoff


def test_strict_turns_a_receive_described_differently_into_an_error(capsys):
    line = re.search(rb'<step s="1" type="r" srcbuf="i" srcoff="0" dstbuf="o" dstoff="1"[^\n]*', ALLPAIRS).group(0)
    other = ALLPAIRS.replace(line, line.replace(b'srcbuf="i" srcoff="0"', b'srcbuf="o" srcoff="1"'), 1)
    report = verify_bytes(other, "t.xml")
    assert report.valid and report.warnings == [
        "gpu 0 tb 0 step 1 receives with srcbuf/srcoff/dstbuf/dstoff = o/1/o/1 but its send, gpu 1 tb 0 step 0 "
        "(message 0 on channel 0), describes i/0/o/1; msccl-tools writes both ends of a transfer alike and the "
        "public MSCCL-XML-Verifier rejects a difference as 'Message mismatch'"]
    strict = verify_bytes(other, "t.xml", strict=True)
    assert not strict.valid and strict.errors["executor rules"] == ["(--strict) " + report.warnings[0]]


def test_former_false_rejects():
    text = ALLPAIRS.decode()
    gpus = re.findall(r'  <gpu id="\d".*?</gpu>\n', text, re.S)
    shuffled = text.replace("".join(gpus), gpus[2] + gpus[0] + gpus[1])
    assert verify_bytes(shuffled.encode(), "t.xml").valid  # <gpu> elements in any order
    bigger = verify_bytes(ALLPAIRS.replace(b'<gpu id="1" i_chunks="3"', b'<gpu id="1" i_chunks="5"'), "t.xml")
    assert bigger.valid and bigger.warnings == [
        "gpu 1: i_chunks=5 is more than the 3 chunks (nchunksperloop) the buffer holds; offsets are checked against 3"]
    # a dead write: scratch s[0] written twice, the first value never read, is no error
    copy_tb = re.search(r'    <tb id="2" send="-1" recv="-1" chan="0">\n(.*?)    </tb>', text, re.S)
    dead = ('      <step s="1" type="cpy" srcbuf="i" srcoff="1" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" '
            'hasdep="0"/>\n      <step s="2" type="cpy" srcbuf="i" srcoff="2" dstbuf="s" dstoff="0" cnt="1" '
            'depid="-1" deps="-1" hasdep="0"/>\n')
    with_dead = text.replace(copy_tb.group(0), copy_tb.group(0).replace("    </tb>", dead + "    </tb>"), 1)
    with_dead = with_dead.replace('<gpu id="0" i_chunks="3" o_chunks="3" s_chunks="0">',
                                  '<gpu id="0" i_chunks="3" o_chunks="3" s_chunks="1">')
    report = verify_bytes(with_dead.encode(), "t.xml")
    assert report.valid, report.messages()


@pytest.mark.parametrize("edit, code, message", [
    ((b'<tb id="1" send="2"', b'<tb send="2"'), 1, "gpu 0 tb ?: <tb> is missing required attribute 'id'"),
    ((b'type="s" srcbuf="i" srcoff="1"', b'srcbuf="i" srcoff="1"'), 1,
     "gpu 0 tb 0 step 0: <step> is missing required attribute 'type'"),
    ((b'<tb id="1" send="2"', b'<tb id="x" send="2"'), 2, "attribute id='x' is not an integer"),
])
def test_exit_codes(tmp_path, capsys, edit, code, message):
    """1: readable but invalid (what the executor would reject); 2: unreadable."""
    f = tmp_path / "t.xml"
    f.write_bytes(ALLPAIRS.replace(*edit, 1))
    assert main(["verify", str(f)]) == code
    out = capsys.readouterr()
    assert message in (out.out if code == 1 else out.err)


def test_verify_json_on_unreadable_input(tmp_path, capsys):
    f = tmp_path / "t.xml"
    f.write_bytes(b"<algo")
    assert main(["verify", str(f), "--json"]) == 2
    d = json.loads(capsys.readouterr().out)
    assert d["valid"] is False and d["format"] is None
    assert d["errors"] == [f"{f}: malformed XML at line 1: Couldn't find end of Start Tag algo line 1, line 1, column 6"]
    assert main(["verify", str(tmp_path / "missing.xml"), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["errors"] == [
        f"cannot read {tmp_path / 'missing.xml'}: No such file or directory"]
    assert set(CHECKS) <= set(verify_bytes(ALLPAIRS).to_json()["checks"])


def test_rcs_passes_chunks_straight_on():
    """genkautz:16,2: 2 relays forward with rcs (3-hop chunks staged in their output slot on the way),
    4 fewer scratch slots; the program still verifies under --strict (both ends of every transfer
    alike, own chunks written only after the staged copy has left)."""
    from a2a_compiler.formats.msccl import msccl_to_xml
    from a2a_compiler.lower.msccl import lower_msccl

    schedule = compile_schedule("genkautz:16,2", "msccl", min_fidelity=0.95).schedule
    plain, fused = lower_msccl(schedule), lower_msccl(schedule, rcs=True)
    steps = [st for g in fused.gpus for tb in g.tbs for st in tb.steps]
    assert sum(st.type == "rcs" for st in steps) == 2
    assert (sum(g.s_chunks for g in plain.gpus), sum(g.s_chunks for g in fused.gpus)) == (464, 460)
    assert all(st.srcbuf == st.dstbuf == "o" and st.srcoff == st.dstoff for st in steps if st.type == "rcs")
    report = verify_bytes(msccl_to_xml(fused), "gk.xml", strict=True)
    assert report.valid and report.warnings == [], report.messages()
    assert report.perf.predicted_time == 27.0  # as without rcs (plain: 27.0 too)
