"""MSCCL verification: executor rules, data movement, deadlock; hand-written and hand-broken files."""

import re
from pathlib import Path

import pytest

from a2a_compiler.errors import FormatError
from a2a_compiler.formats.msccl import msccl_to_xml, parse_msccl
from a2a_compiler.verify import verify_bytes
from a2a_compiler.formats.msccl_rules import check_attributes, check_lexical
from a2a_compiler.formats.xmlutil import parse_xml

DATA = Path(__file__).resolve().parent / "data"
ALLPAIRS = (DATA / "msccl_tools_allpairs_3.xml").read_bytes()


def _errors(data: bytes) -> list[str]:
    return verify_bytes(data, "t.xml").messages()


def _step_line(gpu: int, tb: int, s: int) -> str:
    """The text of ``<step s=..>`` in tb ``tb`` of gpu ``gpu`` of the all-pairs file."""
    text = ALLPAIRS.decode()
    g = text.index(f'<gpu id="{gpu}"')
    t = text.index(f'<tb id="{tb}"', g)
    m = re.compile(rf'\s*<step s="{s}" [^\n]*\n').search(text, t)
    return m.group(0)


def test_hand_written_msccl_tools_style_file_verifies():
    report = verify_bytes(ALLPAIRS, "allpairs.xml")
    assert report.valid, report.messages()
    assert (report.format, report.ranks, report.chunks_per_shard) == ("msccl", 3, 1)
    assert report.perf.predicted_time == 1.0  # one shard over every link, in one level


def test_changed_receive_offset_fails_data_movement():
    line = _step_line(1, 0, 1)  # gpu 1 receives gpu 0's chunk into o[0]
    broken = ALLPAIRS.replace(line.encode(), line.replace('dstoff="0"', 'dstoff="2"').encode())
    report = verify_bytes(broken, "t.xml")
    assert not report.valid and not report.errors["executor rules"]
    assert "gpu 1: output chunk o[0] (chunk 0 from gpu 0) is never written" in report.errors["data movement"]
    assert any("gpu 1 tb 1 step 1: overwrites output chunk o[2] already written by tb 0 step 1" in m
               for m in report.errors["data movement"])


def test_missing_attribute():
    line = _step_line(0, 0, 0)
    errs = _errors(ALLPAIRS.replace(line.encode(), line.replace(' cnt="1"', "").encode()))
    assert "executor rules: gpu 0 tb 0 step 0: <step> is missing required attribute 'cnt'" in errs


def test_xml_declaration_and_tab_and_newline_in_tag():
    assert check_lexical(b'<?xml version="1.0"?>\n' + ALLPAIRS) == [
        "line 1: XML declaration <?xml ...?> is not allowed (the executor's tokenizer fails on '?')"]
    assert check_lexical(b"<!-- c -->\n<gpu/>") == ["line 2: the first element is <gpu>, the executor requires <algo>"]
    assert "line 4: tab character (indent with spaces only)" in check_lexical(ALLPAIRS.replace(b"\n    <tb", b"\n\t<tb", 1))
    assert check_lexical(ALLPAIRS.replace(b'" proto=', b'"\n proto=', 1)) == [
        "line 1: newline inside the <algo> tag (each tag must stay on one line)"]
    assert check_lexical(ALLPAIRS.replace(b'name="alltoall_allpairs_3"', b"name='x'")) == [
        "line 1: single-quoted attribute in <algo> (use double quotes)"]
    assert check_lexical(ALLPAIRS) == []
    assert any("XML declaration" in m for m in _errors(b'<?xml version="1.0"?>\n' + ALLPAIRS))


