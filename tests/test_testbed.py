"""The emulated testbed for real: namespaces, shaped links, routes, MPI across them, teardown in every case.

Needs root (network namespaces, veth, tbf) and the mpich wheel's mpiexec; skips
with the reason otherwise.  Every test uses its own instance name, so testbeds
of other users on the machine are never touched, and checks with pyroute2
that nothing of its own is left behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from terminal import sigint_default

REPO = Path(__file__).resolve().parents[1]
SCHEDULES = REPO / "schedules"


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "the testbed needs root (network namespaces, veth links and tbf qdiscs)"
    if not Path(sys.executable).with_name("mpiexec").exists():
        return "no mpiexec next to the Python interpreter (the mpich wheel)"
    try:
        from pyroute2 import IPRoute

        with IPRoute() as ipr:
            ipr.get_links()
    except Exception as exc:  # noqa: BLE001 - any netlink failure means no testbed here
        return f"netlink is not usable here: {exc}"
    return None


pytestmark = [pytest.mark.mpi, pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")]


def _name(tag: str) -> str:
    return f"t{tag}{os.getpid() % 100000}"


def _leftovers(name: str) -> list[str]:
    """Namespaces of instance ``name``, and testbed interfaces in this (the root) namespace."""
    from pyroute2 import IPRoute, netns

    left = [n for n in netns.listnetns() if n.startswith(f"a2tb-{name}-")]
    with IPRoute() as ipr:
        left += [ln.get_attr("IFLA_IFNAME") for ln in ipr.get_links()
                 if ln.get_attr("IFLA_IFNAME").startswith("a2tb-")]
    if Path(f"/run/a2a-testbed/{name}").exists():
        left.append(f"/run/a2a-testbed/{name}")
    return left


def a2a(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "a2a_compiler", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def ring_schedules(tmp_path_factory) -> dict[str, Path]:
    from a2a_compiler.fabric import Fabric
    from a2a_compiler.formats import program_to_xml
    from a2a_compiler.routes import RoutedPath, RouteSet
    from a2a_compiler.topology.spec import from_spec
    from runtimes.testbed.routes import path_program

    d = tmp_path_factory.mktemp("ring")
    out = {"mpi": d / "r4.mpi.xml", "oneccl": d / "r4.oneccl.xml", "clockwise": d / "cw.mpi.xml"}
    for fmt in ("mpi", "oneccl"):
        extra = ["--forwarding", "nic"] if fmt == "mpi" else []
        p = a2a("compile", "hypercube:2", "--emit", fmt, "-o", str(out[fmt]), "-q", *extra)
        assert p.returncode == 0, p.stderr
    # every shard clockwise round the 4-cycle 0-1-3-2 (hypercube:2): the other direction carries no data
    cycle = [0, 1, 3, 2]
    paths = [RoutedPath(s, d, tuple(cycle[(cycle.index(s) + k) % 4] for k in range((cycle.index(d) - cycle.index(s))
                                                                                  % 4 + 1)), 1.0)
             for s in range(4) for d in range(4) if s != d]
    out["clockwise"].write_bytes(program_to_xml(path_program(
        RouteSet("clockwise", from_spec("hypercube:2"), Fabric(), tuple(paths)), "clockwise")))
    return out


def test_up_builds_the_fabric_and_down_removes_it():
    from pyroute2 import NetNS, netns

    from a2a_compiler.fabric import Fabric
    from a2a_compiler.topology.spec import from_spec
    from runtimes.testbed.instance import Testbed
    from runtimes.testbed.routes import UP_TABLE

    name = _name("up")
    topo = from_spec("hypercube:2")
    tb = Testbed.up(topo, Fabric(link_bw=2.5e6, host_bw=10e6, forwarding="host"), name)
    try:
        lay = tb.layout
        assert sorted(n for n in netns.listnetns() if n.startswith(f"a2tb-{name}-")) == sorted(lay.namespaces)
        with NetNS(lay.nic_ns(0), flags=0) as nic:
            links = {ln.get_attr("IFLA_IFNAME"): ln for ln in nic.get_links()}
            assert sorted(links) == ["a2tb-host", "a2tb-to1", "a2tb-to2", "lo"]
            assert links["a2tb-to1"].get_attr("IFLA_MTU") == 9000
            tbf = {q["index"]: q.get_nested("TCA_OPTIONS", "TCA_TBF_PARMS")["rate"]
                   for q in nic.get_qdiscs() if q.get_attr("TCA_KIND") == "tbf"}
            assert sorted(tbf.values()) == [2_500_000, 2_500_000, 10_000_000]
            # the default (SSSP) route to host 3 leaves towards its next hop; cables arrive in the up table
            nxt = next(p.nodes[1] for p in tb.routes.paths if (p.src, p.dst) == (0, 3))
            (r,) = nic.route("get", dst=lay.host_addr(3))
            assert r.get_attr("RTA_GATEWAY") == lay.cable_addr(nxt, 0)
            iifs = sorted(rule.get_attr("FRA_IIFNAME") for rule in nic.get_rules()
                          if rule.get_attr("FRA_TABLE") == UP_TABLE)
            assert iifs == ["a2tb-to1", "a2tb-to2"]
    finally:
        assert tb.down() == len(tb.layout.namespaces)
    assert _leftovers(name) == []


def test_bench_on_a_four_node_fabric(ring_schedules):
    """The CI bench: steered MCF-extP, a tsMCF oneCCL schedule and native MPI_Alltoall on a 4-cycle."""
    name = _name("ci")
    p = a2a("testbed", "bench", "hypercube:2", "--forwarding", "nic", "--name", name, "--sizes", "64K",
            "--iters", "2", "--schedule", str(ring_schedules["mpi"]), "--schedule", str(ring_schedules["oneccl"]),
            "--schedule", str(ring_schedules["clockwise"]), "--native", "--default-routes", "--json", "-q")
    assert _leftovers(name) == []
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["spec"], out["ranks"], out["mcf_flow"]) == ("hypercube:2", 4, pytest.approx(0.5))
    assert out["throughput_bound_GBps"] == pytest.approx(3 * 0.5 * 2.5e-3) and out["json_version"] == 1
    by = {r["label"]: r for r in out["results"]}
    assert list(by) == ["r4.mpi", "r4.oneccl", "cw.mpi", "sssp", "native"]
    for r in by.values():
        assert r["size_bytes"] == 65536 and r["verified"] and r["error"] is None and r["routes_followed"], r
        assert r["time_median_s"] > 0 and r["algbw_GBps"] == pytest.approx(3 * 65536 / r["time_median_s"] / 1e9)
        assert r["mgmt_bytes"] == 0  # nothing but hydra uses the bridge, and not while timed
    # 2 chunks of 32 KiB per shard; each of the 8 directed links carries 4 chunks per call: 2 timed calls
    mcf = by["r4.mpi"]
    assert mcf["route_mode"] == "direct"
    assert mcf["predicted_algbw_GBps"] == pytest.approx(out["throughput_bound_GBps"])
    assert set(mcf["predicted_link_bytes"].values()) == {4 * 32768 * 2}
    # single shortest paths: 8 shards cross one link and 4 cross two; SSSP puts 2 shards on every link per call
    assert set(by["sssp"]["predicted_link_bytes"].values()) == {2 * 65536 * 2}
    assert by["native"]["predicted_link_bytes"] == by["sssp"]["predicted_link_bytes"]
    # clockwise 0->1->3->2->0: each of those links carries 6 shards per call; the reverse links carry no data
    # (only the routes' ACKs, steered back along them, and MPI's barriers), below 1% of the busiest link
    cw = by["cw.mpi"]
    assert cw["predicted_link_bytes"] == {"0-1": 786432, "0-2": 0, "1-0": 0, "1-3": 786432, "2-0": 786432,
                                          "2-3": 0, "3-1": 0, "3-2": 786432}
    for key in ("0-2", "1-0", "2-3", "3-1"):
        assert cw["link_bytes"][key] <= 0.01 * 786432, key
    for h in range(4):  # NIC forwarding: relays stay in the NICs, each host link carries only its 3 shards
        assert 0.9 <= by["native"]["host_bytes"][f"nic>{h}"] / (3 * 65536 * 2) <= 1.25
    for r in by.values():  # measured payload follows the routes (also what routes_followed asserts)
        for key, want in r["predicted_link_bytes"].items():
            if want:
                assert 0.9 * want <= r["link_bytes"][key] <= 1.25 * want, (r["label"], key)


def test_host_forwarding_relays_through_the_host(ring_schedules):
    """Host forwarding: native traffic between opposite corners crosses the relaying host's NIC link."""
    name = _name("hf")
    p = a2a("testbed", "bench", "hypercube:2", "--name", name, "--sizes", "64K", "--iters", "2",
            "--schedule", str(ring_schedules["oneccl"]), "--native", "--json", "-q")
    assert _leftovers(name) == []
    assert p.returncode == 0, p.stderr
    by = {r["label"]: r for r in json.loads(p.stdout)["results"]}
    one, nat = by["r4.oneccl"], by["native"]
    assert one["verified"] and one["routes_followed"] and nat["verified"]
    # each host sinks 3 shards per call and relays 1 (the two-hop pairs): under host forwarding the relayed
    # shard crosses the host-NIC link too, whether the rank relays it (tsMCF) or the host's kernel (native)
    for r in (one, nat):
        for h in range(4):
            assert 0.9 <= r["host_bytes"][f"nic>{h}"] / (4 * 65536 * 2) <= 1.25, (r["label"], h)


