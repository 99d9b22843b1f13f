"""The testbed's pure parts (no root needed): names, addresses, default routes, predicted link bytes."""

import re
from pathlib import Path

import numpy as np
import pytest

from a2a_compiler.errors import A2AError
from a2a_compiler.fabric import Fabric
from a2a_compiler.formats import load_program
from a2a_compiler.routes import RoutedPath, RouteSet
from a2a_compiler.topology.spec import from_spec
from runtimes.testbed.bench import link_chunks, links_follow
from runtimes.testbed.cleanup import _NS_RE
from runtimes.testbed.counters import delta
from runtimes.testbed.layout import Layout, check_name
from runtimes.testbed.routes import default_routes, forwarding_table, path_program

SCHEDULES = Path(__file__).resolve().parents[1] / "schedules"
FAB = Fabric(link_bw=2.5e6, forwarding="nic")


def test_layout_names_and_addresses():
    lay = Layout("x1", from_spec("hypercube:2"), FAB)
    assert lay.namespaces == ["a2tb-x1-m", "a2tb-x1-h0", "a2tb-x1-h1", "a2tb-x1-h2", "a2tb-x1-h3",
                              "a2tb-x1-n0", "a2tb-x1-n1", "a2tb-x1-n2", "a2tb-x1-n3"]
    assert lay.cables == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert (lay.cable_addr(0, 2), lay.cable_addr(2, 0)) == ("10.128.0.2", "10.128.0.3")
    assert (lay.host_addr(3), lay.nic_addr(3), lay.mgmt_addr(), lay.mgmt_addr(3)) == (
        "10.64.0.7", "10.64.0.6", "10.16.0.1", "10.16.0.5")
    assert Layout.route_addrs(5) == ("10.192.0.10", "10.192.0.11")
    assert lay.link_if(3) == "a2tb-to3" and len(Layout.link_if(99999999)) <= 15
    assert lay.aggregate_rate() == 8 * 2.5e6 + 2 * 4 * 2 * 2.5e6  # cables, and hosts at what their 2 cables carry


def test_switches_are_nic_only_namespaces():
    lay = Layout("sw", from_spec("fattree:2,2"), FAB)  # 4 hosts, 4 switches
    assert [n for n in lay.namespaces if "-h" in n] == [f"a2tb-sw-h{h}" for h in range(4)]
    assert [n for n in lay.namespaces if "-n" in n] == [f"a2tb-sw-n{u}" for u in range(8)]
    assert all(4 <= v for u, v in lay.cables if u < 4)  # hosts hang off switches only


def test_layout_refuses_what_it_cannot_emulate():
    with pytest.raises(A2AError, match="one-way links"):
        Layout("x", from_spec("genkautz:8,2"), FAB)
    with pytest.raises(A2AError, match="needs a link bandwidth"):
        Layout("x", from_spec("ring:4"), Fabric())
    for bad in ("", "Upper", "a-b", "x" * 17):
        with pytest.raises(A2AError, match="lower-case letters and digits"):
            check_name(bad)


def test_only_prefixed_namespaces_belong_to_the_testbed():
    assert _NS_RE.fullmatch("a2tb-b123-h7").group(1) == "b123"
    assert _NS_RE.fullmatch("a2tb-b123-m") and _NS_RE.fullmatch("a2tb-b1-n30")
    for other in ("a2tbx-b1-h0", "b1-h0", "a2tb-b1-h", "a2tb-b1-x0", "a2tb--h0", "test-a2tb-b1-h0"):
        assert not _NS_RE.fullmatch(other)


@pytest.mark.parametrize("spec", ["bipartite:4", "hypercube:3", "twisted-hypercube:3", "torus:3x3x3"])
def test_default_routes_are_an_lft(spec):
    t = from_spec(spec)
    routes = default_routes(t, FAB)
    nxt = forwarding_table(routes)  # raises unless one path per pair and one next hop per (node, destination)
    assert routes.algo == "sssp" and len(routes.paths) == t.n_hosts * (t.n_hosts - 1)
    for p in routes.paths:
        assert [nxt[u, p.dst] for u in p.nodes[:-1]] == list(p.nodes[1:])


def _clockwise() -> RouteSet:
    """ring:4, every two-hop pair routed clockwise."""
    paths = [RoutedPath(s, d, (s, d) if (d - s) % 4 in (1, 3) else (s, (s + 1) % 4, d), 1.0)
             for s in range(4) for d in range(4) if s != d]
    return RouteSet("clockwise", from_spec("ring:4"), Fabric(), tuple(paths))


