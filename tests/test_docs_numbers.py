"""Numbers the docs print, re-run (issue 34, item 5: stale numbers).  Each case runs the documented command
and finds its numbers, formatted as the docs write them, in the documented place.  Runs of minutes are
re-run by ``tools/reproduce.py`` instead (the figure is named beside the number in docs/results.md)."""

import json
from pathlib import Path

import pytest

from a2a_compiler.cli import main

REPO = Path(__file__).resolve().parents[1]


def _json(capsys, argv: list[str]) -> dict:
    assert main([*argv, "--json", "-q"]) == 0
    return json.loads(capsys.readouterr().out)


def _doc(name: str) -> str:
    return (REPO / name).read_text()


def test_hpc_routing_minhop_shift_example(capsys):
    """docs/hpc-routing.md's console block is what the command prints (all but its run time)."""
    assert main(["routes", "fattree:4,3", "--algo", "minhop", "--pattern", "shift", "-q"]) == 0
    printed = [x for x in capsys.readouterr().out.splitlines() if not x.startswith("computed")]
    doc = _doc("docs/hpc-routing.md")
    block = doc.split("$ a2a routes fattree:4,3 --algo minhop --pattern shift -q\n", 1)[1].split("\n$ ", 1)[0]
    assert [x for x in block.splitlines() if not x.startswith("computed")] == printed


def test_readme_routes_examples(capsys):
    s = _json(capsys, ["routes", "genkautz:64,4", "--algo", "sssp"])
    want = f"# {s['predicted_time']:g}, {s['mcf_time']:.2f}, {s['mcf_ratio']:.3f}"
    assert f"jq '.predicted_time, .mcf_time, .mcf_ratio'   {want}" in _doc("README.md"), want
    s = _json(capsys, ["routes", "fattree:4,3", "--algo", "minhop", "--pattern", "shift"])
    want = f"shift congestion {s['congestion_worst']:g} worst, {s['congestion_avg']:.2f} average"
    assert want in _doc("README.md"), want


def test_results_slimfly3_mcf_extp(capsys):
    """docs/results.md's Slim Fly table, the MCF-extP file of slimfly:3,p=0 at the default chunking."""
    s = _json(capsys, ["routes", "slimfly:3,p=0", "--algo", "mcf-extp", "--deadlock", "dfsssp"])
    want = (f"| `slimfly:3,p=0` (18 routers; MCF {s['mcf_time']:.0f}) | {s['predicted_time']:.2f} "
            f"({s['predicted_time'] / s['mcf_time']:.2f}, {s['layers']} VL) |")
    assert want in _doc("docs/results.md"), want


@pytest.mark.parametrize("forwarding", ["nic", "host"])
def test_readme_solve_examples(capsys, forwarding):
    from fractions import Fraction

    argv = ["solve", "torus:3x3x3", "--link-bw", "25Gbps", "--host-bw", "100Gbps", "--forwarding", forwarding]
    s = _json(capsys, argv)
    flow = Fraction(s["concurrent_flow"]).limit_denominator(1000)
    line = next(x for x in _doc("README.md").splitlines() if x.startswith(f"$ a2a {' '.join(argv)} --json "))
    assert line.split("#", 1)[1] == f" F = {flow}, {s['throughput_bound_GBps']:.3f} GB/s", line


def test_readme_more_routes_examples(capsys, tmp_path):
    s = _json(capsys, ["routes", "bipartite:4", "--algo", "ilp-disjoint"])
    assert s["optimal"]
    want = f"--algo ilp-disjoint          # {s['predicted_time']:g} link-times, proved optimal; MCF {s['mcf_time']:g}"
    assert want in _doc("README.md"), want
    s = _json(capsys, ["routes", "torus:3x3x3", "--algo", "mcf-extp", "--deadlock", "lash-seq", "-o",
                       str(tmp_path / "t3.xml")])
    assert s["deadlock_free"]
    assert f"-o t3.xml   # {s['layers']} layers, deadlock-free" in _doc("README.md")