def test_up_exec_list_down(ring_schedules):
    """A testbed left running by 'up' runs any MPI program through 'exec' until 'down'."""
    name = _name("ex")
    p = a2a("testbed", "up", "hypercube:2", "--name", name, "-q")
    try:
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(f"testbed {name}: hypercube:2, ")
        listed = json.loads(a2a("testbed", "list", "--json").stdout)["testbeds"]
        mine = [t for t in listed if t["name"] == name]
        assert len(mine) == 1 and mine[0]["namespaces"] == 9 and mine[0]["default_routes"] == "sssp"
        assert mine[0]["owner_pid"] is None and not mine[0]["stale"]
        run = a2a("testbed", "exec", "--name", name, "--timeout", "120", "--", sys.executable, "-m", "runtimes.mpi",
                  str(ring_schedules["oneccl"]), "-b", "4K", "-e", "4K", "-n", "2", "-w", "1", "--json")
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout)
        assert out["ranks"] == 4 and out["results"][0]["verified"] and out["results"][0]["native_verified"]
        slow = a2a("testbed", "exec", "--name", name, "--timeout", "2", "--", "sleep", "30")
        assert (slow.returncode, slow.stdout, slow.stderr) == (
            124, "", "a2a testbed: error: the MPI job did not finish within 2 s and was killed\n")
    finally:
        down = a2a("testbed", "down", "--name", name)
    assert (down.returncode, down.stdout) == (0, f"removed testbed {name}\n")
    assert _leftovers(name) == []
    again = a2a("testbed", "down", "--name", name)
    assert (again.returncode, again.stderr) == (
        2, f"a2a testbed: error: no testbed named {name!r}; 'a2a testbed list' shows the running ones\n")


