"""docs/infiniband.md step 5: reading back the installed tables with infiniband-diags 44, whose dump_lfts /
dump_fts leave out the top LID when it starts a 64-entry block of its own."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from a2a_compiler.errors import FormatError
from a2a_compiler.routes import route_tables
from a2a_compiler.routes.opensm import missing_top, read_dump, write_dump
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.ibnet import parse_ibnet

from runtimes.infiniband import SimulatedFabric, missing_tools

ROOT = Path(__file__).resolve().parents[1]


def as_dump_fts(text: str, top: int) -> str:
    """Our dump in dump_fts's form (headers with the LID range and a directed route), rows up to ``top`` - 1:
    what infiniband-diags 44 prints when the top LID is alone in its block."""
    out = []
    for line in text.splitlines():
        m = re.match(r"Unicast lids \[0-\d+\] of switch Lid \d+ guid (0x[0-9a-f]+) \('(.*)'\):", line)
        if m:
            out.append(f"Unicast lids [0x0-0x{top:x}] of switch DR path slid 0; dlid 0; 0,1 guid {m.group(1)} "
                       f"({m.group(2)}):")
        elif line.startswith("0x") and int(line.split()[0], 16) < top:
            out.append(line)
    return "\n".join(out) + "\n"


def test_a_dump_without_a_hosts_top_lid_names_the_tools_limitation():
    """fattree:4,2's dump: hosts on LIDs 1..16.  With the rows up to LID 15 only, host h15 (LID 16, the top) has
    no row: refused in one line that names the tool's gap and the way to read the tables."""
    t = from_spec("fattree:4,2")
    short = as_dump_fts(write_dump(route_tables(t, "ftree"))[0], 0x10)
    assert missing_top(short) == 0x10
    with pytest.raises(FormatError) as e:
        read_dump(short, t, source="installed.txt")
    assert str(e.value) == (
        "installed.txt: no switch lists LID 0x0010, the top of every table (file: switch s0:0 has no entry for host "
        "h15): infiniband-diags 44's dump_lfts/dump_fts skip the last 64-LID block when it holds only that LID; read the tables with 'python -m runtimes.infiniband.installed' "
        "(dump_fts plus smpdump for that block)")


def test_a_dump_without_a_switchs_top_lid_is_read_with_a_note():
    """Switch LIDs 17..24 follow the hosts: the top row (switch s1:3's LID) missing leaves every host route, and
    the tables are read with a note saying what is missing and why."""
    t = from_spec("fattree:4,2")
    full = write_dump(route_tables(t, "ftree"))[0]
    ft = read_dump(as_dump_fts(full, 24), t, source="installed.txt")
    assert ft.info["notes"] == ["installed.txt: no switch lists LID 0x0018, the top of every table, a switch's own "
                                "LID (infiniband-diags 44's dump_lfts/dump_fts leave that row out); the host routes "
                                "are complete"]
    assert (ft.cable == read_dump(full, t).cable).all()
    assert missing_top(full) is None


@pytest.mark.skipif(missing_tools() is not None, reason=f"simulated InfiniBand {missing_tools()}")
def test_dump_lfts_on_704_lids_and_the_installed_reader():
    """ibsim's fattree:8,3 has 704 LIDs (top 0x2c0, alone in block 11): dump_lfts as step 5 used it is refused
    naming the gap; python -m runtimes.infiniband.installed reads the whole tables, as OpenSM's ftree has them
    (congestion-free: 511 link-times, shift 1 / 1)."""
    with SimulatedFabric(from_spec("fattree:8,3"), "a2atest") as fabric:
        found = parse_ibnet(fabric.discover())
        assert fabric.opensm("ftree").engine == "ftree"
        lfts = fabric.run(["dump_lfts"])
        assert missing_top(lfts) == 0x2c0
        with pytest.raises(FormatError, match=r"^installed.txt: no switch lists LID 0x02c0, the top of every table "
                                              r"\(file: switch .* has no entry for host h511\): infiniband-diags 44"):
            read_dump(lfts, found, source="installed.txt")
        proc = subprocess.run([sys.executable, "-m", "runtimes.infiniband.installed"], cwd=ROOT,
                              env=fabric._env(True), capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.count("\n0x02c0 ") == 192 and missing_top(proc.stdout) is None
        m = read_dump(proc.stdout, found).measure()
        assert (m.alltoall_time, m.shift.worst, m.shift.average) == (511, 1, 1)


def test_the_reader_without_its_tools_is_one_line(tmp_path):
    """python -m runtimes.infiniband.installed where dump_fts is not installed: one line, exit 1, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "runtimes.infiniband.installed"], cwd=ROOT, capture_output=True,
                          text=True, env={"PATH": str(tmp_path)}, timeout=60)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "installed: dump_fts not found (Debian: apt-get install infiniband-diags)\n"
