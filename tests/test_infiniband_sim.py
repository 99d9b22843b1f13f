"""The real OpenSM on a simulated fabric (ibsim): our tables installed exactly, OpenSM's engines equal ours.

Skipped, with the reason, where the Debian packages opensm, ibsim-utils and infiniband-diags are missing.
"""

import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.routes import route_tables
from a2a_compiler.routes.opensm import read_dump, write_dump
from a2a_compiler.topology import from_spec
from a2a_compiler.topology.ibnet import parse_ibnet

from runtimes.infiniband import SimulatedFabric, missing_tools, round_trip

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(missing_tools() is not None, reason=f"simulated InfiniBand {missing_tools()}")


def test_round_trip_merged_roots_with_parallel_cables():
    """fattree:4,3,merge=2: roots merged in pairs, so every root port group has 2 cables.  OpenSM's log names
    the file engine, the switches hold exactly our rows, and the tables read back measure as ours; OpenSM's
    own ftree, minhop and sssp give our tables (sssp --opensm) entry for entry, switch LIDs included (ftree's and
    minhop's numbers: 63 / 1 / 1 and 192 / 4 / 3.24)."""
    r = round_trip(from_spec("fattree:4,3,merge=2"), "ftree", compare=("ftree", "minhop", "sssp"), name="a2atest")
    assert r.engine == "file" and r.installed_equal and r.rows == 3720       # no rows for unreachable switch LIDs
    assert r.read_back == r.ours == {"alltoall_time": 63.0, "congestion_worst": 1.0, "congestion_avg": 1.0}
    ftree, minhop = r.opensm["ftree"], r.opensm["minhop"]
    assert ftree["engine"] == "ftree" and ftree["equal"] and ftree["switch_rows_equal"]
    assert minhop["engine"] == "minhop" and minhop["equal"] and minhop["switch_rows_equal"]
    assert minhop["theirs"] == minhop["ours"]
    assert (minhop["ours"]["congestion_worst"], round(minhop["ours"]["congestion_avg"] * 63)) == (4, 204)
    sssp = r.opensm["sssp"]                                   # ours with --opensm
    assert sssp["engine"] == "sssp" and sssp["equal"] and sssp["switch_rows_equal"]


def test_discovery_gives_back_our_topology_and_a_corrupt_dump_makes_opensm_fall_back():
    t = from_spec("vartree:6,2,w=3")
    with SimulatedFabric(t, "a2atest") as fabric:
        found = parse_ibnet(fabric.discover())
        assert found.names == t.names and np.array_equal(found.cable_port, t.cable_port)
        assert np.array_equal(found.link_cables, t.link_cables) and found.link_cables.max() == 3
        text, _ = write_dump(route_tables(found, "minhop"))
        lines = text.splitlines()
        lid, _, rest = lines[1].split(" ", 2)
        bad = fabric.dir / "bad.dump"
        bad.write_text("\n".join([lines[0], f"{lid} 099 {rest}"] + lines[2:]) + "\n")
        assert fabric.opensm("file", bad).engine == "minhop"              # OpenSM says nothing else
        with pytest.raises(A2AError, match=r"bad.dump: line 2: switch s0:0 \(guid 0x[0-9a-f]{16}\) has no port 99"):
            read_dump(bad.read_text(), found, source="bad.dump")


def _stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat`` fields after the command name (state, ppid, ...), or None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return [text[text.index("(") + 1:text.rindex(")")]] + text[text.rindex(")") + 2:].split()


def _ibsim_children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        st = _stat(int(entry.name)) if entry.name.isdigit() else None
        if st and st[0] == "ibsim" and int(st[2]) == pid:
            kids.append(int(entry.name))
    return kids


def _alive(pid: int) -> bool:
    st = _stat(pid)
    return st is not None and st[1] != "Z"


def test_sigterm_stops_ibsim_by_pid(tmp_path):
    """A fabric's owner killed by SIGTERM mid-run still stops the ibsim it started."""
    script = tmp_path / "hold.py"
    script.write_text(
        "import sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from a2a_compiler.topology import from_spec\n"
        "from runtimes.infiniband import SimulatedFabric\n"
        "with SimulatedFabric(from_spec('fattree:4,2'), 'a2atest') as f:\n"
        "    print('up', flush=True)\n"
        "    time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        sims = _ibsim_children(proc.pid)
        assert len(sims) == 1
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and _alive(sims[0]):
            time.sleep(0.1)
        assert not _alive(sims[0])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