def test_up_that_cannot_report_leaves_nothing_up():
    """'up' whose summary cannot be written (stdout a full device) fails and tears its testbed down."""
    name = _name("fu")
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "a2a_compiler", "testbed", "up", "ring:4", "--name", name, "-q"],
                           cwd=REPO, stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert _leftovers(name) == []
    assert (p.returncode, p.stderr) == (2, "a2a testbed: error: cannot write standard output: No space left on device\n")


def test_wrong_rank_count_fails_in_one_line():
    name = _name("rk")
    p = a2a("testbed", "bench", "ring:4", "--name", name, "--schedule",
            str(SCHEDULES / "hypercube-3-tsmcf.oneccl.xml"))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [f"a2a testbed: error: {SCHEDULES / 'hypercube-3-tsmcf.oneccl.xml'}: topology: "
                                     f"the program has 8 ranks but topology ring:4 has 4 hosts"]
    assert _leftovers(name) == []


def test_refuses_rates_one_machine_cannot_forward():
    name = _name("rt")
    p = a2a("testbed", "bench", "torus:3x3x3", "--link-bw", "20Mbps", "--host-bw", "80Mbps", "--forwarding", "nic",
            "--native", "--name", name)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [
        "a2a testbed: error: torus:3x3x3 at link 0.02 Gbit/s, host 0.08 Gbit/s, nic forwarding asks the kernel to "
        "forward up to 945 MB/s, more than 2 cores sustain beside the ranks (600 MB/s); lower --link-bw and "
        "--host-bw, or --force"]
    assert _leftovers(name) == []


def test_fft_workload_is_exact(ring_schedules):
    """--fft: the slab 3-D FFT through a steered schedule and native matches the analytic transform."""
    name = _name("ff")
    p = a2a("testbed", "bench", "hypercube:2", "--forwarding", "nic", "--name", name, "--fft", "32", "--iters", "2",
            "--schedule", str(ring_schedules["mpi"]), "--native", "--json", "-q")
    assert _leftovers(name) == []
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["fft_grid"] == 32
    for r in out["results"]:
        assert r["verified"] and r["routes_followed"] and r["size_bytes"] == 8 * 8 * 32 * 16
        assert set(r["fft_s"]) == {"fft2d", "alltoall", "fft1d", "total"}
        assert r["fft_s"]["alltoall"] == r["time_median_s"]


