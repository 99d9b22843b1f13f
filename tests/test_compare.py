"""``a2a compare``: optimal all-to-all times beside the Theorem 1 bound (Basu et al. §5.4, Fig. 10)."""

import json
import subprocess
import sys

import pytest

from a2a_compiler.cli import main
from a2a_compiler.compare import compare


def test_closed_forms_and_the_bound(capsys):
    assert main(["compare", "hypercube:4", "torus:4x4", "genkautz:16,4", "--json", "--quiet"]) == 0
    out = json.loads(capsys.readouterr().out)
    rows = {r["spec"]: r for r in out["rows"]}
    assert [r["spec"] for r in out["rows"]] == ["hypercube:4", "torus:4x4", "genkautz:16,4"]
    # Q4 and the 4x4 torus are the same graph: F = 2/N = 8/k^3 = 1/8, time 8
    assert rows["hypercube:4"]["lp_time"] == pytest.approx(8, rel=1e-7)
    assert rows["torus:4x4"]["lp_time"] == pytest.approx(8, rel=1e-7)
    # Theorem 1 for N=16, d=4: depths 1 x4 + 2 x11 = 26, over d: 6.5
    assert rows["torus:4x4"]["thm1_time"] == 6.5 and rows["torus:4x4"]["degree_max"] == 4
    assert rows["torus:4x4"]["thm1_ratio"] == pytest.approx(6.5 / 8, rel=1e-7)
    gk = rows["genkautz:16,4"]
    assert gk["thm1_time"] == 6.5 and 6.5 / 8 < gk["thm1_ratio"] <= 1.0   # the expander beats the torus
    assert out["best"] == "genkautz:16,4" and gk["rank"] == 1 and gk["gap"] <= 1e-6
    assert out["fabric"]["link_bw_Bps"] is None and gk["throughput_bound_GBps"] is None


def test_ranked_by_the_bound_of_each_size_not_by_raw_time(capsys):
    """issue #18: 'vs best' ranked raw times across N and degree; ring:7 (N=7) is faster than GK(16,4) but
    further from the Theorem 1 bound of its own N and degree."""
    assert main(["compare", "ring:7", "genkautz:16,4", "fattree:4,2", "--json", "-q"]) == 0
    rows = {r["spec"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    ring, gk, ft = rows["ring:7"], rows["genkautz:16,4"], rows["fattree:4,2"]
    assert ring["lp_time"] == pytest.approx(6, rel=1e-7) and gk["lp_time"] == pytest.approx(53 / 7, rel=1e-7)
    assert ring["thm1_time"] == 5 and ring["thm1_ratio"] == pytest.approx(5 / 6, rel=1e-7)
    assert gk["thm1_ratio"] == pytest.approx(6.5 * 7 / 53, rel=1e-7)                 # 0.8585 > 0.8333
    assert (gk["rank"], ring["rank"]) == (1, 2)                                        # ... ranked below the expander
    assert ft["thm1_time"] is None and ft["thm1_ratio"] is None and ft["rank"] is None  # switches: no bound, no rank


def test_library_rows_and_fabric():
    c = compare(["ring:6"], None)
    (row,) = c.rows
    assert row.lp_time == pytest.approx(9 / 2, rel=1e-7)           # ring C_6: F = 2 / floor(36/4)
    assert row.thm1_time == (1 * 2 + 2 * 3) / 2                       # binary arborescence on 6 nodes
    assert c.best is row


def test_text_output_and_plot(tmp_path, capsys):
    png = tmp_path / "cmp.png"
    assert main(["compare", "torus:4x4", "genkautz:16,4", "--plot", str(png), "--quiet"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].split() == ["topology", "hosts", "deg", "a2a", "time", "thm1", "ratio", "rank"]
    assert text[1].split() == ["torus:4x4", "16", "4", "8", "6.5", "0.8125", "2"]
    assert text[2].startswith("*genkautz:16,4") and text[2].endswith(" 1") and text[-1] == f"saved {png}"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_errors_are_one_line_without_output(tmp_path):
    png = tmp_path / "never.png"
    r = subprocess.run([sys.executable, "-m", "a2a_compiler", "compare", "torus:4x4", "genkautz:16", "--plot",
                        str(png)], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "" and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith("a2a compare: error: ")
    assert not png.exists()