def test_forwarding_table_refuses_non_lft_routes():
    ok = _clockwise()
    t, paths = ok.topology, list(ok.paths)
    assert forwarding_table(ok)[0, 2] == 1 and forwarding_table(ok)[1, 3] == 2
    with pytest.raises(A2AError, match="several paths"):
        forwarding_table(RouteSet("x", t, Fabric(), tuple(paths) + (RoutedPath(0, 1, (0, 3, 2, 1), 0.5),)))
    # 0->1 the long way round meets 3->1's direct path at node 3 with another next hop
    crossing = [p if (p.src, p.dst) != (0, 1) else RoutedPath(0, 1, (0, 3, 2, 1), 1.0) for p in paths]
    with pytest.raises(A2AError, match="not destination-based: node 3 forwards traffic for 1 to both 2 and 0"):
        forwarding_table(RouteSet("x", t, Fabric(), tuple(crossing)))


def test_link_chunks_of_the_shipped_schedules():
    # MCF-extP on K4,4: 4 chunks per shard, every directed link carries exactly LP time x C = 2.5 x 4 chunks
    chunks = link_chunks(load_program(SCHEDULES / "bipartite-4-mcf-extp.mpi.xml")[1])
    assert len(chunks) == 32 and set(chunks.values()) == {10}
    # tsMCF on the 3-cube: oneCCL-style at 3 chunks per shard, 4 link-times: 12 chunks on each of the 24 links
    chunks = link_chunks(load_program(SCHEDULES / "hypercube-3-tsmcf.oneccl.xml")[1])
    assert len(chunks) == 24 and set(chunks.values()) == {12}
    # the MSCCL file for NCCL's executor: C = 32 (a power of two, issue #33), 127-129 chunks a link (4.03 link-times),
    # 3072 in all: 56 pairs x 32 chunks x the mean distance 12/7 (shortest paths only)
    chunks = link_chunks(load_program(SCHEDULES / "hypercube-3-tsmcf.msccl.xml")[1])
    assert len(chunks) == 24 and set(chunks.values()) == {127, 128, 129} and sum(chunks.values()) == 3072


def test_default_routes_as_a_path_schedule():
    prog = path_program(_clockwise(), "cw")
    assert (prog.nranks, prog.nnodes, prog.chunks_per_shard, len(prog.sends), prog.record) == (4, 4, 1, 12, None)
    assert prog.sends[1].nodes == (0, 1, 2) and prog.sends[1].chunks == (0,)
    # clockwise links carry a direct shard, a first hop and a second hop; the others only a direct shard
    assert link_chunks(prog) == {(0, 1): 3, (1, 2): 3, (2, 3): 3, (3, 0): 3, (1, 0): 1, (2, 1): 1, (3, 2): 1, (0, 3): 1}


def test_links_follow_the_prediction_within_tolerance():
    predicted = {"0-1": 1000, "1-0": 1000, "1-2": 0}
    assert links_follow({"0-1": 900, "1-0": 1250, "1-2": 10}, predicted) == []
    assert links_follow({"0-1": 899, "1-0": 1251, "1-2": 11}, predicted) == [
        "link 0-1 carried 899 B, predicted 1000 B (0.90x)",
        "link 1-0 carried 1251 B, predicted 1000 B (1.25x)",
        "link 1-2 carried 11 B but the routes do not use it"]


def test_counter_delta_estimates_payload():
    d = delta({"0-1": (1000, 10)}, {"0-1": (1000 + 9066 * 3 + 66 * 2, 15), "mgmt": (50, 1)})
    assert d["0-1"] == {"bytes": 9066 * 3 + 132, "packets": 5, "payload": 9000 * 3}
    assert d["mgmt"] == {"bytes": 50, "packets": 1, "payload": 0}
    assert np.isclose(9066 - 66, 9000)


def test_without_root_one_clear_line(monkeypatch):
    from runtimes.testbed import cleanup

    monkeypatch.setattr(cleanup.os, "geteuid", lambda: 1000)
    with pytest.raises(A2AError, match=r"^the testbed needs root \(network namespaces, veth links and qdiscs need "
                                       r"CAP_NET_ADMIN and CAP_SYS_ADMIN\); run it as root$"):
        cleanup.require_root()


def test_slab_fft_is_the_3d_transform():
    """The FFT workload's phases around an all-to-all done in numpy give numpy's fftn of the whole grid."""
    from runtimes.testbed import fft

    n, P = 24, 4
    s = n // P
    planes = [fft.local_input(n, P, r) for r in range(P)]
    ref = np.fft.fftn(np.concatenate(planes))
    sent = [np.fft.fft2(p, axes=(1, 2)).reshape(s, P, s, n).transpose(1, 0, 2, 3) for p in planes]
    for r in range(P):  # rank r's fft3d, its all-to-all receiving block r of every rank's phase-1 output
        out, times = fft.fft3d(planes[r], lambda send, recv: recv.__setitem__(slice(None), [b[r] for b in sent]),
                               P, iter(range(4)).__next__)
        assert times == (1, 1, 1)
        assert np.allclose(out, ref[:, r * s:(r + 1) * s, :]) and fft.first_error(out, n, P, r) is None
        if r == 1:  # rank 1's block checked as rank 0's: the wave (0, 9, 1) of amplitude 2 shows at local y = 3
            assert fft.first_error(out, n, P, 0) == ("rank 0: FFT output at (kx, ky, kz) = (0, 3, 1) is off by "
                                                     f"{2 * n ** 3:.3g}")
    assert fft.shard_bytes(216, 27) == 8 * 8 * 216 * 16
    assert fft.check_grid(216, 27) is None and "multiple of the rank count 27" in fft.check_grid(100, 27)