def test_65_steps_in_a_thread_block():
    prog = parse_msccl(ALLPAIRS)
    g0 = prog.gpus[0]
    cpy = g0.tbs[2].steps[0]
    tb = g0.tbs[2].__class__(2, -1, -1, 0, tuple(cpy.__class__(s, "cpy", "i", 0, "s", s, 1, -1, -1, 0)
                                                 for s in range(65)))
    gpu = g0.__class__(0, 3, 3, 65, (g0.tbs[0], g0.tbs[1], tb))
    data = msccl_to_xml(prog.__class__(**{**prog.__dict__, "gpus": (gpu, *prog.gpus[1:])}))
    errs = _errors(data)
    assert "executor rules: gpu 0 tb 2: 65 steps, over the executor's limit of 64 steps per tb" in errs


def test_chunk_sent_twice():
    s0, r1 = _step_line(0, 0, 0), _step_line(1, 0, 1)
    data = ALLPAIRS.replace(s0.encode(), (s0 + s0.replace('s="0"', 's="1"')).encode())
    data = data.replace(_step_line(0, 0, 1).encode(), _step_line(0, 0, 1).replace('s="1"', 's="2"').encode())
    data = data.replace(r1.encode(), (r1 + r1.replace('s="1"', 's="2"')).encode())
    report = verify_bytes(data, "t.xml")
    assert not report.errors["executor rules"]
    assert "gpu 1 tb 0 step 2: chunk (0, 1, 0) (origin, dest, index) delivered twice" in report.errors["data movement"]


def test_dependency_cycle_deadlocks():
    a, b = _step_line(0, 0, 0), _step_line(0, 1, 0)
    data = ALLPAIRS.replace(a.encode(), a.replace('depid="-1" deps="-1" hasdep="0"', 'depid="1" deps="0" hasdep="1"').encode())
    data = data.replace(b.encode(), b.replace('depid="-1" deps="-1" hasdep="0"', 'depid="0" deps="0" hasdep="1"').encode())
    report = verify_bytes(data, "t.xml")
    assert not report.errors["executor rules"]
    dead = report.errors["deadlock freedom"]
    assert len(dead) == 1 and dead[0].startswith("deadlock: ")
    assert ("wait-for cycle: gpu 0 tb 0 step 0 waits for tb 1 step 0 (dependency) -> "
            "gpu 0 tb 1 step 0 waits for tb 0 step 0 (dependency)") in dead[0]


def test_send_with_no_matching_receive():
    r = _step_line(1, 0, 1)
    errs = _errors(ALLPAIRS.replace(r.encode(), b""))
    assert ("executor rules: gpu 0 tb 0 sends 1 message(s) to gpu 1 on channel 0, but gpu 1 tb 0 receives 0 "
            "(send with no matching receive)") in errs


def test_structural_rules():
    text = ALLPAIRS.decode()
    cases = {
        text.replace('<tb id="2" send="-1"', '<tb id="3" send="-1"', 1):
            "gpu 0: thread block ids [0, 1, 3] must be 0..2 with no gaps",
        text.replace('<tb id="0" send="1" recv="1"', '<tb id="0" send="0" recv="1"', 1):
            "gpu 0 tb 0: send=0 must be -1 or another gpu's id (0..2, not 0)",
        text.replace('<tb id="1" send="2" recv="2"', '<tb id="1" send="1" recv="2"', 1):
            "gpu 0: thread blocks [0, 1] all send to gpu 1 on channel 0; one connection per (peer, channel, direction) allows one tb",
        text.replace('<tb id="0" send="1" recv="1" chan="0"', '<tb id="0" send="1" recv="1" chan="1"', 1):
            "gpu 0 tb 0: chan=1 must be in 0..0 (nchannels=1)",
        text.replace('inplace="0" outofplace="1"', 'inplace="1" outofplace="0"'):
            'algo: inplace=1 outofplace=0; all-to-all must be inplace="0" outofplace="1"',
        text.replace('nchunksperloop="3"', 'nchunksperloop="4"'):
            "algo: nchunksperloop=4 must be a positive multiple of ngpus=3 (ngpus x chunks per peer)",
        text.replace('type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1"',
                     'type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="72"'):
            "gpu 0 tb 2 step 0: cnt=72 outside 1..71",
        text.replace('type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1"',
                     'type="nop" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1"'):
            "gpu 0 tb 2 step 0: nop without a dependency (every nop must carry depid/deps)",
        text.replace('type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1"',
                     'type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="0" deps="1"'):
            "gpu 0 tb 2 step 0: depends on tb 0 step 1, which lacks hasdep=\"1\"",
        text.replace('type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="-1" deps="-1"',
                     'type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0" cnt="1" depid="128" deps="0"'):
            "gpu 0 tb 2 step 0: depid=128 outside 0..127 (int8 in the executor)",
        text.replace('type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="0"',
                     'type="cpy" srcbuf="i" srcoff="0" dstbuf="o" dstoff="40000"'):
            "gpu 0 tb 2 step 0: dstoff=40000 does not fit the executor's int16 offsets (<= 32767)",
    }
    for data, message in cases.items():
        errs = verify_bytes(data.encode(), "t.xml").errors["executor rules"]
        assert any(message in e for e in errs), (message, errs)


