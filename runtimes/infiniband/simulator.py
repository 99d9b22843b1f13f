"""ibsim + OpenSM + diagnostics on one simulated fabric (package docstring)."""

from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from a2a_compiler import interrupt
from a2a_compiler.errors import A2AError
from a2a_compiler.routes import route_tables
from a2a_compiler.routes.opensm import parse_dump, read_dump, write_dump
from a2a_compiler.routes.tables import ForwardingTables
from a2a_compiler.topology.ibnet import net_file, node_guids, parse_ibnet
from a2a_compiler.topology.model import Topology

#: Where Debian installs the shim (any multiarch directory).
UMAD2SIM_PATHS = "/usr/lib/*/umad2sim/libumad2sim.so"
#: The programs a round trip runs.
TOOLS = ("ibsim", "ibnetdiscover", "opensm", "dump_fts", "smpdump")
#: Seconds any one tool may run (OpenSM configures a 704-node fabric in a few seconds here).
TOOL_TIMEOUT = 300.0
#: Seconds ibsim may take to say it is ready.
START_TIMEOUT = 30.0
#: The OpenSM log line naming the engine that configured the tables.
ENGINE_LINE = re.compile(r"osm_ucast_mgr_process: (\S+) tables configured on all switches")


#: Our options that compute what OpenSM's engine of the same name does.
OPENSM_VARIANT = {"sssp": {"opensm": True}, "dfsssp": {"opensm": True}}


def missing_tools() -> str | None:
    """Why a simulated fabric cannot run here (one line), or ``None``."""
    absent = [tool for tool in TOOLS if shutil.which(tool) is None]
    if absent or not glob.glob(UMAD2SIM_PATHS):
        what = ", ".join(absent + ([] if glob.glob(UMAD2SIM_PATHS) else ["libumad2sim.so"]))
        return (f"needs {what} (Debian: apt-get install opensm ibsim-utils infiniband-diags)")
    return None


@dataclass(frozen=True)
class OpenSMRun:
    """One ``opensm -o`` run: the engine its log says configured the tables, its log and its LFT dump."""

    engine: str | None
    log: str
    dump: str
    seconds: float


def _stop(proc: subprocess.Popen) -> None:
    """Stop one process we started, by its PID: SIGTERM, then SIGKILL after 5 s."""
    if proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