def _start_bench(name: str, schedule: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "a2a_compiler", "testbed", "bench", "hypercube:2",
                             "--forwarding", "nic", "--name", name, "--sizes", "1M", "--iters", "50",
                             "--schedule", str(schedule), "-q"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=sigint_default)
    from pyroute2 import netns

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for ns, pids in netns.ns_pids().items():
            if ns == f"a2tb-{name}-h2":
                for pid in pids:
                    try:
                        if b"runtimes.testbed.rank" in Path(f"/proc/{pid}/cmdline").read_bytes():
                            time.sleep(2)  # let it get into the timed loop
                            return proc, pid
                    except OSError:
                        pass
        time.sleep(0.2)
    proc.kill()
    pytest.fail("the bench's ranks never started")


def test_killed_rank_tears_down(ring_schedules):
    name = _name("kr")
    proc, rank_pid = _start_bench(name, ring_schedules["mpi"])
    os.kill(rank_pid, signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert line.startswith("a2a testbed: error: the MPI job failed (a rank died or was killed")
    assert _leftovers(name) == []


@pytest.mark.parametrize("sig, code, message", [(signal.SIGINT, 130, "a2a testbed: interrupted"),
                                                (signal.SIGTERM, 130, "a2a testbed: interrupted")])
def test_signals_tear_down(ring_schedules, sig, code, message):
    name = _name("sg")
    proc, _ = _start_bench(name, ring_schedules["mpi"])
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err.strip()) == (code, "", message)
    assert _leftovers(name) == []


def test_timeout_kills_the_job_and_tears_down(ring_schedules):
    """50 calls of 1 MiB shards need ~40 s at 20 Mbit/s; --timeout 8 kills the job, one line, nothing left."""
    name = _name("to")
    p = a2a("testbed", "bench", "hypercube:2", "--forwarding", "nic", "--name", name, "--sizes", "1M", "--iters",
            "50", "--schedule", str(ring_schedules["mpi"]), "--timeout", "8", "-q")
    assert _leftovers(name) == []
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.splitlines() == ["a2a testbed: error: the MPI job did not finish within 8 s and was killed"]


def test_two_jobs_at_once_each_on_its_communicator(tmp_path):
    """Two jobs on the 4-cycle 0-1-3-2 (hypercube:2), {0, 3} and {1, 2}: each pair is 2 hops apart, so the
    joint solve splits every shard over both ways round (1/2 link-time each way); run together, each job
    on its own communicator, both are byte-exact and the links carry both jobs' routes."""
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps({"format": "a2a-jobs", "version": 1,
                                "jobs": [{"name": "A", "hosts": [0, 3]}, {"name": "B", "hosts": [1, 2]}]}))
    p = a2a("solve", "hypercube:2", "--forwarding", "nic", "--jobs", str(jobs), "--schedules", str(tmp_path),
            "--json", "-q")
    assert p.returncode == 0, p.stderr
    assert [j["joint_time"] for j in json.loads(p.stdout)["jobs"]] == pytest.approx([1.0, 1.0])
    name = _name("jobs")
    p = a2a("testbed", "bench", "hypercube:2", "--forwarding", "nic", "--name", name, "--sizes", "64K",
            "--iters", "2", "--jobs", str(jobs), "--schedule", f"{tmp_path / 'A.xml'},{tmp_path / 'B.xml'}",
            "--json", "-q")
    assert _leftovers(name) == []
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert [(r["label"], r["job"]) for r in out["results"]] == [("A+B", "A"), ("A+B", "B")]
    for r in out["results"]:
        assert r["verified"] and r["routes_followed"] and r["error"] is None, r
        assert r["algbw_GBps"] == pytest.approx(65536 / r["time_median_s"] / 1e9) and r["item"] == "job"
        assert r["file_throughput_bound_GBps"] is not None      # the file records the job's LP time
    # each job: 2 shards of 64 KiB, each half one way round and half the other (2 chunks of 32 KiB):
    # every directed link carries one chunk of each job per call, 2 timed calls
    assert set(out["results"][0]["predicted_link_bytes"].values()) == {2 * 32768 * 2}
