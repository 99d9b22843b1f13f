"""Bad input: one clear line, a nonzero exit, no traceback, no partial output, bounded time and memory."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from a2a_compiler.cli import main
from terminal import sigint_default

REPO = Path(__file__).resolve().parents[1]


def _error(capsys, argv, code=2) -> str:
    """Run ``a2a ARGV`` in-process; return its one stderr line (asserting the exit status)."""
    assert main(argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


@pytest.mark.parametrize("argv, message", [
    (["compile", "ring:4", "--emit", "msccl", "-o", "{tmp}/missing/x.xml"],
     "a2a compile: error: cannot write {tmp}/missing/x.xml: directory {tmp}/missing does not exist"),
    (["compile", "ring:4", "--emit", "msccl", "-o", "{tmp}"], "a2a compile: error: cannot write {tmp}: it is a directory; give a regular file, a new path, a FIFO, a character device or - (standard output)"),
    (["schedule", "ring:4", "-o", "/proc/x.json"],
     "a2a schedule: error: cannot write /proc/x.json: No such file or directory"),
    (["solve", "ring:4", "--save", "{tmp}/nowhere/s.npz"],
     "a2a solve: error: cannot write {tmp}/nowhere/s.npz: directory {tmp}/nowhere does not exist"),
    (["topo", "ring:4", "--save", "{tmp}"], "a2a topo: error: cannot write {tmp}: it is a directory; give a regular file, a new path, a FIFO, a character device or - (standard output)"),
    (["demo", "--dir", "{tmp}/file/sub", "--no-run"],
     "a2a demo: error: --dir {tmp}/file/sub: cannot create the directory: Not a directory"),
    (["topo", "file:/dev/zero"], "a2a topo: error: cannot read /dev/zero: it is a device; give a regular file"),
    (["topo", "file:{tmp}/deep.json"], "a2a topo: error: {tmp}/deep.json: JSON nested too deeply"),
    (["topo", "torus:300x300", "-q"],
     "a2a topo: error: torus:300x300: the distance statistics need a BFS from each of 90000 attachment points over "
     "360000 links (about 1.5e+11 link visits of 64 sources, over the limit 6e+09: more than a minute); too large "
     "for 'a2a topo' (a2a_compiler.topology.metrics.MAX_BFS_WORDS)"),
    (["topo", "hypercube:20"], "a2a topo: error: hypercube:20: parameter d must be in 1..16 (2^d <= 100000 hosts)"),
    (["solve", "torus:100x100"],
     "a2a solve: error: torus:100x100: the mcf-decomp LP would have about 1.2e+09 nonzeros (10000 commodity group(s) "
     "x 40000 links) and need about 335 GiB, over the 16 GiB limit (a2a_compiler.solve.MAX_LP_BYTES)"),
    (["solve", "jellyfish:3000,4,seed=1"],
     "a2a solve: error: jellyfish:3000,4,seed=1: the mcf-decomp LP would have about 1.1e+08 nonzeros (3000 commodity "
     "group(s) x 12000 links) and need about 30 GiB, over the 16 GiB limit (a2a_compiler.solve.MAX_LP_BYTES)"),
    (["solve", "ring:4", "--link-bw", "-25Gbps"], "a2a solve: error: --link-bw: bandwidth must be positive, got '-25Gbps'"),
    (["solve", "ring:4", "--link-bw", "0Gbps"], "a2a solve: error: --link-bw: bandwidth must be positive, got '0Gbps'"),
    (["solve", "ring:4", "--link-bw", "1e-12Gbps"],
     "a2a solve: error: --link-bw: bandwidth '1e-12Gbps' is outside 1 B/s .. 1e+15 B/s (1 PB/s)"),
    (["solve", "ring:4", "--link-bw", "1e400Gbps"],
     "a2a solve: error: --link-bw: bandwidth '1e400Gbps' is outside 1 B/s .. 1e+15 B/s (1 PB/s)"),
    (["solve", "ring:4", "--link-bw", "inf"],
     "a2a solve: error: --link-bw: cannot parse 'inf'; give a number and a unit, e.g. 25Gbps or 3.125GB/s (b is a "
     "bit, B a byte: 25Gbps = 25Gb/s = 25Gbit/s (bits), 25GBps = 25GB/s = 8 x 25Gbps (bytes); prefixes k M G T P "
     "(1000s) or Ki Mi Gi Ti (1024s), in exactly these cases)"),
    (["solve", "ring:4", "--link-bw", "100Gbps", "--host-bw", "1kbps"],
     "a2a solve: error: --host-bw / --link-bw = 1e-08 is outside 1e-6 .. 1e6, where the flow LPs lose precision"),
    (["topo", "ring:4", "--save", ""], "a2a topo: error: --save: the path is empty"),
    (["topo", "torus:3x3x3,"], "a2a topo: error: torus:3x3x3,: an empty parameter (a stray comma)"),
    (["compare", "torus:3x3", "--plot", "{tmp}/p.pdf"], "a2a compare: error: --plot {tmp}/p.pdf: plots are PNG; give a .png path"),
    (["routes", "fattree:4,2", "--algo", "ftree", "--lft", "{tmp}/same.x", "-o", "{tmp}/./same.x"],
     "a2a routes: error: -o and --lft name the same file ({tmp}/same.x); give each its own"),
    (["solve", "torus:3x3", "--mpi"], "a2a solve: error: --mpi runs on MPI ranks: launch it as 'mpiexec -n K python "
     "-m mpi4py.futures -m a2a_compiler solve SPEC --mpi' (K-1 worker ranks; docs/solver.md)"),
    (["solve", "torus:3x3", "--mpi", "--workers", "2"],
     "a2a solve: error: --mpi and --workers: give one; under --mpi the MPI ranks are the workers"),
    (["solve", "hypercube:3", "--method", "tsmcf", "--steps", "1000000"],
     "a2a solve: error: hypercube:3: the tsmcf LP would have about 5.8e+08 nonzeros (8 commodity group(s) x 24 links x "
     "1000000 steps) and need about 161 GiB, over the 16 GiB limit (a2a_compiler.solve.MAX_LP_BYTES)"),
    (["schedule", "torus:3x3x3", "--max-chunks", "100000", "-o", "{tmp}/s.json", "-q"],
     "a2a schedule: error: 100000 chunks per shard x 702 shards is over 4194304 chunks "
     "(a2a_compiler.chunk.chunking.MAX_CHUNKS_TOTAL); use at most 5974"),
    (["topo", "file:{tmp}/huge.json"],
     "a2a topo: error: {tmp}/huge.json: 1000000000 nodes, over the limit of 100000 "
     "(a2a_compiler.topology.model.MAX_NODES)"),
    (["routes", "torus:3x3x3", "--algo", "fptas", "--eps", "1e-3"],
     "a2a routes: error: fptas: --eps 0.001 is too small for 162 links: the initial length δ = (m/(1-ε))^(-1/ε) = "
     "e^-5089 underflows; use --eps 0.0079 or more"),
    (["verify", "{tmp}/file", "--junit", "{tmp}/file"],
     "a2a verify: error: --junit {tmp}/file: that is an input of this command ({tmp}/file); write the output "
     "elsewhere"),
    (["compile", "ring:4", "--emit", "msccl", "--demand", "{tmp}/file", "-o", "{tmp}/./file"],
     "a2a compile: error: -o {tmp}/./file: that is an input of this command ({tmp}/file); write the output elsewhere"),
    (["topo", "file:{tmp}/file", "--save", "{tmp}/file"],
     "a2a topo: error: --save {tmp}/file: that is an input of this command ({tmp}/file); write the output elsewhere"),
    # issue 34, item 15: options that were silently ignored
    (["solve", "hypercube:3", "--seed", "5"],
     "a2a solve: error: --seed applies only with --remove-links or --remove-nodes: it seeds the failures they draw"),
    (["compile", "hypercube:3", "--emit", "msccl", "--link-bw", "25Gbps", "--nvlink-bw", "3.6Tbps",
      "-o", "{tmp}/x.xml"],
     "a2a compile: error: --nvlink-bw: hypercube:3 has no nvlink links (only nvswitch:... topologies have them)"),
    (["verify", "{repo}/schedules/hypercube-3-tsmcf.msccl.xml", "--deadlock-free"],
     "a2a verify: error: --deadlock-free applies to MPI path files (their routes' channel dependencies); this msccl "
     "file's deadlock freedom is checked without it"),
    # issue 34, item 19: messages that misled
    (["compile", "complete:40", "--emit", "msccl", "--channels", "2", "-q", "-o", "{tmp}/x.xml"],
     "a2a compile: error: gpu 0 needs 39 receive thread blocks on one channel, over the executor's limit of 32; it "
     "receives from 39 peers in one step, and every channel carries some step's peers whole, so more --channels "
     "cannot help (degree too high for MSCCL; use --emit oneccl or mpi)"),
    (["compile", "ring:4", "--emit", "msccl", "--name", "my algo", "-o", "{tmp}/x.xml"],
     "a2a compile: error: --name 'my algo': a program name holds letters, digits and . _ : , = + - only (the "
     "executors' tokenizers), e.g. 'my_algo'"),
])
def test_one_line_and_exit_2(tmp_path, capsys, argv, message):
    (tmp_path / "deep.json").write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    (tmp_path / "file").write_text("")
    head = '{"format": "a2a-topology", "version": 1, "spec": "x", '
    (tmp_path / "huge.json").write_text(head + '"hosts": 1000000000, "links": []}')
    tmp = str(tmp_path)
    before = sorted(tmp_path.iterdir())
    argv = [a.replace("{tmp}", tmp).replace("{repo}", str(REPO)) for a in argv]
    assert _error(capsys, argv) == message.replace("{tmp}", tmp)
    assert sorted(tmp_path.iterdir()) == before  # nothing written, no temporary left behind


def test_fifo_topology_neither_blocks_nor_reads(tmp_path, capsys):
    fifo = tmp_path / "t.fifo"
    os.mkfifo(fifo)
    assert _error(capsys, ["topo", f"file:{fifo}"]) == f"a2a topo: error: cannot read {fifo}: it is a FIFO; give a regular file"


def test_ctrl_c_is_one_line_and_130():
    """SIGINT (as a terminal sends it to the process group) mid-solve: one line, status 130."""
    p = subprocess.Popen([sys.executable, "-m", "a2a_compiler", "compile", "torus:3x3x3", "--link-bw", "25Gbps",
                          "--host-bw", "100Gbps", "--emit", "oneccl", "--min-fidelity", "0.999", "--max-chunks", "64",
                          "-o", os.devnull], cwd=REPO, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=sigint_default)
    time.sleep(1.5)
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130
    assert err.splitlines()[-1] == "a2a compile: interrupted" and "Traceback" not in err


def test_a_usage_error_is_one_line(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["solve", "ring:4", "--remove-links", "-1"])
    assert exit.value.code == 2
    assert capsys.readouterr().err == ("a2a solve: error: argument --remove-links: must be a non-negative integer, "
                                       "got '-1' (see 'a2a solve --help')\n")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_a_full_standard_output_is_one_line():
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "a2a_compiler", "topo", "ring:4", "--json"], stdout=full,
                           stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=60)
    assert (p.returncode, p.stderr) == (2, "a2a topo: error: cannot write standard output: No space left on device\n")


def test_a_reader_that_stops_early_ends_the_command_quietly():
    p = subprocess.Popen([sys.executable, "-m", "a2a_compiler", "topo", "ring:4"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, cwd=REPO)
    p.stdout.close()  # as 'head' does once it has its lines
    assert (p.wait(timeout=60), p.stderr.read()) == (141, b"")