def _a2a(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "a2a_compiler", *args], cwd=SCHEDULES.parent, capture_output=True,
                          text=True, timeout=120)


def test_bench_refuses_buffers_beyond_memory():
    """Checked before anything is built: 8 ranks x 4 buffers x 8 shards of 1 GiB are 256 GiB."""
    p = _a2a("testbed", "bench", "hypercube:3", "--native", "--sizes", "1G", "--name", "memx")
    assert p.returncode == 2 and p.stdout == ""
    (line,) = p.stderr.splitlines()
    assert re.fullmatch(r"a2a testbed: error: --sizes 1073741824: 8 ranks need ~256\.0 GiB of buffers, only "
                        r"\d+\.\d GiB available; use smaller sizes", line), line


def test_bench_refuses_runs_of_many_hours():
    """hypercube:2 native at 20 Mbit/s: a 64 MiB shard call takes 3 x 64 MiB / (1.5 x 2.5 MB/s) = 53.7 s, x 5001."""
    p = _a2a("testbed", "bench", "hypercube:2", "--native", "--sizes", "64M", "--iters", "5000", "--name", "hrsx")
    assert p.returncode == 2 and p.stdout == ""
    hours = 5001 * 3 * 64 * 2**20 / 3.75e6 / 3600
    assert p.stderr.splitlines() == [
        f"a2a testbed: error: the schedules alone would run for {hours:.1f} h at the predicted rates (limit 6 h); "
        "use fewer or smaller --sizes, fewer --iters, or a higher --link-bw"]


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_bench_timeout_must_be_positive_seconds(value):
    p = _a2a("testbed", "bench", "hypercube:2", "--native", "--timeout", value)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr == (f"a2a testbed bench: error: argument --timeout: expected a positive number of seconds, "
                        f"got {value!r} (see 'a2a testbed bench --help')\n")


def test_only_the_timer_blames_the_timeout():
    """A job mpiexec ended with SIGKILL before --timeout passed had a rank killed; only the timer means a timeout."""
    from runtimes.testbed.bench import _job_error
    from runtimes.testbed.launch import Finished

    assert _job_error(Finished(-9, 5.0, 0.0, 0.0), "=   PID 7 RUNNING AT a2tb-x-h1\n=   EXIT CODE: 9\n") == (
        "the MPI job failed (a rank died or was killed; exit -9): EXIT CODE: 9")
    assert _job_error(Finished(-9, 8.2, 0.0, 0.0, timed_out=True), "") == (
        "the MPI job did not finish within 8 s and was killed")


@pytest.mark.parametrize("plot, why", [
    ("/nonexistent/dir/x.png", "directory /nonexistent/dir does not exist"),
    (".", "it is a directory; give a regular file, a new path, a FIFO, a character device or - (standard output)"),
    ("/proc/version", "No such file or directory")])
def test_bench_checks_the_plot_path_before_building(plot, why):
    """Refused at once, before the topology, the schedules or the testbed (no root needed to see it)."""
    p = _a2a("testbed", "bench", "hypercube:3", "--native", "--plot", plot)
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.splitlines() == [f"a2a testbed: error: cannot write {plot}: {why}"]


def test_bench_warmup_must_be_non_negative():
    p = _a2a("testbed", "bench", "hypercube:3", "--native", "--warmup", "-1")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr == ("a2a testbed bench: error: argument --warmup: must be a non-negative integer, got '-1' "
                        "(see 'a2a testbed bench --help')\n")


@pytest.mark.parametrize("args", [("up", "hypercube:3"), ("bench", "hypercube:3", "--native"), ("down",),
                                  ("exec", "--", "true")])
@pytest.mark.parametrize("name", ["", "Bad"])
def test_bad_names_refused_before_any_work(args, name):
    p = _a2a("testbed", args[0], "--name", name, *args[1:])
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.splitlines() == [
        f"a2a testbed: error: testbed name {name!r}: use 1-16 lower-case letters and digits"]


