"""Readers/writers of the three lowered formats: exact bytes, round trips, hostile input."""

from pathlib import Path

import pytest

from a2a_compiler.errors import FormatError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import msccl_rules
from a2a_compiler.formats.record import Record
from a2a_compiler.formats import load_program, parse_program, program_to_xml
from a2a_compiler.formats.msccl import msccl_to_xml, parse_msccl
from a2a_compiler.formats.mpi_paths import mpi_paths_to_xml, parse_mpi_paths
from a2a_compiler.formats.oneccl import oneccl_to_xml, parse_oneccl
from a2a_compiler.formats import (MpiPathProgram, MscclGpu, MscclProgram, MscclStep, MscclThreadBlock,
                                         OnecclOp, OnecclProgram, OnecclRank, PathSend)

DATA = Path(__file__).resolve().parent / "data"


def _msccl():
    send = MscclStep(0, "s", "i", 1, "o", 1, 1, -1, -1, 0)
    recv = MscclStep(1, "r", "i", 1, "o", 1, 1, -1, -1, 0)
    gpu = lambda g: MscclGpu(g, 2, 2, 0, (MscclThreadBlock(0, 1 - g, 1 - g, 0, (send, recv)),))
    return MscclProgram("x", "Simple", 1, 2, 2, "alltoall", 0, 1, 0, 0, (gpu(0), gpu(1)))


def test_msccl_writer_exact_bytes_and_round_trip():
    data = msccl_to_xml(_msccl())
    lines = data.decode().splitlines()
    assert lines[0] == ('<algo name="x" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" '
                        'inplace="0" outofplace="1" minBytes="0" maxBytes="0">')
    assert lines[2] == '    <tb id="0" send="1" recv="1" chan="0">'
    assert lines[3] == ('      <step s="0" type="s" srcbuf="i" srcoff="1" dstbuf="o" dstoff="1" cnt="1" '
                        'depid="-1" deps="-1" hasdep="0"/>')
    assert b"\t" not in data and not data.startswith(b"<?xml") and data.endswith(b"</algo>\n")
    assert parse_msccl(data) == _msccl()
    assert parse_program(data) == ("msccl", _msccl())


def test_msccl_reader_accepts_msccl_tools_single_buffer_form():
    data = (b'<algo name="a" proto="Simple" nchannels="1" nchunksperloop="2" ngpus="2" coll="alltoall" inplace="0">'
            b'<gpu id="0" i_chunks="2" o_chunks="2" s_chunks="0"><tb id="0" send="1" recv="-1" chan="0">'
            b'<step s="0" type="s" buf="i" off="1"/></tb></gpu></algo>')
    p = parse_msccl(data, "t.xml")
    st = p.gpus[0].tbs[0].steps[0]
    assert (st.srcbuf, st.srcoff, st.cnt, st.depid, st.hasdep) == ("i", 1, 1, -1, 0)
    assert (p.outofplace, p.min_bytes, p.max_bytes) == (1, 0, 0)


def test_oneccl_round_trip_and_structure_errors():
    prog = OnecclProgram("h", 2, 1, 1, (
        OnecclRank(0, 2, 2, 0, ((OnecclOp("copy", -1, "i", 0, "o", 0, 1), OnecclOp("send", 1, "i", 1, "", -1, 1),
                                 OnecclOp("recv", 1, "", -1, "o", 1, 1)),)),
        OnecclRank(1, 2, 2, 0, ((),)),
    ))
    data = oneccl_to_xml(prog)
    assert b'<send peer="1" buf="i" off="1" cnt="1"/>' in data and b'<sync after="0"/>' in data
    assert parse_oneccl(data) == prog
    with pytest.raises(FormatError, match='step 0 has no <sync after="0"/>'):
        parse_oneccl(data.replace(b'<sync after="0"/>', b""))
    with pytest.raises(FormatError, match="lists 1 steps, nsteps=2"):
        parse_oneccl(data.replace(b'nsteps="1"', b'nsteps="2"'))


def test_mpi_paths_round_trip(tmp_path):
    prog = MpiPathProgram("m", 2, 3, 2, (PathSend(0, 1, 0, 0, (0, 2, 1), (0, 1)), PathSend(1, 0, 0, 0, (1, 0), (1, 0))))
    data = mpi_paths_to_xml(prog)
    assert b'<send dst="1" route_id="0" layer="0" route="0 2 1" chunks="0 1"/>' in data
    assert parse_mpi_paths(data) == prog
    f = tmp_path / "m.xml"
    f.write_bytes(data)
    assert load_program(f) == ("mpi", prog)
    assert program_to_xml(prog) == data