def test_attribute_pass_flags_unknown_elements():
    root = parse_xml(ALLPAIRS.replace(b"<tb id=\"2\"", b"<copy/><tb id=\"2\"", 1))
    assert any("unexpected element <copy> inside <gpu>" in m for m in check_attributes(root))


def test_hostile_xml_refused():
    bomb = b'<!DOCTYPE algo [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;">]><algo name="&b;"/>'
    with pytest.raises(FormatError, match="DOCTYPE/ENTITY declarations are not allowed"):
        verify_bytes(bomb, "bomb.xml")


def _exchange(nmsg: int) -> bytes:
    """Two gpus, one tb each: ``nmsg`` sends of chunk copies, then ``nmsg`` receives (C = nmsg)."""
    from a2a_compiler.formats import MscclGpu, MscclProgram, MscclStep, MscclThreadBlock

    def gpu(g):
        p = 1 - g
        steps = [MscclStep(k, "s", "i", p * nmsg + k, "i", p * nmsg + k, 1, -1, -1, 0) for k in range(nmsg)]
        steps += [MscclStep(nmsg + k, "r", "o", p * nmsg + k, "o", p * nmsg + k, 1, -1, -1, 0) for k in range(nmsg)]
        cpy = MscclThreadBlock(1, -1, -1, 0, (MscclStep(0, "cpy", "i", g * nmsg, "o", g * nmsg, nmsg, -1, -1, 0),))
        return MscclGpu(g, 2 * nmsg, 2 * nmsg, 0, (MscclThreadBlock(0, p, p, 0, tuple(steps)), cpy))

    return msccl_to_xml(MscclProgram("x", "Simple", 1, 2 * nmsg, 2, "alltoall", 0, 1, 0, 0, (gpu(0), gpu(1))))


def test_bounded_fifo_deadlock():
    """Eight messages fit the connection FIFO; the ninth send blocks both sides forever."""
    assert verify_bytes(_exchange(8), "x.xml").valid
    dead = verify_bytes(_exchange(9), "x.xml").errors["deadlock freedom"]
    assert dead == ["deadlock: 2 thread block(s) cannot progress; wait-for cycle: "
                    "gpu 0 tb 0 step 8 waits for gpu 1 to drain the full channel-0 connection -> "
                    "gpu 1 tb 0 step 8 waits for gpu 0 to drain the full channel-0 connection"]


def test_dataflow_time_with_host_bottleneck():
    from a2a_compiler.fabric import Fabric
    from a2a_compiler.topology.spec import from_spec

    fabric = Fabric(link_bw=25e9 / 8, host_bw=25e9 / 8)  # host-NIC as fast as one link
    report = verify_bytes(ALLPAIRS, "allpairs.xml", from_spec("complete:3"), fabric)
    # each gpu injects two shards through a one-link-wide host port: 2 link-times, as the LP says
    assert report.valid and report.perf.predicted_time == 2.0 and abs(report.mcf_time - 2.0) < 1e-6