class SimulatedFabric:
    """``topology`` simulated by ibsim, for the duration of a ``with`` block (package docstring).

    Tools attach at the first host's CA (``SIM_HOST``); ``name`` goes into the
    socket name with our PID, so fabrics of several users never meet.
    """

    def __init__(self, topology: Topology, name: str = "a2a", workdir: str | os.PathLike | None = None,
                 timeout: float = TOOL_TIMEOUT):
        why = missing_tools()
        if why:
            raise A2AError(f"a simulated InfiniBand fabric {why}")
        self.topology = topology
        self.timeout = timeout
        self.socket = f"{name}-{os.getpid()}-{id(self) & 0xFFFF:x}"
        self._own_dir = workdir is None
        self.dir = Path(tempfile.mkdtemp(prefix=f"{name}-ibsim-") if workdir is None else workdir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.shim = sorted(glob.glob(UMAD2SIM_PATHS))[0]
        guids = node_guids(topology)
        port = topology.cable_port[np.searchsorted(topology.src[topology.cable_link], 0)]
        self.sim_host = f"H-{guids[0] - int(port):016x}"
        self.ibsim: subprocess.Popen | None = None
        self._old: dict = {}

    # ------------------------------------------------------------- lifetime
    def __enter__(self) -> "SimulatedFabric":
        self._old = interrupt.catch()
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        try:
            if self.ibsim is not None:
                _stop(self.ibsim)
                self.ibsim = None
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)
        finally:
            interrupt.restore(self._old)
            self._old = {}

    def _env(self, shim: bool) -> dict:
        env = dict(os.environ, IBSIM_SOCKNAME=self.socket, OSM_CACHE_DIR=str(self.dir), OSM_TMP_DIR=str(self.dir),
                   SIM_HOST=self.sim_host)
        if shim:
            env["LD_PRELOAD"] = self.shim
        return env

    def _start(self) -> None:
        t = self.topology
        net = self.dir / "net"
        net.write_text(net_file(t))
        ports = int(t.port_count.sum()) + t.n_nodes
        cmd = ["ibsim", "-s", "-n", "-N", str(max(2048, t.n_nodes + 16)), "-S", str(max(256, t.n_switches + 16)),
               "-P", str(max(13312, 2 * ports)), str(net)]
        self.ibsim = subprocess.Popen(cmd, env=self._env(False), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True, cwd=self.dir)
        seen: list[str] = []
        ready = threading.Event()

        def read():
            for line in self.ibsim.stdout:
                seen.append(line)
                if "Network simulator ready" in line:
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(START_TIMEOUT) or self.ibsim.poll() is not None:
            tail = "".join(seen[-3:]).strip().replace("\n", " | ")
            raise A2AError(f"ibsim did not start ({tail or 'no output'})")

    # ---------------------------------------------------------------- tools
    def run(self, cmd: list[str], timeout: float | None = None) -> str:
        """Run a tool attached to the fabric; its stdout.  A failure or timeout is one line."""
        proc = subprocess.Popen(cmd, env=self._env(True), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=self.dir)
        try:
            out, err = proc.communicate(timeout=timeout or self.timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            raise A2AError(f"{cmd[0]} ran past {timeout or self.timeout:.0f} s on the simulated fabric") from None
        finally:
            _stop(proc)
        if proc.returncode:
            last = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            raise A2AError(f"{cmd[0]} failed on the simulated fabric: {last}")
        return out

    def discover(self) -> str:
        """``ibnetdiscover``'s output for the fabric."""
        return self.run(["ibnetdiscover"])

    def opensm(self, engine: str, lfts: str | os.PathLike | None = None, lmc: int = 0) -> OpenSMRun:
        """Configure the fabric once with ``opensm -R ENGINE`` (``-U LFTS`` for the file engine, ``-l LMC``)."""
        log = self.dir / f"opensm-{engine}.log"
        dumps = self.dir / f"dumps-{engine}"
        dumps.mkdir(exist_ok=True)
        cmd = ["opensm", "-o", "-s", "0", "-e", "-f", str(log), "-R", engine, "--dump_files_dir", str(dumps),
               "-F", str(self._config())]
        if lfts is not None:
            cmd += ["-U", str(lfts)]
        if lmc:
            cmd += ["-l", str(lmc)]
        t0 = time.perf_counter()
        self.run(cmd)
        text = log.read_text(errors="replace")
        m = ENGINE_LINE.search(text)
        dump = dumps / "opensm-lfts.dump"
        return OpenSMRun(m.group(1) if m else None, text, dump.read_text() if dump.exists() else "",
                         time.perf_counter() - t0)

    def _config(self) -> Path:
        """An empty OpenSM config file (so nothing under /etc/opensm is read)."""
        path = self.dir / "opensm.conf"
        if not path.exists():
            path.write_text("# defaults\n")
        return path

    def installed(self) -> str:
        """The forwarding tables the switches hold now (:func:`.installed.installed_tables`: ``dump_fts``, plus
        each switch's entry for the top LID that infiniband-diags 44 leaves out), LID owners from OpenSM's
        guid2lid file."""
        from .installed import installed_tables     # not at import: python -m runtimes.infiniband.installed

        owner = {}
        for line in (self.dir / "guid2lid").read_text().splitlines():
            f = line.split()
            if len(f) == 3:
                for lid in range(int(f[1], 0), int(f[2], 0) + 1):
                    owner[lid] = int(f[0], 0)
        return installed_tables(self.run, owner.get)


# --------------------------------------------------------------- the check
@dataclass
class RoundTrip:
    """What :func:`round_trip` found (every number measured on the fabric read back)."""

    spec: str
    algo: str
    engine: str | None
    installed_equal: bool
    differing_rows: int
    rows: int
    ours: dict
    read_back: dict
    opensm: dict = field(default_factory=dict)
    seconds: dict = field(default_factory=dict)


def _numbers(tables: ForwardingTables) -> dict:
    m = tables.measure()
    return {"alltoall_time": m.alltoall_time, "congestion_worst": m.shift.worst, "congestion_avg": m.shift.average}


def _rows(text: str, topology: Topology) -> set:
    return set(map(tuple, parse_dump(text, topology).tolist()))


def round_trip(topology: Topology, algo: str, *, name: str = "a2a", compare: tuple[str, ...] = (),
               **options) -> RoundTrip:
    """Simulate ``topology``; discover it; route the discovered fabric with ``algo`` and write the LFT dump;
    install it with ``opensm -R file``; read the switches' tables back; measure both.  ``compare`` also runs
    OpenSM's own engines on the same fabric (:func:`compare_engine`)."""
    seconds = {}
    with SimulatedFabric(topology, name) as fabric:
        t0 = time.perf_counter()
        found = parse_ibnet(fabric.discover(), "ibnetdiscover")
        seconds["discover"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours = route_tables(found, algo, **options)
        text, lmc = write_dump(ours)
        dump = fabric.dir / f"{algo}.dump"
        dump.write_text(text)
        seconds["a2a"] = time.perf_counter() - t0
        run = fabric.opensm("file", dump, lmc)
        seconds["opensm"] = run.seconds
        t0 = time.perf_counter()
        installed = fabric.installed()
        seconds["dump_fts"] = time.perf_counter() - t0
        want, got = _rows(text, found), _rows(installed, found)
        back = read_dump(installed, found, algo="read back")
        result = RoundTrip(topology.spec, algo, run.engine, want == got, len(want ^ got), len(want),
                           _numbers(ours), _numbers(back), seconds=seconds)
        for engine in compare:
            result.opensm[engine] = compare_engine(fabric, found, engine, **OPENSM_VARIANT.get(engine, {}))
    return result


def compare_engine(fabric: SimulatedFabric, topology: Topology, engine: str, **options) -> dict:
    """OpenSM's own ``engine`` on the fabric beside ours (``options`` go to our engine, e.g. ``opensm=True``).

    ``equal``: every switch's entry for every host is the same port;
    ``switch_rows_equal``: so are the entries for the switches' own LIDs (ours
    follow MinHop's rule for every engine, see :mod:`a2a_compiler.routes.opensm`).
    Both sides measured per cable.  Where our engine refuses the fabric
    (``refused``: its line), OpenSM's log says which engine it fell back to, and
    that engine's tables are compared with ours of the same name.
    """
    run = fabric.opensm(engine)
    installed = fabric.installed()
    theirs = read_dump(installed, topology, algo=f"opensm {engine}")
    refused = None
    try:
        ours = route_tables(topology, engine, **options)
    except A2AError as exc:
        refused = str(exc)
        if run.engine == engine or run.engine is None:
            return {"engine": run.engine, "refused": refused, "equal": False, "theirs": _numbers(theirs)}
        ours = route_tables(topology, run.engine, **OPENSM_VARIANT.get(run.engine, {}))
    differ = int((theirs.cable[0] != ours.cable[0])[topology.n_hosts:].sum())
    sw_theirs = {r for r in _rows(installed, topology) if r[1] >= topology.n_hosts}
    sw_ours = {r for r in _rows(write_dump(ours)[0], topology) if r[1] >= topology.n_hosts}
    return {"engine": run.engine, "refused": refused, "equal": differ == 0, "differing_entries": differ,
            "entries": int(topology.n_switches * topology.n_hosts), "switch_rows_equal": sw_theirs == sw_ours,
            "theirs": _numbers(theirs), "ours": _numbers(ours)}