def test_jobs_refuses_each_inapplicable_flag_in_grammar():
    p = _a2a("testbed", "bench", "hypercube:2", "--jobs", "j.json", "--native", "--schedule", "a.xml")
    assert p.stderr.splitlines() == ["a2a testbed: error: --native does not apply with --jobs"]
    p = _a2a("testbed", "bench", "hypercube:2", "--jobs", "j.json", "--native", "--fft", "8", "--schedule", "a.xml")
    assert p.stderr.splitlines() == ["a2a testbed: error: --native, --fft do not apply with --jobs"]


@pytest.mark.parametrize("cmd", ["/nonexistent/cmd", "no-such-command-a2a", "."])
def test_exec_refuses_a_command_that_cannot_run(cmd):
    """Checked before the testbed is looked up: no proxy ever prints its execvp error."""
    p = _a2a("testbed", "exec", "--name", "nosuch", "--", cmd, "-x")
    assert (p.returncode, p.stdout) == (2, "")
    assert p.stderr.splitlines() == [
        f"a2a testbed: error: {cmd}: no such command (neither an executable file nor a program on PATH)"]


def test_every_testbed_action_documents_its_exit_status():
    import argparse

    from a2a_compiler.cli import build_parser

    testbed = build_parser("testbed")._subparsers._group_actions[0].choices["testbed"]
    actions = next(a for a in testbed._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert sorted(actions) == ["bench", "down", "exec", "list", "up"]
    for name, p in actions.items():
        assert "exit status:\n  0    success\n" in p.epilog, name
    assert "\n  124  the command did not finish within --timeout and was killed (the testbed stays up)\n" in \
        actions["exec"].epilog
    assert "\n  1    a schedule failed its byte-exact or route check\n" in actions["bench"].epilog
    assert "\n  1    " not in actions["up"].epilog and "\n  124  " not in actions["bench"].epilog


def test_help_examples_pass_the_rate_check():
    """Every bench example of 'a2a testbed --help' fits what one machine forwards (the torus's once asked 945 MB/s)."""
    import shlex

    from a2a_compiler.cli import build_parser
    from a2a_compiler.commands.common import topology_from_args
    from a2a_compiler.commands.testbed import EPILOG, _fabric
    from runtimes.testbed.instance import MAX_AGGREGATE_BPS

    lines = EPILOG.replace("\\\n", " ").splitlines()
    examples = [shlex.split(ln) for ln in lines if ln.strip().startswith("a2a testbed bench ")]
    assert [argv[3] for argv in examples] == ["bipartite:4", "hypercube:3", "torus:3x3x3"]
    for argv in examples:
        args = build_parser("testbed").parse_args(argv[1:])
        assert Layout("x", topology_from_args(args), _fabric(args)).aggregate_rate() <= MAX_AGGREGATE_BPS, argv


def test_a_result_above_the_mcf_bound_is_explained():
    """issue 34, item 20: sssp at 104.3% of the MCF bound was reported without a word; the tbf burst explains it."""
    from runtimes.testbed.bench import over_bound

    assert over_bound("sssp", 65536, 1.043, 0.05, 10e6 / 8) == (
        "sssp 65536 B: 104.3% of the MCF bound: each link's token bucket starts an iteration with 18028 B of credit "
        "(5 ms of its rate) sent above the rate, here 28.8% of a 50 ms iteration; larger --sizes make it negligible")


def test_the_runtime_table_shows_testbed_rates():
    """issue 34, item 20: 'testbed exec' runs the runtime over Mbit/s links; GB/s to 3 decimals showed 0.004 for
    every size.  Bandwidths have 4 significant digits."""
    import io

    from runtimes.mpi.cli import _print_row

    out = io.StringIO()
    _print_row(out, {"size_bytes": 65536, "chunk_bytes": 65536, "time_min_s": 0.3, "time_median_s": 0.367,
                     "time_max_s": 0.4, "algbw_GBps": 0.001250, "busbw_GBps": 0.00109375,
                     "native_time_median_s": 0.42, "native_algbw_GBps": 0.0010923, "ratio_to_native": 1.1444,
                     "bound_fraction": 0.9, "verified": True, "error": None}, True)
    assert out.getvalue().split() == ["65536", "65536", "300000.0", "367000.0", "400000.0", "0.00125", "0.001094",
                                      "420000.0", "0.001092", "1.144", "90.0", "ok"]


def test_bench_runtime_torch_refuses_what_it_does_not_run():
    p = _a2a("testbed", "bench", "hypercube:3", "--native", "--fft", "8", "--runtime", "torch", "--name", "tfft")
    assert (p.returncode, p.stdout, p.stderr.splitlines()) == (
        2, "", ["a2a testbed: error: --fft runs with --runtime mpi only"])
    p = _a2a("testbed", "bench", "hypercube:2", "--jobs", "j.json", "--schedule", "a.xml", "--runtime", "torch")
    assert p.stderr.splitlines() == ["a2a testbed: error: --jobs runs with --runtime mpi only"]