def test_huge_declared_buffers_not_simulated():
    gpu = '<gpu id="{}" i_chunks="32768" o_chunks="32768" s_chunks="32768"/>'
    data = ('<algo name="x" proto="Simple" nchannels="1" nchunksperloop="32768" ngpus="256" coll="alltoall" '
            'inplace="0" outofplace="1" minBytes="0" maxBytes="0">\n'
            + "\n".join(gpu.format(g) for g in range(256)) + "\n</algo>\n").encode()
    report = verify_bytes(data, "big.xml")
    assert report.errors["data movement"] == [
        "the program declares 25165824 buffer chunks over all ranks, more than the verifier simulates (16777216); "
        "not verified"]


def test_unordered_scratch_read_is_a_race():
    """gpu 1 receives into scratch (tb 0) and copies it out in tb 2 without a dependency."""
    text = ALLPAIRS.decode()
    r = _step_line(1, 0, 1)
    text = text.replace(r, r.replace('dstbuf="o" dstoff="0"', 'dstbuf="s" dstoff="0"'))
    text = text.replace('<gpu id="1" i_chunks="3" o_chunks="3" s_chunks="0">',
                        '<gpu id="1" i_chunks="3" o_chunks="3" s_chunks="1">')
    c = _step_line(1, 2, 0)
    cpy = c.replace('s="0" type="cpy" srcbuf="i" srcoff="1"', 's="1" type="cpy" srcbuf="s" srcoff="0"')
    text = text.replace(c, c + cpy.replace('dstoff="1"', 'dstoff="0"'))
    report = verify_bytes(text.encode(), "t.xml")
    assert not report.errors["executor rules"]
    assert report.errors["data movement"] == [
        "gpu 1 tb 2 step 1: reads s[0] written by tb 0 step 1 with no dependency ordering the two (race)"]
    fixed = text.replace(cpy.replace('dstoff="1"', 'dstoff="0"'),
                         cpy.replace('dstoff="1"', 'dstoff="0"').replace('depid="-1" deps="-1"', 'depid="0" deps="1"'))
    fixed = fixed.replace(r.replace('dstbuf="o" dstoff="0"', 'dstbuf="s" dstoff="0"'),
                          r.replace('dstbuf="o" dstoff="0"', 'dstbuf="s" dstoff="0"').replace('hasdep="0"', 'hasdep="1"'))
    assert verify_bytes(fixed.encode(), "t.xml").valid


@pytest.mark.parametrize("value", ["0_1", "\uff11", "\u0661", "01", "+1", " 1", "1 ", "0x1", "-0", ""])
def test_integer_attributes_have_the_executors_lexical_form(value):
    """The executor reads integers with strtol(v, NULL, 0): '0_1' is 0, '01' octal, '１' and '١' 0; Python's
    int() read them as 1, so such a file verified VALID.  One form is accepted: ASCII digits, no leading zero,
    an optional '-' (the ranges are the rules')."""
    line = _step_line(0, 0, 0)
    lineno = ALLPAIRS[:ALLPAIRS.index(line.encode())].count(b"\n") + 2
    broken = ALLPAIRS.replace(line.encode(), line.replace(' cnt="1"', f' cnt="{value}"').encode())
    with pytest.raises(FormatError) as exc:
        verify_bytes(broken, "t.xml")
    assert str(exc.value) == (f"t.xml: line {lineno}: <step> attribute cnt={value!r} is not an integer "
                              "(ASCII digits, no leading zero, an optional '-')")


def test_negative_integers_are_read_and_left_to_the_rules():
    line = _step_line(0, 0, 0)
    errs = _errors(ALLPAIRS.replace(line.encode(), line.replace(' cnt="1"', ' cnt="-1"').encode()))
    assert errs == ["executor rules: gpu 0 tb 0 step 0: cnt=-1 outside 1..71"]