@pytest.mark.parametrize("data, message", [
    (b'<!DOCTYPE a [<!ENTITY x "xxxxxxxx"><!ENTITY y "&x;&x;&x;&x;">]><algo name="&y;"/>', "DOCTYPE/ENTITY"),
    (b'<!DOCTYPE a [<!ENTITY x SYSTEM "file:///etc/passwd">]><algo name="&x;"/>', "DOCTYPE/ENTITY"),
    (b'<algo name="a"><gpu id="0"', "malformed XML"),
    (b'<schedule/>', "unknown schedule format: root element <schedule>"),
    (b'<algo><gpu id="zero"/></algo>', "attribute id='zero' is not an integer"),
    (b'<algo><gpu id="0"><tb id="0"><step s="first" type="s"/></tb></gpu></algo>', "attribute s='first' is not an integer"),
    (b'<mpi_paths coll="alltoall" nranks="2" chunks_per_shard="1"><rank id="0"><send dst="1" route_id="0" '
     b'route="0 x" chunks="0"/></rank><rank id="1"/></mpi_paths>', "is not a list of integers"),
])
def test_malformed_and_hostile_input_refused(data, message):
    with pytest.raises(FormatError, match=message):
        parse_program(data, "bad.xml")


def test_missing_ids_and_types_read_as_invalid_not_unreadable():
    """The executor rules report them (exit 1), so the reader keeps placeholders."""
    _, prog = parse_program(b'<algo><gpu><tb><step s="0"/></tb></gpu></algo>', "t.xml")
    assert (prog.gpus[0].id, prog.gpus[0].tbs[0].id, prog.gpus[0].tbs[0].steps[0].type) == (-1, -1, "")


def test_every_format_records_spec_method_fabric_and_lp_times():
    fabric = Fabric(25e9 / 8, 100e9 / 8, "nic")
    record = Record("ring:2 -links 1 seed=0 --x", "mcf-extp", fabric, 13.5, 13.25)
    prog = MpiPathProgram("m", 2, 2, 1, (PathSend(0, 1, 0, 0, (0, 1), (0,)), PathSend(1, 0, 0, 0, (1, 0), (0,))),
                          record=record)
    data = mpi_paths_to_xml(prog)
    assert data.splitlines()[1] == (
        b'  <!-- a2a-record {"fabric": {"forwarding": "nic", "host_bw_Bps": 12500000000.0, "link_bw_Bps": '
        b'3125000000.0}, "lp_time": 13.5, "mcf_time": 13.25, "method": "mcf-extp", "spec": "ring:2 -links 1 '
        b'seed=0 -\\u002dx", "version": 1} -->')                       # "--" cannot occur in a comment
    assert parse_mpi_paths(data) == prog and parse_mpi_paths(data).record.spec.endswith(" --x")
    assert parse_mpi_paths(data.replace(data.splitlines()[1] + b"\n", b"")).record is None
    with pytest.raises(FormatError, match=r"^m\.xml: line 2: a2a-record: lp_time=-1 is not a positive number$"):
        parse_program(data.replace(b'"lp_time": 13.5', b'"lp_time": -1'), "m.xml")
    with pytest.raises(FormatError, match=r"^m\.xml: line 2: a2a-record: fabric: --link-bw: bandwidth 'x' is not a "
                                         r"number of bytes/s$"):
        parse_program(data.replace(b'3125000000.0', b'"x"'), "m.xml")
    one = OnecclProgram("o", 1, 1, 1, (OnecclRank(0, 1, 1, 0, ((),)),), record=record)
    assert parse_oneccl(oneccl_to_xml(one)) == one
    algo = MscclProgram("a", "Simple", 1, 1, 1, "alltoall", 0, 1, 0, 0, (), record)
    text = msccl_to_xml(algo)
    assert parse_msccl(text) == algo and msccl_rules.check_lexical(text) == []
    assert text.splitlines()[0].count(b'="') == 10            # the executor's 16-attribute limit is untouched


def test_load_program_missing_file(tmp_path):
    with pytest.raises(FormatError, match="cannot read"):
        load_program(tmp_path / "nope.xml")


def test_absurd_sizes_refused():
    data = (b'<oneccl_algo name="x" coll="alltoall" nranks="2" chunks_per_shard="999999999" nsteps="0">'
            b'<rank id="0" i_chunks="1" o_chunks="1"/><rank id="1" i_chunks="1" o_chunks="1"/></oneccl_algo>')
    with pytest.raises(FormatError, match="nchunksperloop=1999999998 exceeds the limit"):
        parse_program(data, "big.xml")
    data = b'<mpi_paths coll="alltoall" nranks="3" chunks_per_shard="99999999"/>'
    with pytest.raises(FormatError, match="exceeds the limit"):
        parse_program(data, "big.xml")


def test_an_empty_name_is_the_default_name(tmp_path, capsys):
    from a2a_compiler.cli import main

    assert main(["compile", "ring:4", "--emit", "oneccl", "--name", "", "-o", str(tmp_path / "r.xml"), "-q"]) == 0
    assert 'name="ring:4-tsmcf"' in (tmp_path / "r.xml").read_text()
